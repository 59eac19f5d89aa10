#!/usr/bin/env python3
"""Writes the invalid models of the robustness regression tests into OUTDIR.

Each is a test model of the repository with one known defect (the defects of
issue 15): external data outside the model's folder, graph-validation errors
at opset 18+ (which libonnx's checker does not know), a huge dimension, an
INT64 loss, an unknown attribute. Nothing binary is checked in: the lit tests
run this script into %t.

    make_bad_models.py SRC_ROOT OUTDIR

Every model is written next to what it needs (a weights file, a symlink, a
fifo), under OUTDIR/<case>/.
"""
import copy
import os
import shutil
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np


def load(src, rel):
    return onnx.load(os.path.join(src, rel), load_external_data=False)


def save(model, out, case, name="model.onnx"):
    d = os.path.join(out, case)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, name))
    return d


def set_opset(model, version):
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = version


def set_location(model, init_name, location):
    for init in model.graph.initializer:
        if init.name == init_name:
            for kv in init.external_data:
                if kv.key == "location":
                    kv.value = location


def external_cases(src, out):
    """external.onnx (opset 14) reads w and b from external.weights."""
    base = load(src, "test/frontend/Inputs/external.onnx")
    weights = os.path.join(src, "test/frontend/Inputs/external.weights")

    def case(name, location, opset=None, prepare=None):
        m = copy.deepcopy(base)
        set_location(m, "w", location)
        if opset:
            set_opset(m, opset)
        d = save(m, out, name)
        shutil.copy(weights, os.path.join(d, "external.weights"))
        if prepare:
            prepare(d)

    # ../ out of the folder, at the checker's opset and past it.
    case("ext-parent", "../" * 64 + "etc/passwd")
    case("ext-parent-18", "../" * 64 + "etc/passwd", opset=18)
    # An absolute path (opset 18: libonnx's checker does not run).
    case("ext-absolute-18", "/etc/passwd", opset=18)
    # A symlink inside the folder pointing outside it.
    case("ext-symlink", "link.bin",
         prepare=lambda d: os.symlink("/etc/passwd", os.path.join(d, "link.bin")))
    # A device file reached through a symlink, and a fifo inside the folder.
    case("ext-device", "zero.bin",
         prepare=lambda d: os.symlink("/dev/zero", os.path.join(d, "zero.bin")))
    case("ext-fifo", "fifo.bin", opset=18,
         prepare=lambda d: os.mkfifo(os.path.join(d, "fifo.bin")))
    # A `..` that stays inside the folder is fine.
    case("ext-inside", "sub/../external.weights",
         prepare=lambda d: os.makedirs(os.path.join(d, "sub")))
    # Offset + length past the end of the file, with a length near 2^63.
    m = copy.deepcopy(base)
    for init in m.graph.initializer:
        if init.name == "w":
            for kv in init.external_data:
                if kv.key == "offset":
                    kv.value = str(2**63 - 8)
    d = save(m, out, "ext-offset")
    shutil.copy(weights, os.path.join(d, "external.weights"))


def mlp18(src):
    """The MLP of test/frontend/Inputs at opset 18 (Gemm, Relu, loss)."""
    m = load(src, "test/frontend/Inputs/mlp.onnx")
    set_opset(m, 18)
    return m


def graph_cases(src, out):
    # The valid model itself, at opset 18.
    save(mlp18(src), out, "mlp18")

    # A tensor written by two nodes.
    m = mlp18(src)
    nodes = m.graph.node
    nodes[1].output[0] = nodes[0].output[0]
    save(m, out, "two-writers-18")

    # A node output named like a graph input.
    m = mlp18(src)
    m.graph.node[1].output[0] = "x"
    for n in m.graph.node[2:]:
        for i, name in enumerate(n.input):
            if name == mlp18(src).graph.node[1].output[0]:
                n.input[i] = "x"
    save(m, out, "output-is-input-18")

    # A node output named like an initializer.
    m = mlp18(src)
    init = m.graph.initializer[0].name
    old = m.graph.node[1].output[0]
    m.graph.node[1].output[0] = init
    for n in m.graph.node[2:]:
        for i, name in enumerate(n.input):
            if name == old:
                n.input[i] = init
    save(m, out, "output-is-initializer-18")

    # An initializer listed twice.
    m = mlp18(src)
    m.graph.initializer.append(copy.deepcopy(m.graph.initializer[0]))
    save(m, out, "duplicate-initializer-18")

    # A graph output listed twice.
    m = mlp18(src)
    m.graph.output.append(copy.deepcopy(m.graph.output[0]))
    save(m, out, "duplicate-output-18")

    # An unknown attribute (alpha on Relu).
    m = mlp18(src)
    relu = [n for n in m.graph.node if n.op_type == "Relu"][0]
    relu.attribute.append(helper.make_attribute("alpha", 0.5))
    save(m, out, "unknown-attribute-18")

    # An attribute of the wrong type (Gemm's transB as a float).
    m = mlp18(src)
    gemm = m.graph.node[0]
    for a in gemm.attribute:
        if a.name == "transB":
            a.type = onnx.AttributeProto.FLOAT
            a.f = 1.0
    save(m, out, "attribute-type-18")

    # A node input that nothing defines.
    m = mlp18(src)
    m.graph.node[1].input[0] = "nowhere"
    save(m, out, "dangling-input-18")

    # An input whose type the op's schema does not take (float labels).
    m = mlp18(src)
    loss = [n for n in m.graph.node if n.op_type == "SoftmaxCrossEntropyLoss"][0]
    loss.input[1] = "x"
    save(m, out, "wrong-type-18")

    # A declared output type that is not the computed one.
    m = mlp18(src)
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    save(m, out, "declared-type-18")

    # A name holding a newline and a control byte (found by the fuzz target):
    # the error escapes them and stays one line.
    m = mlp18(src)
    m.graph.output[0].name = "lo\nss\x01"
    save(m, out, "newline-name-18")

    # The loss cast to INT64: a graph output that exists but is no float.
    m = mlp18(src)
    loss = m.graph.output[0].name
    for n in m.graph.node:
        for i, name in enumerate(n.output):
            if name == loss:
                n.output[i] = "loss_f"
    m.graph.node.append(helper.make_node("Cast", ["loss_f"], [loss],
                                         to=TensorProto.INT64, name="to_int"))
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    save(m, out, "int64-loss-18")


