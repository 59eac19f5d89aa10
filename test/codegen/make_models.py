#!/usr/bin/env python3
"""Writes the small ONNX models under test/codegen/Inputs/ that the
vs-interp-*.test lit tests compile and check against the reference
interpreter (test/e2e/check_codegen_vs_interp.py). Each model has a symbolic
leading `batch` dimension, trainable float initializers, and ends in a loss;
together they exercise every kernel body family of codegen/:

  layernorm_gelu   LayerNorm from primitives (ReduceMean, Sub, Pow, Sqrt,
                   Reciprocal), GELU through Erf, SiLU through Sigmoid,
                   SoftmaxCrossEntropyLoss
  attention        causal self-attention: Trilu mask, Equal/Where, Softmax on
                   the last axis, Softmax on a middle axis, ReduceMax, Cast
  embedding        Gather embedding tied to the output projection, learned
                   positions, LogSoftmax + NegativeLogLikelihoodLoss with an
                   ignore_index
  rotary           rotary embedding through Slice/Neg/Concat, strided Slice,
                   Gather on an activation along axis 1 with repeated and
                   negative indices, ReduceMax over a middle axis
  dropout          Dropout in training mode before the loss
  trig             Cos and Sin of activations (run-time values, not
                   constants: rotary angles of positions a program computes)
  attention_gqa    multi-head attention as Llama exports it (grouped-query
                   K/V through Unsqueeze/Expand/Reshape, an added Trilu of
                   -inf), Dropout on the probabilities, cross-entropy over
                   flattened [B, T, C] logits: otc-fuse-patterns makes it one
                   otc.attention with dropout, checked against the
                   interpreter's unfused ops
  routing          a mixture-of-experts layer as the exporters write one:
                   Softmax router, TopK (k = 2 of 4 experts) with the values
                   renormalized, the experts' weights gathered by the
                   indices, an auxiliary loss from OneHot counts; Tile, Abs
                   and Sign on the way
  scatter          ScatterElements (reduction none and add) and ScatterND
                   (add) at indices computed at run time (a TopK's), as
                   DeepSeek-V3's routing writes them
  experts          the experts' product alone: each row's [48, 64] matrix
                   gathered by its index (Gather of [4, 48, 64] weights) and
                   multiplied with the row as a column, summed to a loss; at
                   a micro-batch of 2^27 rows the gathered tensor (1.5 TiB)
                   is over the size of any tensor the importer holds, which
                   otc.expert_matmul never builds
  conv             Conv as vision and speech encoders write it: a patch
                   embedding (kernel = stride), a padded 3 x 3 with groups and
                   a bias, a strided and dilated one with asymmetric pads,
                   and a 1-D one with stride 2 (Whisper's second)

Run with Debian's /usr/bin/python3 (onnx + numpy); the output is
deterministic (fixed seed), so regenerating gives byte-identical files.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "Inputs")


class Graph:
    """Accumulates nodes, initializers and constants of one model."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.counter = [], [], 0

    def param(self, name, shape, scale=0.3):
        """A trainable float initializer drawn from N(0, scale^2)."""
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, value, dtype=np.float32):
        """A Constant node holding `value`."""
        name = self.fresh("c")
        self.nodes.append(helper.make_node(
            "Constant", [], [name],
            value=numpy_helper.from_array(np.asarray(value, dtype=dtype), name + "_v"),
            name=name))
        return name

    def fresh(self, hint):
        self.counter += 1
        return f"{hint}{self.counter}"

    def op(self, op_type, inputs, n_out=1, **attrs):
        """Appends a node; returns its output name (or names when n_out > 1)."""
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs,
                                           name=f"/{op_type}_{self.counter}", **attrs))
        return outs[0] if n_out == 1 else outs

    def save(self, inputs, loss):
        graph = helper.make_graph(
            self.nodes, self.name, inputs,
            [helper.make_tensor_value_info(loss, TensorProto.FLOAT, [])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="otc-test")
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(OUT, self.name + ".onnx"))


def float_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def int_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.INT64, shape)


