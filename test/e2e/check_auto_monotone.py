"""Sweeps --remat=auto over budgets between the full and none plans of a
model and checks what the issue asks of it: the planned total peak never
exceeds the budget, and recompute FLOPs never grow as the budget grows.
Budgets below the smallest plan must fail with a message naming it.

    check_auto_monotone.py MODEL --micro-batch N [--points 8] [--extra ARG]...
Prints one line per budget and a verdict line; exits 1 on a violation.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def plan(model, mb, remat, extra, budget=None):
    out = tempfile.mkdtemp()
    cmd = ["otc-compile", model, "-o", out, "--micro-batch", str(mb),
           "--plan-only", "--remat=" + remat] + extra
    if budget is not None:
        cmd.append(f"--memory-budget={budget}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--extra", action="append", default=[])
    a = ap.parse_args()
    none, _ = plan(a.model, a.micro_batch, "none", a.extra)
    full, _ = plan(a.model, a.micro_batch, "full", a.extra)
    lo = min(full["memory_bytes"]["total_peak"], none["memory_bytes"]["total_peak"])
    hi = none["memory_bytes"]["total_peak"]
    ok, prev = True, None
    _, err = plan(a.model, a.micro_batch, "auto", a.extra, lo // 2)
    below = "smallest that fits" in err
    print(f"budget {lo // 2}: {'refused, names the smallest' if below else 'NOT refused: ' + err}")
    ok &= below
    for i in range(a.points):
        budget = lo + (hi - lo) * i // (a.points - 1)
        p, err = plan(a.model, a.micro_batch, "auto", a.extra, budget)
        if p is None:
            print(f"budget {budget}: failed: {err}")
            ok = False
            continue
        peak, flops = p["memory_bytes"]["total_peak"], p["flops"]["recompute"]
        fits = peak <= budget
        mono = prev is None or flops <= prev
        print(f"budget {budget}: peak {peak} recompute {flops} blocks "
              f"{p['remat']['blocks']}{'' if fits else ' OVER BUDGET'}"
              f"{'' if mono else ' MORE RECOMPUTE THAN A SMALLER BUDGET'}")
        ok &= fits and mono
        prev = flops
    print("auto: within budget and monotone" if ok else "auto: VIOLATION")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
