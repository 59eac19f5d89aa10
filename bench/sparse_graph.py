"""The ONNX graph writer of the shaped benchmark models (make_gpt2_onnx.py,
make_llama_onnx.py): FP32 initializers as ONNX external data in a sparse
file of zeros (only shapes matter for planning), constants as Constant
nodes (as exporters write them: not initializers, so not parameters), ops
named "/<Op>_<n>" as PyTorch's exporter names them, and the training graph
of tokens `idx` and `targets` [batch, T] to a scalar `loss`, opset 17.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class SparseGraph:
    def __init__(self, out):
        self.out = out
        self.weights_path = out + ".weights"
        self.inits, self.nodes = [], []
        self.offset = 0
        self.count = 0

    def weight(self, name, shape):
        """An FP32 initializer of `shape` in the weights file; its name."""
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * 4
        for k, val in (("location", os.path.basename(self.weights_path)),
                       ("offset", str(self.offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, val
        self.offset += length
        self.inits.append(t)
        return name

    def const(self, name, array):
        """A Constant node holding `array`; its output's name."""
        self.nodes.append(helper.make_node(
            "Constant", [], [name], name="/" + name,
            value=numpy_helper.from_array(array, name)))
        return name

    def node(self, op, inputs, **attrs):
        """One `op` node; its output's name."""
        self.count += 1
        out = f"{op.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out],
                                           name=f"/{op}_{self.count}", **attrs))
        return out

    def save(self, graph_name, T):
        """Writes the model (inputs idx and targets [batch, T], output loss)
        and its sparse weights file; returns the parameter count."""
        graph = helper.make_graph(
            self.nodes, graph_name,
            [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", T]),
             helper.make_tensor_value_info("targets", TensorProto.INT64,
                                           ["batch", T])],
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
            initializer=self.inits)
        model = helper.make_model(graph,
                                  opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        onnx.save(model, self.out)
        with open(self.weights_path, "wb") as f:
            f.truncate(self.offset)
        return self.offset // 4
