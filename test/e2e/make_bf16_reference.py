#!/usr/bin/env python3
"""Measures how far PyTorch's own BF16 autocast gradients are from float64 on
the GPT-2-style golden model and batch, and records it next to the goldens
(gpt2-opset14/bf16_autocast_error.json); test/e2e/bf16-gpt2-gradients.test
holds otc's --precision=bf16 gradients to twice that figure.

The model, its weights (seed 0) and the batch are those of
make_transformer_goldens.py (imported, not copied), so the float64 reference is
gpt2-opset14/grads.safetensors itself; the script checks that the loss it
recomputes in float64 equals the recorded one. Relative error of a tensor is
||autocast - float64|| / ||float64|| (as in compare_grads.py). Needs torch 1.13
(torch.autocast('cpu', dtype=torch.bfloat16)), onnx and numpy:

    /usr/bin/python3 test/e2e/make_bf16_reference.py
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_transformer_goldens as goldens  # noqa: E402
import st_io  # noqa: E402


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt2", choices=["gpt2"])
    ap.add_argument("--opset", type=int, default=14)
    args = ap.parse_args()
    out = os.path.join(HERE, f"{args.model}-opset{args.opset}")
    golden = st_io.read(os.path.join(out, "grads.safetensors"))

    torch.manual_seed(0)
    model = goldens.MODELS[args.model]()
    model.train()
    idx, targets = goldens.golden_batch()

    ref = copy.deepcopy(model).double()
    loss64 = ref(idx, targets).item()
    if abs(loss64 - float(golden["loss"])) > 1e-12 * abs(loss64):
        sys.exit(f"float64 loss {loss64} differs from the golden {float(golden['loss'])}: "
                 "the model or batch is not the golden one")

    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(idx, targets)
    loss.float().backward()
    params = dict(model.named_parameters())
    errors = {"loss": rel_err(loss.item(), golden["loss"])}
    for name in golden:
        if name.startswith("grad/"):
            errors[name] = rel_err(params[name[len("grad/"):]].grad.numpy(), golden[name])
    grad_errors = [e for n, e in errors.items() if n != "loss"]
    record = {
        "what": "relative error ||autocast - float64|| / ||float64|| of torch "
                f"{torch.__version__} BF16 autocast (cpu) on the golden model and batch",
        "max_grad_rel_err": max(grad_errors),
        "median_grad_rel_err": float(np.median(grad_errors)),
        "loss_rel_err": errors["loss"],
        "per_tensor": errors,
    }
    path = os.path.join(out, "bf16_autocast_error.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"autocast bf16: max gradient rel err {record['max_grad_rel_err']:.3e}, "
          f"median {record['median_grad_rel_err']:.3e}, loss {errors['loss']:.3e}")
    print("wrote", path)


if __name__ == "__main__":
    main()
