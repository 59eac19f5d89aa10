#!/usr/bin/env python3
"""For merged-fold.test: two small graphs of the form the TorchScript
exporter writes for a freshly initialized Gemma, whose norms compute
x * (1 + weight) with every weight zero: the folded ones `onnx::Mul_7` are
one initializer, and the exporter merges the equal values, reading them in
a second module through `Identity(onnx::Mul_7) -> onnx::Mul_9`, or (the
`direct` form) from the same initializer in both modules. `separate` is the
same model with the two values as two initializers, the oracle: PyTorch
trains them apart.

    loss = mean((((x * a) @ W) * b)^2),  a = b = ones(8) at the start

    make_merged_fold.py identity|direct|separate|chain|chain_separate OUT.onnx [BATCH.safetensors]

`chain`: the second module called twice, its second call (scope
input_layernorm_1) reading an Identity copy of its own copy, as the
TorchScript exporter writes Gemma 3n's AltUp router norm; `chain_separate`
the same with the two values as two initializers, the second read by both
calls: the oracle.

Needs numpy and onnx (Debian's python3-onnx).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def main():
    form, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    ones = np.ones(8, np.float32)
    inits = [numpy_helper.from_array(ones, "onnx::Mul_7"),
             numpy_helper.from_array(rng.normal(size=(8, 8)).astype(np.float32),
                                     "proj.weight")]
    nodes = []
    second = "onnx::Mul_9"
    chained = form.startswith("chain")
    if chained:
        # The second module called twice (scopes input_layernorm and
        # input_layernorm_1), its second call reading a copy of its copy.
        form = "identity" if form == "chain" else "separate"
    if form == "identity":
        nodes.append(helper.make_node("Identity", ["onnx::Mul_7"], [second],
                                      name="Identity_3"))
    elif form == "separate":
        inits.append(numpy_helper.from_array(ones, second))
    else:
        second = "onnx::Mul_7"
    nodes += [
        helper.make_node("Mul", ["x", "onnx::Mul_7"], ["h0"],
                         name="/model/layers.0/input_layernorm/Mul"),
        helper.make_node("MatMul", ["h0", "proj.weight"], ["h1"],
                         name="/model/proj/MatMul"),
        helper.make_node("Mul", ["h1", second], ["h2"],
                         name="/model/layers.1/input_layernorm/Mul"),
    ]
    last = "h2"
    if chained:
        third = "onnx::Mul_11" if form == "identity" else second
        if form == "identity":
            nodes.append(helper.make_node("Identity", [second], [third],
                                          name="Identity_5"))
        nodes.append(helper.make_node(
            "Mul", ["h2", third], ["h3"],
            name="/model/layers.1/input_layernorm_1/Mul"))
        last = "h3"
    nodes += [
        helper.make_node("Mul", [last, last], ["sq"], name="/loss/Mul"),
        helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0,
                         name="/loss/ReduceMean"),
    ]
    graph = helper.make_graph(
        nodes, "merged_fold",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, out)
    if len(sys.argv) > 3:
        st_io.write(sys.argv[3], {"x": rng.normal(size=(2, 8)).astype(np.float32)})


if __name__ == "__main__":
    main()
