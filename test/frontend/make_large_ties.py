"""Writes a model whose float initializers are large enough that an import
which keeps no values drops them (kValuelessElements, frontend/Importer.h):
w (2048 x 2048, random), its transpose under an exporter's folded-constant
name (a tie to find), and w with two rows swapped (the same tie key, an
order-independent summary, but neither a copy nor a transpose: no tie).

    make_large_ties.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    n = 2048
    rng = np.random.default_rng(7)
    w = rng.standard_normal((n, n)).astype(np.float32)
    perm = w.copy()
    perm[[0, 1]] = perm[[1, 0]]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.ascontiguousarray(w.T), "onnx::MatMul_9"),
             numpy_helper.from_array(perm, "w_perm")]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y1"], name="/mm1"),
        helper.make_node("MatMul", ["x", "onnx::MatMul_9"], ["y2"], name="/mm2"),
        helper.make_node("MatMul", ["x", "w_perm"], ["y3"], name="/mm3"),
        helper.make_node("Add", ["y1", "y2"], ["s1"], name="/add1"),
        helper.make_node("Add", ["s1", "y3"], ["s2"], name="/add2"),
        helper.make_node("ReduceMean", ["s2"], ["loss"], name="/mean", keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "large_ties",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, sys.argv[1])


if __name__ == "__main__":
    main()
