#!/usr/bin/env python3
"""Checks several AdamW steps of a train program against the float64 golden
of make_adamw_golden.py (PyTorch's torch.optim.AdamW with the same learning
rate schedule, clipping and weight decay):

  check_adamw_steps.py GOLDEN INIT CKPT [--log JSONL] --rtol R [--steps 1,2,...]

CKPT is the --save folder of `train ... --save CKPT --save-every 1`; its
step-0000000<t>/state.safetensors holds the parameters (param/<name>, the
FP32 masters of a BF16 program too) after step t, and the last one the
moments (adam_m/, adam_v/). For every step t of --steps (default: every
step of the golden) and parameter, the update so far, p_t - p_0 (p_0 from
INIT), is compared with the golden's: relative L2 error
||got - want|| / ||want|| <= R. Comparing the update, not the parameters,
keeps the check as sharp as the update is small next to the weights. The
moments after the last step are compared the same way (relative L2 error
<= R). With --log (train --log-jsonl), each step's learning rate must be the
golden's within 1e-6 (relative), and its loss and gradient norm within R.

Prints one line per step (its worst tensor), one per failing tensor, and a
summary "N passed, M failed"; exits 1 when anything failed. numpy only."""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def rel(got, want):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("golden")
    ap.add_argument("init")
    ap.add_argument("ckpt")
    ap.add_argument("--log")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--steps", help="comma-separated steps to check (default: all)")
    a = ap.parse_args()
    golden = st_io.read(a.golden)
    init = st_io.read(a.init)
    names = sorted(init)
    nsteps = len(golden["lr"])
    steps = [int(s) for s in a.steps.split(",")] if a.steps else list(range(1, nsteps + 1))
    passed = failed = 0

    def verdict(ok, line):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        if not ok:
            print("FAIL " + line)

    state = None
    for t in steps:
        path = os.path.join(a.ckpt, f"step-{t:08d}", "state.safetensors")
        state = st_io.read(path)
        worst, worst_name = 0.0, ""
        for n in names:
            p0 = init[n].astype(np.float64)
            err = rel(state[f"param/{n}"].astype(np.float64) - p0, golden[f"step{t}/{n}"] - p0)
            verdict(err <= a.rtol, f"step {t} {n}: update relative error {err:.2e}")
            if err >= worst:
                worst, worst_name = err, n
        print(f"step {t}: lr {golden['lr'][t - 1]:.6g}, worst update relative error "
              f"{worst:.2e} ({worst_name})")
    if steps and steps[-1] == nsteps:
        worst = 0.0
        for kind in ("adam_m", "adam_v"):
            for n in names:
                err = rel(state[f"{kind}/{n}"], golden[f"{kind}/{n}"])
                verdict(err <= a.rtol, f"{kind}/{n} after step {nsteps}: relative error {err:.2e}")
                worst = max(worst, err)
        print(f"moments after step {nsteps}: worst relative error {worst:.2e}")
    if a.log:
        records = [json.loads(line) for line in open(a.log)]
        records = {r["step"]: r for r in records if r.get("event") == "step"}
        for t in range(1, nsteps + 1):
            r = records.get(t)
            if r is None:
                verdict(False, f"step {t}: not in {a.log}")
                continue
            for key, golden_key, tol in (("lr", "lr", 1e-6), ("loss", "loss", a.rtol),
                                         ("grad_norm", "grad_norm", a.rtol)):
                err = rel(r[key], golden[golden_key][t - 1])
                verdict(err <= tol, f"step {t} {key}: {r[key]:.9g}, golden "
                        f"{golden[golden_key][t - 1]:.9g} (relative error {err:.2e})")
        print(f"log: lr, loss and gradient norm of steps 1..{nsteps} checked")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
