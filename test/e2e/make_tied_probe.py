#!/usr/bin/env python3
"""Writes test/e2e/tied-probe/model.onnx for valueless-plan.test: a tied
embedding and LM head as TorchScript's constant folding writes them (the
table `emb.weight` [V, D] read by a Gather, its transpose `onnx::MatMul_7`
[D, V] as a second initializer read by the head's MatMul), in a graph
without the dynamo exporter's signature. The table's first 32 rows are zeros
(a padding row block), so its first 4096 values are a single value and an
import that keeps no values reads it whole, while its transpose's first
values (the table's first columns) are varied and are only probed: the two
must still be keyed alike and found tied.

    logits = emb.weight[ids] @ onnx::MatMul_7      (ids [batch, T] int64)

The tensors are external data (model.onnx.data). Needs numpy and onnx
(Debian's python3-onnx). The output is checked in (66 KB).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

V, D, T, ZERO_ROWS = 64, 128, 8, 32


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "tied-probe", "model.onnx")
    rng = np.random.default_rng(0)
    emb = rng.normal(scale=0.5, size=(V, D)).astype(np.float32)
    emb[:ZERO_ROWS] = 0.0
    head = np.ascontiguousarray(emb.T)
    nodes = [
        helper.make_node("Gather", ["emb.weight", "input_ids"], ["h"]),
        helper.make_node("MatMul", ["h", "onnx::MatMul_7"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "tied_probe",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", T])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", T, V])],
        [numpy_helper.from_array(emb, "emb.weight"),
         numpy_helper.from_array(head, "onnx::MatMul_7")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_tied_probe")
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # The tensors in model.onnx.data beside it, so that a probe reads slices
    # of an external file at their offsets.
    onnx.save(model, out, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(out) + ".data", size_threshold=0)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
