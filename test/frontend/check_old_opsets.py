#!/usr/bin/env python3
"""Runs models at old opsets (7 to 12) through otc-run and checks the results
against numpy computations of the old ops' semantics.

The importer upgrades such models to opset 13 with libonnx's version
converter; these models use the ops whose signature or meaning changed on
the way: Softmax/LogSoftmax before 13 (the input flattened to 2-D at `axis`),
Unsqueeze/Squeeze/ReduceSum/Split with attributes that became inputs,
Dropout with is_test / ratio attributes, Reshape, Gemm-7 and Pow-7; and a
weight stored as external data, which the conversion keeps; a Softmax
whose input rank only shape inference knows, and one over symbolic
dimensions bound by --dim.
Prints `NAME PASS` or `NAME FAIL (why)` per model; exits 1 on a failure.
Needs numpy and onnx (Debian's /usr/bin/python3).
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "interp"))
from run_onnx_node_tests import read_safetensors, write_safetensors  # noqa

F = TensorProto.FLOAT


def softmax_2d(x, axis):
    """Softmax-1..12: x flattened to [prod(:axis), prod(axis:)], softmax
    over the second dimension, reshaped back."""
    rows = int(np.prod(x.shape[:axis]))
    flat = x.reshape(rows, -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


def model(name, opset, nodes, inputs, outputs, inits=()):
    """A model at `opset` with float inputs/outputs given as (name, shape)."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        list(inits))
    m = helper.make_model(graph, producer_name="otc-old-opsets",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 6
    onnx.checker.check_model(m)
    return m


def cases():
    """(name, model, inputs, expected outputs)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out = []

    # Opset 11: Softmax and LogSoftmax over the flattened trailing dims,
    # Unsqueeze/Squeeze/ReduceSum with axes attributes, Split with `split`.
    nodes = [
        helper.make_node("Softmax", ["x"], ["sm"], axis=1),
        helper.make_node("LogSoftmax", ["x"], ["lsm"], axis=0),
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, 3]),
        helper.make_node("Squeeze", ["u"], ["sq"], axes=[0]),
        helper.make_node("ReduceSum", ["x"], ["rs"], axes=[2], keepdims=0),
        helper.make_node("Split", ["x"], ["s1", "s2"], axis=1, split=[1, 2]),
    ]
    m = model("opset11", 11, nodes, [("x", [2, 3, 4])],
              [("sm", [2, 3, 4]), ("lsm", [2, 3, 4]), ("sq", [2, 3, 1, 4]),
               ("rs", [2, 3]), ("s1", [2, 1, 4]), ("s2", [2, 2, 4])])
    out.append(("opset11", m, {"x": x}, {
        "sm": softmax_2d(x, 1), "lsm": np.log(softmax_2d(x, 0)),
        "sq": x[:, :, None, :], "rs": x.sum(axis=2),
        "s1": x[:, :1], "s2": x[:, 1:]}))

    # Opset 7: Dropout with is_test unset (inference: identity), Reshape
    # with a shape input, Gemm with transB, Pow of floats, Add broadcasting.
    w = rng.standard_normal((5, 12)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    nodes = [
        helper.make_node("Dropout", ["x"], ["d"], ratio=0.25),
        helper.make_node("Reshape", ["d", "shape"], ["r"]),
        helper.make_node("Gemm", ["r", "w", "b"], ["g"], transB=1, alpha=0.5),
        helper.make_node("Pow", ["g", "two"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
             numpy_helper.from_array(np.array([2, 12], np.int64), "shape"),
             numpy_helper.from_array(np.array([2.0], np.float32), "two")]
    m = model("opset7", 7, nodes, [("x", [2, 3, 4])], [("y", [2, 5])], inits)
    g = 0.5 * x.reshape(2, 12) @ w.T + b
    out.append(("opset7", m, {"x": x}, {"y": g ** 2 + b}))

    # Opset 11 with the weight stored as external data (saved by main()).
    w2 = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w2"], ["mm"]),
             helper.make_node("Unsqueeze", ["mm"], ["y"], axes=[0])]
    m = model("opset11_external", 11, nodes, [("x", [2, 3, 4])],
              [("y", [1, 2, 3, 3])], [numpy_helper.from_array(w2, "w2")])
    out.append(("opset11_external", m, {"x": x}, {"y": (x @ w2)[None]}))

    # Opset 9: the Softmax input's rank is known only by shape inference.
    x2 = rng.standard_normal((2, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w2"], ["mm"]),
             helper.make_node("Softmax", ["mm"], ["y"], axis=1)]
    m = model("opset9_inferred", 9, nodes, [("x", [2, 4])], [("y", [2, 3])],
              [numpy_helper.from_array(w2, "w2")])
    out.append(("opset9_inferred", m, {"x": x2},
                {"y": softmax_2d(x2 @ w2, 1)}))

    # Opset 11: Softmax over axis 1 of an input with symbolic dimensions,
    # bound by --dim (the converter's Reshape back takes their values).
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=1)]
    m = model("opset11_symbolic", 11, nodes, [("x", ["batch", "n", 4])],
              [("y", ["batch", "n", 4])])
    out.append(("opset11_symbolic", m, {"x": x}, {"y": softmax_2d(x, 1)}))
    return out


# Extra otc-run arguments by case.
DIMS = {"opset11_symbolic": ["--dim", "batch=2", "--dim", "n=3"]}


def unconvertible():
    """An opset-11 Softmax over an input of unknown shape: the converter
    needs the rank to rewrite it (see old-opsets.test)."""
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=1, name="sm")], "g",
        [helper.make_tensor_value_info("x", F, None)],
        [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(graph, producer_name="otc-old-opsets",
                          opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otc-run", default="otc-run")
    parser.add_argument("--keep", metavar="DIR",
                        help="write the models and data to DIR (kept), and "
                             "softmax_unknown_shape.onnx, which the "
                             "converter cannot upgrade")
    args = parser.parse_args()
    failed = 0
    if args.keep:
        onnx.save(unconvertible(),
                  os.path.join(args.keep, "softmax_unknown_shape.onnx"))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        for name, m, inputs, expected in cases():
            path = os.path.join(work, name + ".onnx")
            onnx.save(m, path, save_as_external_data=name.endswith("external"),
                      location=name + ".weights", size_threshold=0)
            in_path = os.path.join(work, name + ".in.safetensors")
            out_path = os.path.join(work, name + ".out.safetensors")
            write_safetensors(in_path, inputs)
            proc = subprocess.run([args.otc_run, path, "--inputs", in_path,
                                   "--outputs", out_path] + DIMS.get(name, []),
                                  capture_output=True, text=True)
            error = proc.stderr.strip() if proc.returncode else None
            if error is None:
                got = read_safetensors(out_path)
                for out_name, want in expected.items():
                    if got[out_name].shape != want.shape or not np.allclose(
                            got[out_name], want, rtol=1e-5, atol=1e-6):
                        error = f"output '{out_name}' differs"
                        break
            print(f"{name} PASS" if error is None else f"{name} FAIL ({error})")
            failed += error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
