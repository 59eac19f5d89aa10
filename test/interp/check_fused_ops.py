#!/usr/bin/env python3
"""Checks otc-run's forward values of the fused ops against numpy.

Runs each function of test/interp/interp-fused-ops.mlir with `otc-run
FILE.mlir --func NAME --f64` on seeded random inputs (the runner of
check_interp_ops.py) and compares its results with numpy implementations
written from the op descriptions in ir/OtcFusedOps.td: attention (grouped
query heads, additive mask with -inf entries, dropout with the hash of
check_interp_ops.py, causal), layer and RMS normalization, GELU, SiLU and
their gradients, cross-entropy and its gradient kernel, column sums, the
layer norm gradient with a residual added to dx, attention and its gradient
on a packed [B, T, H + 2 Hk, D] tensor. Results that the
.mlir computes a second time from unfused ops are held to the same numpy
values. Prints `name PASS` or `name FAIL (why)` per function, then
`N passed, M failed`; exits 1 on any failure.
"""

import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_interp_ops import dropout_keep, run_cases  # noqa


def normal(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def attention(q, k, v, scale, mask=None, causal=False, dropout=0.0, key=0,
              stream=0):
    """softmax(scale q k^T + mask) v per head, query head h reading kv head
    h / (H / Hk); returns (output, lse, dropout keep mask or None)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    heads, kv_heads = q.shape[1], k.shape[1]
    k = np.repeat(k, heads // kv_heads, axis=1)
    v = np.repeat(v, heads // kv_heads, axis=1)
    s = scale * (q @ k.transpose(0, 1, 3, 2))
    if mask is not None:
        s = s + mask.astype(np.float64)
    if causal:
        t, n = s.shape[-2:]
        s = np.where(np.triu(np.ones((t, n), dtype=bool), 1), -np.inf, s)
    top = s.max(axis=-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(s - top).sum(axis=-1))
    p = np.exp(s - lse[..., None])
    keep = None
    if dropout > 0:
        keep = np.array([dropout_keep(key, stream, i, dropout)
                         for i in range(p.size)]).reshape(p.shape)
        p = p * keep / (1 - dropout)
    return p @ v, lse, keep


def expect_attention(rng):
    q = normal(rng, (2, 4, 3, 4))
    k = normal(rng, (2, 2, 5, 4))
    v = normal(rng, (2, 2, 5, 4))
    mask = normal(rng, (3, 5))
    mask[0, 4] = mask[2, 1] = -np.inf
    key = -987654321
    o, lse, keep = attention(q, k, v, 0.5, mask=mask, dropout=0.25, key=key,
                             stream=9)
    assert 0 < keep.sum() < keep.size, "some probabilities must be dropped"
    return {"q": q, "k": k, "v": v, "mask": mask,
            "key": np.array(key, dtype=np.int64)}, \
        {"o": o, "lse": lse, "o_unfused": o}


def expect_attention_causal(rng):
    q, k, v = (normal(rng, (1, 2, 4, 3)) for _ in range(3))
    o, lse, _ = attention(q, k, v, 0.7, causal=True)
    return {"q": q, "k": k, "v": v}, {"o": o, "lse": lse}


def layer_norm(x, axis, eps, gamma=None, beta=None):
    x = x.astype(np.float64)
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1)
    mean = rows.mean(axis=1)
    var = ((rows - mean[:, None]) ** 2).mean(axis=1)
    rstd = 1 / np.sqrt(var + eps)
    y = ((rows - mean[:, None]) * rstd[:, None]).reshape(x.shape)
    if gamma is not None:
        y = y * gamma.astype(np.float64)
    if beta is not None:
        y = y + beta.astype(np.float64)
    return y, mean.reshape(x.shape[:axis]), rstd.reshape(x.shape[:axis])


def expect_layer_norm(rng):
    x = normal(rng, (2, 3, 4), 3.0) + np.float32(1.5)
    gamma, beta = normal(rng, (3, 4)), normal(rng, (3, 4))
    y, mean, rstd = layer_norm(x, 1, 1e-5, gamma, beta)
    y2, mean2, rstd2 = layer_norm(x, 2, 0.1)
    return {"x": x, "gamma": gamma, "beta": beta}, {
        "y": y, "mean": mean, "rstd": rstd,
        "y2": y2, "mean2": mean2, "rstd2": rstd2}


def rms_norm(x, axis, eps, gamma=None):
    x = x.astype(np.float64)
    rows = x.reshape(int(np.prod(x.shape[:axis])), -1)
    rstd = 1 / np.sqrt((rows ** 2).mean(axis=1) + eps)
    y = (rows * rstd[:, None]).reshape(x.shape)
    if gamma is not None:
        y = y * gamma.astype(np.float64)
    return y, rstd.reshape(x.shape[:axis])


def expect_rms_norm(rng):
    x = normal(rng, (2, 3, 4), 2.0)
    gamma = normal(rng, (4,))
    y, rstd = rms_norm(x, 2, 1e-6, gamma)
    y2, rstd2 = rms_norm(x, 1, 0.1)
    return {"x": x, "gamma": gamma}, {"y": y, "rstd": rstd, "y2": y2,
                                      "rstd2": rstd2}


def expect_activations(rng):
    x, g = normal(rng, (3, 5), 2.5), normal(rng, (3, 5))
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    erf = np.vectorize(math.erf)
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (xd + 0.044715 * xd ** 3))
    s = 1 / (1 + np.exp(-xd))
    return {"x": x, "g": g}, {
        "gelu": 0.5 * xd * (1 + erf(xd / math.sqrt(2))),
        "gelu_tanh": 0.5 * xd * (1 + t),
        "silu": xd * s,
        "gelu_grad": gd * (0.5 * (1 + erf(xd / math.sqrt(2)))
                           + xd * np.exp(-xd ** 2 / 2)
                           / math.sqrt(2 * math.pi)),
        "gelu_tanh_grad": gd * (0.5 * (1 + t) + 0.5 * xd * (1 - t ** 2) * c
                                * (1 + 3 * 0.044715 * xd ** 2)),
        "silu_grad": gd * s * (1 + xd * (1 - s))}


LABELS = np.array([[0, 1, 4], [1, 3, 2]], dtype=np.int64)


def log_sum_exp(z):
    top = z.max(axis=-1, keepdims=True)
    return top[..., 0] + np.log(np.exp(z - top).sum(axis=-1))


def expect_cross_entropy(rng):
    z = normal(rng, (2, 3, 5), 3.0)
    zd = z.astype(np.float64)
    lse = log_sum_exp(zd)
    picked = np.take_along_axis(zd, LABELS[..., None], axis=-1)[..., 0]
    per_row = lse - picked
    kept = LABELS != 1
    return {"z": z, "labels": LABELS}, {
        "mean": np.array(per_row[kept].sum() / kept.sum()),
        # lse is every row's log-sum-exp, ignored rows included.
        "lse": lse,
        "sum": np.array(per_row.sum()),
        "none": np.where(kept, per_row, 0.0),
        "mean_unfused": np.array(per_row[kept].sum() / kept.sum())}


def expect_cross_entropy_grad(rng):
    g = np.array(rng.standard_normal(), dtype=np.float32)
    gn = normal(rng, (2, 3))
    z = normal(rng, (2, 3, 5), 3.0)
    zd = z.astype(np.float64)
    # An lse off by a little from the logits' own: the kernel must use the
    # saved one, not recompute it.
    lse = (log_sum_exp(zd) + 0.0625).astype(np.float32)
    e = np.exp(zd - lse.astype(np.float64)[..., None])
    onehot = np.eye(5)[LABELS]
    kept = (LABELS != 1)[..., None]
    return {"g": g, "gn": gn, "z": z, "labels": LABELS, "lse": lse}, {
        "mean": float(g) * (e - onehot) * kept / kept.sum(),
        "sum": float(g) * (e - onehot),
        "none": gn.astype(np.float64)[..., None] * (e - onehot) * kept}


def expect_cross_entropy_with_grad(rng):
    g = np.array(rng.standard_normal(), dtype=np.float32)
    gn = normal(rng, (2, 3))
    z = normal(rng, (2, 3, 5), 3.0)
    zd = z.astype(np.float64)
    lse = log_sum_exp(zd)
    picked = np.take_along_axis(zd, LABELS[..., None], axis=-1)[..., 0]
    per_row = lse - picked
    kept = LABELS != 1
    e = np.exp(zd - lse[..., None])
    onehot = np.eye(5)[LABELS]
    keep = kept[..., None]
    return {"g": g, "gn": gn, "z": z, "labels": LABELS}, {
        "dmean": float(g) * (e - onehot) * keep / kept.sum(),
        "mean": np.array(per_row[kept].sum() / kept.sum()),
        "rows": np.where(kept, per_row, 0.0),
        "dsum": float(g) * (e - onehot),
        "sum": np.array(per_row.sum()),
        "dnone": gn.astype(np.float64)[..., None] * (e - onehot) * keep,
        "none": np.where(kept, per_row, 0.0)}


def expect_column_sum(rng):
    x = normal(rng, (3, 2, 5))
    # bfloat16 inputs: values with 8 significant bits, stored exactly.
    y = (np.round(normal(rng, (3, 2, 5)) * 64) / 64).astype(np.float32)
    slot = normal(rng, (5,))
    sums = x.astype(np.float64).reshape(6, 5).sum(axis=0)
    return {"x": x, "y": y, "slot": slot}, {
        "sum": sums,
        "sum_bf16": y.astype(np.float64).reshape(6, 5).sum(axis=0),
        "sum_into": slot.astype(np.float64) + sums}


def expect_attention_bthd(rng):
    # Stored [B, T, H, D]: the reference runs on the [B, H, T, D] views.
    q = normal(rng, (1, 5, 4, 3))
    k, v = (normal(rng, (1, 5, 2, 3)) for _ in range(2))
    heads = (lambda a: a.transpose(0, 2, 1, 3))
    o, lse, _ = attention(heads(q), heads(k), heads(v), 0.7, causal=True)
    return {"q": q, "k": k, "v": v}, {"o": heads(o), "lse": lse}


def attention_grads(q, k, v, do, scale):
    """dq, dk, dv of causal attention (no mask, no dropout) from its
    definition: P = softmax(S), dV = P^T dO, dS = P (dO V^T - rowsum(P dO
    V^T)), dQ = scale dS K, dK = scale dS^T Q; grouped heads summed into
    their kv head. [B, H, T, D] arrays in float64."""
    q, k, v, do = (a.astype(np.float64) for a in (q, k, v, do))
    group = q.shape[1] // k.shape[1]
    kr, vr = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = scale * (q @ kr.transpose(0, 1, 3, 2))
    t = s.shape[-1]
    s = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    dp = do @ vr.transpose(0, 1, 3, 2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    dq = scale * ds @ kr
    dk = scale * ds.transpose(0, 1, 3, 2) @ q
    dv = p.transpose(0, 1, 3, 2) @ do
    fold = (lambda a: a.reshape(a.shape[0], -1, group, *a.shape[2:]).sum(2))
    return dq, fold(dk), fold(dv)


def expect_attention_packed(rng):
    # One [B, T, H + 2 Hk, D] tensor: q heads 0-3, k heads 4-5, v heads 6-7.
    qkv, do = normal(rng, (1, 5, 8, 3)), normal(rng, (1, 5, 4, 3))
    heads = (lambda a: a.transpose(0, 2, 1, 3))
    q, k, v = (heads(qkv[:, :, a:b]) for a, b in ((0, 4), (4, 6), (6, 8)))
    o, lse, _ = attention(q, k, v, 0.7, causal=True)
    dq, dk, dv = attention_grads(q, k, v, heads(do), 0.7)
    d = np.concatenate([heads(dq), heads(dk), heads(dv)], axis=2)
    return {"qkv": qkv, "do": do}, {"o": heads(o), "lse": lse, "d": d,
                                    "d_bthd": d}


def expect_layer_norm_grad_residual(rng):
    x = normal(rng, (3, 5), 2.0)
    gamma, dy, r = normal(rng, (5,)), normal(rng, (3, 5)), normal(rng, (3, 5))
    _, mean, rstd = layer_norm(x, 1, 1e-5)
    xhat = (x.astype(np.float64) - mean[:, None]) * rstd[:, None]
    g = dy.astype(np.float64) * gamma.astype(np.float64)
    dx = rstd[:, None] * (g - g.mean(axis=1, keepdims=True)
                          - xhat * (g * xhat).mean(axis=1, keepdims=True))
    want = dx + r.astype(np.float64)
    dgamma = (dy.astype(np.float64) * xhat).sum(axis=0)
    sg, sb = normal(rng, (5,)), normal(rng, (5,))
    # RMS norm: xhat = x rstd with rstd = 1 / sqrt(mean(x^2) + eps).
    xd = x.astype(np.float64)
    rms_rstd = 1 / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-5)
    rms_xhat = xd * rms_rstd
    rms_dx = rms_rstd * (g - rms_xhat * (g * rms_xhat).mean(axis=1, keepdims=True))
    return {"x": x, "gamma": gamma, "dy": dy, "r": r, "sg": sg, "sb": sb}, {
        "fused": want, "unfused": want, "dgamma": dgamma,
        "dgamma_into": sg.astype(np.float64) + dgamma,
        "dbeta_into": sb.astype(np.float64) + dy.astype(np.float64).sum(axis=0),
        "rms_dgamma_into": sg.astype(np.float64)
        + (dy.astype(np.float64) * rms_xhat).sum(axis=0),
        "rms_residual": rms_dx + r.astype(np.float64)}


CASES = [("attention", expect_attention),
         ("attention_causal", expect_attention_causal),
         ("layer_norm", expect_layer_norm), ("rms_norm", expect_rms_norm),
         ("activations", expect_activations),
         ("cross_entropy", expect_cross_entropy),
         ("cross_entropy_grad", expect_cross_entropy_grad),
         ("column_sum", expect_column_sum),
         ("attention_bthd", expect_attention_bthd),
         ("attention_packed", expect_attention_packed),
         ("layer_norm_grad_residual", expect_layer_norm_grad_residual),
         ("cross_entropy_with_grad", expect_cross_entropy_with_grad)]


def main():
    return run_cases(CASES, __doc__.splitlines()[0], "interp-fused-ops.mlir")


if __name__ == "__main__":
    sys.exit(main())
