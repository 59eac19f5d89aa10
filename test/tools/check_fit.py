#!/usr/bin/env python3
"""Checks otc-compile --fit against an exhaustive search.

Compiles every micro-batch (a power of two dividing the global batch's
samples) x recompute policy (none, selective, full) of MODEL with
`otc-compile --plan-only`, reads each plan.json's planned total peak and
predicted tokens/s, and prints the configuration an exhaustive search picks:
the fastest whose peak is within the budget (ties: the smaller peak), as
`exhaustive: --micro-batch M --grad-accum K --remat=P`, or `exhaustive: none
fits`. Also prints `max peak that fits: N` for the budget check.

    check_fit.py OTC_COMPILE MODEL TOKENS_PER_SAMPLE GLOBAL_TOKENS BUDGET WORK
"""
import json
import os
import subprocess
import sys


def main():
    otc, model, per_sample, tokens, budget, work = sys.argv[1:7]
    samples = int(tokens) // int(per_sample)
    best = None
    mb = 1
    while mb <= samples:
        if samples % mb == 0:
            for remat in ("none", "selective", "full"):
                out = os.path.join(work, f"mb{mb}-{remat}")
                subprocess.run([otc, model, "-o", out, "--plan-only",
                                "--micro-batch", str(mb),
                                "--grad-accum", str(samples // mb),
                                f"--remat={remat}"],
                               check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                with open(os.path.join(out, "plan.json")) as f:
                    plan = json.load(f)
                peak = plan["memory_bytes"]["total_peak"]
                speed = plan["time"]["tokens_per_s"]
                if peak <= int(budget):
                    key = (speed, -peak)
                    if best is None or key > best[0]:
                        best = (key, mb, samples // mb, remat)
        mb *= 2
    if best is None:
        print("exhaustive: none fits")
    else:
        _, mb, k, remat = best
        print(f"exhaustive: --micro-batch {mb} --grad-accum {k} --remat={remat}")


if __name__ == "__main__":
    main()
