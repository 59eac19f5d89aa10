#!/usr/bin/env python3
"""Writes batch_uneven.safetensors and grads_uneven.safetensors next to the opset-17
GPT-2 and Llama goldens (test/e2e/<model>-opset17/): a batch of 4 rows whose rows have
0, 3, 9 and 14 of their 16 targets ignored (index -1), and the loss and gradients
torch computes on the whole batch in float64 from the golden's float32 weights (the
models of make_transformer_goldens.py, seed 0). Split into micro-batches of 1 or 2
rows, the micro-batches count different numbers of targets, so the mean of the
micro-batch means is not the whole batch's mean: the script prints by how much the
gradients of that average differ from the whole batch's, for each split.

Needs torch 1.13, onnx and numpy (Debian's python3-torch python3-onnx python3-numpy):
    /usr/bin/python3 test/e2e/make_uneven_goldens.py
"""
import copy
import os
import sys

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_transformer_goldens as mtg  # noqa: E402
import st_io  # noqa: E402

IGNORED = [0, 3, 9, 14]


def uneven_batch():
    gen = torch.Generator().manual_seed(4321)
    rows = len(IGNORED)
    idx = torch.randint(0, mtg.VOCAB, (rows, mtg.SEQ), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, mtg.VOCAB, (rows, mtg.SEQ), generator=gen, dtype=torch.int64)
    for row, n in enumerate(IGNORED):
        cols = torch.randperm(mtg.SEQ, generator=gen)[:n]
        targets[row, cols] = -1
    return idx, targets


def grads_of(model, mapping, idx, targets):
    model.zero_grad()
    loss = model(idx, targets)
    loss.backward()
    params = dict(model.named_parameters())
    out = {"loss": np.array(loss.item(), dtype=np.float64)}
    for onnx_name, (kind, torch_name) in mapping.items():
        if kind == "param":
            out["grad/" + onnx_name] = params[torch_name].grad.numpy().astype(np.float64)
    return out


def main():
    for name in ("gpt2", "llama"):
        out = os.path.join(HERE, f"{name}-opset17")
        torch.manual_seed(0)
        model = mtg.MODELS[name]()
        model.train()
        mapping = mtg.map_initializers(onnx.load(os.path.join(out, f"{name}.onnx")), model)
        ref = copy.deepcopy(model).double()
        idx, targets = uneven_batch()
        golden = grads_of(ref, mapping, idx, targets)
        st_io.write(os.path.join(out, "batch_uneven.safetensors"),
                    {"idx": idx.numpy(), "targets": targets.numpy()})
        st_io.write(os.path.join(out, "grads_uneven.safetensors"), golden)
        counted = [(targets[r] != -1).sum().item() for r in range(len(IGNORED))]
        print(f"== {name}: counted targets per row {counted}, loss {golden['loss']:.12f}")
        for rows in (1, 2):
            parts = [grads_of(ref, mapping, idx[i:i + rows], targets[i:i + rows])
                     for i in range(0, len(IGNORED), rows)]
            worst = 0.0
            for key, value in golden.items():
                if key == "loss":
                    continue
                avg = sum(p[key] for p in parts) / len(parts)
                worst = max(worst, np.abs(avg - value).max() / np.abs(value).max())
            print(f"  micro-batches of {rows}: mean of micro-batch means differs from "
                  f"the whole batch by up to {100 * worst:.1f}% (max-abs relative)")


if __name__ == "__main__":
    main()
