#!/usr/bin/env python3
"""Checks otc-run's forward results against ONNX's own backend node tests.

Each node test (Debian's libonnx-testdata, /usr/share/libonnx-testdata/data/
node/<test>/) holds a model.onnx (one node, or its "_expanded" form in other
ops) and test_data_set_0/{input,output}_N.pb TensorProtos computed by ONNX's
reference implementation: an oracle that is independent of otc.

The tests in scope are every node test whose ops are all in otc's supported
set (the op table, kOps, of frontend/OnnxImporter.cpp, read from the source
tree) and whose tensors are all of types otc represents (floats, int64,
int32, bool; the others are reported as UNSUPPORTED-TYPE). For each one not
EXCLUDED (with its reason), this script writes the inputs to a safetensors
file named after the graph inputs, runs `otc-run model.onnx --inputs IN
--outputs OUT`, and compares every graph output with the expected one (same shape; integers and booleans exactly and
with the same dtype; floats with numpy.allclose, rtol 1e-5, atol 1e-6;
float16 and bfloat16 outputs within one step of their type, rtol 2^-10 and
2^-7: otc computes every float type in f32, and ONNX 1.12's expected
bfloat16 values truncate).

The graph inputs that otc needs at import time (the inputs the op table marks
as import-time: shapes, axes, starts/ends, k, ratio...) become initializers
holding the test's values, as exporters emit them; with --bind-inputs they
stay graph inputs and otc-run binds them from the inputs file instead.

Prints one line per test, `name PASS`, `name FAIL (why)`, `name EXCLUDED
(reason)` or `name UNSUPPORTED-TYPE (types)`, then the counts and the pass
rate over the tests in scope (and over every test of supported ops). Exits 1
when a test that is not excluded fails, when the pass rate is below
--min-pass-rate (default 0.95), or when EXCLUDED names a test out of scope.
Needs numpy and onnx (Debian's /usr/bin/python3).
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def supported_ops(source_root):
    """{op type: [import-time input positions]} from the importer's op table,
    whose rows read `{"Name", minOpset, in(0) | in(2), &Importer::...}`."""
    path = os.path.join(source_root, "frontend", "OnnxImporter.cpp")
    with open(path) as f:
        text = f.read()
    table = text[text.index("kOps[] = {"):]
    table = table[:table.index("};")]
    ops = {}
    for name, mask in re.findall(r'\{"(\w+)", \d+, ([^,]+), &', table):
        ops[name] = [int(i) for i in re.findall(r"in\((\d+)\)", mask)]
    if not ops:
        raise RuntimeError(f"no op table found in {path}")
    for name in CONSTANT_ONLY_OPS:
        ops.pop(name, None)
    return ops


# Ops the importer takes only in forms that fold at import (of constants),
# not as ops over values computed at run time, or only in a narrow form:
# outside the supported set.
CONSTANT_ONLY_OPS = {
    "AveragePool": "windows that tile the input alone (kernel = strides, no "
                   "padding: Gemma 3's projector), which no node test has; "
                   "test/e2e/masked-scatter.test checks it against PyTorch",
}


# Tests in scope that do not run, by reason.
EXCLUDED_BY_REASON = {
    "training-mode Dropout with a random mask: numpy's draw cannot be "
    "reproduced (otc's mask is a hash of the key; checked by "
    "interp-ops.mlir)": [
        "training_dropout", "training_dropout_default",
        "training_dropout_default_mask", "training_dropout_mask"],
    "the expected windows are not the windows' formula: test_hannwindow_"
    "expanded's y[1] is 0.09548607 where 0.5 - 0.5 cos(2 pi / 10) is "
    "0.0954915 in float32 and float64 alike (up to 7e-5 apart; otc's "
    "Cos gives the formula's value)": [
        "blackmanwindow_expanded", "blackmanwindow_symmetric_expanded",
        "hammingwindow_expanded", "hammingwindow_symmetric_expanded",
        "hannwindow_expanded", "hannwindow_symmetric_expanded"],
    "Pad's edge and reflect modes (constant is imported: Hugging Face's "
    "loss pads the shifted labels with it)": ["edge_pad", "reflect_pad"],
    "ScatterND's reduction 'mul' (none and add are imported: no mixture-of-"
    "experts export writes mul)": ["scatternd_multiply"],
    "Einsum with a letter repeated within one operand (a diagonal: "
    "'...ii'), which the importer refuses in one line; no model writes it": [
        "einsum_batch_diagonal"],
    "the model is at opset 1, older than the oldest the importer reads (7)": [
        "not_2d", "not_3d", "not_4d", "softplus", "softplus_example"],
    "inconsistent test data: input 'like' is [1] in test_data_set_0 but "
    "[3, 4] in the model": [
        "castlike_BFLOAT16_to_FLOAT", "castlike_BFLOAT16_to_FLOAT_expanded",
        "castlike_FLOAT_to_BFLOAT16", "castlike_FLOAT_to_BFLOAT16_expanded"],
}

EXCLUDED = {"test_" + name: reason
            for reason, names in EXCLUDED_BY_REASON.items() for name in names}


def ops_of(model):
    """The op types of the model's nodes."""
    return [node.op_type for node in model.graph.node]


