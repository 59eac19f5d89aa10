"""Writes a Llama-3-shaped ONNX training graph (opset 17) for sizing runs.

The graph is what a Llama 3 forward with its loss computes, written with the
ops PyTorch's exporter writes for it: token embedding, L pre-norm blocks of
RMSNorm (x / sqrt(mean(x^2) + eps) * weight), rotary position embedding
(rotate-half form, cos and sin tables as constants), grouped-query causal
softmax attention (each key/value head expanded to heads/kv_heads query
heads), a SiLU-gated MLP (down(silu(gate(x)) * up(x))), a final RMSNorm, the
output projection (tied to the embedding for the 1B and 3B sizes, as Llama
3.2 ties them) and softmax cross-entropy. The weights are ONNX external data
(OUT.onnx.weights): dense random values by default (sparse_graph.py; 5 GB at
1B, 32 GB at 8B), or with --weights sparse a sparse file of zeros (no disk,
no time; only shapes matter for planning, but the importer's per-value work
is hidden).

    make_llama_onnx.py OUT.onnx --size 1b|3b|8b [--seq 2048]
    make_llama_onnx.py OUT.onnx --layers 2 --embd 64 --heads 4 --kv-heads 2
                                --ffn 128 --vocab 256 --seq 32 [--tied]
                                [--weights dense|sparse --seed 0]

Sizes (Llama 3.2 1B and 3B, Llama 3.1 8B; vocabulary 128,256):
  1b: 16 layers, 2048 wide, 32/8 heads, MLP 8192, tied   (1.24 B parameters)
  3b: 28 layers, 3072 wide, 24/8 heads, MLP 8192, tied   (3.21 B)
  8b: 32 layers, 4096 wide, 32/8 heads, MLP 14336        (8.03 B)
Runs with any python that has onnx and numpy.
"""
import argparse

import numpy as np
from onnx import helper

from sparse_graph import SparseGraph

