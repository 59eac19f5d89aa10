#!/usr/bin/env python3
"""Checks a sliding window fused under a key padding against the export's
own ops, where padding is longer than the window.

For each transformers-5 golden with sliding-window layers (Mistral, Gemma 3,
GPT-OSS, ModernBERT's bidirectional one) and each export with an
attention_mask input, it feeds the golden's input ids with a batch padded
further than the window (row 0 none, rows 1 and 2 more than the window of 8
or ModernBERT's 4 either side, row 3 every position: a sequence that sees
no key), the targets of the padded positions ignored (-100, as a data
collator labels padding), and compiles the export twice for the cpu
target: fused (the window layers become otc.attention {causal, window,
key_padding}, or {window, key_padding}, whose padded queries W or more past the last seen key see no
key and give zeros) and with --no-fuse (the export's where/softmax/matmul
ops, which spread the fill over every key of such a row). The loss and every
gradient must agree within --rtol: the rows that differ are padded
positions, which nothing the loss counts reads. The reference interpreter
runs the fused @train_step too (float64, the program's initial parameters,
otc-run --func train_step), which must agree with the fused program: its
attention, written from the op's definition, against the cpu kernels.

With --count-padding the padded targets are kept instead (only row 3's are
ignored, so that its loss is defined) and the script reports the tensors
that differ: a loss that counts padded positions sees the rows that differ.

With --reference-stem STEM the --no-fuse program is compiled from the export
STEM (dynamo_mask) for every export, and the gradients are compared by
PyTorch parameter (the manifest's initializer map, a transposed initializer
transposed back): an export whose own ops give NaN where a query sees no key
(an SDPA exported by TorchScript, a -inf fill with no guard) is checked
against one whose ops do not (the dynamo exporter's NaN guard).

Prints one line per export, "<arch> <export> PASS|FAIL ...".
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

IGNORE = -100
# Positions each row keeps: row 0 all 16, rows 1 and 2 fewer than 16 - 8
# (queries 8 or more past the last seen key see no key), row 3 none.
KEPT = [16, 5, 2, 0]


def padded_batch(golden, count_padding):
    ids = np.asarray(golden["input_ids"])
    targets = np.asarray(golden["targets"]).copy()
    mask = np.zeros_like(ids)
    for row, kept in enumerate(KEPT):
        mask[row, :kept] = 1
        if not count_padding or kept == 0:
            targets[row, kept:] = IGNORE
    return {"input_ids": ids, "attention_mask": mask, "targets": targets}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{os.path.basename(cmd[0])}: {tail}")
    return r.stdout


def gradients(otc_compile, model, out, batch, extra):
    run([otc_compile, model, "-o", out, "--micro-batch", "4",
         "--loss=cross_entropy:logits:targets"] + extra)
    dump = os.path.join(out, "grads.safetensors")
    run([os.path.join(out, "train"), "--batch", batch, "--dump-grads", dump])
    return st_io.read(dump)


def interpreted(otc_compile, model, prog, batch, work):
    """loss and grad/* of the fused @train_step run by the interpreter."""
    step = work + "-step.mlir"
    with open(step, "w") as f:
        f.write(run([otc_compile, model, "--micro-batch", "4",
                     "--loss=cross_entropy:logits:targets",
                     "--compile-to=differentiate"]))
    tensors = dict(st_io.read(os.path.join(prog, "init.safetensors")))
    tensors.update(st_io.read(batch))
    inputs, outputs = work + "-in.safetensors", work + "-out.safetensors"
    st_io.write(inputs, tensors)
    otc_run = os.path.join(os.path.dirname(otc_compile), "otc-run")
    run([otc_run, step, "--func", "train_step", "--inputs", inputs,
         "--outputs", outputs, "--f64"])
    return {n: v for n, v in st_io.read(outputs).items()
            if n == "loss" or n.startswith("grad/")}


def by_parameter(grads, initializers):
    """loss and the gradients keyed by PyTorch parameter (tied copies left
    out: a tied parameter's gradient is its primary initializer's)."""
    out = {"loss": grads["loss"]}
    for name, value in grads.items():
        info = initializers.get(name[len("grad/"):]) if name.startswith("grad/") else None
        if not info or info.get("tied_copy"):
            continue
        value = np.asarray(value)
        out["grad/" + info["state_dict"]] = value.T if info["transposed"] else value
    return out


def differing(fused, plain, rtol):
    """The names whose relative difference exceeds rtol."""
    bad = []
    for name in sorted(set(fused) | set(plain)):
        if name not in fused or name not in plain:
            bad.append(name)
            continue
        a = np.asarray(fused[name], dtype=np.float64).ravel()
        b = np.asarray(plain[name], dtype=np.float64).ravel()
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            bad.append(name)
            continue
        scale = max(np.linalg.norm(b), 1e-30)
        if np.linalg.norm(a - b) / scale > rtol:
            bad.append(name)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("hf5_dir")
    ap.add_argument("--work", required=True)
    ap.add_argument("--archs", default="mistral,gemma3,gpt_oss,modernbert")
    ap.add_argument("--otc-compile", default="otc-compile")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--count-padding", action="store_true")
    ap.add_argument("--reference-stem", default=None,
                    help="the --no-fuse program from this export (dynamo_mask), "
                         "compared by parameter")
    args = ap.parse_args()
    failed = 0
    for arch in args.archs.split(","):
        arch_dir = os.path.join(args.hf5_dir, arch)
        with open(os.path.join(arch_dir, "manifest.json")) as f:
            manifest = json.load(f)
        golden = st_io.read(os.path.join(arch_dir, "batch.safetensors"))
        batch = os.path.join(args.work, f"{arch}-batch.safetensors")
        st_io.write(batch, padded_batch(golden, args.count_padding))
        for stem in ("dynamo_mask", "ts_mask"):
            model = os.path.join(arch_dir, stem + ".onnx")
            if not os.path.exists(model):
                continue
            work = os.path.join(args.work, f"{arch}-{stem}")
            try:
                fir = run([args.otc_compile, model, "--micro-batch", "4",
                           "--loss=cross_entropy:logits:targets",
                           "--compile-to=fuse"])
                windows = sum(1 for line in fir.splitlines()
                              if " = otc.attention " in line and "key_padding" in line
                              and "window = " in line)
                fused = gradients(args.otc_compile, model, work + "-fused", batch, [])
                plain_stem = args.reference_stem or stem
                plain = gradients(args.otc_compile,
                                  os.path.join(arch_dir, plain_stem + ".onnx"),
                                  work + "-plain", batch, ["--no-fuse"])
                interp = interpreted(args.otc_compile, model, work + "-fused",
                                     batch, work)
            except RuntimeError as e:
                print(f"{arch} {stem} FAIL {e}")
                failed += 1
                continue
            if args.reference_stem:
                inits = {s: manifest["exports"][s + ".onnx"]["initializers"]
                         for s in (stem, args.reference_stem)}
                bad = differing(by_parameter(fused, inits[stem]),
                                by_parameter(plain, inits[args.reference_stem]),
                                args.rtol)
            else:
                bad = differing(fused, plain, args.rtol)
            fused_names = {n for n in fused if n == "loss" or n.startswith("grad/")}
            bad_interp = differing({n: fused[n] for n in fused_names}, interp,
                                   args.rtol)
            ok = not bad and not bad_interp and windows > 0
            failed += not ok
            print(f"{arch} {stem} {'PASS' if ok else 'FAIL'} windows under a key "
                  f"padding {windows}, {len(fused)} tensors, differing {len(bad)}"
                  + (f" {bad[:3]}" if bad else "")
                  + f", from the interpreter {len(bad_interp)}"
                  + (f" {bad_interp[:3]}" if bad_interp else ""))
    return 1 if failed and not args.count_padding else 0


if __name__ == "__main__":
    sys.exit(main())
