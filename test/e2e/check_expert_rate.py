#!/usr/bin/env python3
"""Checks that the step-time model prices the cuda target's expert products
(otc.expert_matmul and its weight gradient) no faster than the CUDA cores
can run them: the kernels multiply in FP32 without tensor cores, and an
H100 SXM's FP32 peak is 67 TFLOP/s (datasheet), so each such kernel of
plan.json must take at least its FLOPs / 67e12 seconds. Prints one line per
kind of product and `N ok, M too fast`.

    check_expert_rate.py PLAN_JSON
"""
import json
import sys

PEAK_FP32 = 67e12


def main():
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    ok = fast = 0
    for k in plan["time"]["kernels"]:
        if "expert_matmul" not in k["name"]:
            continue
        seconds = k["ms"] / 1e3
        rate = k["flops"] / seconds if seconds > 0 else float("inf")
        good = rate <= PEAK_FP32
        ok += good
        fast += not good
        print(f"{k['name']}: {rate / 1e12:.1f} TFLOP/s "
              f"{'ok' if good else 'FASTER THAN THE FP32 PEAK'}")
    print(f"{ok} ok, {fast} too fast")
    return 0 if ok and not fast else 1


if __name__ == "__main__":
    sys.exit(main())
