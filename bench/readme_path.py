#!/usr/bin/env python3
"""README's path for a new user, end to end, checked against PyTorch (a
dev-time check: PyPI's torch, transformers and onnxscript; nothing is
downloaded):

  1. export the Hugging Face model with README's recipe (make_hf_onnx.py:
     the Logits wrapper, (input_ids, attention_mask), or the wrapper of an
     image classifier, an encoder-decoder or Whisper; dynamo, optimize=False,
     a dynamic batch, external data; T5 by TorchScript);
  2. otc-compile it with --loss=cross_entropy:logits:targets;
  3. train from token shards (`train --data`, the attention mask fed ones;
     an image classifier, an encoder-decoder or Whisper from a `--batch`
     file of random images, token pairs or mel features, the first step's
     rows checked against PyTorch with the original weights;
     an encoder, a masked LM, with `--mlm MASK_ID`: next-token targets
     would be visible to it, and the first step's masked rows, from
     --dump-grads, go through PyTorch with the original weights: the same
     loss) and save a checkpoint;
  4. otc-export the checkpoint as a state dict (no --reference: the graph's
     names, README's wrapper prefix taken off; BERT, whose head's bias has
     a second name the graph does not show, BART and T5, whose shared
     embedding's names no module of the graph reads, and CLIP, whose
     post_layernorm the classifier never reaches, with --reference) and as
     trained.onnx (with trained.onnx.data beside it);
  5. load the state dict into the Hugging Face model with strict=True and
     compare PyTorch's loss on a batch with otc's (`train --batch --init`),
     and otc-run's on trained.onnx (skipped, and said so, where the
     reference interpreter refuses the graph's size). With --pad N that
     batch is right-padded (the last row's last N positions, the other
     rows' fewer: attention_mask 0, targets -100 as a data collator labels
     padding), so that a sliding window shorter than N sees padded queries
     with no key. With --sparse-prediction K (otc-compile's, a masked LM's
     loss at K positions per sequence) each row of it counts K targets.

    readme_path.py --bin build/bin --work /tmp/rp [--model tiny-llama]
                   [--seq 256] [--micro-batch 2] [--steps 3]
                   [--layers N] [--set KEY=VALUE ...] [--pad N]
                   [--sparse-prediction K]

(--layers and --set as make_hf_onnx.py takes them: a part of a model too
large for the machine, e.g. --model gpt-oss-20b --layers 2 --set
num_local_experts=4 --set vocab_size=32768.)

Prints each step's figures and `PASS`/`FAIL` (loss within 1e-4 relative);
exits 1 on a failure."""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_hf_onnx as mk  # noqa: E402


def run(cmd, **kw):
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd[:3])}: {(r.stderr or r.stdout).strip()[-800:]}")
    return r, time.time() - t0


def shard(path, tokens):
    """llm.c's format: 256 int32 header (magic, version, count), tokens."""
    wide = tokens.max() >= 65536
    header = np.zeros(256, np.int32)
    header[:3] = (20240520, 2 if wide else 1, len(tokens))
    with open(path, "wb") as f:
        header.tofile(f)
        tokens.astype(np.uint32 if wide else np.uint16).tofile(f)


# Models whose state dict has names the graph does not show (README's
# otc-export section): otc-export writes them from --reference.
REFERENCE_NEEDED = ("BertForMaskedLM", "BartForConditionalGeneration",
                    "T5ForConditionalGeneration", "CLIPForImageClassification")


def reference_loss(cls, model, inputs, targets):
    """PyTorch's mean cross-entropy of README's wrapper's logits (float64)."""
    with torch.no_grad():
        logits = mk.wrap(model, cls)(*inputs.values()).double()
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1)).item()


