#!/usr/bin/env python3
"""Runs an ONNX Attention node test through otc's fused attention: the model
imported (otc-import), fused (otc-opt --otc-fuse-patterns), checked to hold
one otc.attention, and interpreted (otc-run FILE.mlir) on the test's inputs;
its output is compared with the expected one that ONNX's reference
implementation computed (rtol 1e-5, atol 1e-6). Prints `NAME fused PASS` or
why not.

    check_fused_attention_node.py TEST_DIR WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, load, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_onnx_node_tests import read_safetensors, write_safetensors  # noqa: E402


def main():
    test, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    name = os.path.basename(os.path.normpath(test))
    model = load(os.path.join(test, "model.onnx"))
    data = os.path.join(test, "test_data_set_0")
    inputs = {}
    for i, vi in enumerate(model.graph.input):
        t = TensorProto()
        with open(os.path.join(data, f"input_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        inputs[vi.name] = numpy_helper.to_array(t)
    t = TensorProto()
    with open(os.path.join(data, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    want = numpy_helper.to_array(t)
    imported = subprocess.run(["otc-import", os.path.join(test, "model.onnx")],
                              check=True, capture_output=True, text=True).stdout
    fused = subprocess.run(["otc-opt", "--otc-fuse-patterns"], input=imported,
                           check=True, capture_output=True, text=True).stdout
    if fused.count("otc.attention ") != 1:
        print(f"{name} fused FAIL (not one otc.attention)")
        return 1
    mlir = os.path.join(work, "fused.mlir")
    with open(mlir, "w") as f:
        f.write(fused)
    ins, outs = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    write_safetensors(ins, inputs)
    subprocess.run(["otc-run", mlir, "--inputs", ins, "--outputs", outs], check=True)
    got = read_safetensors(outs)[model.graph.output[0].name]
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        err = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        print(f"{name} fused FAIL (max error {err})")
        return 1
    print(f"{name} fused PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
