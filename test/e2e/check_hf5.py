#!/usr/bin/env python3
"""Checks one architecture of test/e2e/hf5/ (models exported by today's
PyTorch, see make_hf5_goldens.py) end to end: for every export its manifest
lists as written, otc-compile appends the mean cross-entropy of the logits
(ignore index -100), the cpu program runs one forward/backward on the golden
batch (global batch 4: micro-batch 4, and 2 x grad-accum 2 where the export
has a dynamic batch) and writes its gradients, which must match PyTorch's
float64 ones within --rtol per tensor (compare_grads.py; gradients that are
zero in exact arithmetic within --zero-atol), with exactly the golden's
names: one gradient per PyTorch parameter, none for constants or the copy of
a tied weight. plan.json's params_count must equal PyTorch's
`sum(p.numel() for p in model.parameters())`.

Prints `<export> <config> PASS|FAIL (why)` per check and `N passed, M failed`;
exits 1 on a failure. numpy only."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402


def compare(ours, golden, rtol, zero_atol):
    """The names that fail, and the names in one file only."""
    bad = []
    for name, ref in golden.items():
        got = ours.get(name)
        if got is None or got.size != ref.size:
            bad.append(name)
            continue
        ref = np.asarray(ref, dtype=np.float64).ravel()
        got = np.asarray(got, dtype=np.float64).ravel()
        rn, gn = np.linalg.norm(ref), np.linalg.norm(got)
        if rn <= zero_atol and gn <= zero_atol:
            continue
        if np.linalg.norm(got - ref) / max(rn, 1e-30) > rtol:
            bad.append(name)
    return bad, sorted(set(ours) ^ set(golden))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arch_dir")
    ap.add_argument("--otc-compile", default="otc-compile")
    ap.add_argument("--work", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--zero-atol", type=float, default=1e-6)
    args = ap.parse_args()

    with open(os.path.join(args.arch_dir, "manifest.json")) as f:
        manifest = json.load(f)
    batch = os.path.join(args.arch_dir, "batch.safetensors")
    passed = failed = 0

    def report(label, ok, why=""):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print(f"{label} {'PASS' if ok else 'FAIL'}{'' if ok else ' (' + why + ')'}")

    for onnx_name, export in sorted(manifest["exports"].items()):
        if export.get("status") != "ok":
            continue
        stem = onnx_name[:-len(".onnx")]
        model = os.path.join(args.arch_dir, onnx_name)
        golden = st_io.read(os.path.join(args.arch_dir, export["golden"]))
        configs = [("mb4", ["--micro-batch", "4"])]
        if export.get("dynamic_batch"):
            configs.append(("mb2x2", ["--micro-batch", "2", "--grad-accum", "2"]))
        for label, flags in configs:
            out = os.path.join(args.work, f"{stem}-{label}")
            what = f"{stem} {label}"
            r = subprocess.run([args.otc_compile, model, "-o", out,
                                "--loss=cross_entropy:logits:targets"] + flags,
                               capture_output=True, text=True)
            if r.returncode:
                report(what, False, "compile: " + r.stderr.strip().splitlines()[-1])
                continue
            with open(os.path.join(out, "plan.json")) as f:
                count = json.load(f)["params_count"]
            if label == "mb4":
                report(f"{stem} count", count == manifest["num_parameters"],
                       f"{count} trained, PyTorch has {manifest['num_parameters']}")
            dump = os.path.join(out, "grads.safetensors")
            r = subprocess.run([os.path.join(out, "train"), "--batch", batch,
                                "--dump-grads", dump], capture_output=True, text=True)
            if r.returncode:
                report(what, False, "train: " + r.stderr.strip().splitlines()[-1])
                continue
            bad, odd = compare(st_io.read(dump), golden, args.rtol, args.zero_atol)
            report(what, not bad and not odd,
                   f"mismatched {bad[:3]} names in one file only {odd[:3]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
