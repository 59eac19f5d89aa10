#!/usr/bin/env python3
"""For rotary-fold.test: `write IN` writes the input x [1, 3, 5] of
Inputs/rotary_const.onnx; `check OUT` compares otc-run's y with numpy's
x * cos(f p) + x * sin(f p) (f the model's frequencies, p = 0..4) in float64
and prints the largest absolute difference and PASS/FAIL (limit 1e-6).
`write-cos IN` / `check-cos OUT` do the same for Inputs/cos_runtime.onnx,
y = cos(x) of an input x [2, 3] that holds angles up to 2e5 radians (a
rotary angle at position 131,072), against numpy's cos of the same float32
values in float64 (limit 1e-6)."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import st_io  # noqa: E402

FREQS = np.array([1.0, 0.25, 0.0625])


def x_value():
    return (np.arange(15, dtype=np.float32).reshape(1, 3, 5) - 7) / 4


def cos_input():
    return np.array([[0.0, 1.0, -2.5], [3.0e1, 1.31071e5, 2.0e5]], dtype=np.float32)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write-cos":
        st_io.write(path, {"x": cos_input()})
        return 0
    if mode == "check-cos":
        y = np.asarray(st_io.read(path)["y"], dtype=np.float64)
        err = float(np.max(np.abs(y - np.cos(cos_input().astype(np.float64)))))
        ok = err <= 1e-6
        print(f"cos max abs err {err:.3e} {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    if mode == "write":
        st_io.write(path, {"x": x_value()})
        return 0
    y = np.asarray(st_io.read(path)["y"], dtype=np.float64)
    angles = FREQS[:, None] * np.arange(5)[None, :]
    x = x_value().astype(np.float64)
    ref = x * np.cos(angles) + x * np.sin(angles)
    err = float(np.max(np.abs(y - ref)))
    ok = err <= 1e-6
    print(f"rotary max abs err {err:.3e} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
