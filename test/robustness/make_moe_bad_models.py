#!/usr/bin/env python3
"""Writes the mixture-of-experts inputs of moe-bad-input.test into OUT/:
the routing layer of test/codegen/make_models.py (Softmax router, TopK,
the experts' weights gathered by the indices, a cross-entropy) with

  topk-over   K = 5 of 4 experts
  one-expert  a single expert, K = 1 (every token routed to it)
  skewed      a router biased by 12 towards expert 2 (its first pick)
  nan-router  a NaN in the router's weights
  scatter-ids ScatterElements at indices read from an input (the test
              feeds one outside the axis), and batch files for it and for
              nan-router
  scatter-const  the same at constant indices, one outside the axis

Run with Debian's /usr/bin/python3 (onnx + numpy).

    make_moe_bad_models.py OUT
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "codegen"))
import make_models  # noqa: E402  the Graph helper
from make_models import Graph, float_input, int_input  # noqa: E402


def routing(out, name, e, k, router_bias=None, nan=False):
    t, d, h, c = 3, 6, 4, 3
    g = Graph(name, 8)
    wr = g.param("wr", [d, e], scale=1.0)
    if nan:
        g.inits[-1] = numpy_helper.from_array(
            np.where(np.arange(d * e).reshape(d, e) == 1, np.nan,
                     numpy_helper.to_array(g.inits[-1])).astype(np.float32), "wr")
    scores = g.op("MatMul", ["x", wr])
    if router_bias is not None:
        scores = g.op("Add", [scores, g.const(np.asarray(router_bias, np.float32))])
    probs = g.op("Softmax", [scores], axis=-1)                      # [N, T, E]
    vals, idx = g.op("TopK", [probs, g.const([k], np.int64)], n_out=2, axis=-1)
    w = g.op("Gather", [g.param("we", [e, d, h]), idx], axis=0)     # [N, T, K, D, H]
    xe = g.op("Unsqueeze", ["x", g.const([2, 3], np.int64)])
    xe = g.op("Expand", [xe, g.const([1, 1, k, 1, 1], np.int64)])
    y = g.op("MatMul", [xe, w])                                     # [N, T, K, 1, H]
    y = g.op("Reshape", [y, g.const([0, t, k, h], np.int64)])
    y = g.op("ReduceSum", [g.op("Mul", [y, g.op("Unsqueeze", [vals, g.const([3], np.int64)])]),
                           g.const([2], np.int64)], keepdims=0)     # [N, T, H]
    pooled = g.op("ReduceMean", [g.op("Tanh", [y])], axes=[1], keepdims=0)
    logits = g.op("MatMul", [pooled, g.param("wo", [h, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    make_models.OUT = out
    if k > e:  # the checker refuses it too; otc must say so itself
        graph = helper.make_graph(
            g.nodes, g.name, [float_input("x", ["batch", t, d]), int_input("y", ["batch"])],
            [helper.make_tensor_value_info(loss, TensorProto.FLOAT, [])], g.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, os.path.join(out, name + ".onnx"))
        return
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def scatter_ids(out):
    t, e = 3, 4
    g = Graph("scatter-ids", 9)
    base = g.op("MatMul", ["x", g.param("wb", [5, e])])             # [N, T, E]
    upd = g.op("Tanh", [g.op("MatMul", ["x", g.param("wu", [5, 2])])])
    put = g.op("ScatterElements", [base, "ids", upd], axis=2)
    loss = g.op("ReduceSum", [g.op("Mul", [put, put])], keepdims=0)
    make_models.OUT = out
    g.save([float_input("x", ["batch", t, 5]), int_input("ids", ["batch", t, 2])], loss)


def scatter_const(out):
    g = Graph("scatter-const", 9)
    base = g.op("MatMul", ["x", g.param("wb", [5, 4])])
    upd = g.op("Tanh", [g.op("MatMul", ["x", g.param("wu", [5, 2])])])
    ids = g.const(np.array([[[0, 1], [2, 7], [1, 0]]] * 2, np.int64), np.int64)
    put = g.op("ScatterElements", [base, ids, upd], axis=2)
    loss = g.op("ReduceSum", [g.op("Mul", [put, put])], keepdims=0)
    make_models.OUT = out
    g.save([float_input("x", [2, 3, 5])], loss)


def write_safetensors(path, tensors):
    """A safetensors file of (array, dtype name) by tensor name."""
    header, blobs, offset = {}, [], 0
    for name, (array, dtype) in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    routing(out, "topk-over", 4, 5)
    routing(out, "one-expert", 1, 1)
    routing(out, "skewed", 4, 2, router_bias=[0.0, 0.0, 12.0, 0.0])
    routing(out, "nan-router", 4, 2, nan=True)
    scatter_ids(out)
    scatter_const(out)
    rng = np.random.default_rng(0)
    write_safetensors(os.path.join(out, "batch.safetensors"), {
        "x": (rng.standard_normal((2, 3, 6)).astype(np.float32), "F32"),
        "y": (np.array([0, 2], np.int64), "I64")})
    ids = np.array([[[0, 1], [2, 3], [1, 0]], [[0, 7], [2, 3], [1, 0]]], np.int64)
    write_safetensors(os.path.join(out, "ids.safetensors"), {
        "x": (rng.standard_normal((2, 3, 5)).astype(np.float32), "F32"),
        "ids": (ids, "I64")})


if __name__ == "__main__":
    main()
