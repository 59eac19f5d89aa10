#!/usr/bin/env python3
"""Checks a compiled training program against the reference interpreter on
any ONNX model that ends in a loss.

  check_codegen_vs_interp.py MODEL.onnx --micro-batch N [--grad-accum K]
      [--dim NAME=VALUE]... [--int-bound NAME=B]... [--otc-bin DIR]
      [--target cpu|cuda] [--rtol 1e-4] [--seed S] [--work DIR]
      [--reference auto|global|micro] [--compile-flag FLAG]...
      [--reference-phase PHASE] [--round-bf16]

1. Makes a random global batch (micro-batch x grad-accum along dimension 0)
   named after the ONNX graph inputs: floats from N(0, 1), integers uniform
   in [0, B) with B from --int-bound NAME=B, booleans 0/1.
2. `otc-compile MODEL -o WORK/prog ...`, then `WORK/prog/train --batch
   --dump-grads` (loss, grad/<param>, rng_key/<k> per micro-step).
3. The reference: `otc-compile MODEL --compile-to=differentiate` (or
   --reference-phase; --compile-flag flags go to both compiles: with
   `--precision=fp8 --fp8-gemms=all` and fuse-reductions, the interpreter
   runs the FP8 GEMMs the program runs, with its own rounding; with
   --round-bf16 it rounds every BF16 result as the program stores it) gives
   @train_step, which `otc-run --func train_step --f64` evaluates in float64
   with the parameters of WORK/prog/init.safetensors and the batch (and the
   dumped dropout key). "global" runs the whole batch at once (what the
   program must match when the loss is a mean over samples, or over the
   targets that are not ignored); "micro" runs each micro-batch with its own
   key and averages, the program's accumulation when every micro-batch
   counts the same number of loss terms (needed for dropout with
   --grad-accum > 1). "auto" picks
   micro when the program drew dropout keys for more than one micro-step.
4. Compares loss and every grad/<name> with test/e2e/compare_grads.py
   (relative L2 error <= --rtol) and also fails when the two sides do not
   name the same gradients.

--otc-bin is the directory of otc-compile and otc-run (default: where
otc-compile is found on PATH, else build/bin). Prints the commands it runs and compare_grads' table; exits 0 when every
tensor passes, 1 when any fails, 2 when a step cannot run. numpy and onnx.
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402


class StepError(Exception):
    """A step that could not run (exit status 2)."""


def run(cmd, stdout=None):
    """Runs `cmd`, echoing it; raises StepError with its output on failure."""
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd, stdout=stdout if stdout else subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        out = "" if stdout else r.stdout
        raise StepError(f"{os.path.basename(cmd[0])} exited {r.returncode}:\n"
                        f"{out}{r.stderr}".rstrip())
    return r.stdout


def parse_bindings(items, what):
    """NAME=INT pairs to a dict."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = int(value)
        except ValueError:
            raise StepError(f"{what} wants NAME=INTEGER, got '{item}'")
    return out


def input_specs(model_path, batch, dims):
    """(name, numpy dtype, shape) of each graph input that is not an
    initializer, the leading symbolic dimension bound to `batch`."""
    model = onnx.load(model_path)
    inits = {i.name for i in model.graph.initializer}
    types = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
             onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
             onnx.TensorProto.BOOL: np.bool_}
    specs = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        if tensor.elem_type not in types:
            raise StepError(f"input '{value.name}' has an unsupported element type "
                            f"{onnx.TensorProto.DataType.Name(tensor.elem_type)}")
        shape = []
        for axis, dim in enumerate(tensor.shape.dim):
            if dim.HasField("dim_value"):
                shape.append(dim.dim_value)
            elif axis == 0:
                shape.append(batch)
            elif dim.dim_param in dims:
                shape.append(dims[dim.dim_param])
            else:
                raise StepError(f"input '{value.name}' dimension {axis} "
                                f"('{dim.dim_param}') needs --dim")
        specs.append((value.name, types[tensor.elem_type], shape))
    return specs