SIZES = {
    "1b": dict(layers=16, embd=2048, heads=32, kv_heads=8, ffn=8192, tied=True),
    "3b": dict(layers=28, embd=3072, heads=24, kv_heads=8, ffn=8192, tied=True),
    "8b": dict(layers=32, embd=4096, heads=32, kv_heads=8, ffn=14336, tied=False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", choices=sorted(SIZES))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--weights", choices=("dense", "sparse"), default="dense",
                    help="dense N(0, 0.02) values as a real export holds (default), or a "
                         "sparse file of zeros (no disk, no time; hides the importer's cost)")
    ap.add_argument("--seed", type=int, default=0, help="the dense weights' generator seed")
    a = ap.parse_args()
    if a.size:
        for k, v in SIZES[a.size].items():
            setattr(a, k, v)
    h, L, nh, nkv, ffn, V, T = (a.embd, a.layers, a.heads, a.kv_heads, a.ffn,
                                a.vocab, a.seq)
    if h % nh or nh % nkv or (h // nh) % 2:
        ap.error("embd must split into heads of an even size, and heads "
                 "into kv-heads")
    hd = h // nh
    rep = nh // nkv

    g = SparseGraph(a.out, a.weights, a.seed)
    weight, const, node, nodes = g.weight, g.const, g.node, g.nodes

    # Rotary tables [T, hd]: angle t * theta^(-2i/hd), each half repeated.
    inv = a.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.outer(np.arange(T, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=-1)
    cos = const("rope_cos", np.cos(ang).astype(np.float32))
    sin = const("rope_sin", np.sin(ang).astype(np.float32))
    two = const("two", np.array(2.0, dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    eps = const("eps", np.array(1e-5, dtype=np.float32))
    mask = const("causal_mask", np.tril(np.ones((T, T), dtype=bool)))
    neg = const("neg_inf", np.array(-1e9, dtype=np.float32))
    scale = const("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    shape_q = const("shape_q", np.array([0, T, nh, hd], dtype=np.int64))
    shape_kv = const("shape_kv", np.array([0, T, nkv, hd], dtype=np.int64))
    expand = const("expand_kv", np.array([1, 1, rep, 1, 1], dtype=np.int64))
    shape_rep = const("shape_rep", np.array([0, nh, T, hd], dtype=np.int64))
    shape_merge = const("shape_merge", np.array([0, T, h], dtype=np.int64))
    shape_flat = const("shape_flat", np.array([-1, V], dtype=np.int64))
    shape_tgt = const("shape_tgt", np.array([-1], dtype=np.int64))
    axis2 = const("axis2", np.array([2], dtype=np.int64))
    axis3 = const("axis3", np.array([3], dtype=np.int64))
    lo = const("half_lo", np.array([0], dtype=np.int64))
    mid = const("half_mid", np.array([hd // 2], dtype=np.int64))
    hi = const("half_hi", np.array([hd], dtype=np.int64))

    def rms_norm(x, name):
        w = weight(name + ".weight", [h])
        ms = node("ReduceMean", [node("Pow", [x, two])], axes=[-1], keepdims=1)
        inv_rms = node("Div", [one, node("Sqrt", [node("Add", [ms, eps])])])
        return node("Mul", [node("Mul", [x, inv_rms]), w])

    def linear(x, name, n_in, n_out):
        w = weight(name + ".weight", [n_out, n_in])
        return node("MatMul", [x, node("Transpose", [w], perm=[1, 0])])

    def rope(x):
        x1 = node("Slice", [x, lo, mid, axis3])
        x2 = node("Slice", [x, mid, hi, axis3])
        rot = node("Concat", [node("Neg", [x2]), x1], axis=-1)
        return node("Add", [node("Mul", [x, cos]), node("Mul", [rot, sin])])

    def heads(x, shape):
        return node("Transpose", [node("Reshape", [x, shape])], perm=[0, 2, 1, 3])

    def repeat_kv(x):
        if rep == 1:
            return x
        return node("Reshape", [node("Expand", [node("Unsqueeze", [x, axis2]), expand]),
                                shape_rep])

    emb = weight("tok_emb.weight", [V, h])
    x = node("Gather", [emb, "idx"])
    for i in range(L):
        p = f"layers.{i}"
        a_in = rms_norm(x, p + ".attn_norm")
        q = rope(heads(linear(a_in, p + ".attn.wq", h, h), shape_q))
        k = rope(heads(linear(a_in, p + ".attn.wk", h, nkv * hd), shape_kv))
        v = heads(linear(a_in, p + ".attn.wv", h, nkv * hd), shape_kv)
        k, v = repeat_kv(k), repeat_kv(v)
        att = node("Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        att = node("Softmax", [node("Where", [mask, att, neg])], axis=-1)
        y = node("MatMul", [att, v])
        y = node("Reshape", [node("Transpose", [y], perm=[0, 2, 1, 3]), shape_merge])
        x = node("Add", [x, linear(y, p + ".attn.wo", h, h)])
        m_in = rms_norm(x, p + ".mlp_norm")
        gate = linear(m_in, p + ".mlp.gate", h, ffn)
        silu = node("Mul", [gate, node("Sigmoid", [gate])])
        x = node("Add", [x, linear(node("Mul", [silu, linear(m_in, p + ".mlp.up", h, ffn)]),
                                   p + ".mlp.down", ffn, h)])
    x = rms_norm(x, "norm")
    out_w = emb if a.tied else weight("output.weight", [V, h])
    logits = node("MatMul", [x, node("Transpose", [out_w], perm=[1, 0])])
    flat = node("Reshape", [logits, shape_flat])
    tgt = node("Reshape", ["targets", shape_tgt])
    nodes.append(helper.make_node("SoftmaxCrossEntropyLoss", [flat, tgt], ["loss"],
                                  name="/loss", reduction="mean"))

    params = g.save("llama3_shaped", T)
    formula = (V * h * (1 if a.tied else 2) + h +
               L * (2 * h + 2 * h * h + 2 * h * nkv * hd + 3 * h * ffn))
    print(f"wrote {a.out}: {params} parameters (formula {formula})")


if __name__ == "__main__":
    main()
