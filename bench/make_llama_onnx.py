"""Writes a Llama-3-shaped ONNX training graph (opset 17) for sizing runs,
dense or with a mixture of experts in every MLP.

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

    make_llama_onnx.py OUT.onnx --size 1b|3b|8b|olmoe|qwen3-30b-a3b [--seq 2048]
    make_llama_onnx.py OUT.onnx --layers 2 --embd 64 --heads 4 --kv-heads 2
                                --ffn 128 --vocab 256 --seq 32 [--tied]
                                [--head-dim D] [--experts E --top-k K]
                                [--weights dense|sparse --seed 0]
                                [--lora R [--lora-alpha A]]

Sizes (Llama 3.2 1B and 3B, Llama 3.1 8B; vocabulary 128,256; and two
mixtures of experts):
  1b: 16 layers, 2048 wide, 32/8 heads, MLP 8192, tied   (1.24 B parameters)
  3b: 28 layers, 3072 wide, 24/8 heads, MLP 8192, tied   (3.21 B)
  8b: 32 layers, 4096 wide, 32/8 heads, MLP 14336        (8.03 B)
  olmoe: OLMoE-1B-7B-shaped, 16 layers, 2048 wide, 16/16 heads, 64 experts
         of MLP 1024, top-8, vocabulary 50,304            (6.92 B)
  qwen3-30b-a3b: Qwen3-30B-A3B-shaped (without its q/k norms), 48 layers,
         2048 wide, 32/4 heads of 128, 128 experts of MLP 768, top-8,
         vocabulary 151,936                               (30.4 B)
With --experts E, each MLP is a mixture of E experts as Hugging Face's
`batched_mm` experts export it: a router (softmax over the experts, the
top-k kept and renormalized), each token's k experts' gate/up and down
matrices gathered by the indices and multiplied with it as a column, SiLU
gating, the k results weighted and summed. otc fuses each gathered product
into otc.expert_matmul, so no [tokens x k, F, C] gathered tensor is planned.
With --lora R, the attention's q, k, v and o projections carry peft-style
adapters (`….lora_A.weight`, `….lora_B.weight`): a LoRA fine-tune's plan is
`--freeze='^(?!.*lora_)'` of this graph.
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
    "olmoe": dict(layers=16, embd=2048, heads=16, kv_heads=16, ffn=1024,
                  tied=False, experts=64, top_k=8, vocab=50304),
    "qwen3-30b-a3b": dict(layers=48, embd=2048, heads=32, kv_heads=4,
                          head_dim=128, ffn=768, tied=False, experts=128,
                          top_k=8, vocab=151936),
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
    ap.add_argument("--head-dim", type=int, default=0,
                    help="the heads' size (default: embd / heads)")
    ap.add_argument("--experts", type=int, default=0,
                    help="a mixture of this many experts in every MLP (each of --ffn)")
    ap.add_argument("--top-k", type=int, default=2, help="experts per token")
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--weights", choices=("dense", "sparse"), default="dense",
                    help="dense N(0, 0.02) values as a real export holds (default), or a "
                         "sparse file of zeros (no disk, no time; hides the importer's cost)")
    ap.add_argument("--seed", type=int, default=0, help="the dense weights' generator seed")
    ap.add_argument("--lora", type=int, default=0, metavar="R",
                    help="LoRA adapters of rank R on the attention's q, k, v and o "
                         "projections, named as peft names them (….lora_A.weight "
                         "[R, in], ….lora_B.weight [out, R])")
    ap.add_argument("--lora-alpha", type=float, default=0,
                    help="LoRA's alpha (default 2 R): the adapter's product is "
                         "scaled by alpha / R")
    a = ap.parse_args()
    if a.size:
        for k, v in SIZES[a.size].items():
            setattr(a, k, v)
    h, L, nh, nkv, ffn, V, T = (a.embd, a.layers, a.heads, a.kv_heads, a.ffn,
                                a.vocab, a.seq)
    hd = a.head_dim or h // nh
    if (not a.head_dim and h % nh) or nh % nkv or hd % 2:
        ap.error("embd must split into heads of an even size (or give "
                 "--head-dim), and heads into kv-heads")
    if a.experts and not 1 <= a.top_k <= a.experts:
        ap.error("--top-k must be in [1, --experts]")
    rep = nh // nkv
    E, K = a.experts, a.top_k

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
    shape_merge = const("shape_merge", np.array([0, T, nh * hd], dtype=np.int64))
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

    if a.lora:
        lora_scale = const("lora_scale", np.array(
            (a.lora_alpha or 2 * a.lora) / a.lora, dtype=np.float32))

    def adapted(x, name, n_in, n_out):
        """A projection with a LoRA adapter, as peft's Linear computes it:
        x Wᵀ + (x Aᵀ) Bᵀ · alpha / r."""
        y = linear(x, name, n_in, n_out)
        if not a.lora:
            return y
        down = linear(x, name + ".lora_A", n_in, a.lora)
        up = linear(down, name + ".lora_B", a.lora, n_out)
        return node("Add", [y, node("Mul", [up, lora_scale])])

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

    if E:
        rows_c = const("moe_rows", np.array([-1, h], dtype=np.int64))
        flat_k = const("moe_flat", np.array([-1], dtype=np.int64))
        column = const("moe_column", np.array([-1, h, 1], dtype=np.int64))
        act_col = const("moe_act_column", np.array([-1, ffn, 1], dtype=np.int64))
        gu_rows = const("moe_gate_up_rows", np.array([-1, 2 * ffn], dtype=np.int64))
        weights_col = const("moe_weights", np.array([-1, 1], dtype=np.int64))
        per_token = const("moe_per_token", np.array([-1, K, h], dtype=np.int64))
        back = const("moe_back", np.array([-1, T, h], dtype=np.int64))
        ones_k = const("moe_ones", np.ones((1, K, 1), dtype=np.float32))
        k_c = const("moe_k", np.array([K], dtype=np.int64))
        last = const("moe_last", np.array([-1], dtype=np.int64))
        axis1 = const("moe_axis1", np.array([1], dtype=np.int64))
        split = const("moe_split", np.array([ffn, ffn], dtype=np.int64))

    def experts(x, p):
        """A mixture of E experts on x [batch, T, h] as the batched_mm
        export writes it."""
        rows = node("Reshape", [x, rows_c])                        # [S, h]
        probs = node("Softmax", [linear(rows, p + ".router", h, E)], axis=-1)
        vals, ids = g.node_outputs("TopK", [probs, k_c], 2, axis=-1)
        vals = node("Div", [vals, node("ReduceSum", [vals, last], keepdims=1)])
        ids = node("Reshape", [ids, flat_k])                        # [S k]
        reps = node("Reshape", [node("Mul", [node("Unsqueeze", [rows, axis1]), ones_k]),
                                rows_c])                            # [S k, h]
        gate_up = weight(p + ".experts.gate_up_proj", [E, 2 * ffn, h])
        gu = node("MatMul", [node("Gather", [gate_up, ids], axis=0),
                             node("Reshape", [reps, column])])       # [S k, 2F, 1]
        gate, up = g.node_outputs("Split", [node("Reshape", [gu, gu_rows]), split], 2,
                                  axis=1)
        act = node("Mul", [node("Mul", [gate, node("Sigmoid", [gate])]), up])
        down = weight(p + ".experts.down_proj", [E, h, ffn])
        y = node("MatMul", [node("Gather", [down, ids], axis=0),
                            node("Reshape", [act, act_col])])         # [S k, h, 1]
        y = node("Mul", [node("Reshape", [y, rows_c]), node("Reshape", [vals, weights_col])])
        y = node("ReduceSum", [node("Reshape", [y, per_token]), axis1], keepdims=0)
        return node("Reshape", [y, back])

    emb = weight("tok_emb.weight", [V, h])
    x = node("Gather", [emb, "idx"])
    for i in range(L):
        p = f"layers.{i}"
        a_in = rms_norm(x, p + ".attn_norm")
        q = rope(heads(adapted(a_in, p + ".attn.wq", h, nh * hd), shape_q))
        k = rope(heads(adapted(a_in, p + ".attn.wk", h, nkv * hd), shape_kv))
        v = heads(adapted(a_in, p + ".attn.wv", h, nkv * hd), shape_kv)
        k, v = repeat_kv(k), repeat_kv(v)
        att = node("Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        att = node("Softmax", [node("Where", [mask, att, neg])], axis=-1)
        y = node("MatMul", [att, v])
        y = node("Reshape", [node("Transpose", [y], perm=[0, 2, 1, 3]), shape_merge])
        x = node("Add", [x, adapted(y, p + ".attn.wo", nh * hd, h)])
        m_in = rms_norm(x, p + ".mlp_norm")
        if E:
            x = node("Add", [x, experts(m_in, p + ".mlp")])
            continue
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
    mlp = E * (h + 3 * h * ffn) if E else 3 * h * ffn
    formula = (V * h * (1 if a.tied else 2) + h +
               L * (2 * h + 2 * h * nh * hd + 2 * h * nkv * hd + mlp))
    # Each adapter: A [r, in] and B [out, r] on q, k, v and o.
    lora = L * a.lora * ((h + nh * hd) + (h + nkv * hd) * 2 + (nh * hd + h))
    print(f"wrote {a.out}: {params} parameters (formula {formula + lora}"
          + (f", of which LoRA {lora}" if a.lora else "") + ")")


if __name__ == "__main__":
    main()
