#!/usr/bin/env python3
"""Runs otc-run on a small model whose Reshape shape `s` is a graph input and
whose `t` is a scalar input, with several inputs files.

y = x * t, r = Reshape(x, s). Each case prints `NAME PASS` when otc-run's
outputs equal numpy's (x * t, x.reshape(s)), else `NAME ERROR <otc-run's
first line>` or `NAME FAIL (why)`. Needs numpy and onnx.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "interp"))
from run_onnx_node_tests import read_safetensors, write_safetensors  # noqa


def model():
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "t"], ["y"], name="mul"),
         helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape")],
        "bind",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otc-run", default="otc-run")
    args = parser.parse_args()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    shape = np.array([3, 2], np.int64)
    cases = [
        ("scalar_and_shape", {"x": x, "t": np.array(1.5, np.float32),
                              "s": shape}),
        ("scalar_as_one", {"x": x, "t": np.array([1.5], np.float32),
                           "s": shape}),
        ("scalar_as_two", {"x": x, "t": np.array([1.5, 2], np.float32),
                           "s": shape}),
        ("shape_as_floats", {"x": x, "t": np.array(1.5, np.float32),
                             "s": shape.astype(np.float32)}),
        ("shape_of_rank_2", {"x": x, "t": np.array(1.5, np.float32),
                             "s": shape.reshape(1, 2)}),
        ("shape_missing", {"x": x, "t": np.array(1.5, np.float32)}),
    ]
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "bind.onnx")
        onnx.save(model(), path)
        for name, inputs in cases:
            in_path = os.path.join(work, name + ".in.safetensors")
            out_path = os.path.join(work, name + ".out.safetensors")
            write_safetensors(in_path, inputs)
            proc = subprocess.run([args.otc_run, path, "--inputs", in_path,
                                   "--outputs", out_path],
                                  capture_output=True, text=True)
            if proc.returncode:
                print(f"{name} ERROR {proc.stderr.strip().splitlines()[0]}")
                continue
            got = read_safetensors(out_path)
            ok = (np.array_equal(got["y"], x * np.float32(1.5))
                  and np.array_equal(got["r"], x.reshape(3, 2)))
            print(f"{name} PASS" if ok else f"{name} FAIL (outputs differ)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