def first_step(a, w, cls, config, feed, names, what="", rows=None):
    """3a: the first step's rows (train --dump-grads writes those --data fed;
    from --batch, `rows`: the file's first global batch) through PyTorch
    with the original weights: the same loss. An encoder's rows are fed an
    attention mask of ones."""
    run([w("out", "train")] + feed + ["--dump-grads", w("first.safetensors"), "--quiet"])
    first = load_file(w("first.safetensors"))
    if rows is not None:
        first.update({"input/" + n: v[:a.micro_batch] for n, v in rows.items()})
    inputs = {n: first["input/" + n] for n in names}
    if mk.kind(cls) == "tokens":
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    targets = first["input/targets"]
    model = getattr(transformers, cls)(config).eval()
    model.load_state_dict(load_file(w("original.safetensors")), strict=True)
    ref = reference_loss(cls, model, inputs, targets)
    ours = first["loss"].item()
    ok = abs(ours - ref) <= 1e-4 * abs(ref)
    chosen = targets != -100
    counted = (f"{int(chosen.sum())} of {chosen.numel()} positions chosen"
               if what else f"{targets.shape[0]} rows")
    print(f"3a. {what}first step's rows, {counted}: PyTorch {ref:.6f}, otc {ours:.6f}: "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="tiny-llama", choices=sorted(mk.CONFIGS))
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--set", action="append", metavar="KEY=VALUE")
    ap.add_argument("--pad", type=int, default=0,
                    help="right-pad the comparison batch: the last row's last N positions")
    ap.add_argument("--sparse-prediction", type=int, default=0, metavar="K",
                    help="a masked LM's loss at K positions per sequence "
                         "(otc-compile --sparse-prediction=K); the comparison "
                         "batch then counts K targets per row")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)  # noqa: E731
    b = lambda name: os.path.join(a.bin, name)  # noqa: E731

    shape = (["--layers", str(a.layers)] if a.layers else []) + \
        [f"--set={s}" for s in a.set or []]
    _, t = run([sys.executable, os.path.join(HERE, "make_hf_onnx.py"), w("model.onnx"),
                "--model", a.model, "--seq", str(a.seq), "--state-dict",
                w("original.safetensors")] + shape)
    # The reference runs the experts one by one (batched_mm gathers an
    # expert's weights per token).
    cls, config = mk.build_config(a.model, a.layers, a.set, experts="eager")
    kind = mk.kind(cls)
    print(f"1. exported {a.model}" + (f" at sequence {a.seq}" if kind != "image" else "") +
          f" in {t:.1f} s")
    vocab = mk.vocab_size(config)
    if kind == "tokens":
        rng = np.random.default_rng(0)
        shard(w("data_000000.bin"), rng.integers(0, vocab, 64 * a.seq))
    elif a.pad or a.sparse_prediction:
        sys.exit(f"--pad and --sparse-prediction are for a language model, not {cls}")
    sparse = [f"--sparse-prediction={a.sparse_prediction}"] if a.sparse_prediction else []
    _, t = run([b("otc-compile"), w("model.onnx"), "-o", w("out"), "--micro-batch",
                str(a.micro_batch), "--loss=cross_entropy:logits:targets"] + sparse)
    print(f"2. compiled in {t:.1f} s")
    feed = ["--data", w("data_*.bin")]
    if kind != "tokens":
        # Images, encoder-decoder pairs, speech: `train --batch` files (README's
        # "a dataset of images, of encoder-decoder pairs"), one file of
        # a.steps global batches; the first step's rows checked against
        # PyTorch with the original weights.
        g = torch.Generator().manual_seed(3)
        rows = a.steps * a.micro_batch
        data = mk.example_inputs(cls, config, rows, a.seq, g)
        data["targets"] = torch.randint(0, vocab, (rows,) if kind == "image" else
                                        (rows, a.seq), generator=g)
        save_file(data, w("batches.safetensors"))
        feed = ["--batch", w("batches.safetensors")]
        if not first_step(a, w, cls, config, feed, [n for n in data if n != "targets"],
                          rows=data):
            return 1
    elif cls.endswith("ForMaskedLM"):
        # An encoder sees the next token: masked-LM targets (`--mlm`), the
        # first step's rows checked against PyTorch with the original
        # weights.
        mask_id = getattr(config, "mask_token_id", None)
        mask_id = vocab - 1 if mask_id is None or mask_id >= vocab else mask_id
        feed += ["--mlm", str(mask_id)]
        if not first_step(a, w, cls, config, feed, ["input_ids"], f"--mlm {mask_id}: "):
            return 1
    r, t = run([w("out", "train")] + feed + ["--steps", str(a.steps),
                "--lr", "1e-3", "--save", w("ckpt"), "--log-every", "1"])
    losses = [ln for ln in r.stdout.splitlines() if ln.startswith("step")]
    print(f"3. trained {a.steps} steps in {t:.1f} s: {losses[-1] if losses else '?'}")
    # BERT's masked-LM head registers its decoder's bias under two names,
    # which the graph shows once: README says such a model needs the
    # original weights as --reference for strict=True.
    # Encoder-decoder models tie their token embedding under names no
    # module of the graph reads, and CLIP's classifier never reaches the
    # vision tower's post_layernorm: README says these need it too.
    reference = (["--reference", w("original.safetensors")]
                 if cls in REFERENCE_NEEDED else [])
    r, _ = run([b("otc-export"), w("model.onnx"), "--weights", w("ckpt"), "-o",
                w("sd.safetensors")] + reference)
    r2, _ = run([b("otc-export"), w("model.onnx"), "--weights", w("ckpt"), "-o", w("trained.onnx")])
    print(f"4. {r.stdout.strip().splitlines()[-1]}; {r2.stdout.strip().splitlines()[-1]}")

    # 5. PyTorch with the exported state dict, otc with the checkpoint.
    model = getattr(transformers, cls)(config).eval()
    model.load_state_dict(load_file(w("sd.safetensors")), strict=True)
    g = torch.Generator().manual_seed(5)
    inputs = mk.example_inputs(cls, config, a.micro_batch, a.seq, g)
    tg = torch.randint(0, vocab, (a.micro_batch,) if kind == "image" else
                       (a.micro_batch, a.seq), generator=g)
    if kind == "tokens":
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        for row in range(a.micro_batch):
            padded = min(a.seq - 1, a.pad * (row + 1) // a.micro_batch)
            if padded > 0:
                mask[row, a.seq - padded:] = 0
                tg[row, a.seq - padded:] = -100
            if a.sparse_prediction:
                # K positions of the row's unpadded ones counted, as a masked
                # LM's targets.
                keep = torch.randperm(a.seq - max(padded, 0),
                                      generator=g)[:a.sparse_prediction]
                counted = torch.full_like(tg[row], -100)
                counted[keep] = tg[row, keep]
                tg[row] = counted
    save_file(dict(inputs, targets=tg), w("batch.safetensors"))
    ref = reference_loss(cls, model, inputs, tg)
    run([w("out", "train"), "--batch", w("batch.safetensors"), "--init",
         w("ckpt", "model.safetensors"), "--dump-grads", w("grads.safetensors"), "--quiet"])
    ours = load_file(w("grads.safetensors"))["loss"].item()
    ok = abs(ours - ref) <= 1e-4 * abs(ref)
    # The reference interpreter evaluates the graph as exported; a mixture
    # of experts exported as batched_mm gathers every token's expert weights
    # ([tokens, N, K]), which it refuses past the machine's memory.
    r = subprocess.run([b("otc-run"), w("trained.onnx"), "--inputs", w("batch.safetensors"),
                        "--outputs", w("run.safetensors"), "--dim", f"batch={a.micro_batch}"],
                       capture_output=True, text=True)
    if r.returncode and "in the interpreter, more than this machine's" in r.stderr:
        checked = "otc-run on trained.onnx skipped (" + r.stderr.strip().splitlines()[-1] + ")"
    elif r.returncode:
        sys.exit(f"FAIL: otc-run: {(r.stderr or r.stdout).strip()[-800:]}")
    else:
        logits_run = load_file(w("run.safetensors"))["logits"].double()
        run_loss = torch.nn.functional.cross_entropy(
            logits_run.reshape(-1, logits_run.shape[-1]), tg.reshape(-1)).item()
        ok = ok and abs(run_loss - ref) <= 1e-4 * abs(ref)
        checked = f"otc-run on trained.onnx {run_loss:.6f}"
    padding = (f" (padded {a.seq - int(inputs['attention_mask'][-1].sum())} of {a.seq})"
               if a.pad else "")
    print(f"5. loss with the trained weights{padding}: PyTorch {ref:.6f}, otc {ours:.6f}, "
          f"{checked}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
