#!/usr/bin/env python3
"""For fixed-batch.test: writes two models whose graph inputs have their
batch fixed at 1, as torch.onnx.export does when the example batch is 1
and no dynamic dimension is asked for.

    make_fixed_batch.py rebindable IN.onnx OUT.onnx
        IN (bench/make_gpt2_onnx.py's graph: Reshapes copy the batch with 0
        or infer it with -1) with inputs idx and targets made [1, T].
    make_fixed_batch.py baked OUT.onnx
        tokens [1, 4] -> embedding [1, 4, 8] -> Reshape to the constant
        [1, 32] -> MatMul [32, 5] -> cross-entropy: the batch is also in
        the Reshape's shape, so no other batch fits.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def rebindable(src, out):
    m = onnx.load(src, load_external_data=False)
    for inp in m.graph.input:
        dims = inp.type.tensor_type.shape.dim
        if len(dims) and dims[0].dim_param == "batch":
            dims[0].Clear()
            dims[0].dim_value = 1
    onnx.save(m, out)


def baked(out):
    r = np.random.default_rng(0)
    inits = [numpy_helper.from_array(r.standard_normal((16, 8)).astype(np.float32), "emb"),
             numpy_helper.from_array(r.standard_normal((32, 5)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 32], np.int64), "shape")]
    nodes = [helper.make_node("Gather", ["emb", "tokens"], ["e"], name="/emb/Gather"),
             helper.make_node("Reshape", ["e", "shape"], ["flat"], name="/Reshape"),
             helper.make_node("MatMul", ["flat", "w"], ["logits"], name="/head/MatMul"),
             helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "label"], ["loss"],
                              name="/loss", reduction="mean")]
    g = helper.make_graph(nodes, "baked",
                          [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, 4]),
                           helper.make_tensor_value_info("label", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, out)


if __name__ == "__main__":
    if sys.argv[1] == "rebindable":
        rebindable(sys.argv[2], sys.argv[3])
    else:
        baked(sys.argv[2])
