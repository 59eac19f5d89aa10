#!/usr/bin/env python3
"""Writes the FP8 test's model: two products and a loss, small enough that
every product runs FP8 under --fp8-gemms=all (sizes multiples of 16) and
nothing else rounds differently in the program and the interpreter.

    make_fp8_chain.py OUT.onnx

x [B, 32] -> y = x w1 [B, 48] -> z = y w2^T (Gemm, transB) [B, 16] ->
loss = mean cross-entropy of the logits z against labels [B] (in [0, 16)).
The backward multiplies the loss's gradient (E5M2, computed from the
cross-entropy's gradient) by the weights and activations (E4M3): dy = dz w2,
dw2 = dz^T y, dw1 = x^T dy. Weights from a fixed seed. Needs onnx and
numpy."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    rng = np.random.default_rng(1)
    w1 = (rng.standard_normal((32, 48)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((16, 48)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["y"]),
        helper.make_node("Gemm", ["y", "w2"], ["z"], transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["z", "labels"],
                         ["loss"], reduction="mean"),
    ]
    graph = helper.make_graph(
        nodes, "fp8_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 32]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["B"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
