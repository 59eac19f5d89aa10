#!/usr/bin/env python3
"""Checks that the step-time model prices the cuda target's expert products
(otc.expert_matmul and its weight gradient) no faster than their kernels can
run. For BF16 storage they are WMMA tiles (mma.sync, no asynchronous copy
pipeline), which on Hopper reach at most about half of what cuBLASLt's
wgmma kernels do: each must be priced at no more than half the rate of the
fastest library GEMM of the same plan (kind "gemm"). F32 storage runs on
the CUDA cores in FP32: no more than an H100 SXM's FP32 peak, 67 TFLOP/s
(datasheet). Prints one line per product and `N ok, M too fast`.

    check_expert_rate.py PLAN_JSON
"""
import json
import sys

PEAK_FP32 = 67e12


def rate(k):
    seconds = k["ms"] / 1e3
    return k["flops"] / seconds if seconds > 0 else float("inf")


def main():
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    kernels = plan["time"]["kernels"]
    bf16 = plan["precision"] != "fp32"
    library = max((rate(k) for k in kernels if k["kind"] == "gemm"), default=0)
    bound = library / 2 if bf16 else PEAK_FP32
    ok = fast = 0
    for k in kernels:
        if "expert_matmul" not in k["name"]:
            continue
        r = rate(k)
        good = r <= bound
        ok += good
        fast += not good
        print(f"{k['name']}: {r / 1e12:.1f} TFLOP/s (bound {bound / 1e12:.1f}) "
              f"{'ok' if good else 'FASTER THAN ITS KERNEL CAN RUN'}")
    print(f"{ok} ok, {fast} too fast")
    return 0 if ok and not fast else 1


if __name__ == "__main__":
    sys.exit(main())
