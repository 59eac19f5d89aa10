#!/usr/bin/env python3
"""Generates the transformer golden data of issue 3 into test/e2e/<model>-opset<N>/:
two tiny seeded float32 models written here, a GPT-2-style one (learned token and
position embeddings, pre-LayerNorm blocks, causal softmax attention masked with a
registered buffer, GELU MLP, tied output projection) and a Llama-style one (RMSNorm,
rotary embedding, grouped-query attention, SwiGLU MLP, untied output), each
computing its mean cross-entropy loss (ignore_index -1) from (idx, targets).

For every model and opset it writes <model>.onnx (torch.onnx.export in training mode,
dynamic batch, no constant folding), batch.safetensors (idx, targets: I64 [4, 16])
and grads.safetensors (loss and grad/<ONNX initializer> for every trainable
parameter, computed by torch in float64 from the same float32 weights; buffers such
as masks and rotary tables are not included). It prints the initializer mapping
and the op histogram of every graph.

Opsets up to 17 use the TorchScript exporter (Debian's torch 1.13:
`/usr/bin/python3 test/e2e/make_transformer_goldens.py`). Opset 18 and above need
the dynamo exporter (torch >= 2.5 with onnxscript, the first with
torch.onnx.export(..., dynamo=True)); pass --opsets 18 from such an
interpreter (that path is written but has not been run: Debian's torch 1.13 is the
only one here). Output is deterministic for a given torch version.
"""
import argparse
import collections
import copy
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

VOCAB = 64
SEQ = 16          # block size; the exported T is fixed at this value
GOLDEN_BATCH = 4
IGNORED_PER_ROW = 2   # every row has the same count, so micro-batch means average to the global mean


# --------------------------------------------------------------------------- GPT-2 style

class GPTAttention(torch.nn.Module):
    """Multi-head causal self-attention with a fused qkv projection; future
    positions are hidden with masked_fill(-inf) through a registered buffer."""

    def __init__(self, dim, heads, block):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.attn_dropout = torch.nn.Dropout(0.0)
        self.out_dropout = torch.nn.Dropout(0.0)
        lower = torch.tril(torch.ones(block, block, dtype=torch.float32))
        self.register_buffer("causal_mask", lower.reshape(1, 1, block, block))

    def forward(self, x):
        batch, steps, dim = x.shape
        head_dim = dim // self.heads
        q, k, v = self.qkv(x).split(dim, dim=2)

        def heads_first(t):
            return t.view(batch, steps, self.heads, head_dim).transpose(1, 2)

        q, k, v = heads_first(q), heads_first(k), heads_first(v)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dim)
        visible = self.causal_mask[:, :, :steps, :steps]
        scores = scores.masked_fill(visible == 0, float("-inf"))
        probs = self.attn_dropout(torch.softmax(scores, dim=-1))
        mixed = torch.matmul(probs, v).transpose(1, 2).contiguous().view(batch, steps, dim)
        return self.out_dropout(self.out(mixed))


class GPTFeedForward(torch.nn.Module):
    """Position-wise MLP: dim -> 4*dim, exact (erf) GELU, -> dim."""

    def __init__(self, dim):
        super().__init__()
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * dim, dim)
        self.dropout = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.down(self.act(self.up(x))))


