#!/usr/bin/env python3
"""Checks one optimizer step of a train program against AdamW written here
from its definition (PyTorch's torch.optim.AdamW, ir/OtcOps.td) in float64:
from the initial parameters INIT and the batch's gradients GRADS (PyTorch's
float64 golden), the expected step-1 state with global-norm clipping at
--clip (the gradients scaled by min(1, clip / ||g||), as
torch.nn.utils.clip_grad_norm_ does) is

    g' = s g,  m = (1 - b1) g',  v = (1 - b2) g'^2,
    p = p0 - lr (m / (1 - b1) / (sqrt(v / (1 - b2)) + eps) + wd p0),

compared with the checkpoint's param/, adam_m/ and adam_v/ tensors (relative
L2 error <= --rtol per tensor: the program works in float32). Prints one
line per tensor and a summary; exits 1 when any fails.

  check_adamw_step.py INIT GRADS STATE --lr LR --clip C --weight-decay WD
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("init")
    ap.add_argument("grads")
    ap.add_argument("state")
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--clip", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    init = st_io.read(a.init)
    grads = {k[len("grad/"):]: v.astype(np.float64)
             for k, v in st_io.read(a.grads).items() if k.startswith("grad/")}
    state = st_io.read(a.state)
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
    s = min(1.0, a.clip / norm) if a.clip > 0 else 1.0
    print(f"gradient norm {norm:.6f}, factor {s:.6f}")
    failed = 0
    for name in sorted(grads):
        p0 = init[name].astype(np.float64)
        g = s * grads[name]
        m = (1 - a.beta1) * g
        v = (1 - a.beta2) * g * g
        p = p0 - a.lr * (m / (1 - a.beta1) / (np.sqrt(v / (1 - a.beta2)) + a.eps)
                         + a.weight_decay * p0)
        for kind, want in (("param", p), ("adam_m", m), ("adam_v", v)):
            got = state[f"{kind}/{name}"].astype(np.float64)
            err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
            ok = err <= a.rtol
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {kind}/{name}: relative error {err:.2e}")
    total = 3 * len(grads)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
