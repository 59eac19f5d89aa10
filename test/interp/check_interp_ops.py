#!/usr/bin/env python3
"""Checks otc-run on the otc ops that ONNX has no node test for.

Runs each function of test/interp/interp-ops.mlir with `otc-run FILE.mlir
--func NAME --f64` on seeded random inputs and compares its results with
numpy implementations written from the op descriptions in ir/OtcOps.td:
AdamW, the dropout mask (the exact hash below, which generated code must
reproduce bit for bit), relu/tanh/dropout gradients, softmax cross-entropy
gradients, constants, integer division, the comparison predicates, select
and casts, the softmax, log_softmax, nll_loss, slice and gather gradient
kernels, matmul's four transpose forms, and the expert products (a BF16
result, the weight gradient added into a slot). Prints `name PASS` or
`name FAIL (why)` per function, then `N passed, M failed`; exits 1 on any
failure.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_onnx_node_tests import read_safetensors, write_safetensors  # noqa

MASK64 = (1 << 64) - 1


def splitmix64(z):
    """splitmix64 of a 64-bit integer, all arithmetic modulo 2^64."""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def dropout_keep(key, stream, index, ratio):
    """keep iff (h >> 11) * 2^-53 >= ratio, with
    h = splitmix64((key * 0x9E3779B97F4A7C15) ^ (stream << 32) ^ index)."""
    h = splitmix64((((key & MASK64) * 0x9E3779B97F4A7C15) & MASK64)
                   ^ ((stream << 32) & MASK64) ^ index)
    return (h >> 11) * 2.0**-53 >= ratio


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def adamw_inputs(rng, factor):
    p, g, m, v = (rng.standard_normal((3, 4)).astype(np.float32)
                  for _ in range(4))
    v = np.abs(v)
    lr, step = np.float32(0.01), np.float32(3)
    return {"p": p, "g": g, "m": m, "v": v, "lr": np.array(lr),
            "step": np.array(step), "factor": np.array(np.float32(factor))}


def expect_adamw(rng):
    """The update of ir/OtcOps.td with the gradient scaled by the factor."""
    inputs = adamw_inputs(rng, 0.25)
    p, g, m, v = (inputs[k].astype(np.float64) for k in "pgmv")
    g = g * 0.25
    lr, step = inputs["lr"], inputs["step"]
    b1, b2, eps, wd, t = 0.9, 0.99, 1e-3, 0.1, float(step)
    m1 = b1 * m + (1 - b1) * g
    v1 = b2 * v + (1 - b2) * g * g
    p1 = p - float(lr) * (m1 / (1 - b1**t) / (np.sqrt(v1 / (1 - b2**t)) + eps)
                          + wd * p)
    return inputs, {"p1": p1, "m1": m1, "v1": v1}


def expect_adamw_skip(rng):
    """A NaN factor: the parameter and moments come back unchanged."""
    inputs = adamw_inputs(rng, float("nan"))
    return inputs, {"p1": inputs["p"], "m1": inputs["m"], "v1": inputs["v"]}


def expect_dropout(rng):
    x = rng.standard_normal((64, 32)).astype(np.float32)
    key, stream, ratio = -123456789, 5, 0.3
    keep = np.array([dropout_keep(key, stream, i, ratio)
                     for i in range(x.size)]).reshape(x.shape)
    assert 0.65 < keep.mean() < 0.75, "the hash should keep about 70%"
    y = x.astype(np.float64) * keep / (1 - ratio)
    return {"x": x, "key": np.array(key, dtype=np.int64)}, \
        {"y": y, "mask": keep}


def expect_grads(rng):
    g = rng.standard_normal((2, 5)).astype(np.float32)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    mask = rng.random((2, 5)) < 0.5
    gd, xd = g.astype(np.float64), x.astype(np.float64)
    return {"g": g, "x": x, "mask": mask}, {
        "relu_grad": np.where(xd > 0, gd, 0.0),
        "tanh_grad": gd * (1 - xd * xd),
        "dropout_grad": gd * mask / 0.75}


def expect_sce_grad(rng):
    g = np.array(rng.standard_normal(), dtype=np.float32)
    gn = rng.standard_normal(6).astype(np.float32)
    logits = (3 * rng.standard_normal((6, 4))).astype(np.float32)
    labels = np.array([0, 1, 3, 1, 2, 0], dtype=np.int64)
    s = softmax(logits.astype(np.float64))
    onehot = np.eye(4)[labels]
    kept = (labels != 1)[:, None]
    return {"g": g, "gn": gn, "logits": logits, "labels": labels}, {
        "mean": float(g) * (s - onehot) * kept / kept.sum(),
        "sum": float(g) * (s - onehot),
        "none": gn.astype(np.float64)[:, None] * (s - onehot) * kept}


def expect_constants(rng):
    return {}, {"splat": np.full((2, 2), 2.5),
                "ints": np.array([-3, 0, 9000000000], dtype=np.int64),
                "bools": np.array([True, False]),
                "doubles": np.array([0.1, -2.0])}


def expect_int_div(rng):
    a = np.array([-7, 7, -7, 7], dtype=np.int64)
    b = np.array([2, 2, -2, -2], dtype=np.int64)
    # C-style division truncates toward zero.
    return {"a": a, "b": b}, {"q": np.array([-3, 3, 3, -3], dtype=np.int64)}


def expect_compare_select_cast(rng):
    a = np.array([[1.5, -2.7, 0.0, 3.0, 1.0 / 3.0],
                  [-0.5, 2.0, 7.9, -3.0, 0.1]], dtype=np.float32)
    b = np.array([1.5, 2.0, 0.0, -3.0, 0.25], dtype=np.float32)
    n = np.array([-4, 0, 123456789], dtype=np.int64)
    return {"a": a, "b": b, "n": n}, {
        "eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b,
        "gt": a > b, "ge": a >= b,
        "select": np.where(a < b, a, b).astype(np.float64),
        # Float to integer truncates toward zero; to bool is x != 0; to f16
        # rounds to nearest (the output is written as f64 with --f64).
        "to_i64": np.trunc(a).astype(np.int64),
        "to_i1": a != 0,
        "to_f16": a.astype(np.float16).astype(np.float64),
        # i64 to f32 rounds to float32 (123456789 is not a float32).
        "from_i64": n.astype(np.float32).astype(np.float64)}


def expect_grad_kernels(rng):
    g = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    gs = np.array(rng.standard_normal(), dtype=np.float32)
    labels = np.array([3, 2, 0], dtype=np.int64)
    gw = rng.standard_normal((2, 2)).astype(np.float32)
    idx = np.array([1, 3, 1], dtype=np.int64)
    gd, yd = g.astype(np.float64), y.astype(np.float64)
    nll = np.zeros((3, 4))
    for row, label in enumerate(labels):
        if label != 2:  # ignore_index 2; "mean" over the 2 rows kept
            nll[row, label] = -float(gs) / 2
    sliced = np.zeros((5, 5))
    sliced[1::2, 0::3] = gw
    gathered = np.zeros((4, 4))
    np.add.at(gathered, idx, gd)
    # Added into a slot: rows 1 (twice) and 3 get their sums; rows 0 and 2,
    # which no index picks, keep the slot's values.
    slot = rng.standard_normal((4, 4)).astype(np.float32)
    added = slot.astype(np.float64).copy()
    added[1] += gd[0] + gd[2]
    added[3] += gd[1]
    return {"g": g, "y": y, "gs": gs, "labels": labels, "gw": gw,
            "idx": idx, "slot": slot}, {
        "softmax_grad": yd * (gd - (gd * yd).sum(axis=0, keepdims=True)),
        "log_softmax_grad": gd - np.exp(yd) * gd.sum(axis=1, keepdims=True),
        "nll_loss_grad": nll, "slice_grad": sliced, "gather_grad": gathered,
        "gather_grad_acc": added}


def expect_matmul_blocks(rng):
    a = rng.standard_normal((2, 3, 7)).astype(np.float32)
    b = rng.standard_normal((7, 300)).astype(np.float32)
    at = np.ascontiguousarray(a.transpose(0, 2, 1))
    bt = np.ascontiguousarray(b.T)
    want = a.astype(np.float64) @ b.astype(np.float64)
    return {"a": a, "at": at, "b": b, "bt": bt}, {
        "nn": want, "tn": want, "nt": want, "tt": want}


def bf16_values(a):
    """`a` (float32) with the low 16 bits of each value cleared: values
    that bfloat16 holds exactly."""
    return (a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def expect_experts(rng):
    x = bf16_values(rng.standard_normal((5, 3)).astype(np.float32))
    w = bf16_values(rng.standard_normal((3, 4, 3)).astype(np.float32))
    dy = bf16_values(rng.standard_normal((5, 4)).astype(np.float32))
    slot = bf16_values(rng.standard_normal((3, 4, 3)).astype(np.float32))
    ids = np.array([0, -1, 2, 0, 2], dtype=np.int64)
    experts = ids % 3  # -1 is expert 2
    xd, wd, dyd = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    y = np.stack([wd[e] @ xd[n] for n, e in enumerate(experts)])
    dw = slot.astype(np.float64).copy()
    for n, e in enumerate(experts):
        dw[e] += np.outer(dyd[n], xd[n])  # [O, K]: stored transposed
    return {"x": x, "ids": ids, "w": w, "dy": dy, "slot": slot}, {
        "y": y, "dw": dw, "y_bf16": y, "dw_bf16": dw}


CASES = [("adamw", expect_adamw), ("adamw_skip", expect_adamw_skip),
         ("dropout", expect_dropout),
         ("grads", expect_grads), ("sce_grad", expect_sce_grad),
         ("constants", expect_constants), ("int_div", expect_int_div),
         ("compare_select_cast", expect_compare_select_cast),
         ("grad_kernels", expect_grad_kernels),
         ("matmul_blocks", expect_matmul_blocks),
         ("experts", expect_experts)]


def check(name, make, args):
    """Runs function `name`; returns None on success, else why it failed."""
    inputs, expected = make(np.random.default_rng(0))
    in_path = os.path.join(args.work, name + ".in.safetensors")
    out_path = os.path.join(args.work, name + ".out.safetensors")
    write_safetensors(in_path, inputs)
    cmd = [args.otc_run, args.mlir, "--func", name, "--f64", "--inputs",
           in_path, "--outputs", out_path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[0]
    actual = read_safetensors(out_path)
    for key, want in expected.items():
        got = actual.get(key)
        if got is None or got.shape != want.shape:
            return f"result '{key}' is missing or has the wrong shape"
        if want.dtype.kind in "biu":
            if got.dtype != want.dtype or not np.array_equal(got, want):
                return f"result '{key}' is {got.tolist()}, want {want.tolist()}"
        elif not np.allclose(got, want, rtol=1e-12, atol=1e-12):
            return f"result '{key}' differs by {np.max(np.abs(got - want)):.3g}"
    return None


def run_cases(cases, description, mlir_help):
    """Parses --otc-run/--mlir/--work, checks every (name, make) case and
    prints one line per case and the totals; returns the exit code."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--otc-run", default="otc-run")
    parser.add_argument("--mlir", required=True, help=mlir_help)
    parser.add_argument("--work", required=True, help="scratch directory")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for name, make in cases:
        error = check(name, make, args)
        print(f"{name} PASS" if error is None else f"{name} FAIL ({error})")
        failed += error is not None
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    return run_cases(CASES, __doc__.splitlines()[0], "interp-ops.mlir")


if __name__ == "__main__":
    sys.exit(main())
