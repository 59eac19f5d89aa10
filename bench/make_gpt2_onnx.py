"""Writes a GPT-2-shaped ONNX training graph (opset 17) for sizing runs.

The graph is what a GPT-2 forward with its loss computes: token and learned
position embeddings, L pre-LayerNorm blocks of causal softmax attention and a
GELU MLP (GPT-2's own tanh form by default, 0.5 x (1 + tanh(sqrt(2/pi) (x +
0.044715 x^3))), as the original model, Hugging Face's gelu_new and llm.c
compute it; --gelu erf for the exact form), a final LayerNorm, the output projection tied to the token
embedding, and softmax cross-entropy. The weights are ONNX external data
(OUT.onnx.weights): dense random values by default, as a real export holds
them (sparse_graph.py: matrices N(0, 0.02), norm gains 1, biases 0; 500 MB
for 124M parameters), or with --weights sparse a sparse file of zeros that
costs no disk and no time (only shapes matter for planning memory, but an
importer's per-value work is then hidden).

    make_gpt2_onnx.py OUT.onnx [--layers 12 --embd 768 --heads 12
                                --vocab 50304 --seq 1024 --gelu tanh
                                --weights dense|sparse --seed 0]

Parameters: vocab*embd + layers*(12*embd^2 + 13*embd) + 2*embd + seq*embd.
Runs with any python that has onnx and numpy.
"""
import argparse

import numpy as np
from onnx import helper

from sparse_graph import SparseGraph


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--gelu", choices=("tanh", "erf"), default="tanh")
    ap.add_argument("--weights", choices=("dense", "sparse"), default="dense",
                    help="dense N(0, 0.02) values as a real export holds (default), or a "
                         "sparse file of zeros (no disk, no time; hides the importer's cost)")
    ap.add_argument("--seed", type=int, default=0, help="the dense weights' generator seed")
    a = ap.parse_args()
    h, L, nh, v, T = a.embd, a.layers, a.heads, a.vocab, a.seq
    hs = h // nh

    g = SparseGraph(a.out, a.weights, a.seed)
    weight, const, node, nodes = g.weight, g.const, g.node, g.nodes

    def layer_norm(x, prefix):
        g = weight(prefix + ".weight", [h])
        b = weight(prefix + ".bias", [h])
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)

    def linear(x, prefix, n_in, n_out):
        w = weight(prefix + ".weight", [n_in, n_out])
        b = weight(prefix + ".bias", [n_out])
        return node("Add", [node("MatMul", [x, w]), b])

    wte = weight("wte.weight", [v, h])
    wpe = weight("wpe.weight", [T, h])
    pos = const("positions", np.arange(T, dtype=np.int64))
    mask = const("causal_mask", np.tril(np.ones((T, T), dtype=bool)))
    neg = const("neg_inf", np.array(-1e9, dtype=np.float32))
    scale = const("scale", np.array(1.0 / np.sqrt(hs), dtype=np.float32))
    shape_heads = const("shape_heads", np.array([0, T, nh, hs], dtype=np.int64))
    shape_merge = const("shape_merge", np.array([0, T, h], dtype=np.int64))
    shape_flat = const("shape_flat", np.array([-1, v], dtype=np.int64))
    shape_tgt = const("shape_tgt", np.array([-1], dtype=np.int64))
    split = const("split_qkv", np.array([h, h, h], dtype=np.int64))
    one = const("one", np.array(1.0, dtype=np.float32))
    half = const("half", np.array(0.5, dtype=np.float32))
    if a.gelu == "erf":
        sqrt2 = const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    else:
        three = const("three", np.array(3.0, dtype=np.float32))
        cubic = const("gelu_cubic", np.array(0.044715, dtype=np.float32))
        sqrt2pi = const("sqrt_2_over_pi", np.array(np.sqrt(2.0 / np.pi), dtype=np.float32))

    def gelu(m):
        if a.gelu == "erf":
            return node("Mul", [node("Mul", [m, node("Add", [node("Erf", [node("Div", [m, sqrt2])]), one])]), half])
        inner = node("Mul", [node("Add", [m, node("Mul", [node("Pow", [m, three]), cubic])]), sqrt2pi])
        return node("Mul", [node("Mul", [m, half]), node("Add", [node("Tanh", [inner]), one])])

    x = node("Add", [node("Gather", [wte, "idx"]), node("Gather", [wpe, pos])])
    for i in range(L):
        p = f"h.{i}"
        a_in = layer_norm(x, p + ".ln_1")
        qkv = linear(a_in, p + ".attn.c_attn", h, 3 * h)
        outs = [f"{p}.q", f"{p}.k", f"{p}.v"]
        nodes.append(helper.make_node("Split", [qkv, split], outs, axis=2, name=f"/{p}/Split"))
        q, k, vv = (node("Transpose", [node("Reshape", [t, shape_heads])], perm=[0, 2, 1, 3])
                    for t in outs)
        kt = node("Transpose", [k], perm=[0, 1, 3, 2])
        att = node("Mul", [node("MatMul", [q, kt]), scale])
        att = node("Where", [mask, att, neg])
        att = node("Softmax", [att], axis=-1)
        y = node("MatMul", [att, vv])
        y = node("Reshape", [node("Transpose", [y], perm=[0, 2, 1, 3]), shape_merge])
        x = node("Add", [x, linear(y, p + ".attn.c_proj", h, h)])
        m = linear(layer_norm(x, p + ".ln_2"), p + ".mlp.c_fc", h, 4 * h)
        x = node("Add", [x, linear(gelu(m), p + ".mlp.c_proj", 4 * h, h)])
    x = layer_norm(x, "ln_f")
    logits = node("MatMul", [x, node("Transpose", [wte], perm=[1, 0])])
    flat = node("Reshape", [logits, shape_flat])
    tgt = node("Reshape", ["targets", shape_tgt])
    nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [flat, tgt], ["loss"],
                                  name="/loss", reduction="mean"))

    params = g.save("gpt2_shaped", T)
    print(f"wrote {a.out}: {params} parameters "
          f"(formula {v*h + L*(12*h*h + 13*h) + 2*h + T*h})")


if __name__ == "__main__":
    main()
