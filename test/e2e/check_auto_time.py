#!/usr/bin/env python3
"""Checks that otc-compile --remat=auto picks by predicted step time.

For MODEL and each budget between the smallest and the largest planned peak
of the uniform policies (none, selective, full), compiles --remat=auto with
--plan-only and checks: its planned total peak is within the budget, and its
predicted step (plan.json time.step_ms) is no slower than any uniform policy
that fits the same budget (each is one of the solver's candidates or
dominated by one). Prints one line per budget and a summary.

    check_auto_time.py OTC_COMPILE MODEL WORK [otc-compile options...]
"""
import json
import os
import subprocess
import sys


def plan(otc, model, out, extra):
    subprocess.run([otc, model, "-o", out, "--plan-only"] + extra, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "plan.json")) as f:
        p = json.load(f)
    return p["memory_bytes"]["total_peak"], p["time"]["step_ms"]


def main():
    otc, model, work = sys.argv[1:4]
    extra = sys.argv[4:]
    uniform = {r: plan(otc, model, os.path.join(work, r), extra + [f"--remat={r}"])
               for r in ("none", "selective", "full")}
    lo = min(p for p, _ in uniform.values())
    hi = max(p for p, _ in uniform.values())
    bad = 0
    for i in range(5):
        budget = lo + (hi - lo) * i // 4
        peak, ms = plan(otc, model, os.path.join(work, f"auto{i}"),
                        extra + ["--remat=auto", f"--memory-budget={budget}"])
        slower = [r for r, (p, t) in uniform.items() if p <= budget and t < ms - 1e-9]
        ok = peak <= budget and not slower
        bad += not ok
        print(f"budget {budget}: auto peak {peak}, {ms:.6f} ms: "
              f"{'OK' if ok else 'WORSE than ' + ','.join(slower) if slower else 'OVER BUDGET'}")
    print(f"{5 - bad} ok, {bad} wrong")


if __name__ == "__main__":
    main()
