#!/usr/bin/python3
"""Writes the frontend test models for the ops Hugging Face exports need into
Inputs/ (or OUTDIR): rotary_const.onnx, where a constant frequency column
times Range positions (MatMul) goes through Cos and Sin, as in the rotary
embedding of Hugging Face's Llama export; cos_runtime.onnx, a Cos of a graph
input (a value computed at run time); scatter_nd.onnx, a ScatterND with
constant indices (one negative) writing rows of an input into another, as
Llama's padding mask is written into its causal mask; scatter_nd_add.onnx
(reduction "add") and scatter_nd_runtime.onnx (indices from a graph input),
both one-line errors. Run with Debian's /usr/bin/python3 (onnx 1.12):
`make_hf_import_models.py [OUTDIR]`; the bytes are deterministic and checked
in."""

SCATTER_INDICES = [[0, 1], [1, -1]]   # into data [2, 3, 4]: rows of 4
FREQS = [1.0, 0.25, 0.0625]   # [3] frequencies; positions 0..4
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper



def model(name, nodes, inputs, outputs, inits=()):
    ins = [helper.make_tensor_value_info(*i) for i in inputs]
    outs = [helper.make_tensor_value_info(*o) for o in outputs]
    m = helper.make_model(helper.make_graph(nodes, name, ins, outs, list(inits)),
                          producer_name="otc-make-test-models",
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "Inputs")
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    node = helper.make_node
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "start"),
        numpy_helper.from_array(np.array(5, np.int64), "limit"),
        numpy_helper.from_array(np.array(1, np.int64), "delta"),
        numpy_helper.from_array(np.array([1, 1, 5], np.int64), "row"),
    ]
    # y = x * cos(f p) + x * sin(f p): [1, 3, 5]
    rotary = model("rotary_const", [
        # A Constant node, as torch.onnx.export writes a non-persistent buffer.
        node("Constant", [], ["inv_freq"], name="inv_freq", value=numpy_helper.from_array(
            np.array(FREQS, np.float32).reshape(1, 3, 1), "inv_freq")),
        node("Range", ["start", "limit", "delta"], ["pos"], name="range"),
        node("Cast", ["pos"], ["posf"], to=f, name="cast"),
        node("Reshape", ["posf", "row"], ["pos3"], name="reshape"),
        node("MatMul", ["inv_freq", "pos3"], ["angles"], name="angles"),
        node("Cos", ["angles"], ["c"], name="cos"),
        node("Sin", ["angles"], ["s"], name="sin"),
        node("Mul", ["x", "c"], ["xc"], name="xc"),
        node("Mul", ["x", "s"], ["xs"], name="xs"),
        node("Add", ["xc", "xs"], ["y"], name="y"),
    ], [("x", f, [1, 3, 5])], [("y", f, [1, 3, 5])], inits)
    onnx.save(rotary, os.path.join(out_dir, "rotary_const.onnx"))
    runtime = model("cos_runtime", [
        node("Cos", ["x"], ["y"], name="/rotary/Cos"),
    ], [("x", f, [2, 3])], [("y", f, [2, 3])])
    onnx.save(runtime, os.path.join(out_dir, "cos_runtime.onnx"))

    idx = numpy_helper.from_array(np.array(SCATTER_INDICES, np.int64), "idx")
    scatter = model("scatter_nd", [
        node("ScatterND", ["x", "idx", "u"], ["y"], name="/model/ScatterND"),
    ], [("x", f, [2, 3, 4]), ("u", f, [2, 4])], [("y", f, [2, 3, 4])], [idx])
    onnx.save(scatter, os.path.join(out_dir, "scatter_nd.onnx"))
    add = model("scatter_nd_add", [
        node("ScatterND", ["x", "idx", "u"], ["y"], name="/model/ScatterND",
             reduction="add"),
    ], [("x", f, [2, 3, 4]), ("u", f, [2, 4])], [("y", f, [2, 3, 4])], [idx])
    onnx.save(add, os.path.join(out_dir, "scatter_nd_add.onnx"))
    dynamic = model("scatter_nd_runtime", [
        node("ScatterND", ["x", "i", "u"], ["y"], name="/model/ScatterND"),
    ], [("x", f, [2, 3, 4]), ("i", i64, [2, 2]), ("u", f, [2, 4])],
        [("y", f, [2, 3, 4])])
    onnx.save(dynamic, os.path.join(out_dir, "scatter_nd_runtime.onnx"))


if __name__ == "__main__":
    main()
