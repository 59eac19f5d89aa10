#!/usr/bin/env python3
"""Compares a measured step (`train --trace`) with its prediction (plan.json).

otc-compile predicts every launch of the program it plans (plan.json
`time.kernels`, by the span names that `train --trace` records); this script
reads both, skips the first steps of the trace (warm-up: first-call
allocation, graph capture), and prints per kernel name the predicted and
measured milliseconds per step for the names that take at least --min-share
of the measured step, with the bandwidth and FLOP rate each achieved (the
plan's bytes and FLOPs over the measured time) and the limit the model says
binds it, then the step totals and tokens/s side by side. With
--check it exits 1 unless the step is within --total-tol and every such
kernel within --kernel-tol of its prediction (issue 13's goals: 10% and 25%
on an H100; 25% for the step on the cpu target).

    compare_trace.py PLAN.json TRACE.json [--skip-steps 1] [--min-share 0.01]
                     [--check --total-tol 0.10 --kernel-tol 0.25]
"""
import argparse
import json
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("trace")
    ap.add_argument("--skip-steps", type=int, default=1)
    ap.add_argument("--min-share", type=float, default=0.01)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--total-tol", type=float, default=0.10)
    ap.add_argument("--kernel-tol", type=float, default=0.25)
    a = ap.parse_args()

    with open(a.plan) as f:
        time = json.load(f)["time"]
    with open(a.trace) as f:
        events = [e for e in json.load(f) if e.get("ph") == "X"]

    steps = sorted((e for e in events if e.get("cat") == "step"),
                   key=lambda e: e["ts"])
    kept = steps[a.skip_steps:]
    if not kept:
        sys.exit(f"compare_trace: the trace has {len(steps)} step(s); "
                 f"nothing is left after skipping {a.skip_steps}")
    windows = [(s["ts"], s["ts"] + s["dur"]) for s in kept]
    measured_step_ms = sum(s["dur"] for s in kept) / len(kept) / 1e3

    measured = defaultdict(float)
    for e in events:
        if e.get("cat") != "kernel":
            continue
        if any(lo <= e["ts"] <= hi for lo, hi in windows):
            measured[e["name"]] += e["dur"] / 1e3 / len(kept)

    predicted = defaultdict(float)
    flops, moved, limit = defaultdict(float), defaultdict(float), {}
    untraced = 0.0
    for k in time["kernels"]:
        if k.get("traced", True):
            predicted[k["name"]] += k["ms"]
            flops[k["name"]] += k.get("flops", 0.0)
            moved[k["name"]] += k.get("bytes", 0.0)
            limit.setdefault(k["name"], k.get("limit", ""))
        else:
            untraced += k["ms"]

    missing = sorted(n for n in predicted if n not in measured)
    unexpected = sorted(n for n in measured if n not in predicted)
    print(f"{'predicted ms':>12} {'measured ms':>12} {'ratio':>7} "
          f"{'GB/s':>7} {'TFLOP/s':>7} {'limit':>9}  kernel "
          f"(taking >= {100 * a.min_share:.1f}% of the measured step; GB/s "
          f"and TFLOP/s: plan.json's bytes and FLOPs over the measured time)")
    worst = 0.0
    rows = sorted(set(predicted) | set(measured),
                  key=lambda n: -measured.get(n, 0.0))
    for name in rows:
        m, p = measured.get(name, 0.0), predicted.get(name, 0.0)
        if m < a.min_share * measured_step_ms:
            continue
        ratio = p / m if m > 0 else float("inf")
        worst = max(worst, abs(ratio - 1.0))
        gbs = moved[name] / (m * 1e-3) / 1e9 if m > 0 else 0.0
        tfs = flops[name] / (m * 1e-3) / 1e12 if m > 0 else 0.0
        print(f"{p:12.4f} {m:12.4f} {ratio:7.2f} {gbs:7.0f} {tfs:7.1f} "
              f"{limit.get(name, ''):>9}  {name}")
    predicted_step_ms = time["step_ms"]
    tokens_per_step = time["tokens_per_s"] * predicted_step_ms / 1e3
    step_error = predicted_step_ms / measured_step_ms - 1.0
    print(f"step: predicted {predicted_step_ms:.4f} ms, measured "
          f"{measured_step_ms:.4f} ms over {len(kept)} step(s) "
          f"({100 * step_error:+.1f}%); untraced (memsets, copies) "
          f"{untraced:.4f} ms predicted")
    print(f"tokens/s: predicted {time['tokens_per_s']:.0f}, measured "
          f"{tokens_per_step / (measured_step_ms / 1e3):.0f}")
    print(f"kernel names: {len(predicted)} predicted, {len(measured)} traced, "
          f"{len(missing)} predicted but not traced, {len(unexpected)} traced "
          f"but not predicted")
    for n in missing[:10]:
        print(f"  predicted, not traced: {n}")
    for n in unexpected[:10]:
        print(f"  traced, not predicted: {n}")
    if a.check and (abs(step_error) > a.total_tol or worst > a.kernel_tol):
        print(f"compare_trace: beyond the goals (step {100 * step_error:+.1f}% "
              f"vs {100 * a.total_tol:.0f}%, worst kernel {100 * worst:.0f}% "
              f"vs {100 * a.kernel_tol:.0f}%)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
