#!/usr/bin/env python3
"""Writes two invalid opset-11 models for old-opset-invalid.test: UNDEFINED.onnx
lists a graph output that no node writes, UNKNOWN.onnx uses an op no opset has."""
import sys

import onnx
from onnx import TensorProto, helper

undefined_path, unknown_path = sys.argv[1:3]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])


def out(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 1])


def save(nodes, outputs, path):
    graph = helper.make_graph(nodes, "g", [x], outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)


save([helper.make_node("ReduceMean", ["x"], ["m"])], [out("m"), out("x2")], undefined_path)
save([helper.make_node("SeduceSum", ["x"], ["s"])], [out("s")], unknown_path)
