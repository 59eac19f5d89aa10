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


def model_at(name, nodes, inputs, outputs, opset, inits=()):
    """A graph from value-info tuples at `opset` (ir_version 8)."""
    ins = [helper.make_tensor_value_info(*i) for i in inputs]
    outs = [helper.make_tensor_value_info(*o) for o in outputs]
    return make_model(helper.make_graph(nodes, name, ins, outs, list(inits)),
                      opset)


def i64(name, values):
    """An int64 initializer."""
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def transformer_ops(out_dir):
    """One model per op family and per opset whose signature changed."""
    f, i = TensorProto.FLOAT, TensorProto.INT64
    node = helper.make_node
    # Elementwise at opset 14: Pow, Sqrt, Reciprocal, Erf, Sigmoid, Equal,
    # Less, Greater, Where, Cast, Neg on int64.
    save(model_at("elementwise", [
        node("Pow", ["x", "two"], ["p"], name="pow"),
        node("Sqrt", ["p"], ["s"], name="sqrt"),
        node("Reciprocal", ["s"], ["r"], name="recip"),
        node("Erf", ["r"], ["e"], name="erf"),
        node("Sigmoid", ["e"], ["g"], name="sigmoid"),
        node("Equal", ["k", "zero"], ["eq"], name="equal"),
        node("Less", ["x", "g"], ["lt"], name="less"),
        node("Greater", ["x", "g"], ["gt"], name="greater"),
        node("Where", ["eq", "g", "x"], ["w"], name="where"),
        node("Cast", ["lt"], ["ltf"], name="cast", to=TensorProto.FLOAT),
        node("Add", ["w", "ltf"], ["y"], name="add"),
        node("Neg", ["k"], ["nk"], name="neg_int"),
        node("Cast", ["gt"], ["gti"], name="cast_i32", to=TensorProto.INT32),
    ], [("x", f, [2, 3]), ("k", i, [3])],
        [("y", f, [2, 3]), ("nk", i, [3]), ("gti", TensorProto.INT32, [2, 3])],
        14, [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             i64("zero", 0)]), out_dir, "elementwise.onnx")
    # Gelu exists from opset 20 (libonnx 1.12's checker does not know it).
    save(model_at("gelu", [
        node("Gelu", ["x"], ["a"], name="gelu_erf"),
        node("Gelu", ["a"], ["y"], name="gelu_tanh", approximate="tanh"),
    ], [("x", f, [2, 3])], [("y", f, [2, 3])], 20), out_dir, "gelu20.onnx",
        check=False)
    # LayerNormalization from opset 17.
    save(model_at("layernorm", [
        node("LayerNormalization", ["x", "ln.w", "ln.b"], ["y"], name="ln",
             epsilon=1e-5),
    ], [("x", f, [2, 4, 6])], [("y", f, [2, 4, 6])], 17,
        [numpy_helper.from_array(weights((6,), 7), "ln.w"),
         numpy_helper.from_array(weights((6,), 8), "ln.b")]),
        out_dir, "layernorm17.onnx")
    save(model_at("layernorm_mean", [
        node("LayerNormalization", ["x", "ln.w"], ["y", "mean"], name="ln"),
    ], [("x", f, [2, 6])], [("y", f, [2, 6]), ("mean", f, [2, 1])], 17,
        [numpy_helper.from_array(weights((6,), 7), "ln.w")]),
        out_dir, "layernorm_mean.onnx")
    # Reductions: ReduceSum axes input at 13, ReduceMean/Max axes attribute
    # before 18 and input from 18.
    reduce_io = ([("x", f, [2, 3, 4])],
                 [("s", f, [2, 1, 4]), ("m", f, [2]), ("x1", f, [3, 4])])
    save(model_at("reduce13", [
        node("ReduceSum", ["x", "ax1"], ["s"], name="rsum"),
        node("ReduceMean", ["x"], ["m"], name="rmean", axes=[-1, 1],
             keepdims=0),
        node("ReduceMax", ["x"], ["x1"], name="rmax", axes=[0], keepdims=0),
    ], *reduce_io, 13, [i64("ax1", [1])]), out_dir, "reduce13.onnx")
    save(model_at("reduce18", [
        node("ReduceSum", ["x", "ax1"], ["s"], name="rsum"),
        node("ReduceMean", ["x", "ax_m"], ["m"], name="rmean", keepdims=0),
        node("ReduceMax", ["x", "ax0"], ["x1"], name="rmax", keepdims=0),
    ], *reduce_io, 18, [i64("ax1", [1]), i64("ax_m", [-1, 1]),
                        i64("ax0", [0])]), out_dir, "reduce18.onnx",
        check=False)
    # Shape and data movement at opset 14 (axes/split as inputs).
    save(model_at("shape_ops", [
        node("Unsqueeze", ["x", "ax0"], ["u"], name="unsqueeze"),
        node("Squeeze", ["u", "ax0"], ["sq"], name="squeeze"),
        node("Flatten", ["x3"], ["fl"], name="flatten", axis=2),
        node("Expand", ["x", "eshape"], ["ex"], name="expand"),
        node("Concat", ["sq", "x"], ["cat"], name="concat", axis=-1),
        node("Split", ["cat", "sizes"], ["p0", "p1"], name="split", axis=1),
        node("Slice", ["x3", "starts", "ends", "axes", "steps"], ["sl"],
             name="slice"),
        node("Gather", ["emb", "ids"], ["g"], name="gather"),
        node("Trilu", ["ex", "k1"], ["tri"], name="trilu", upper=0),
        node("Transpose", ["g"], ["gt"], name="transpose", perm=[1, 0, 2]),
    ], [("x", f, [4, 5]), ("x3", f, [2, 3, 4]), ("ids", i, [2, 3])],
        [("fl", f, [6, 4]), ("p0", f, [4, 3]), ("p1", f, [4, 7]),
         ("sl", f, [2, 1, 2]), ("gt", f, [3, 2, 8]), ("tri", f, [2, 4, 5])],
        14, [i64("ax0", [0]), i64("eshape", [2, 1, 1]), i64("sizes", [3, 7]),
             i64("starts", [1, 0]), i64("ends", [2, 9223372036854775807]),
             i64("axes", [1, -1]), i64("steps", [1, 2]), i64("k1", 1),
             numpy_helper.from_array(weights((10, 8), 9), "emb")]),
        out_dir, "shape_ops.onnx")
    # Split with num_outputs (opset 18) and Squeeze without axes.
    save(model_at("split18", [
        node("Split", ["x"], ["a", "b", "c"], name="split", axis=0,
             num_outputs=3),
        node("Squeeze", ["c"], ["y"], name="squeeze_all"),
    ], [("x", f, [5, 1, 2])], [("a", f, [2, 1, 2]), ("b", f, [2, 1, 2]),
                                ("y", f, [2])], 18), out_dir, "split18.onnx",
        check=False)
    # What the dynamo exporter writes at opset 18: SplitToSequence with a
    # scalar split, SequenceAt (negative position too), CastLike.
    save(model_at("sequence18", [
        node("SplitToSequence", ["x", "two"], ["seq"], name="split_seq", axis=1),
        node("SequenceAt", ["seq", "zero"], ["a"], name="at0"),
        node("SequenceAt", ["seq", "minus1"], ["b"], name="at_last"),
        node("CastLike", ["ids", "x"], ["c"], name="castlike"),
    ], [("x", f, [3, 6]), ("ids", i, [3])],
        [("a", f, [3, 2]), ("b", f, [3, 2]), ("c", f, [3])], 18,
        [i64("two", 2), i64("zero", 0), i64("minus1", -1)]),
        out_dir, "sequence18.onnx", check=False)
    # Softmax family and losses, including [N, C, d] cross-entropy.
    save(model_at("losses", [
        node("Softmax", ["s"], ["p"], name="softmax"),
        node("LogSoftmax", ["s"], ["lp"], name="logsoftmax", axis=1),
        node("NegativeLogLikelihoodLoss", ["lp", "l"], ["nll"], name="nll",
             reduction="sum", ignore_index=0),
        node("SoftmaxCrossEntropyLoss", ["s3", "l3"], ["sce"], name="sce3",
             reduction="none"),
        node("SoftmaxCrossEntropyLoss", ["s3", "l3"], ["scem"], name="sce3m",
             ignore_index=-100),
    ], [("s", f, [2, 3]), ("l", i, [2]), ("s3", f, [2, 5, 4]),
        ("l3", i, [2, 4])],
        [("p", f, [2, 3]), ("nll", f, []), ("sce", f, [2, 4]),
         ("scem", f, [])], 13), out_dir, "losses.onnx")
    # Class weights as an initializer: a constant, not a parameter, built as
    # the unweighted "none" loss times the gathered weights.
    save(model_at("loss_weights", [
        node("SoftmaxCrossEntropyLoss", ["s", "l", "cw"], ["sce"], name="sce",
             ignore_index=2),
        node("NegativeLogLikelihoodLoss", ["s", "l", "cw"], ["nll"],
             name="nll", reduction="sum"),
    ], [("s", f, [2, 3]), ("l", i, [2])], [("sce", f, []), ("nll", f, [])],
        13, [numpy_helper.from_array(
            np.array([0.5, 2.0, 1.0], dtype=np.float32), "cw")]),
        out_dir, "loss_weights.onnx")
    # A GPT-like dynamic-batch reshape chain: the target [batch, seq, 2, 4]
    # is computed from Shape at run time; Range, ConstantOfShape, Size and
    # Shape with start/end (opset 15) fold too.
    save(model_at("gpt_reshape", [
        node("Shape", ["x"], ["shp"], name="/attn/Shape"),
        node("Gather", ["shp", "c0"], ["b"], name="/attn/Gather", axis=0),
        node("Shape", ["x"], ["sq"], name="/attn/Shape_1", start=1, end=2),
        node("Squeeze", ["sq", "c0v"], ["s"], name="/attn/Squeeze"),
        node("Unsqueeze", ["b", "c0v"], ["bu"], name="/attn/Unsqueeze"),
        node("Unsqueeze", ["s", "c0v"], ["su"], name="/attn/Unsqueeze_1"),
        node("Concat", ["bu", "su", "heads"], ["tgt"], name="/attn/Concat",
             axis=0),
        node("Reshape", ["x", "tgt"], ["r"], name="/attn/Reshape"),
        node("Range", ["c0", "s", "c1"], ["pos"], name="/pos/Range"),
        node("Unsqueeze", ["pos", "c1v"], ["posu"], name="/pos/Unsqueeze"),
        node("Size", ["x"], ["n"], name="/Size"),
        node("ConstantOfShape", ["shp"], ["ones"], name="/ConstantOfShape",
             value=helper.make_tensor("v", f, [1], [1.0])),
        node("Mul", ["x", "ones"], ["xo"], name="/Mul"),
        node("Cast", ["posu"], ["posf"], name="/pos/Cast", to=f),
        node("Add", ["xo", "posf"], ["y0"], name="/Add"),
        node("Div", ["s", "c2"], ["half"], name="/Div"),
        node("Equal", ["half", "c4"], ["ok"], name="/Equal"),
    ], [("x", f, ["batch", "seq", 8])],
        [("r", f, ["batch", "seq", 2, 4]), ("y0", f, ["batch", "seq", 8]),
         ("n", i, []), ("ok", TensorProto.BOOL, [])], 15,
        [i64("c0", 0), i64("c1", 1), i64("c2", 2), i64("c4", 4),
         i64("c0v", [0]), i64("c1v", [1]), i64("heads", [2, 4])]), out_dir,
        "gpt_reshape.onnx")

    # Errors.
    save(model_at("matmul_int", [
        node("MatMul", ["a", "b"], ["y"], name="/mm_int")],
        [("a", i, [2, 3]), ("b", f, [3, 2])], [("y", f, [2, 2])], 14),
        out_dir, "matmul_int.onnx", check=False)
    save(model_at("add_types", [
        node("Add", ["a", "b"], ["y"], name="/add_mixed")],
        [("a", f, [2, 3]), ("b", i, [3])], [("y", f, [2, 3])], 14),
        out_dir, "add_types.onnx", check=False)
    save(model_at("no_broadcast", [
        node("Mul", ["a", "b"], ["y"], name="/mul_bcast")],
        [("a", f, [2, 3]), ("b", f, [4])], [("y", f, [2, 3])], 14),
        out_dir, "no_broadcast.onnx")
    save(model_at("range_dynamic", [
        node("Range", ["c0", "n", "c1"], ["y"], name="/range_dyn")],
        [("n", i, [])], [("y", i, ["m"])], 14, [i64("c0", 0), i64("c1", 1)]),
        out_dir, "range_dynamic.onnx")
    save(model_at("slice_neg", [
        node("Slice", ["x", "st", "en", "ax", "stp"], ["y"], name="/flip")],
        [("x", f, [4])], [("y", f, [4])], 14,
        [i64("st", [-1]), i64("en", [-5]), i64("ax", [0]), i64("stp", [-1])]),
        out_dir, "slice_neg.onnx")
    save(model_at("cycle", [
        node("Relu", ["b"], ["a"], name="first"),
        node("Neg", ["a"], ["b"], name="second")],
        [("x", f, [2])], [("b", f, [2])], 14), out_dir, "cycle.onnx",
        check=False)
    save(model_at("missing_init", [
        node("MatMul", ["x", "fc.weight"], ["y"], name="/fc/MatMul")],
        [("x", f, [2, 3])], [("y", f, [2, 4])], 14), out_dir,
        "missing_init.onnx", check=False)
    save(model_at("gelu_old", [node("Gelu", ["x"], ["y"], name="gelu")],
                  [("x", f, [2])], [("y", f, [2])], 17),
         out_dir, "gelu_old.onnx", check=False)


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
    # An opset older than the importer upgrades.
    old = single_node_graph(
        "old_opset", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [("x", f, [2])], [("y", f, [2])])
    old.opset_import[0].version = 6
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

    transformer_ops(out_dir)


if __name__ == "__main__":
    main()