def layer_norm(g, x, dim, axis=-1):
    """LayerNorm over the last axis from primitives, with scale and bias."""
    mean = g.op("ReduceMean", [x], axes=[axis], keepdims=1)
    xc = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Pow", [xc, g.const(2.0)])], axes=[axis], keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.const(1e-5)])])
    y = g.op("Mul", [xc, g.op("Reciprocal", [std])])
    gamma = g.param(g.fresh("ln_scale"), [dim], 0.1)
    y = g.op("Mul", [y, g.op("Add", [gamma, g.const(1.0)])])
    return g.op("Add", [y, g.param(g.fresh("ln_bias"), [dim], 0.1)])


def gelu(g, x):
    """0.5 x (1 + erf(x / sqrt 2))."""
    e = g.op("Erf", [g.op("Div", [x, g.const(np.sqrt(2.0))])])
    return g.op("Mul", [g.op("Mul", [x, g.const(0.5)]), g.op("Add", [e, g.const(1.0)])])


def make_layernorm_gelu():
    g = Graph("layernorm_gelu", 1)
    h = layer_norm(g, "x", 12)
    h = g.op("Add", [g.op("MatMul", [h, g.param("w1", [12, 16])]), g.param("b1", [16])])
    h = gelu(g, h)
    silu = g.op("Mul", [h, g.op("Sigmoid", [h])])
    h = g.op("Div", [g.op("Add", [h, silu]), g.const(2.0)])
    logits = g.op("MatMul", [h, g.param("w2", [16, 5])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", 12]), int_input("y", ["batch"])], loss)


def make_attention():
    t, d, c = 5, 8, 4
    g = Graph("attention", 2)
    x = "x"
    q = g.op("MatMul", [x, g.param("wq", [d, d])])
    k = g.op("MatMul", [x, g.param("wk", [d, d])])
    v = g.op("MatMul", [x, g.param("wv", [d, d])])
    kt = g.op("Transpose", [k], perm=[0, 2, 1])
    s = g.op("Div", [g.op("MatMul", [q, kt]), g.const(np.sqrt(d))])
    # Causal mask: Trilu of ones, Equal 0 -> masked, Where to a large negative.
    lower = g.op("Trilu", [g.const(np.ones((t, t)))], upper=0)
    masked = g.op("Equal", [lower, g.const(0.0)])
    s = g.op("Where", [masked, g.const(-1e4), s])
    p = g.op("Softmax", [s], axis=-1)
    # Trilu on an activation too: the strictly lower part re-weighted.
    strict = g.op("Trilu", [p, g.const(-1, np.int64)], upper=0)
    p = g.op("Add", [p, g.op("Mul", [strict, g.const(0.5)])])
    a = g.op("MatMul", [p, v])                                  # [N, T, D]
    # A softmax over the middle (time) axis as a pooling weight.
    w = g.op("Softmax", [g.op("Mul", [a, g.param("pool", [d])])], axis=1)
    pooled = g.op("ReduceSum", [g.op("Mul", [w, a]), g.const([1], np.int64)], keepdims=0)
    peak = g.op("ReduceMax", [a], axes=[1], keepdims=0)            # [N, D]
    # Cast a comparison to float: a gate on the positive entries.
    gate = g.op("Cast", [g.op("Greater", [peak, g.const(0.0)])], to=TensorProto.FLOAT)
    h = g.op("Add", [pooled, g.op("Mul", [peak, gate])])
    logits = g.op("MatMul", [h, g.param("wo", [d, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def make_embedding():
    t, d, vocab = 6, 8, 11
    g = Graph("embedding", 3)
    emb = g.param("wte", [vocab, d], 0.5)
    h = g.op("Gather", [emb, "tokens"], axis=0)                    # [N, T, D]
    h = g.op("Add", [h, g.param("wpe", [t, d], 0.2)])
    h = g.op("Tanh", [h])
    logits = g.op("MatMul", [h, g.op("Transpose", [emb], perm=[1, 0])])
    logits = g.op("Reshape", [logits, g.const([-1, vocab], np.int64)])
    logp = g.op("LogSoftmax", [logits], axis=1)
    labels = g.op("Reshape", ["targets", g.const([-1], np.int64)])
    loss = g.op("NegativeLogLikelihoodLoss", [logp, labels], reduction="mean",
                ignore_index=0)
    g.save([int_input("tokens", ["batch", t]), int_input("targets", ["batch", t])], loss)


def make_rotary():
    t, d, c = 6, 8, 3
    g = Graph("rotary", 4)
    h = g.op("MatMul", ["x", g.param("wi", [d, d])])              # [N, T, D]
    axes = g.const([2], np.int64)
    x1 = g.op("Slice", [h, g.const([0], np.int64), g.const([d // 2], np.int64), axes])
    x2 = g.op("Slice", [h, g.const([d // 2], np.int64), g.const([d], np.int64), axes])
    rot = g.op("Concat", [g.op("Neg", [x2]), x1], axis=-1)
    pos = np.arange(t)[:, None] * (1.0 / 10000 ** (np.arange(d // 2) / (d // 2)))[None, :]
    ang = np.concatenate([pos, pos], axis=1)
    h = g.op("Add", [g.op("Mul", [h, g.const(np.cos(ang))]),
                     g.op("Mul", [rot, g.const(np.sin(ang))])])
    # Every second feature (a strided slice) and a gather of time steps with
    # repeated and negative indices along axis 1.
    even = g.op("Slice", [h, g.const([0], np.int64), g.const([d], np.int64), axes,
                          g.const([2], np.int64)])             # [N, T, D/2]
    picked = g.op("Gather", [even, g.const([0, 2, 2, -1], np.int64)], axis=1)  # [N, 4, D/2]
    peak = g.op("ReduceMax", [picked], axes=[1], keepdims=0)       # [N, D/2]
    both = g.op("Concat", [peak, g.op("ReduceMean", [h], axes=[1], keepdims=0)], axis=1)
    logits = g.op("MatMul", [both, g.param("wo", [d // 2 + d, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="sum")
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def make_trig():
    t, d, c = 4, 6, 3
    g = Graph("trig", 7)
    h = g.op("MatMul", ["x", g.param("wi", [d, d], scale=1.0)])     # [N, T, D]
    z = g.op("Add", [g.op("Cos", [h]),
                     g.op("Mul", [g.op("Sin", [g.op("Mul", [h, g.const(2.0)])]), h])])
    pooled = g.op("ReduceMean", [z], axes=[1], keepdims=0)          # [N, D]
    logits = g.op("MatMul", [pooled, g.param("wo", [d, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def make_routing():
    t, d, e, k, h, c = 3, 6, 4, 2, 4, 3
    g = Graph("routing", 8)
    probs = g.op("Softmax", [g.op("MatMul", ["x", g.param("wr", [d, e], scale=1.0)])],
                 axis=-1)                                           # [N, T, E]
    vals, idx = g.op("TopK", [probs, g.const([k], np.int64)], n_out=2, axis=-1)
    vals = g.op("Div", [vals, g.op("ReduceSum", [vals, g.const([-1], np.int64)],
                                   keepdims=1)])                    # [N, T, K]
    w = g.op("Gather", [g.param("we", [e, d, h]), idx], axis=0)     # [N, T, K, D, H]
    xe = g.op("Unsqueeze", ["x", g.const([2, 3], np.int64)])        # [N, T, 1, 1, D]
    xe = g.op("Expand", [xe, g.const([1, 1, k, 1, 1], np.int64)])   # [N, T, K, 1, D]
    y = g.op("MatMul", [xe, w])                                     # [N, T, K, 1, H]
    y = g.op("Reshape", [y, g.const([0, t, k, h], np.int64)])
    y = g.op("ReduceSum", [g.op("Mul", [y, g.op("Unsqueeze", [vals, g.const([3], np.int64)])]),
                           g.const([2], np.int64)], keepdims=0)     # [N, T, H]
    y = g.op("Add", [y, g.op("Tile", [g.param("bh", [h // 2]), g.const([2], np.int64)])])
    z = g.op("Add", [g.op("Tanh", [y]),
                     g.op("Mul", [g.op("Add", [g.op("Abs", [y]), g.op("Sign", [y])]),
                                  g.const(0.1)])])
    pooled = g.op("ReduceMean", [z], axes=[1], keepdims=0)          # [N, H]
    logits = g.op("MatMul", [pooled, g.param("wo", [h, c])])
    ce = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    # Switch's balance term: each expert's share of the picks times its
    # mean router probability.
    hot = g.op("OneHot", [idx, g.const([e], np.int64), g.const([0.0, 1.0])], axis=-1)
    share = g.op("ReduceMean", [hot], axes=[0, 1, 2], keepdims=0)
    mean_p = g.op("ReduceMean", [probs], axes=[0, 1], keepdims=0)
    aux = g.op("ReduceSum", [g.op("Mul", [share, mean_p])], keepdims=0)
    loss = g.op("Add", [ce, g.op("Mul", [aux, g.const(0.5)])])
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def make_experts():
    e, c, o = 4, 64, 48
    g = Graph("experts", 10)
    w = g.op("Gather", [g.param("experts", [e, o, c], scale=0.1), "ids"], axis=0)
    y = g.op("MatMul", [w, g.op("Unsqueeze", ["x", g.const([2], np.int64)])])  # [N, O, 1]
    loss = g.op("ReduceSum", [g.op("Mul", [y, y])], keepdims=0)
    g.save([float_input("x", ["batch", c]), int_input("ids", ["batch"])], loss)


def make_scatter():
    t, d, e, k, h, c = 3, 5, 4, 2, 3, 3
    g = Graph("scatter", 9)
    scores = g.op("MatMul", ["x", g.param("ws", [d, e], scale=1.0)])   # [N, T, E]
    _, idx = g.op("TopK", [scores, g.const([k], np.int64)], n_out=2, axis=-1)
    upd = g.op("Tanh", [g.op("MatMul", ["x", g.param("wu", [d, k])])])  # [N, T, K]
    base = g.op("MatMul", ["x", g.param("wb", [d, e])])                # [N, T, E]
    put = g.op("ScatterElements", [base, idx, upd], axis=2)
    summed = g.op("ScatterElements", [put, idx, upd], axis=2, reduction="add")
    # ScatterND (add) with [rows, 2] index tuples (token, its first pick)
    # into a [rows, E] matrix, rows = N * T.
    first = g.op("Reshape", [g.op("Slice", [idx, g.const([0], np.int64),
                                            g.const([1], np.int64),
                                            g.const([2], np.int64)]),
                             g.const([-1, 1], np.int64)])               # [N*T, 1]
    n_rows = g.op("Mul", [g.op("Gather", [g.op("Shape", ["x"]), g.const(0, np.int64)]),
                          g.const(t, np.int64)])
    tokens = g.op("Unsqueeze", [g.op("Range", [g.const(0, np.int64), n_rows,
                                               g.const(1, np.int64)]),
                                g.const([1], np.int64)])                # [N*T, 1]
    tuples = g.op("Concat", [tokens, first], axis=1)                    # [N*T, 2]
    rows = g.op("Reshape", [g.op("MatMul", ["x", g.param("wr", [d, 1])]),
                            g.const([-1], np.int64)])                   # [N*T]
    flat = g.op("Reshape", [summed, g.const([-1, e], np.int64)])
    picked = g.op("ScatterND", [flat, tuples, rows], reduction="add")
    picked = g.op("Reshape", [picked, g.const([-1, t, e], np.int64)])
    mixed = g.op("MatMul", [picked, g.param("table", [e, h])])          # [N, T, H]
    pooled = g.op("ReduceMean", [g.op("Tanh", [mixed])], axes=[1], keepdims=0)
    logits = g.op("MatMul", [pooled, g.param("wo", [h, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch"])], loss)


def make_conv():
    c = 3
    g = Graph("conv", 10)
    patches = g.op("Conv", ["x", g.param("wp", [6, 3, 4, 4])],
                   kernel_shape=[4, 4], strides=[4, 4])                 # [N, 6, 2, 2]
    grouped = g.op("Conv", [g.op("Tanh", [patches]), g.param("wg", [6, 3, 3, 3]),
                            g.param("bg", [6])], pads=[1, 1, 1, 1], group=2)
    dilated = g.op("Conv", ["x", g.param("wd", [4, 3, 3, 3])], strides=[2, 2],
                   dilations=[2, 2], pads=[1, 2, 0, 1])                # [N, 4, 3, 4]
    wave = g.op("Reshape", ["x", g.const([0, 3, 64], np.int64)])
    speech = g.op("Conv", [wave, g.param("w1", [5, 3, 3]), g.param("b1", [5])],
                  pads=[1, 1], strides=[2])                            # [N, 5, 32]
    pooled = g.op("Concat", [
        g.op("ReduceMean", [g.op("Tanh", [grouped])], axes=[2, 3], keepdims=0),
        g.op("ReduceMean", [g.op("Tanh", [dilated])], axes=[2, 3], keepdims=0),
        g.op("ReduceMean", [g.op("Tanh", [speech])], axes=[2], keepdims=0)], axis=1)
    logits = g.op("MatMul", [pooled, g.param("wo", [15, c])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", 3, 8, 8]), int_input("y", ["batch"])], loss)


def make_dropout():
    g = Graph("dropout", 5)
    h = g.op("Tanh", [g.op("MatMul", ["x", g.param("w1", [10, 16])])])
    h = g.op("Dropout", [h, g.const(0.25), g.const(True, np.bool_)])
    logits = g.op("MatMul", [h, g.param("w2", [16, 4])])
    loss = g.op("SoftmaxCrossEntropyLoss", [logits, "y"], reduction="mean")
    g.save([float_input("x", ["batch", 10]), int_input("y", ["batch"])], loss)


def make_attention_gqa():
    t, d, heads, kv, hd, c = 6, 16, 4, 2, 4, 5
    g = Graph("attention_gqa", 6)

    def split_heads(x, n):
        x = g.op("Reshape", [x, g.const([0, t, n, hd], np.int64)])
        return g.op("Transpose", [x], perm=[0, 2, 1, 3])          # [B, n, T, hd]

    def repeat_kv(x):
        x = g.op("Unsqueeze", [x, g.const([2], np.int64)])        # [B, kv, 1, T, hd]
        x = g.op("Expand", [x, g.const([1, 1, heads // kv, 1, 1], np.int64)])
        return g.op("Reshape", [x, g.const([0, heads, t, hd], np.int64)])

    q = split_heads(g.op("MatMul", ["x", g.param("wq", [d, heads * hd])]), heads)
    k = repeat_kv(split_heads(g.op("MatMul", ["x", g.param("wk", [d, kv * hd])]), kv))
    v = repeat_kv(split_heads(g.op("MatMul", ["x", g.param("wv", [d, kv * hd])]), kv))
    s = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                     g.const(hd ** -0.5)])
    future = g.op("Trilu", [g.const(np.full((t, t), -np.inf)), g.const(1, np.int64)],
                  upper=1)
    p = g.op("Softmax", [g.op("Add", [s, future])], axis=-1)
    p = g.op("Dropout", [p, g.const(0.1), g.const(True, np.bool_)])
    o = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = g.op("Reshape", [o, g.const([0, t, heads * hd], np.int64)])
    logits = g.op("MatMul", [o, g.param("wo", [heads * hd, c])])
    flat = g.op("Reshape", [logits, g.const([-1, c], np.int64)])
    labels = g.op("Reshape", ["y", g.const([-1], np.int64)])
    loss = g.op("SoftmaxCrossEntropyLoss", [flat, labels], reduction="mean")
    g.save([float_input("x", ["batch", t, d]), int_input("y", ["batch", t])], loss)


def main():
    os.makedirs(OUT, exist_ok=True)
    make_layernorm_gelu()
    make_attention()
    make_embedding()
    make_rotary()
    make_dropout()
    make_attention_gqa()
    make_trig()
    make_routing()
    make_scatter()
    make_conv()
    make_experts()


if __name__ == "__main__":
    main()
