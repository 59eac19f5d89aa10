#!/usr/bin/env python3
"""A small mixture of experts on the cpu target beside PyTorch, in one run
(a dev-time benchmark: it needs PyPI's torch and transformers, which CI does
not have; nothing is downloaded).

The model is Hugging Face's Qwen3-MoE built from a config in code (4 layers
of width 256, 4 heads, 8 experts of MLP 256, top-2, vocabulary 8192,
sequence 256; experts_implementation="batched_mm", the form that exports;
seeded random weights), exported by README's recipe (the Logits wrapper,
dynamo, optimize=False) and compiled by otc-compile for the cpu target
(FP32, --loss=cross_entropy:logits:targets). PyTorch trains the same
weights with transformers' default experts implementation (batched_mm
gathers each token's expert weights: several GB and several times slower at
this size). otc's `train` and PyTorch train the same model on the same random tokens with AdamW (lr 3e-4, betas
0.9 and 0.999, eps 1e-8, no weight decay): PyTorch eager at 1 thread and at
every core (the faster reported), and torch.compile where it compiles.
They run ROUNDS times, one after another (a shared machine drifts), and
each one's median round is reported: ms per step after the warm-up steps,
tokens/s, and otc's speed over eager's. Prints a table and writes JSON.

    speed_moe_cpu.py OUT [--micro-batch 8] [--steps 12] [--warmup 3]
                     [--rounds 3] [--no-compile] [--otc-bin build/bin]
                     [--result bench/results/DATE-cpu-moe.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_hf_onnx import Logits  # noqa: E402  README's wrapper

SEQ, VOCAB = 256, 8192


def build_model(experts="batched_mm"):
    config = transformers.Qwen3MoeConfig(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, head_dim=64, intermediate_size=512,
        moe_intermediate_size=256, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, vocab_size=VOCAB,
        max_position_embeddings=SEQ, tie_word_embeddings=False)
    if experts:
        config._experts_implementation = experts
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.Qwen3MoeForCausalLM(config)


def write_shard(path, tokens):
    """An llm.c shard (version 1, uint16 tokens), as otc-data writes."""
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def median_ms(values, warmup):
    steady = values[warmup:] if len(values) > warmup else values[len(values) // 2:]
    return statistics.median(steady)


def time_otc(a, out, shard):
    jsonl = os.path.join(out, "otc.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    cmd = [os.path.join(out, "otc", "train"), "--data", shard,
           "--init", os.path.join(out, "otc", "init.safetensors"),
           "--steps", str(a.steps), "--lr", "3e-4", "--seed", "0",
           "--log-every", "1", "--log-jsonl", jsonl, "--quiet"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    steps = [json.loads(line) for line in open(jsonl) if line.strip()]
    return median_ms([s["ms"] for s in steps], a.warmup)


def otc_kinds(a, out, shard):
    """ms per step of each kind of kernel (the op in a span's parentheses,
    "gemm", the optimizer) from one traced otc run, the first step left
    out, with the calls per step."""
    path = os.path.join(out, "otc-trace.json")
    subprocess.run([os.path.join(out, "otc", "train"), "--data", shard,
                    "--init", os.path.join(out, "otc", "init.safetensors"),
                    "--steps", str(a.warmup + 3), "--lr", "3e-4", "--seed", "0",
                    "--trace", path, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    steps = sorted((e for e in events if e.get("cat") == "step"),
                   key=lambda e: e["ts"])[1:]
    t0, ms, calls = steps[0]["ts"], {}, {}
    for e in events:
        if e.get("cat") in ("kernel", "optimizer") and e["ts"] >= t0:
            name = e["name"]
            kind = name[name.rfind("(") + 1:-1] if name.endswith(")") else name
            ms[kind] = ms.get(kind, 0.0) + e["dur"] / 1e3 / len(steps)
            calls[kind] = calls.get(kind, 0) + 1
    top = sorted(ms.items(), key=lambda kv: -kv[1])[:12]
    return {f"{k} ({calls[k] // len(steps)})": round(v, 1) for k, v in top}


def time_torch(a, model_state, tokens, mode, threads):
    torch.set_num_threads(threads)
    # PyTorch trains with its default experts (not batched_mm, whose
    # per-token weight gather is the export's form and much slower).
    model = build_model(experts=None)
    model.load_state_dict(model_state)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.0)
    mb = a.micro_batch
    ids = torch.from_numpy(tokens[:mb * SEQ].reshape(mb, SEQ).astype(np.int64))
    targets = torch.from_numpy(tokens[1:mb * SEQ + 1].reshape(mb, SEQ).astype(np.int64))
    mask = torch.ones_like(ids)
    step_model = Logits(model)
    if mode == "compile":
        step_model = torch.compile(step_model)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        logits = step_model(ids, mask)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - t0) * 1e3)
    return median_ms(times, a.warmup)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--otc-bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--result", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cores = os.cpu_count() or 1

    model = build_model().eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    onnx_path = os.path.join(a.out, "moe.onnx")
    ids = torch.zeros(2, SEQ, dtype=torch.int64)
    batch = torch.export.Dim("batch")
    torch.onnx.export(Logits(model), (ids, torch.ones_like(ids)), onnx_path, dynamo=True,
                      optimize=False, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_shapes={"input_ids": {0: batch}, "attention_mask": {0: batch}})
    subprocess.run([os.path.join(a.otc_bin, "otc-compile"), onnx_path, "-o",
                    os.path.join(a.out, "otc"), "--target=cpu",
                    "--micro-batch", str(a.micro_batch),
                    "--loss=cross_entropy:logits:targets"], check=True,
                   stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=a.micro_batch * SEQ * (a.steps + 1) + 1)
    shard = os.path.join(a.out, "tokens.bin")
    write_shard(shard, tokens)

    runs = {"otc": [], "eager": [], "compile": []}
    for r in range(a.rounds):
        runs["otc"].append(time_otc(a, a.out, shard))
        runs["eager"].append(min(time_torch(a, state, tokens, "eager", t)
                                 for t in sorted({1, cores})))
        if not a.no_compile:
            try:
                runs["compile"].append(time_torch(a, state, tokens, "compile", cores))
            except Exception as e:  # noqa: BLE001 - reported, not fatal
                print(f"torch.compile: {type(e).__name__}: {e}".splitlines()[0])
                a.no_compile = True
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} ms"
                                            for k, v in runs.items() if v))
    tokens_per_step = a.micro_batch * SEQ
    result = {"model": "qwen3-moe 4x256, 8 experts top-2, vocab 8192, seq 256",
              "micro_batch": a.micro_batch, "cores": cores, "rounds": a.rounds,
              "torch": torch.__version__, "transformers": transformers.__version__}
    for k, v in runs.items():
        if v:
            ms = statistics.median(v)
            result[f"{k}_ms_per_step"] = round(ms, 2)
            result[f"{k}_tokens_per_s"] = round(tokens_per_step / ms * 1e3, 1)
    result["otc_over_eager"] = round(result["eager_ms_per_step"] /
                                     result["otc_ms_per_step"], 3)
    if "compile_ms_per_step" in result:
        result["otc_over_compile"] = round(result["compile_ms_per_step"] /
                                           result["otc_ms_per_step"], 3)
    for k, v in runs.items():
        result[f"{k}_ms_per_round"] = [round(x, 1) for x in v]
    result["otc_ms_per_step_by_kind"] = otc_kinds(a, a.out, shard)
    result["command"] = " ".join(["bench/speed_moe_cpu.py"] + sys.argv[1:])
    print(json.dumps(result, indent=1))
    if a.result:
        with open(a.result, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
