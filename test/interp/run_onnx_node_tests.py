#!/usr/bin/env python3
"""Checks otc-run's forward results against ONNX's own backend node tests.

Each node test (Debian's libonnx-testdata, /usr/share/libonnx-testdata/data/
node/<test>/) holds a one-node model.onnx and test_data_set_0/{input,output}_N
.pb TensorProtos computed by ONNX's reference implementation: an oracle that
is independent of otc. For every test in TESTS this script writes the inputs
to a safetensors file (named after the graph inputs), runs
`otc-run model.onnx --inputs IN --outputs OUT`, and compares every graph
output with the expected one (same shape, numpy.allclose with rtol 1e-5,
atol 1e-6). Tests outside otc's scope are listed in EXCLUDED with the reason.

Prints one line per test, `name PASS`, `name FAIL (why)` or
`name EXCLUDED (reason)`, then `N passed, M failed` (and the excluded count);
exits 1 when any test failed. Needs numpy and onnx (Debian's /usr/bin/python3).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_DATA = "/usr/share/libonnx-testdata/data/node"

# Tests expected to pass. A value other than None names graph inputs that
# otc needs at import (Reshape's target shape, Dropout's ratio): the harness
# turns them into initializers holding the test's values.
TESTS = {
    "test_add": None,
    "test_add_bcast": None,
    "test_sub": None,
    "test_sub_bcast": None,
    "test_sub_example": None,
    "test_mul": None,
    "test_mul_bcast": None,
    "test_mul_example": None,
    "test_div": None,
    "test_div_bcast": None,
    "test_div_example": None,
    "test_neg": None,
    "test_neg_example": None,
    "test_exp": None,
    "test_exp_example": None,
    "test_log": None,
    "test_log_example": None,
    "test_tanh": None,
    "test_tanh_example": None,
    "test_relu": None,
    "test_identity": None,
    "test_constant": None,
    "test_matmul_2d": None,
    "test_matmul_3d": None,
    "test_matmul_4d": None,
    "test_gemm_all_attributes": None,
    "test_gemm_alpha": None,
    "test_gemm_beta": None,
    "test_gemm_default_matrix_bias": None,
    "test_gemm_default_no_bias": None,
    "test_gemm_default_scalar_bias": None,
    "test_gemm_default_single_elem_vector_bias": None,
    "test_gemm_default_vector_bias": None,
    "test_gemm_default_zero_bias": None,
    "test_gemm_transposeA": None,
    "test_gemm_transposeB": None,
    "test_transpose_default": None,
    "test_transpose_all_permutations_0": None,
    "test_transpose_all_permutations_1": None,
    "test_transpose_all_permutations_2": None,
    "test_transpose_all_permutations_3": None,
    "test_transpose_all_permutations_4": None,
    "test_transpose_all_permutations_5": None,
    "test_reshape_extended_dims": ["shape"],
    "test_reshape_negative_dim": ["shape"],
    "test_reshape_negative_extended_dims": ["shape"],
    "test_reshape_one_dim": ["shape"],
    "test_reshape_reduced_dims": ["shape"],
    "test_reshape_reordered_all_dims": ["shape"],
    "test_reshape_reordered_last_dims": ["shape"],
    "test_reshape_zero_and_negative_dim": ["shape"],
    "test_reshape_zero_dim": ["shape"],
    "test_dropout_default": None,
    "test_dropout_default_ratio": ["r"],
    "test_dropout_default_mask": None,
    "test_dropout_default_mask_ratio": ["r"],
    "test_sce_mean": None,
    "test_sce_sum": None,
    "test_sce_none": None,
    "test_sce_mean_no_weight_ii": None,
}

# Tests of the same ops that are out of scope, with the reason.
EXCLUDED = {
    "test_add_uint8": "uint8 tensors are outside the otc dialect",
    "test_sub_uint8": "uint8 tensors are outside the otc dialect",
    "test_mul_uint8": "uint8 tensors are outside the otc dialect",
    "test_div_uint8": "uint8 tensors are outside the otc dialect",
    "test_reshape_allowzero_reordered":
        "zero-sized dimension (allowzero); otc tensors are never empty",
    "test_dropout_default_old": "opset 11; the importer reads opsets 13 to 21",
    "test_dropout_random_old": "opset-6 Dropout with is_test=0 and random output",
    "test_sce_mean_3d": "importer: [N, C, d1...] scores not supported yet",
    "test_sce_mean_no_weight_ii_3d":
        "importer: [N, C, d1...] scores not supported yet",
    "test_sce_mean_no_weight_ii_4d":
        "importer: [N, C, d1...] scores not supported yet",
    "test_sce_NCd1d2d3d4d5_none_no_weight":
        "importer: [N, C, d1...] scores not supported yet",
    "test_sce_NCd1d2d3_none_no_weight_negative_ii":
        "importer: [N, C, d1...] scores not supported yet",
    "test_sce_mean_weight": "class weights are not supported",
    "test_sce_mean_weight_ii": "class weights are not supported",
    "test_sce_mean_weight_ii_3d": "class weights are not supported",
    "test_sce_mean_weight_ii_4d": "class weights are not supported",
    "test_sce_none_weights": "class weights are not supported",
    "test_sce_NCd1_mean_weight_negative_ii": "class weights are not supported",
    "test_sce_NCd1d2d3_sum_weight_high_ii": "class weights are not supported",
    "test_sce_NCd1d2d3d4d5_mean_weight": "class weights are not supported",
    "test_sce_mean_log_prob": "second output (log_prob) is not supported",
    "test_sce_sum_log_prob": "second output (log_prob) is not supported",
    "test_sce_none_log_prob": "second output (log_prob) is not supported",
    "test_sce_mean_3d_log_prob": "second output (log_prob) is not supported",
    "test_sce_mean_no_weight_ii_log_prob":
        "second output (log_prob) is not supported",
    "test_sce_mean_expanded":
        "expanded form uses LogSoftmax/NegativeLogLikelihoodLoss, not imported",
    "test_matmulinteger": "MatMulInteger (quantized) is not supported",
}

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


def write_safetensors(path, tensors):
    """Writes {name: numpy array} as a safetensors file."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"))
        raw = data.tobytes()
        header[name] = {"dtype": ST_DTYPES[array.dtype],
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


def load_pb(path):
    """Reads one TensorProto file as a numpy array."""
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def run_test(name, data_dir, otc_run, const_inputs, work_dir):
    """Runs one node test; returns None when it passes, else why it failed."""
    test_dir = os.path.join(data_dir, name)
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    graph = model.graph
    initializer_names = {init.name for init in graph.initializer}
    input_names = [i.name for i in graph.input
                   if i.name not in initializer_names]
    data_dir0 = os.path.join(test_dir, "test_data_set_0")
    inputs = {n: load_pb(os.path.join(data_dir0, f"input_{i}.pb"))
              for i, n in enumerate(input_names)}
    expected = {o.name: load_pb(os.path.join(data_dir0, f"output_{i}.pb"))
                for i, o in enumerate(graph.output)}

    # Shape inputs become initializers holding the test's values.
    model_path = os.path.join(test_dir, "model.onnx")
    if const_inputs:
        for input_name in const_inputs:
            graph.initializer.append(
                numpy_helper.from_array(inputs.pop(input_name), input_name))
            kept = [i for i in graph.input if i.name != input_name]
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
        got = actual[out_name]
        if got.shape != want.shape:
            return (f"output '{out_name}' has shape {list(got.shape)}, "
                    f"expected {list(want.shape)}")
        if not np.allclose(got.astype(np.float64), want.astype(np.float64),
                           rtol=1e-5, atol=1e-6):
            diff = np.max(np.abs(got.astype(np.float64) -
                                 want.astype(np.float64)))
            return f"output '{out_name}' differs (max abs diff {diff:.3g})"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otc-run", default="otc-run",
                        help="the otc-run binary (default: from PATH)")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help="directory of the ONNX node tests")
    parser.add_argument("tests", nargs="*",
                        help="run only these tests (default: all)")
    args = parser.parse_args()
    if not os.path.isdir(args.data):
        print(f"error: no ONNX node tests at {args.data} "
              "(install libonnx-testdata)")
        return 1

    passed = failed = excluded = 0
    with tempfile.TemporaryDirectory() as work_dir:
        for name in sorted(set(TESTS) | set(EXCLUDED)):
            if args.tests and name not in args.tests:
                continue
            if name in EXCLUDED:
                print(f"{name} EXCLUDED ({EXCLUDED[name]})")
                excluded += 1
                continue
            try:
                error = run_test(name, args.data, args.otc_run, TESTS[name],
                                 work_dir)
            except Exception as e:  # A broken test file is a failure too.
                error = f"{type(e).__name__}: {e}"
            if error is None:
                print(f"{name} PASS")
                passed += 1
            else:
                print(f"{name} FAIL ({error})")
                failed += 1
    print(f"{passed} passed, {failed} failed, {excluded} excluded")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
