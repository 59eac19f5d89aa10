#!/usr/bin/env python3
"""Generates test/e2e/mlp/adamw_steps.safetensors, the golden of several
AdamW steps (test/e2e/mlp-adamw-steps.test, check_adamw_steps.py): the MLP
of make_mlp_golden.py in float64 from init.safetensors, trained on the fixed
batch.safetensors (the whole batch's mean loss each step) by
torch.optim.AdamW with the settings of a compiled program's flags

    otc-compile mlp.onnx --weight-decay 0.1
    train --steps 5 --lr 0.01 --warmup 2 --lr-schedule cosine --min-lr 0.001
          --grad-clip 0.72

written here from their documented definitions (train --help), not from
the runtime:

  - the learning rate of step t (1-based): peak * t / warmup while
    t <= warmup, then a cosine from the peak down to --min-lr, reached at
    --steps: min + (peak - min) (1 + cos(pi (t - warmup) / (steps -
    warmup))) / 2;
  - --grad-clip C scales the gradients by C / ||g|| (the global L2 norm of
    every parameter's gradient) when ||g|| > C, else leaves them alone
    (torch.nn.utils.clip_grad_norm_ would divide by ||g|| + 1e-6, a
    1.4e-6 relative difference: the factor is formed here instead);
  - AdamW with betas (0.9, 0.999), epsilon 1e-8 and decoupled weight decay
    0.1 on every parameter (one parameter group).

The gradient norms of this batch are 0.715 to 0.749 over the 5 steps, so
clipping at 0.72 scales four steps and leaves step 3 alone.

The file holds, in float64: step<t>/<param> (the parameters after step t,
t = 1..5), adam_m/<param> and adam_v/<param> after the last step, and
loss, lr and grad_norm ([5]: each step's loss before its update, learning
rate and unclipped gradient norm); its metadata repeats the settings.

Run with a Python that has PyTorch (the file was made with torch 2.15,
from the dev virtualenv):
  /opt/otc-dev-venv/bin/python test/e2e/make_adamw_golden.py
It is deterministic (float64 on the cpu, no randomness)."""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

MLP_DIR = os.path.join(HERE, "mlp")
OUT = os.path.join(MLP_DIR, "adamw_steps.safetensors")

SETTINGS = dict(steps=5, lr=0.01, warmup=2, min_lr=0.001, grad_clip=0.72,
                weight_decay=0.1, beta1=0.9, beta2=0.999, eps=1e-8)


def lr_at(t, s):
    """The learning rate of 1-based step t (linear warmup, then cosine)."""
    if s["warmup"] > 0 and t <= s["warmup"]:
        return s["lr"] * t / s["warmup"]
    progress = (t - s["warmup"]) / (s["steps"] - s["warmup"])
    return s["min_lr"] + 0.5 * (s["lr"] - s["min_lr"]) * (1 + math.cos(math.pi * progress))


def forward(p, x, y):
    """The MLP of make_mlp_golden.py: Linear-Tanh-Linear-Relu-Linear, mean
    cross-entropy."""
    h = torch.tanh(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
    h = torch.relu(F.linear(h, p["fc2.weight"], p["fc2.bias"]))
    return F.cross_entropy(F.linear(h, p["fc3.weight"], p["fc3.bias"]), y)


def main():
    s = SETTINGS
    init = st_io.read(os.path.join(MLP_DIR, "init.safetensors"))
    batch = st_io.read(os.path.join(MLP_DIR, "batch.safetensors"))
    x = torch.tensor(batch["x"], dtype=torch.float64)
    y = torch.tensor(batch["y"], dtype=torch.int64)
    names = list(init)
    p = {n: torch.tensor(init[n], dtype=torch.float64, requires_grad=True) for n in names}
    opt = torch.optim.AdamW([p[n] for n in names], lr=s["lr"], betas=(s["beta1"], s["beta2"]),
                            eps=s["eps"], weight_decay=s["weight_decay"], foreach=False)
    out, losses, lrs, norms = {}, [], [], []
    for t in range(1, s["steps"] + 1):
        opt.zero_grad()
        loss = forward(p, x, y)
        loss.backward()
        norm = math.sqrt(sum(float(torch.sum(p[n].grad ** 2)) for n in names))
        if norm > s["grad_clip"]:
            with torch.no_grad():
                for n in names:
                    p[n].grad.mul_(s["grad_clip"] / norm)
        lr = lr_at(t, s)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
        norms.append(norm)
        for n in names:
            out[f"step{t}/{n}"] = p[n].detach().numpy().copy()
        print(f"step {t}: loss {loss.item():.9f} lr {lr:.6g} norm {norm:.6f}"
              f"{' (clipped)' if norm > s['grad_clip'] else ''}")
    for n in names:
        state = opt.state[p[n]]
        out[f"adam_m/{n}"] = state["exp_avg"].numpy().copy()
        out[f"adam_v/{n}"] = state["exp_avg_sq"].numpy().copy()
    out["loss"] = np.array(losses)
    out["lr"] = np.array(lrs)
    out["grad_norm"] = np.array(norms)
    st_io.write(OUT, out, metadata=dict(SETTINGS, schedule="cosine",
                                        generator="test/e2e/make_adamw_golden.py"))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
