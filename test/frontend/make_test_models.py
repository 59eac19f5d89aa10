#!/usr/bin/python3
"""Writes the small ONNX models that the frontend lit tests import.

Run with Debian's /usr/bin/python3 (onnx 1.12): `make_test_models.py [OUTDIR]`
(default: Inputs/ next to this script). Every model is built with onnx.helper
so the bytes are deterministic; the bad models exercise one importer error
each. The outputs are checked in, so the tests do not need Python.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 14


def make_model(graph, opset=OPSET):
    """Wraps `graph` in a ModelProto with a fixed producer and ir_version."""
    model = helper.make_model(
        graph,
        producer_name="otc-make-test-models",
        opset_imports=[helper.make_opsetid("", opset)],
    )
    model.ir_version = 8
    return model


def save(model, out_dir, name, check=True):
    """Serializes `model` to OUT_DIR/NAME (after the checker, if asked)."""
    if check:
        onnx.checker.check_model(model)
    path = os.path.join(out_dir, name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def weights(shape, seed):
    """Deterministic small float32 weights."""
    rng = np.random.RandomState(seed)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def mlp():
    """Gemm+Relu+Gemm+SoftmaxCrossEntropyLoss with a symbolic batch."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    inits = [
        numpy_helper.from_array(weights((8, 4), 1), "fc1.weight"),
        numpy_helper.from_array(weights((8,), 2), "fc1.bias"),
        numpy_helper.from_array(weights((3, 8), 3), "fc2.weight"),
        numpy_helper.from_array(weights((3,), 4), "fc2.bias"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"],
                         name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["a"], name="/act/Relu"),
        helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"],
                         name="/fc2/Gemm", transB=1, alpha=0.5, beta=2.0),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"],
                         ["loss"], name="/loss/SCE", reduction="mean",
                         ignore_index=-100),
    ]
    return make_model(helper.make_graph(nodes, "mlp", [x, y], [loss], inits))


def ops():
    """MatMul, broadcasting Add, Transpose, Reshape (-1 and 0), Sub, Div,
    Neg, Exp, Log, Tanh and Constant nodes (float and int64)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 15])
    vec_out = helper.make_tensor_value_info("vec", TensorProto.FLOAT, [2, 3])
    inits = [
        numpy_helper.from_array(weights((4, 5), 5), "w"),
        numpy_helper.from_array(weights((5,), 6), "b"),
        numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "shape"),
    ]
    # A double initializer in the typed field (converted to f32).
    inits.append(helper.make_tensor("scale", TensorProto.DOUBLE, [1], [2.0]))
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b"], ["biased"], name="add_bcast"),
        helper.make_node("Transpose", ["biased"], ["t"], name="tr_default"),
        helper.make_node("Transpose", ["t"], ["t2"], name="tr_perm",
                         perm=[2, 0, 1]),
        helper.make_node("Reshape", ["t2", "shape"], ["r"], name="reshape"),
        helper.make_node("Constant", [], ["one"], name="const_one",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [],
                                                  [1.0])),
        helper.make_node("Sub", ["r", "one"], ["s"], name="sub"),
        helper.make_node("Div", ["s", "scale"], ["d"], name="div"),
        helper.make_node("Neg", ["d"], ["n"], name="neg"),
        helper.make_node("Exp", ["n"], ["e"], name="exp"),
        helper.make_node("Log", ["e"], ["l"], name="log"),
        helper.make_node("Tanh", ["l"], ["out"], name="tanh"),
        # MatMul with a 1-D right operand, and a Constant value_ints shape.
        helper.make_node("Constant", [], ["vshape"], name="const_shape",
                         value_ints=[5, 1]),
        helper.make_node("Reshape", ["b", "vshape"], ["bcol"],
                         name="reshape_b"),
        helper.make_node("Reshape", ["bcol", "shape"], ["brow"],
                         name="reshape_flat"),
        helper.make_node("MatMul", ["mm", "b"], ["vec"], name="mm_vec"),
        helper.make_node("Identity", ["brow"], ["brow_id"], name="ident"),
    ]
    return make_model(helper.make_graph(nodes, "ops", [x], [out, vec_out],
                                        inits))


def dropout():
    """Two training-mode Dropouts (one with the mask used) and one in
    inference mode (an identity)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])
    mask = helper.make_tensor_value_info("mask", TensorProto.BOOL,
                                         ["batch", 6])
    inits = [
        numpy_helper.from_array(np.array(0.25, dtype=np.float32), "ratio"),
        numpy_helper.from_array(np.array(True), "training"),
    ]
    nodes = [
        helper.make_node("Dropout", ["x", "ratio", "training"], ["d1", "m1"],
                         name="/drop1/Dropout"),
        helper.make_node("Constant", [], ["ratio2"], name="ratio2",
                         value_float=0.5),
        helper.make_node("Dropout", ["d1", "ratio2", "training"], ["d2"],
                         name="/drop2/Dropout"),
        helper.make_node("Dropout", ["d2"], ["y"], name="/drop3/Dropout"),
        helper.make_node("Identity", ["m1"], ["mask"], name="mask_out"),
    ]
    return make_model(helper.make_graph(nodes, "dropout", [x], [y, mask],
                                        inits))


