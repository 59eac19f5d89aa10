#!/usr/bin/env python3
"""For scatter-nd.test: `write IN` writes the inputs x [2, 3, 4] and u [2, 4]
of Inputs/scatter_nd.onnx; `check OUT` compares otc-run's y with numpy's
ScatterND (a copy of x whose rows x[0, 1] and x[1, -1] are u[0] and u[1])
and prints the largest absolute difference and PASS/FAIL (exact match)."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import st_io  # noqa: E402

INDICES = [[0, 1], [1, -1]]


def inputs():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    u = -1 - np.arange(8, dtype=np.float32).reshape(2, 4)
    return x, u


def main():
    mode, path = sys.argv[1], sys.argv[2]
    x, u = inputs()
    if mode == "write":
        st_io.write(path, {"x": x, "u": u})
        return 0
    y = np.asarray(st_io.read(path)["y"], dtype=np.float64)
    ref = x.astype(np.float64).copy()
    for row, (a, b) in enumerate(INDICES):
        ref[a, b] = u[row]
    err = float(np.max(np.abs(y - ref)))
    ok = err == 0.0
    print(f"scatter_nd max abs err {err:.3e} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
