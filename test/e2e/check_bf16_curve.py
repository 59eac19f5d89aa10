#!/usr/bin/env python3
"""Checks that a BF16 training run tracks its FP32 twin: reads the
`step N/M | loss X` lines of two train logs and requires, at every step, that
|loss_bf16 - loss_fp32| <= --rtol * loss_fp32. Prints the worst step and
PASS or FAIL; exits 1 on failure or when the logs' steps differ. --labels
names the two runs in the line it prints (default "bf16,fp32"; the FP8 test
compares fp8 with bf16)."""
import argparse
import re
import sys

STEP = re.compile(r"step\s+(\d+)/\d+\s+\|\s+loss\s+([-+0-9.eEinfa]+)")


def losses(path):
    with open(path) as f:
        return {int(m.group(1)): float(m.group(2))
                for m in (STEP.search(line) for line in f) if m}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bf16_log")
    ap.add_argument("fp32_log")
    ap.add_argument("--rtol", type=float, default=0.02)
    ap.add_argument("--labels", default="bf16,fp32")
    args = ap.parse_args()
    new, old = args.labels.split(",")
    bf16, fp32 = losses(args.bf16_log), losses(args.fp32_log)
    if not fp32 or sorted(bf16) != sorted(fp32):
        print("FAIL: the logs do not hold the same steps")
        return 1
    worst = max(sorted(fp32), key=lambda s: abs(bf16[s] - fp32[s]) / abs(fp32[s]))
    rel = abs(bf16[worst] - fp32[worst]) / abs(fp32[worst])
    ok = rel <= args.rtol
    print(f"{len(fp32)} steps, first loss {old} {fp32[min(fp32)]:.6f} {new} {bf16[min(bf16)]:.6f}, "
          f"last {old} {fp32[max(fp32)]:.6f} {new} {bf16[max(bf16)]:.6f}; worst step {worst}: "
          f"rel {rel:.3e} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
