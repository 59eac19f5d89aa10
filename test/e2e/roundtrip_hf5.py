#!/usr/bin/env python3
"""Round trip of the hf5 models through PyTorch itself: otc trains each export
a few AdamW steps, otc-export writes the trained weights as a state dict, and
the transformers model loads it with `load_state_dict(strict=True)`; its loss
on the golden batch must equal the loss otc computes with those weights.

Not part of `make test` (it needs torch and transformers): run it in the venv
that make_hf5_goldens.py documents, after `make build`:

    /work/venv-hf/bin/python test/e2e/roundtrip_hf5.py --bin build/bin --work /tmp/rt

The reference given to otc-export is the state dict of the model as built by
the generator (the weights it exported); `--no-reference` tries the graph's
names alone. Prints one line per export and exits 1 on a failure."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_hf5_goldens as mk  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(" ".join(cmd[:2]) + ": " +
                           (r.stderr.strip().splitlines() or ["?"])[-1])
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="directory of otc-compile and otc-export")
    ap.add_argument("--work", required=True)
    ap.add_argument("--archs", nargs="+", default=list(mk.ARCHS))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args()
    versions = mk.check_versions(False)
    gen = mk.Generator(versions, mk.OUT)
    import torch
    from safetensors.torch import load_file, save_file

    os.makedirs(args.work, exist_ok=True)
    batch = gen.golden_batch()
    failed = 0
    for arch in args.archs:
        arch_dir = os.path.join(mk.OUT, arch)
        model = gen.build(arch)
        ref = os.path.join(args.work, f"{arch}-reference.safetensors")
        save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, ref)
        for stem in ("dynamo", "dynamo_mask", "ts", "ts_mask"):
            onnx_path = os.path.join(arch_dir, stem + ".onnx")
            if not os.path.exists(onnx_path):
                continue
            masked = stem.endswith("_mask")
            work = os.path.join(args.work, f"{arch}-{stem}")
            try:
                run([os.path.join(args.bin, "otc-compile"), onnx_path, "-o", work,
                     "--micro-batch", "4", "--loss=cross_entropy:logits:targets"])
                b = os.path.join(arch_dir, "batch.safetensors")
                run([os.path.join(work, "train"), "--batch", b, "--steps", str(args.steps),
                     "--lr", "1e-2", "--save", os.path.join(work, "ckpt"), "--quiet"])
                dump = os.path.join(work, "after.safetensors")
                run([os.path.join(work, "train"), "--batch", b, "--init",
                     os.path.join(work, "ckpt", "model.safetensors"), "--dump-grads", dump])
                otc_loss = float(load_file(dump)["loss"].reshape(-1)[0])
                sd = os.path.join(work, "state_dict.safetensors")
                cmd = [os.path.join(args.bin, "otc-export"), onnx_path, "--weights",
                       os.path.join(work, "ckpt"), "-o", sd]
                if not args.no_reference:
                    cmd += ["--reference", ref]
                run(cmd)
                fresh = gen.build(arch)
                fresh.load_state_dict(load_file(sd), strict=True)
                inputs = (batch["input_ids"], batch["attention_mask"]) if masked else \
                    (batch["input_ids"],)
                with torch.no_grad():
                    loss = gen.loss_of(fresh(*inputs), batch["targets"]).item()
                moved = sum(float((p - q).abs().max()) > 0 for p, q in
                            zip(fresh.state_dict().values(), model.state_dict().values()))
                ok = abs(loss - otc_loss) <= 1e-5 * max(1.0, abs(loss))
                failed += not ok
                print(f"{arch} {stem}: strict load ok, {moved} tensors trained, "
                      f"PyTorch loss {loss:.6f} otc {otc_loss:.6f} "
                      f"{'PASS' if ok else 'FAIL'}", flush=True)
            except Exception as e:  # one line per export, then go on
                failed += 1
                print(f"{arch} {stem}: FAIL {str(e).splitlines()[0][:300]}", flush=True)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