def conv_cases(out):
    """A Conv whose 5 x 5 kernel spans more than its 3 x 3 input (unpadded),
    and one whose dilation (2: a 5-wide span from a 3 x 3 kernel) does."""
    for case, kernel, dilations in (("conv-kernel-larger", 5, [1, 1]),
                                    ("conv-dilated-larger", 3, [2, 2])):
        w = numpy_helper.from_array(
            np.ones((2, 1, kernel, kernel), dtype=np.float32), "w")
        g = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], name="conv0",
                              pads=[0, 0, 0, 0], dilations=dilations),
             helper.make_node("ReduceSum", ["y"], ["loss"], name="sum", keepdims=0)],
            "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 3, 3])],
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w])
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out, case)


def huge_cases(src, out):
    # idx of the GPT-2 test model with a leading dimension of 2^40.
    for opset_dir in ("gpt2-opset14", "gpt2-opset18"):
        m = load(src, "test/e2e/%s/gpt2.onnx" % opset_dir)
        for inp in m.graph.input:
            if inp.name in ("idx", "targets", "input_ids", "labels"):
                d = inp.type.tensor_type.shape.dim[0]
                d.Clear()
                d.dim_value = 2**40
        save(m, out, "huge-idx-" + opset_dir.split("-")[1])
    # idx of 2^32 x 16 (2^36 elements): within the importer's bound of 1 TiB
    # per tensor as int64, not in memory as the interpreter's doubles. Only
    # the input: the graph's activations would exceed the bound.
    m = load(src, "test/e2e/gpt2-opset14/gpt2.onnx")
    idx = [i for i in m.graph.input if i.name == "idx"][0]
    d = idx.type.tensor_type.shape.dim[0]
    d.Clear()
    d.dim_value = 2**32
    del m.graph.node[:]
    del m.graph.initializer[:]
    m.graph.ClearField("output")
    m.graph.ClearField("value_info")
    m.graph.node.append(helper.make_node("Identity", ["idx"], ["out"], name="id"))
    m.graph.output.append(helper.make_tensor_value_info("out", TensorProto.INT64,
                                                        [2**32, 16]))
    m.graph.ClearField("input")
    m.graph.input.append(idx)
    save(m, out, "big-idx")
    # Values the importer computes itself: a Range of 2^40 elements, and a
    # SplitToSequence into 2^17 pieces (each piece a value).
    m = mlp18(src)
    for name, v in (("r_start", 0), ("r_limit", 2**40), ("r_delta", 1)):
        m.graph.initializer.append(helper.make_tensor(name, TensorProto.INT64, [], [v]))
    m.graph.node.append(helper.make_node("Range", ["r_start", "r_limit", "r_delta"],
                                         ["positions"], name="range"))
    m.graph.output.append(helper.make_tensor_value_info("positions", TensorProto.INT64,
                                                        [2**40]))
    save(m, out, "huge-range-18")
    m = mlp18(src)
    m.graph.initializer.append(helper.make_tensor("pieces_shape", TensorProto.INT64,
                                                  [1], [2**17]))
    m.graph.node.extend([
        helper.make_node("ConstantOfShape", ["pieces_shape"], ["zeros"], name="zeros"),
        helper.make_node("SplitToSequence", ["zeros"], ["pieces"], name="split", axis=0),
        helper.make_node("SequenceAt", ["pieces", "r_zero"], ["first"], name="at"),
    ])
    m.graph.initializer.append(helper.make_tensor("r_zero", TensorProto.INT64, [], [0]))
    m.graph.output.append(helper.make_tensor_value_info("first", TensorProto.FLOAT, []))
    save(m, out, "huge-sequence-18")

    # An initializer whose dims multiply past 2^64 (its raw_data is small).
    m = load(src, "test/frontend/Inputs/mlp.onnx")
    init = m.graph.initializer[0]
    del init.dims[:]
    init.dims.extend([2**32, 2**32, 4])
    save(m, out, "overflow-initializer")
    set_opset(m, 18)
    save(m, out, "overflow-initializer-18")


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    external_cases(src, out)
    graph_cases(src, out)
    conv_cases(out)
    huge_cases(src, out)


if __name__ == "__main__":
    main()
