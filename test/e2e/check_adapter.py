"""Checks otc-export --peft-adapter against peft's own adapter file.

    check_adapter.py same OURS.safetensors PEFT.safetensors
    check_adapter.py count PLAN.json PEFT.safetensors
    check_adapter.py trained OURS.safetensors PEFT.safetensors CHECKPOINT.safetensors
    check_adapter.py close A.safetensors B.safetensors RTOL

`trained`: each of OURS is the checkpoint's tensor of the initializer peft's
name comes from (`model.` + the name with `.default` before `.weight`), and
differs from PEFT's initial value. `close`: the same names, each tensor of A
within RTOL of B's largest magnitude. numpy only.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def result(ok, text):
    print(f"{text}: {'PASS' if ok else 'FAIL'}")


def main():
    mode = sys.argv[1]
    if mode == "same":
        ours, peft = st_io.read(sys.argv[2]), st_io.read(sys.argv[3])
        ok = sorted(ours) == sorted(peft) and all(
            np.array_equal(np.asarray(ours[k]), np.asarray(peft[k])) for k in peft)
        result(ok, f"{len(ours)} tensors, names and values of peft's adapter")
    elif mode == "count":
        plan = json.load(open(sys.argv[2]))
        peft = st_io.read(sys.argv[3])
        want = sum(int(np.asarray(v).size) for v in peft.values())
        got = plan["params_count"]
        result(got == want, f"trained {got}, peft's adapter {want}")
    elif mode == "close":
        a, b, rtol = st_io.read(sys.argv[2]), st_io.read(sys.argv[3]), float(sys.argv[4])
        worst = max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) /
                    max(float(np.max(np.abs(np.asarray(b[k])))), 1e-30) for k in b)
        result(sorted(a) == sorted(b) and worst <= rtol,
               f"{len(a)} tensors, names equal, values within {rtol:g} (worst {worst:.1e})")
    else:
        ours, peft = st_io.read(sys.argv[2]), st_io.read(sys.argv[3])
        ck = st_io.read(sys.argv[4])
        ok = sorted(ours) == sorted(peft)
        for name in peft:
            source = "model." + name[:-len(".weight")] + ".default.weight"
            mine = np.asarray(ours.get(name))
            ok &= source in ck and np.array_equal(mine, np.asarray(ck[source]))
            ok &= not np.array_equal(mine, np.asarray(peft[name]))
        result(ok, f"{len(ours)} tensors under peft's names, each the checkpoint's, "
                   "all moved from the initial values")


if __name__ == "__main__":
    main()