# The ONNX element types the importer reads (frontend/ModelReader.cpp,
# kindOf): every float type is computed in f32.
SUPPORTED_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                   onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                   onnx.TensorProto.INT64, onnx.TensorProto.INT32,
                   onnx.TensorProto.BOOL}


def unsupported_types(model):
    """The types of the model's graph inputs, outputs, initializers and
    Constant values (and Cast targets) that otc does not represent, by name;
    empty when there are none."""
    found = set()
    graph = model.graph
    for value in list(graph.input) + list(graph.output):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            found.add(kind.replace("_type", ""))
        elif value.type.tensor_type.elem_type not in SUPPORTED_TYPES:
            found.add(onnx.TensorProto.DataType.Name(
                value.type.tensor_type.elem_type))
    tensors = list(graph.initializer)
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                tensors.append(a.t)
            if node.op_type == "Cast" and a.name == "to" and \
                    a.i not in SUPPORTED_TYPES:
                found.add(onnx.TensorProto.DataType.Name(a.i))
    for t in tensors:
        if t.data_type not in SUPPORTED_TYPES:
            found.add(onnx.TensorProto.DataType.Name(t.data_type))
    return sorted(found)


def tests_of_supported_ops(data_dir, ops):
    """{name: unsupported types} for the node tests in `data_dir` whose ops
    are all in `ops` (the supported op set), sorted by name."""
    tests = {}
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name, "model.onnx")
        if not os.path.isfile(path):
            continue
        model = onnx.load(path)
        types = ops_of(model)
        if types and all(t in ops for t in types):
            tests[name] = unsupported_types(model)
    return tests


# safetensors dtype names of the numpy dtypes the tests use.
ST_DTYPES = {
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}
NP_DTYPES = {name: dtype for dtype, name in ST_DTYPES.items()}


class Bf16:
    """A bfloat16 tensor held as its raw uint16 bits (numpy has no bfloat16)."""

    def __init__(self, bits):
        self.bits = bits

    def to_float32(self):
        """The values, exactly, as float32."""
        return (self.bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors):
    """Writes {name: numpy array or Bf16} as a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        dtype_name = "BF16" if isinstance(array, Bf16) else None
        if dtype_name:
            array = array.bits
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"))
        raw = data.tobytes()
        header[name] = {"dtype": dtype_name or ST_DTYPES[array.dtype],
                        "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """Reads a safetensors file into {name: numpy array}."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = NP_DTYPES[info["dtype"]].newbyteorder("<")
        array = np.frombuffer(blob[base + begin:base + end], dtype=dtype)
        tensors[name] = array.reshape(info["shape"])
    return tensors


