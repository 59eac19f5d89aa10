"""Writes test/e2e/dropout/: a graph with a training-mode Dropout between a
MatMul and SoftmaxCrossEntropyLoss (dynamic batch), and one batch for it.
Used to check that the compiled program draws the same dropout masks as the
reference interpreter for the same key. Run with /usr/bin/python3 (onnx, numpy)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import st_io

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dropout")
os.makedirs(here, exist_ok=True)
rng = np.random.default_rng(7)
w = rng.standard_normal((8, 5)).astype(np.float32)
graph = helper.make_graph(
    [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
        helper.make_node("Dropout", ["h", "ratio", "training"], ["d"], name="/drop/Dropout"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["d", "y"], ["loss"], name="/loss",
                         reduction="mean"),
    ],
    "dropout_loss",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8]),
     helper.make_tensor_value_info("y", TensorProto.INT64, ["batch"])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    initializer=[numpy_helper.from_array(w, "w"),
                 numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
                 numpy_helper.from_array(np.array(True), "training")],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "dropout.onnx"))
st_io.write(os.path.join(here, "batch.safetensors"),
            {"x": rng.standard_normal((16, 8)).astype(np.float32),
             "y": rng.integers(0, 5, 16).astype(np.int64)})