def make_batch(specs, bounds, rng):
    """Random tensors for `specs`: floats N(0, 1), integers in [0, bound)."""
    batch = {}
    for name, dtype, shape in specs:
        if dtype in (np.float32, np.float64):
            batch[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            batch[name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            if name not in bounds:
                raise StepError(f"integer input '{name}' needs --int-bound {name}=B")
            batch[name] = rng.integers(0, bounds[name], shape).astype(dtype)
    return batch


def reference(args, batch, params, keys, work):
    """The interpreter's loss and gradients (float64) for the batch."""
    mode = args.reference
    if mode == "auto":
        mode = "micro" if len(keys) > 1 else "global"
    parts = 1 if mode == "global" else args.grad_accum
    size = args.micro_batch * args.grad_accum // parts
    if keys and len(keys) != parts:
        raise StepError(f"the program drew {len(keys)} dropout keys; the "
                        f"'{mode}' reference replays {parts}: use "
                        f"--reference micro or --grad-accum 1")
    step = os.path.join(work, f"step-{mode}.mlir")
    with open(step, "w") as f:
        run([os.path.join(args.otc_bin, "otc-compile"), args.model,
             "--micro-batch", str(size),
             f"--compile-to={args.reference_phase}"] +
            [f"--dim={d}" for d in args.dim] + args.compile_flag, stdout=f)
    print(f"reference: {mode} ({parts} interpreter run(s) of {size} samples)")
    total = {}
    for k in range(parts):
        tensors = dict(params)
        for name, value in batch.items():
            tensors[name] = value[k * size:(k + 1) * size]
        inputs = os.path.join(work, f"ref-in{k}.safetensors")
        outputs = os.path.join(work, f"ref-out{k}.safetensors")
        st_io.write(inputs, tensors)
        cmd = [os.path.join(args.otc_bin, "otc-run"), step, "--func", "train_step",
               "--inputs", inputs, "--outputs", outputs, "--f64"]
        if keys:
            cmd += ["--rng-key", str(int(keys[k]))]
        if args.round_bf16:
            cmd.append("--round-bf16")
        run(cmd)
        for name, value in st_io.read(outputs).items():
            if name == "loss" or name.startswith("grad/"):
                total[name] = total.get(name, 0.0) + np.asarray(value, np.float64) / parts
    return total


def check(args):
    work = args.work or tempfile.mkdtemp(prefix="otc-vs-interp-")
    os.makedirs(work, exist_ok=True)
    dims = parse_bindings(args.dim, "--dim")
    bounds = parse_bindings(args.int_bound, "--int-bound")
    rng = np.random.default_rng(args.seed)
    specs = input_specs(args.model, args.micro_batch * args.grad_accum, dims)
    batch = make_batch(specs, bounds, rng)
    batch_path = os.path.join(work, "batch.safetensors")
    st_io.write(batch_path, batch)

    prog = os.path.join(work, "prog")
    run([os.path.join(args.otc_bin, "otc-compile"), args.model, "-o", prog,
         f"--target={args.target}", "--micro-batch", str(args.micro_batch),
         "--grad-accum", str(args.grad_accum)] + [f"--dim={d}" for d in args.dim] +
        args.compile_flag)
    grads_path = os.path.join(work, "grads.safetensors")
    run([os.path.join(prog, "train"), "--batch", batch_path, "--dump-grads",
         grads_path, "--seed", str(args.seed), "--quiet"])
    ours = st_io.read(grads_path)
    keys = [ours[f"rng_key/{k}"] for k in range(len(ours)) if f"rng_key/{k}" in ours]
    params = st_io.read(os.path.join(prog, "init.safetensors"))

    ref = reference(args, batch, params, keys, work)
    ref_path = os.path.join(work, "ref.safetensors")
    st_io.write(ref_path, ref)

    ours_names = {n for n in ours if n == "loss" or n.startswith("grad/")}
    extra = sorted(ours_names - set(ref))
    for name in extra:
        print(f"{name}: in the program's dump, not in the reference: FAIL")
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare_grads.py"),
                        grads_path, ref_path, "--rtol", str(args.rtol)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout, end="")
    if r.returncode == 2:
        raise StepError("compare_grads could not read its inputs")
    return 1 if (r.returncode or extra) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--int-bound", action="append", default=[], metavar="NAME=B")
    found = shutil.which("otc-compile")
    ap.add_argument("--otc-bin", default=os.path.dirname(found) if found else "build/bin")
    ap.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="directory for the intermediate files "
                    "(default: a fresh temporary one, kept)")
    ap.add_argument("--reference", default="auto", choices=["auto", "global", "micro"])
    ap.add_argument("--compile-flag", action="append", default=[],
                    metavar="FLAG", help="passed to both otc-compile runs")
    ap.add_argument("--round-bf16", action="store_true",
                    help="the interpreter rounds every BF16 result, as the "
                    "program stores it (otc-run --round-bf16)")
    ap.add_argument("--reference-phase", default="differentiate",
                    metavar="PHASE", help="the --compile-to phase whose "
                    "@train_step the interpreter runs")
    args = ap.parse_args()
    try:
        return check(args)
    except StepError as e:
        print(f"check_codegen_vs_interp: error: {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