class GPTBlock(torch.nn.Module):
    """Pre-LayerNorm residual block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim, heads, block):
        super().__init__()
        self.ln_attn = torch.nn.LayerNorm(dim)
        self.attn = GPTAttention(dim, heads, block)
        self.ln_mlp = torch.nn.LayerNorm(dim)
        self.mlp = GPTFeedForward(dim)

    def forward(self, x):
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class TinyGPT(torch.nn.Module):
    """GPT-2-style language model whose forward returns the loss."""

    def __init__(self, vocab=VOCAB, dim=32, layers=2, heads=4, block=SEQ):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(vocab, dim)
        self.pos_emb = torch.nn.Embedding(block, dim)
        self.emb_dropout = torch.nn.Dropout(0.0)
        self.blocks = torch.nn.ModuleList(GPTBlock(dim, heads, block) for _ in range(layers))
        self.ln_final = torch.nn.LayerNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.tok_emb.weight          # tied
        for name, p in self.named_parameters():            # GPT-2-like small init
            if name.endswith("weight") and p.dim() == 2:
                torch.nn.init.normal_(p, mean=0.0, std=0.1)

    def forward(self, idx, targets):
        steps = idx.shape[1]
        pos = torch.arange(0, steps, dtype=torch.int64, device=idx.device)
        x = self.emb_dropout(self.tok_emb(idx) + self.pos_emb(pos))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_final(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1),
                               ignore_index=-1)


# --------------------------------------------------------------------------- Llama style

class RMSNorm(torch.nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight, no bias, no mean subtraction."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        inv_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * inv_rms * self.weight


def swap_halves(t):
    """(a, b) -> (-b, a) over the last axis: the 'rotate half' of rotary embeddings."""
    half = t.shape[-1] // 2
    return torch.cat((-t[..., half:], t[..., :half]), dim=-1)


class LlamaAttention(torch.nn.Module):
    """Causal attention with rotary positions and grouped-query heads (kv heads
    shared by groups of query heads through expand + reshape); the causal mask is
    built in forward from triu of a -inf matrix."""

    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        self.head_dim = dim // heads
        self.wq = torch.nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = torch.nn.Linear(heads * self.head_dim, dim, bias=False)

    def share_kv(self, t):
        """[B, kv, T, hd] -> [B, heads, T, hd], each kv head repeated heads/kv times."""
        batch, kv, steps, hd = t.shape
        group = self.heads // self.kv_heads
        return t[:, :, None, :, :].expand(batch, kv, group, steps, hd).reshape(
            batch, kv * group, steps, hd)

    def forward(self, x, cos, sin):
        batch, steps, _ = x.shape
        q = self.wq(x).view(batch, steps, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(batch, steps, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(batch, steps, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * cos + swap_halves(q) * sin
        k = k * cos + swap_halves(k) * sin
        k, v = self.share_kv(k), self.share_kv(v)
        scores = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        future = torch.triu(torch.full((steps, steps), float("-inf"), device=x.device), diagonal=1)
        probs = torch.softmax(scores + future, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(batch, steps, -1)
        return self.wo(out)


class SwiGLU(torch.nn.Module):
    """down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.gate = torch.nn.Linear(dim, hidden, bias=False)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaLayer(torch.nn.Module):
    """Pre-RMSNorm residual layer: attention then SwiGLU."""

    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = LlamaAttention(dim, heads, kv_heads)
        self.mlp_norm = RMSNorm(dim)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class TinyLlama(torch.nn.Module):
    """Llama-style language model whose forward returns the loss."""

    def __init__(self, vocab=VOCAB, dim=32, layers=2, heads=4, kv_heads=2, hidden=64,
                 block=SEQ, theta=10000.0):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(
            LlamaLayer(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = torch.nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(block, dtype=torch.float64), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)               # [block, head_dim]
        self.register_buffer("rope_cos", angles.cos().float())
        self.register_buffer("rope_sin", angles.sin().float())
        for name, p in self.named_parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, mean=0.0, std=0.1)
            else:   # RMSNorm gains: perturbed around 1 so their gradients are non-trivial
                with torch.no_grad():
                    p.add_(0.1 * torch.randn_like(p))

    def forward(self, idx, targets):
        steps = idx.shape[1]
        cos, sin = self.rope_cos[:steps], self.rope_sin[:steps]
        x = self.tok_emb(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1),
                               ignore_index=-1)


MODELS = {"gpt2": TinyGPT, "llama": TinyLlama}


# --------------------------------------------------------------------------- export and goldens

def golden_batch():
    gen = torch.Generator().manual_seed(1234)
    idx = torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen, dtype=torch.int64)
    for row in range(GOLDEN_BATCH):
        cols = torch.randperm(SEQ, generator=gen)[:IGNORED_PER_ROW]
        targets[row, cols] = -1
    return idx, targets