def load_pb(path, value_info=None):
    """Reads one TensorProto file as a numpy array; a Bf16 when the tensor or
    the graph input/output `value_info` it is for is bfloat16 (ONNX 1.12
    stores those test tensors as uint16 bits)."""
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    array = numpy_helper.to_array(tensor)
    bf16 = onnx.TensorProto.BFLOAT16
    if tensor.data_type == bf16 or (
            value_info is not None
            and value_info.type.tensor_type.elem_type == bf16):
        return Bf16(array.astype(np.uint16))
    return array


def compare(out_name, got, want):
    """None when `got` matches the expected `want`, else why not: integers
    and booleans exactly and with the same dtype, floats (written as F32 or
    F64 whatever their ONNX type) with numpy.allclose(rtol 1e-5, atol 1e-6),
    float16 and bfloat16 ones within one step of their type (rtol 2^-10 and
    2^-7): otc computes every float in f32."""
    rtol, atol = 1e-5, 1e-6
    if isinstance(want, Bf16):
        want = want.to_float32()
        rtol = 2.0 ** -7
    elif want.dtype == np.float16:
        rtol = 2.0 ** -10
    if got.shape != want.shape:
        return (f"output '{out_name}' has shape {list(got.shape)}, "
                f"expected {list(want.shape)}")
    if want.dtype.kind in "biu":
        if got.dtype != want.dtype:
            return (f"output '{out_name}' has dtype {got.dtype}, "
                    f"expected {want.dtype}")
        if not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
            return (f"output '{out_name}' is {got.ravel()[:8].tolist()}..., "
                    f"expected {want.ravel()[:8].tolist()}...")
        return None
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    if not np.allclose(got64, want64, rtol=rtol, atol=atol, equal_nan=True):
        with np.errstate(invalid="ignore"):
            diff = np.nanmax(np.abs(got64 - want64))
        return f"output '{out_name}' differs (max abs diff {diff:.3g})"
    return None