def external(out_dir):
    """A Gemm whose weights live in a side file (ONNX external data)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = weights((4, 3), 7)
    b = np.arange(4, dtype=np.float32)
    blob = w.tobytes() + b.tobytes()
    with open(os.path.join(out_dir, "external.weights"), "wb") as f:
        f.write(blob)

    def ext(name, arr, offset):
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "external.weights"), ("offset", offset),
                     ("length", arr.nbytes)):
            e = t.external_data.add()
            e.key, e.value = k, str(v)
        return t

    inits = [ext("w", w, 0), ext("b", b, w.nbytes)]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="gemm",
                              transB=1)]
    model = make_model(helper.make_graph(nodes, "external", [x], [y], inits))
    save(model, out_dir, "external.onnx", check=False)

    # The same model pointing at a side file that is not there.
    for t in model.graph.initializer:
        t.external_data[0].value = "missing.weights"
    save(model, out_dir, "external_missing.onnx", check=False)


def single_node_graph(name, nodes, inputs, outputs, inits=()):
    """A graph from value-info tuples (name, type, shape)."""
    ins = [helper.make_tensor_value_info(*i) for i in inputs]
    outs = [helper.make_tensor_value_info(*o) for o in outputs]
    return make_model(helper.make_graph(nodes, name, ins, outs, list(inits)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here,
                                                                 "Inputs")
    os.makedirs(out_dir, exist_ok=True)

    mlp_path = save(mlp(), out_dir, "mlp.onnx")
    save(ops(), out_dir, "ops.onnx")
    save(dropout(), out_dir, "dropout.onnx")
    external(out_dir)

    # Bad files.
    with open(mlp_path, "rb") as f:
        good = f.read()
    with open(os.path.join(out_dir, "truncated.onnx"), "wb") as f:
        f.write(good[:40])
    with open(os.path.join(out_dir, "not_onnx.onnx"), "w") as f:
        f.write("This is a text file that only pretends to be a model.\n")
    open(os.path.join(out_dir, "empty.onnx"), "wb").close()

    f = TensorProto.FLOAT
    save(single_node_graph(
        "unsupported",
        [helper.make_node("Hardmax", ["x"], ["h"], name="h1"),
         helper.make_node("Relu", ["h"], ["r"], name="r1"),
         helper.make_node("Det", ["r"], ["y"], name="d1")],
        [("x", f, [3, 3])], [("y", f, [])]), out_dir, "unsupported.onnx")

    save(single_node_graph(
        "shape_mismatch",
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="/fc1/MatMul")],
        [("a", f, [4, 3]), ("b", f, [5, 2])], [("y", f, [4, 2])]),
        out_dir, "shape_mismatch.onnx")

    save(single_node_graph(
        "dynamic",
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", f, ["batch", "seq"])], [("y", f, ["batch", "seq"])]),
        out_dir, "dynamic_dim.onnx")

    # The checker rejects these two, so they are written unchecked; the
    # importer's own pre-scan reports them (the checker runs after it).
    save(single_node_graph(
        "undefined",
        [helper.make_node("Add", ["x", "ghost"], ["y"], name="add_ghost")],
        [("x", f, [2])], [("y", f, [2])]),
        out_dir, "undefined_value.onnx", check=False)
    save(single_node_graph(
        "unsorted",
        [helper.make_node("Relu", ["t"], ["y"], name="late_user"),
         helper.make_node("Neg", ["x"], ["t"], name="producer")],
        [("x", f, [2])], [("y", f, [2])]),
        out_dir, "unsorted.onnx", check=False)

    # Valid structure, but the checker rejects the attribute.
    save(single_node_graph(
        "checker",
        [helper.make_node("Relu", ["x"], ["y"], name="relu_attr", alpha=1.0)],
        [("x", f, [2])], [("y", f, [2])]),
        out_dir, "checker_fail.onnx", check=False)
    # An opset older than the importer knows.
    old = single_node_graph(
        "old_opset", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", f, [2])], [("y", f, [2])])
    old.opset_import[0].version = 11
    save(old, out_dir, "old_opset.onnx")

    save(single_node_graph(
        "reshape_dynamic",
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_dyn")],
        [("x", f, [2, 3]), ("s", TensorProto.INT64, [2])], [("y", f, [3, 2])]),
        out_dir, "reshape_dynamic.onnx")

    save(single_node_graph(
        "log_prob",
        [helper.make_node("SoftmaxCrossEntropyLoss", ["s", "l"],
                          ["loss", "lp"], name="sce")],
        [("s", f, [2, 3]), ("l", TensorProto.INT64, [2])],
        [("loss", f, []), ("lp", f, [2, 3])]),
        out_dir, "log_prob.onnx")


if __name__ == "__main__":
    main()
