#!/usr/bin/env python3
"""The PyTorch side of the speed benchmark (bench/speed.py runs it, one
process per mode and micro-batch): a self-contained GPT-2 of the shape
bench/make_gpt2_onnx.py writes (learned positions, pre-LayerNorm blocks,
GELU in its tanh form (GPT-2's; "gelu": "erf" in the config for the exact
one), the output projection tied to the token embedding, vocabulary
padded to 50304), trained --steps steps on uniformly random tokens, in eager
mode or through torch.compile: BF16 autocast, SDPA causal attention (a masked
softmax where torch lacks it), AdamW (fused on the GPU; lr 3e-4, betas 0.9 and
0.999, eps 1e-8, no weight decay, as otc's compiled AdamW). Writes ms per
step, tokens/s (the first --warmup steps not timed), the first and last
losses and torch's peak memory figures as JSON to --result; with no
torch.compile in this torch, {"unavailable": why}.

    speed_torch.py --mode eager|compile --micro-batch B --steps N --warmup W
                   --config '{"layers": 12, "embd": 768, "heads": 12,
                              "vocab": 50304, "seq": 1024}' --result OUT.json

A config of family "llama" (bench/speed.py's llama-1b, qwen3-0.6b) is Hugging
Face's LlamaForCausalLM of that shape instead (transformers' own
initialization, SDPA attention, embeddings tied, RMSNorm eps 1e-5 as
bench/make_llama_onnx.py), trained the same way on tokens drawn from its
whole vocabulary; {"unavailable": why} where transformers does not import.
"""
import argparse
import contextlib
import json
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REAL_VOCAB = 50257  # GPT-2's tokens; the table is padded to 50304


def steady(values, warmup):
    """The values after the warm-up steps (the second half if too few)."""
    return values[warmup:] if len(values) > warmup else values[len(values) // 2:]


def hf_llama(cfg):
    """Hugging Face's LlamaForCausalLM of `cfg`'s shape, with a forward of
    (idx, targets) -> the mean cross-entropy, as the GPT below."""
    import transformers
    config = transformers.LlamaConfig(
        hidden_size=cfg["embd"], intermediate_size=cfg["ffn"],
        num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"],
        num_key_value_heads=cfg["kv_heads"], head_dim=cfg["head_dim"],
        vocab_size=cfg["vocab"], max_position_embeddings=cfg["seq"],
        rope_theta=cfg["rope_theta"], rms_norm_eps=1e-5, tie_word_embeddings=True,
        attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(config)
    V = cfg["vocab"]

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, idx, targets):
            logits = self.model(input_ids=idx).logits
            return F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1))

    return Loss()


def bench(a):
    cfg = json.loads(a.config)
    if cfg.get("family") == "llama":
        return bench_model(a, cfg, None)
    return bench_model(a, cfg, gpt2)


def gpt2(cfg):
    """The self-contained GPT-2 of the module's docstring."""
    h, L, nh, V, T = cfg["embd"], cfg["layers"], cfg["heads"], cfg["vocab"], cfg["seq"]
    gelu = "none" if cfg.get("gelu", "tanh") == "erf" else "tanh"
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.c_attn, self.attn_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.c_fc, self.mlp_proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
            for lin in (self.attn_proj, self.mlp_proj):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * L))
            for lin in (self.c_attn, self.c_fc):
                nn.init.normal_(lin.weight, std=0.02)
            for lin in (self.c_attn, self.attn_proj, self.c_fc, self.mlp_proj):
                nn.init.zeros_(lin.bias)

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
            q, k, v = (t.view(B, T, nh, h // nh).transpose(1, 2) for t in (q, k, v))
            if sdpa is not None:
                y = sdpa(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) / math.sqrt(h // nh)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, h))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate=gelu))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(T, h)
            nn.init.normal_(self.wte.weight, std=0.02)
            nn.init.normal_(self.wpe.weight, std=0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(h)

        def forward(self, idx, targets):
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # tied, as the ONNX graph
            return F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1))

    return GPT()


def bench_model(a, cfg, make):
    """Trains `make(cfg)` (None: hf_llama) --steps steps and writes the
    figures to --result."""
    T = cfg["seq"]
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    result = {"device": torch.cuda.get_device_name(0) if cuda else "cpu",
              "torch": torch.__version__, "threads": torch.get_num_threads()}

    def unavailable(why):
        result["unavailable"] = why
        with open(a.result, "w") as f:
            json.dump(result, f)
        return 0

    if a.mode == "compile" and not hasattr(torch, "compile"):
        return unavailable(f"torch {torch.__version__} has no torch.compile")
    torch.manual_seed(0)
    if make is None:
        try:
            net = hf_llama(cfg)
        except ImportError as e:
            return unavailable(f"transformers does not import: {e}")
        import transformers
        result["transformers"] = transformers.__version__
    else:
        net = make(cfg)
    model = net.to(dev)
    kw = {"fused": True} if cuda else {}
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999),
                                eps=1e-8, weight_decay=0.0, **kw)
    except (TypeError, RuntimeError):
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    step_fn = model
    if a.mode == "compile":
        step_fn = torch.compile(model)
    gen = torch.Generator(device=dev).manual_seed(1)
    vocab = cfg["vocab"] if make is None else min(REAL_VOCAB, cfg["vocab"])

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times, losses = [], []
    for _ in range(a.steps):
        data = torch.randint(0, vocab, (a.micro_batch, T + 1), device=dev, generator=gen)
        sync()
        t0 = time.perf_counter()
        with (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if cuda
              else contextlib.nullcontext()):
            loss = step_fn(data[:, :-1], data[:, 1:])
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    st = steady(times, a.warmup)
    result.update({
        "ms_per_step": 1e3 * sum(st) / len(st),
        "ms_per_step_median": 1e3 * float(np.median(st)),
        "tokens_per_s": a.micro_batch * T * len(st) / sum(st),
        "steps_timed": len(st),
        "first_step_s": times[0],
        "loss_first": losses[0],
        "loss_last": losses[-1],
    })
    if cuda:
        result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        result["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    with open(a.result, "w") as f:
        json.dump(result, f)
    return 0




def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("eager", "compile"), required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--grad-clip", type=float, default=0.0,
                    help="clip the global gradient norm (0: off)")
    ap.add_argument("--result", required=True)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default)")
    return bench(ap.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