def run_test(name, data_dir, otc_run, work_dir, ops, bind_inputs):
    """Runs one node test; returns None when it passes, else why it failed.
    The graph inputs read at import time become initializers unless
    `bind_inputs` (then otc-run binds them from the inputs file)."""
    test_dir = os.path.join(data_dir, name)
    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path)
    graph = model.graph
    initializer_names = {init.name for init in graph.initializer}
    graph_inputs = [i for i in graph.input if i.name not in initializer_names]
    data_dir0 = os.path.join(test_dir, "test_data_set_0")
    inputs = {v.name: load_pb(os.path.join(data_dir0, f"input_{i}.pb"), v)
              for i, v in enumerate(graph_inputs)}
    expected = {v.name: load_pb(os.path.join(data_dir0, f"output_{i}.pb"), v)
                for i, v in enumerate(graph.output)}

    if not bind_inputs:
        static = {node.input[position] for node in graph.node
                  for position in ops.get(node.op_type, [])
                  if position < len(node.input)}
        # What an import-time operand is computed from is read at import
        # time too (an expanded window function's size reaches Range's
        # limit through arithmetic): follow producers back to the inputs.
        grew = True
        while grew:
            grew = False
            for node in graph.node:
                if any(o in static for o in node.output):
                    new = {i for i in node.input if i} - static
                    if new:
                        static |= new
                        grew = True
        static &= set(inputs)
        for input_name in sorted(static):
            graph.initializer.append(
                numpy_helper.from_array(inputs.pop(input_name), input_name))
        if static:
            kept = [i for i in graph.input if i.name not in static]
            del graph.input[:]
            graph.input.extend(kept)
            model_path = os.path.join(work_dir, name + ".onnx")
            onnx.save(model, model_path)

    in_path = os.path.join(work_dir, name + ".in.safetensors")
    out_path = os.path.join(work_dir, name + ".out.safetensors")
    write_safetensors(in_path, inputs)
    proc = subprocess.run([otc_run, model_path, "--inputs", in_path,
                           "--outputs", out_path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return message[0] if message else f"exit status {proc.returncode}"
    actual = read_safetensors(out_path)
    for out_name, want in expected.items():
        if out_name not in actual:
            return f"output '{out_name}' is missing"
        error = compare(out_name, actual[out_name], want)
        if error:
            return error
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otc-run", default="otc-run",
                        help="the otc-run binary (default: from PATH)")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help="directory of the ONNX node tests")
    parser.add_argument("--source", default=SOURCE_ROOT,
                        help="otc's source tree, for the supported op set "
                             "(default: the one holding this script)")
    parser.add_argument("--bind-inputs", action="store_true",
                        help="keep import-time inputs as graph inputs, bound "
                             "by otc-run from the inputs file")
    parser.add_argument("--run-excluded", action="store_true",
                        help="also run the EXCLUDED tests (reported as "
                             "EXCLUDED-PASS / EXCLUDED-FAIL, not failures)")
    parser.add_argument("--min-pass-rate", type=float, default=0.95,
                        help="fail below this fraction of the tests in scope "
                             "passing (default 0.95)")
    parser.add_argument("tests", nargs="*",
                        help="run only these tests (default: all in scope; "
                             "the pass rate is then not checked)")
    args = parser.parse_args()
    if not os.path.isdir(args.data):
        print(f"error: no ONNX node tests at {args.data} "
              "(install libonnx-testdata)")
        return 1
    ops = supported_ops(args.source)
    of_ops = tests_of_supported_ops(args.data, ops)
    scope = [name for name, types in of_ops.items() if not types]
    # EXCLUDED lists tests of the default data; another directory (the
    # opset 23 tests made by make_opset23_node_tests.py) has none of them.
    stale = sorted(set(EXCLUDED) - set(scope)) if args.data == DEFAULT_DATA else []
    if stale:
        print(f"error: EXCLUDED names tests out of scope: {stale}")
        return 1
    unknown = sorted(set(args.tests) - set(scope))
    if unknown:
        print(f"error: not node tests of supported ops and types: {unknown}")
        return 1

    passed = failed = excluded = other_types = 0
    with tempfile.TemporaryDirectory() as work_dir:
        for name, types in of_ops.items():
            if args.tests and name not in args.tests:
                continue
            if types:
                print(f"{name} UNSUPPORTED-TYPE ({', '.join(types)} tensors "
                      "are outside the otc dialect)")
                other_types += 1
                continue
            if name in EXCLUDED and not args.run_excluded:
                print(f"{name} EXCLUDED ({EXCLUDED[name]})")
                excluded += 1
                continue
            try:
                error = run_test(name, args.data, args.otc_run, work_dir, ops,
                                 args.bind_inputs)
            except Exception as e:  # A broken test file is a failure too.
                error = f"{type(e).__name__}: {e}"
            if name in EXCLUDED:
                excluded += 1
                print(f"{name} EXCLUDED-PASS" if error is None
                      else f"{name} EXCLUDED-FAIL ({error})")
            elif error is None:
                print(f"{name} PASS")
                passed += 1
            else:
                print(f"{name} FAIL ({error})")
                failed += 1
    total = passed + failed + excluded
    print(f"{passed} passed, {failed} failed, {excluded} excluded of {total} "
          "node tests of supported ops and types")
    if args.tests:
        return 1 if failed else 0
    rate = passed / total if total else 0.0
    print(f"pass rate {100 * rate:.1f}% (minimum "
          f"{100 * args.min_pass_rate:.0f}%); with the {other_types} tests of "
          f"unsupported types, {passed} of {total + other_types} node tests "
          f"of supported ops pass ({100 * passed / (total + other_types):.1f}%)")
    print("outside the supported set: " + "; ".join(
        f"{op} ({why})" for op, why in sorted(CONSTANT_ONLY_OPS.items())))
    return 1 if failed or rate < args.min_pass_rate else 0


if __name__ == "__main__":
    sys.exit(main())
