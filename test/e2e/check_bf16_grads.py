#!/usr/bin/env python3
"""Holds a --precision=bf16 gradient dump to twice the error of PyTorch's BF16
autocast: reads the autocast figure recorded by make_bf16_reference.py
(bf16_autocast_error.json: the largest relative error of any gradient against
float64), then checks that every gradient of OURS is within twice that of the
float64 GOLDEN (relative error ||ours - golden|| / ||golden||). Prints one row
per tensor and a summary; exits 1 on any failure. numpy only."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ours")
    ap.add_argument("golden")
    ap.add_argument("autocast_json")
    args = ap.parse_args()
    ours, golden = st_io.read(args.ours), st_io.read(args.golden)
    with open(args.autocast_json) as f:
        autocast = json.load(f)
    bound = 2 * autocast["max_grad_rel_err"]
    worst, failed = 0.0, 0
    for name, ref in golden.items():
        ref = np.asarray(ref, dtype=np.float64).ravel()
        got = np.asarray(ours[name], dtype=np.float64).ravel() if name in ours else None
        if got is None or got.size != ref.size:
            print(f"{name} FAIL (missing or wrong size)")
            failed += 1
            continue
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
        ok = err <= bound
        worst = max(worst, err) if name != "loss" else worst
        failed += not ok
        print(f"{name} {err:.3e} {'PASS' if ok else 'FAIL'}")
    print(f"autocast max {autocast['max_grad_rel_err']:.3e}, bound {bound:.3e}, "
          f"ours max {worst:.3e}: {'PASS' if not failed else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
