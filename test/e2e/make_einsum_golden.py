#!/usr/bin/env python3
"""Generates test/e2e/einsum/: a small model of the einsums a state space
scan writes (Mamba2's, Falcon-H1's and Bamba's torch_forward), exported by
README's recipe (dynamo, optimize=False, a dynamic batch), with float64
reference gradients (test/e2e/einsum.test):

  - `bclhn,bcshn->bclsh`: a batched product with two kept letters a side
    and one contracted;
  - `bhcs,bcshn->bchn`: batch letters, a contraction over s, kept ones;
  - `bchn->bhn` of one operand: a sum out of it and a transpose;
  - `ij,jk` (implicit output: `ik`).

Dev-time: PyPI's torch 2.15.0 and onnxscript 0.7.2 (the versions this was
generated with). Writes model.onnx (weights inline), batch.safetensors (x
[2, 8, 16] float32, targets [2, 8] int64) and grads.safetensors (`loss` and
grad/<parameter>: the mean cross-entropy of the logits against the targets,
from a .double() copy of the same weights).

    make_einsum_golden.py [OUTDIR]
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hf_export import write_small_golden  # noqa: E402

B, T, C, L, H, N, CLASSES = 2, 8, 2, 4, 2, 3, 10  # T = C chunks of L


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.to_c = torch.nn.Linear(16, H * N)
        self.to_b = torch.nn.Linear(16, H * N)
        self.to_x = torch.nn.Linear(16, H * N)
        self.decay = torch.nn.Parameter(torch.randn(H, L))
        self.mix = torch.nn.Parameter(torch.randn(H * N, 16) * 0.3)
        self.head = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        cm = self.to_c(x).reshape(-1, C, L, H, N)
        bm = self.to_b(x).reshape(-1, C, L, H, N)
        xm = self.to_x(x).reshape(-1, C, L, H, N)
        scores = torch.einsum("bclhn,bcshn->bclsh", cm, bm)      # [b,c,l,s,h]
        y = torch.einsum("bclsh,bcshn->bclhn", scores, xm)        # [b,c,l,h,n]
        w = self.decay.softmax(-1)                                # [h, s]
        w = w[None, :, None, :].expand(x.shape[0], H, C, L)        # [b,h,c,s]
        state = torch.einsum("bhcs,bcshn->bchn", w, xm)           # [b,c,h,n]
        total = torch.einsum("bchn->bhn", state)                   # [b,h,n]
        y = y + total[:, None, None]
        y = y.reshape(-1, T, H * N)
        out = torch.einsum("btj,jk->btk", y, self.mix)
        return self.head(torch.tanh(out))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "einsum")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Model().eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, 16, generator=g)
    targets = torch.randint(0, CLASSES, (B, T), generator=g)
    loss = write_small_golden(model, Model, x, targets, CLASSES, out)
    print(f"wrote {out} (torch {torch.__version__}): loss {loss:.6f}")


if __name__ == "__main__":
    main()
