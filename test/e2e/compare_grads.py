#!/usr/bin/env python3
"""Compares a gradient dump of a compiled train program (--dump-grads) with a
golden file: for every tensor of GOLDEN (loss and grad/<name>) the tensor of
the same name in OURS must exist, have the same number of elements, and a
relative error ||ours - golden|| / max(||golden||, tiny) (in float64) not
above --rtol. With --zero-atol A, a golden whose norm is at most A (a gradient
that is zero in exact arithmetic, such as an attention key bias's: the
softmax ignores a shift shared by every key) passes when ||ours|| <= A too. Prints one row per tensor, then "N passed, M failed"; exits 1
if anything failed, 2 on unreadable input. numpy only."""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402

TINY = 1e-30


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ours")
    ap.add_argument("golden")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--zero-atol", type=float, default=0.0)
    args = ap.parse_args()
    try:
        ours = st_io.read(args.ours)
        golden = st_io.read(args.golden)
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_grads: error: {e}")
        return 2

    width = max([len(n) for n in golden] + [4])
    print(f"{'name':<{width}}  {'rel_err':>10}  result")
    passed = failed = 0
    for name, ref in golden.items():
        ref = np.asarray(ref, dtype=np.float64)
        got = ours.get(name)
        if got is None:
            status, err = "FAIL (missing)", float("nan")
        elif got.size != ref.size:
            status, err = f"FAIL (shape {list(got.shape)} vs {list(ref.shape)})", float("nan")
        else:
            diff = np.asarray(got, dtype=np.float64).reshape(ref.shape) - ref
            err = float(np.linalg.norm(diff.ravel()) / max(np.linalg.norm(ref.ravel()), TINY))
            status = "PASS" if err <= args.rtol else "FAIL"
            ref_norm = float(np.linalg.norm(ref.ravel()))
            got_norm = float(np.linalg.norm(np.asarray(got, dtype=np.float64).ravel()))
            if ref_norm <= args.zero_atol and got_norm <= args.zero_atol:
                status, err = "PASS (zero)", got_norm
        if status.startswith("PASS"):
            passed += 1
        else:
            failed += 1
        print(f"{name:<{width}}  {err:>10.3e}  {status}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
