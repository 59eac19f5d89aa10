"""Runs a model whose mean loss ignores every target (all labels are the
ignore index) through the compiled program and the reference interpreter,
and prints what each computes: PyTorch's cross_entropy / nll_loss give NaN
for the loss (0 / 0) and zero gradients.

    check_all_ignored.py MODEL --micro-batch N --fill NAME=V
        [--int-bound NAME=B]... [--extra ARG]... [--work DIR]

--fill sets every element of integer input NAME to V (the ignore index);
other integer inputs are uniform in [0, B), float inputs N(0, 1). --extra
passes flags to otc-compile (e.g. --no-fuse for the unfused loss ops).
Prints "program loss: nan" (train --dump-grads stops on a NaN loss, naming
it) and the interpreter's loss and whether its gradients are all zero.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st_io  # noqa: E402


def bindings(pairs):
    out = {}
    for p in pairs:
        name, value = p.split("=")
        out[name] = int(value)
    return out


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def describe(side, tensors):
    loss = float(np.asarray(tensors["loss"]).reshape(-1)[0])
    print(f"{side} loss: {'nan' if math.isnan(loss) else loss}")
    grads = [np.asarray(v) for k, v in tensors.items() if k.startswith("grad/")]
    zero = grads and all(np.all(g == 0) for g in grads)
    print(f"{side} gradients: {'all zero' if zero else 'NOT all zero'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--fill", action="append", default=[])
    ap.add_argument("--int-bound", action="append", default=[])
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="otc-ignored-")
    os.makedirs(work, exist_ok=True)
    fill, bounds = bindings(a.fill), bindings(a.int_bound)

    # The batch, from the graph inputs that are not initializers.
    graph = onnx.load(a.model).graph
    inits = {i.name for i in graph.initializer}
    rng = np.random.RandomState(0)
    batch = {}
    for vi in graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = [a.micro_batch if d.dim_param else d.dim_value
                 for d in t.shape.dim]
        if t.elem_type == onnx.TensorProto.INT64:
            batch[vi.name] = (np.full(shape, fill[vi.name], np.int64)
                              if vi.name in fill else
                              rng.randint(0, bounds[vi.name], shape).astype(np.int64))
        else:
            batch[vi.name] = rng.standard_normal(shape).astype(np.float32)
    batch_path = os.path.join(work, "batch.safetensors")
    st_io.write(batch_path, batch)

    # The compiled program: one step on that batch.
    prog = os.path.join(work, "prog")
    run(["otc-compile", a.model, "-o", prog, "--micro-batch",
         str(a.micro_batch)] + a.extra)
    # train refuses a NaN loss (--dump-grads stops there, naming it).
    grads = os.path.join(work, "grads.safetensors")
    r = subprocess.run([os.path.join(prog, "train"), "--batch", batch_path,
                        "--dump-grads", grads, "--quiet"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        describe("program", st_io.read(grads))
    elif "loss is NaN" in r.stderr:
        print("program loss: nan")
    else:
        sys.exit(f"train exited {r.returncode}:\n{r.stdout}{r.stderr}")

    # The interpreter on @train_step with the program's initial parameters.
    step = os.path.join(work, "step.mlir")
    with open(step, "w") as f:
        f.write(run(["otc-compile", a.model, "--micro-batch",
                     str(a.micro_batch), "--compile-to=differentiate"] +
                    a.extra))
    tensors = dict(st_io.read(os.path.join(prog, "init.safetensors")))
    tensors.update(batch)
    inputs = os.path.join(work, "ref-in.safetensors")
    outputs = os.path.join(work, "ref-out.safetensors")
    st_io.write(inputs, tensors)
    run(["otc-run", step, "--func", "train_step", "--inputs", inputs,
         "--outputs", outputs])
    describe("interpreter", st_io.read(outputs))


if __name__ == "__main__":
    main()
