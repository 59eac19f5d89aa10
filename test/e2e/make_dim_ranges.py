#!/usr/bin/env python3
"""Writes test/e2e/dim-ranges/model.onnx: a tiny token model (embedding,
one Linear over the vocabulary) exported by the dynamo exporter with a
dynamic batch of at most 4 (torch.export.Dim("batch", max=4)) and a dynamic
sequence of 2 to 32 (Dim("seq", min=2, max=32)), whose ranges the export
records in its graph metadata (pkg.torch.export.ExportedProgram.
range_constraints). Dev-time: PyPI's torch 2.15.0 and onnxscript 0.7.2."""
import os
import sys

import onnx
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.out = torch.nn.Linear(8, 16)

    def forward(self, input_ids):
        return self.out(self.emb(input_ids))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "dim-ranges", "model.onnx")
    torch.manual_seed(0)
    ids = torch.randint(0, 16, (2, 8))
    batch = torch.export.Dim("batch", max=4)
    seq = torch.export.Dim("seq", min=2, max=32)
    torch.onnx.export(Tiny().eval(), (ids,), out, dynamo=True, optimize=False,
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_shapes={"input_ids": {0: batch, 1: seq}})
    m = onnx.load(out)
    onnx.save(m, out)  # weights inline
    for f in os.listdir(os.path.dirname(out)):
        if f.endswith(".data"):
            os.remove(os.path.join(os.path.dirname(out), f))
    ranges = [p.value for p in m.graph.metadata_props if "range_constraints" in p.key]
    print(f"wrote {out}: {ranges} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
