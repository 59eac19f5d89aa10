#!/usr/bin/env python3
"""Writes test/e2e/folded-lookup/lookup.onnx: a small graph shaped like what
the dynamo exporter's optimizer leaves of a fixed-shape export, with the
metadata it writes (the graph signature's PARAMETER targets, each folded
value's `pkg.onnxscript.optimizer.folded_from`):

  - `emb.weight` [V, C], an embedding read by a Gather of the input ids;
  - `val_pos` [T, C]: rows 0..T-1 of the parameter `wpe.weight` (a position
    table looked up at the export's positions), folded_from
    ['wpe.weight', 'position_ids']: every value distinct, one per table
    entry, so training it trains those rows;
  - `val_bias` [1, T, T]: T5's relative position bias as a fixed-shape export
    folds it, table[bucket(j - i)] of the parameter `rel.weight` [2T - 1]
    (each relative distance its own bucket), folded_from
    ['rel.weight', 'val_buckets']: 2T - 1 distinct values in T x T places,
    so training the T x T values as free tensors would no longer be T5.

    loss = ReduceSum((x + val_pos) @ (x + val_pos)^T / C + val_bias), x = emb[ids]

Needs onnx >= 1.16 (metadata_props on value_info): the dev venv's. The
output is checked in (a few KB); CI only reads it.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

V, C, T = 16, 8, 16


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "folded-lookup", "lookup.onnx")
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(V, C)).astype(np.float32)
    wpe = rng.normal(size=(T + 4, C)).astype(np.float32)
    rel = rng.normal(size=(2 * T - 1,)).astype(np.float32)
    i, j = np.meshgrid(np.arange(T), np.arange(T), indexing="ij")
    bias = rel[(j - i) + T - 1].reshape(1, T, T).astype(np.float32)
    inits = [numpy_helper.from_array(emb, "emb.weight"),
             numpy_helper.from_array(wpe[:T], "val_pos"),
             numpy_helper.from_array(bias, "val_bias"),
             numpy_helper.from_array(np.array(1.0 / C, dtype=np.float32), "val_scale")]
    nodes = [
        helper.make_node("Gather", ["emb.weight", "ids"], ["x"], name="node_embedding"),
        helper.make_node("Add", ["x", "val_pos"], ["h"], name="node_add"),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1], name="node_transpose"),
        helper.make_node("MatMul", ["h", "ht"], ["s"], name="node_matmul"),
        helper.make_node("Mul", ["s", "val_scale"], ["ss"], name="node_mul"),
        helper.make_node("Add", ["ss", "val_bias"], ["b"], name="node_add_bias"),
        helper.make_node("ReduceSum", ["b"], ["loss"], keepdims=0, name="node_sum"),
    ]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", T])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    folded = {"val_pos": "['wpe.weight', 'position_ids']",
              "val_bias": "['rel.weight', 'val_buckets']"}
    for name, arr in (("val_pos", wpe[:T]), ("val_bias", bias)):
        vi = helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape))
        p = vi.metadata_props.add()
        p.key, p.value = "pkg.onnxscript.optimizer.folded_from", folded[name]
        graph.value_info.append(vi)
    sig = ("\n# inputs\np_emb_weight: PARAMETER target='emb.weight'\n"
           "p_wpe_weight: PARAMETER target='wpe.weight'\n"
           "p_rel_weight: PARAMETER target='rel.weight'\n"
           "b_position_ids: BUFFER target='position_ids' persistent=False\n"
           "ids: USER_INPUT\n\n# outputs\nloss: USER_OUTPUT\n")
    p = graph.metadata_props.add()
    p.key, p.value = "pkg.torch.export.ExportedProgram.graph_signature", sig
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="make_folded_lookup.py")
    model.ir_version = 10
    onnx.checker.check_model(model)
    onnx.save(model, out)
    print(f"wrote {out} (onnx {onnx.__version__})")


if __name__ == "__main__":
    main()