def export(model, args, path, opset):
    if opset <= 17:
        torch.onnx.export(model, args, path, input_names=["idx", "targets"],
                          output_names=["loss"],
                          dynamic_axes={"idx": {0: "batch"}, "targets": {0: "batch"}},
                          opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        return
    # Dynamo exporter (torch >= 2.5 from PyPI): dynamic batch, train mode.
    batch = torch.export.Dim("batch", min=1, max=1024)
    model.train()
    prog = torch.onnx.export(model, args, input_names=["idx", "targets"],
                             output_names=["loss"], opset_version=opset, dynamo=True,
                             dynamic_shapes={"idx": {0: batch}, "targets": {0: batch}})
    # Local functions inlined (the exporter's aten_* helpers), nothing folded:
    # constant folding would turn parameters into transformed copies.
    import onnx.inliner
    onnx.save(onnx.inliner.inline_local_functions(prog.model_proto), path)


def histogram(proto):
    counts = collections.Counter(n.op_type for n in proto.graph.node)
    return ", ".join(f"{op} {c}" for op, c in sorted(counts.items()))


def map_initializers(proto, model):
    """ONNX initializer name -> ('param'|'buffer', torch name), by name, else by value."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    mapping = {}
    for init in proto.graph.initializer:
        if init.name in params:
            mapping[init.name] = ("param", init.name)
            continue
        if init.name in buffers:
            mapping[init.name] = ("buffer", init.name)
            continue
        value = numpy_helper.to_array(init)
        hits = [("param", n) for n, p in params.items()
                if tuple(p.shape) == value.shape and np.array_equal(p.detach().numpy(), value)]
        hits += [("buffer", n) for n, b in buffers.items()
                 if tuple(b.shape) == value.shape and np.array_equal(b.numpy(), value)]
        if len(hits) != 1:
            sys.exit(f"cannot map ONNX initializer {init.name!r} {list(value.shape)}: {hits}")
        mapping[init.name] = hits[0]
    mapped = sorted(n for kind, n in mapping.values() if kind == "param")
    if mapped != sorted(params):
        sys.exit(f"torch parameters missing from the ONNX initializers: "
                 f"{sorted(set(params) - set(mapped))}")
    return mapping


def generate(name, opset):
    out = os.path.join(HERE, f"{name}-opset{opset}")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = MODELS[name]()
    model.train()
    idx, targets = golden_batch()

    path = os.path.join(out, f"{name}.onnx")
    export(model, (idx, targets), path, opset)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"== {name} opset {opset}: {nparams} parameters, {len(proto.graph.node)} nodes")
    print("ops:", histogram(proto))
    mapping = map_initializers(proto, model)
    for onnx_name, (kind, torch_name) in mapping.items():
        shown = onnx_name if onnx_name == torch_name else f"{onnx_name} <- {torch_name}"
        print(f"  init {kind:6} {shown}")
    unique = dict(model.named_parameters())
    tied = [f"{mod_name}.{p_name}" for mod_name, mod in model.named_modules()
            for p_name, p in mod._parameters.items()
            if p is not None and f"{mod_name}.{p_name}" not in unique]
    if tied:
        print("  tied (not separate initializers):", ", ".join(tied))

    st_io.write(os.path.join(out, "batch.safetensors"),
                {"idx": idx.numpy(), "targets": targets.numpy()})

    ref = copy.deepcopy(model).double()      # float32 weights and buffers, upcast
    loss = ref(idx, targets)
    loss.backward()
    ref_params = dict(ref.named_parameters())
    golden = {"loss": np.array(loss.item(), dtype=np.float64)}
    for onnx_name, (kind, torch_name) in mapping.items():
        if kind == "param":
            golden["grad/" + onnx_name] = ref_params[torch_name].grad.numpy().astype(np.float64)
    st_io.write(os.path.join(out, "grads.safetensors"), golden)
    with torch.no_grad():
        loss32 = model(idx, targets).item()
    print(f"  loss float64 {loss.item():.12f}  float32 {loss32:.8f}")
    print("  wrote", ", ".join(f"{f} ({os.path.getsize(os.path.join(out, f))} B)"
                              for f in sorted(os.listdir(out))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=sorted(MODELS), choices=sorted(MODELS))
    ap.add_argument("--opsets", nargs="+", type=int, default=[14, 17])
    args = ap.parse_args()
    torch_version = tuple(int(v) for v in torch.__version__.split(".")[:2])
    if max(args.opsets) >= 18 and torch_version < (2, 5):
        sys.exit(f"opset {max(args.opsets)} needs torch >= 2.5 with onnxscript (dynamo "
                 f"exporter); this is torch {torch.__version__}")
    for name in args.models:
        for opset in args.opsets:
            generate(name, opset)


if __name__ == "__main__":
    main()
