#!/usr/bin/env python3
"""Generates test/e2e/masked-scatter/: a small model that merges "image
features" into "text embeddings" the way every Hugging Face vision-language
model does, `inputs_embeds.masked_scatter(mask, features)` with the mask
computed from the input at run time, then average-pools the features' grid
as Gemma 3's projector does (nn.AvgPool2d with kernel = stride), exported
by README's recipe (dynamo, optimize=False, a dynamic batch): the exporter
writes masked_scatter as ScatterND at a NonZero, which otc rewrites into
static shapes (frontend/MaskedScatter.cpp). With float64 reference
gradients (test/e2e/masked-scatter.test).

    x [2, 6, 8] -> embeds = text(x) [2, 6, 16], mask = x[..., :1] > 0
    (expanded over the 16 features), grid = pool(vision(x) as [2, 4, 6, 4])
    -> features [2, 6, 16] (K <= 192 of them taken, in order), logits =
    head(embeds.masked_scatter(mask, features))

Dev-time: PyPI's torch 2.15.0 and onnxscript 0.7.2 (the versions this was
generated with). Writes model.onnx (weights inline), batch.safetensors and
grads.safetensors (`loss` and grad/<parameter>, float64).

    make_masked_scatter_golden.py [OUTDIR]
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
        self.text = torch.nn.Linear(WIDTH, 16)
        self.vision = torch.nn.Linear(WIDTH, 64)
        self.pool = torch.nn.AvgPool2d(2)
        self.head = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        embeds = self.text(x)
        mask = (x[..., :1] > 0).expand_as(embeds)
        grid = self.vision(x).reshape(-1, 4, 2 * SEQ, 8)       # [b, 4, 12, 8]
        features = self.pool(grid).reshape(-1, SEQ, 16)       # [b, 6, 16]
        merged = embeds.masked_scatter(mask, features)
        return self.head(torch.tanh(merged))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "masked-scatter")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Model().eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, SEQ, WIDTH, generator=g)
    targets = torch.randint(0, CLASSES, (BATCH, SEQ), generator=g)
    loss = write_small_golden(model, Model, x, targets, CLASSES, out)
    print(f"wrote {out} (torch {torch.__version__}): loss {loss:.6f}, "
          f"{int((x[..., 0] > 0).sum())} of {BATCH * SEQ} positions take features")


if __name__ == "__main__":
    main()
