#!/usr/bin/env python3
"""Generates test/e2e/rounding-ops/: a small model of the ops the 2026
architectures' exports write and otc imports as primitives
(frontend/RoundingOps.cpp), exported by README's recipe (dynamo,
optimize=False, a dynamic batch), with float64 reference gradients:

  - torch.clamp with both bounds (GPT-OSS's experts, Mamba's time steps):
    ONNX Clip, whose gradient PyTorch passes where lo <= x <= hi;
  - torch.nn.functional.softplus over a wide range (Mamba's, Jamba's and
    Qwen3-Next's time steps): ONNX Softplus;
  - torch.floor of activations (a value computed at run time, whose
    gradient is zero) and of positions over a constant (Llama 4's attention
    temperature): ONNX Floor;
  - an integer remainder of positions (Llama 4's chunked-attention mask):
    ONNX Mod, folded at import.

    logits = head(softplus(4 fc2(h)) * temp + floor(3 h) / 3),
    h = clamp(fc1(x), -0.5, 0.7), temp[t] = 1 + 0.1 floor((t + 1) / 2.5)
                                          + 0.05 (t mod 3)

Dev-time: PyPI's torch 2.15.0 and onnxscript 0.7.2 (the versions this was
generated with). Writes model.onnx (weights inline), batch.safetensors (x
[2, 6, 8] float32, targets [2, 6] int64) and grads.safetensors (`loss` and
grad/<parameter>: the mean cross-entropy of the logits against the targets,
from a .double() copy of the same weights).

    make_rounding_golden.py [OUTDIR]
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hf_export import write_small_golden  # noqa: E402

BATCH, SEQ, WIDTH, CLASSES = 2, 6, 8, 10


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(WIDTH, 16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        h = torch.clamp(self.fc1(x), -0.5, 0.7)
        s = torch.nn.functional.softplus(4 * self.fc2(h))
        t = torch.arange(x.shape[1], device=x.device)
        temp = (1 + 0.1 * torch.floor((t + 1).float() / 2.5)
                + 0.05 * torch.remainder(t, 3).float())
        s = s * temp[None, :, None] + torch.floor(3 * h) / 3
        return self.head(s)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "rounding-ops")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Model().eval()
    with torch.no_grad():
        model.fc1.weight.mul_(3)  # activations past both clamp bounds
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, SEQ, WIDTH, generator=g)
    targets = torch.randint(0, CLASSES, (BATCH, SEQ), generator=g)
    loss = write_small_golden(model, Model, x, targets, CLASSES, out)
    h = torch.clamp(model.fc1(x), -0.5, 0.7)
    print(f"wrote {out} (torch {torch.__version__}): loss {loss:.6f}, "
          f"clamped below {(h == -0.5).sum().item()}, above "
          f"{(h == 0.7).sum().item()} of {h.numel()}")


if __name__ == "__main__":
    main()
