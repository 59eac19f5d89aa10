#!/usr/bin/env python3
"""Generates the Hugging Face golden data into test/e2e/hf-<model>/: a tiny
transformers GPT2LMHeadModel and LlamaForCausalLM built from configs written
here (random weights, nothing downloaded), exported by torch.onnx.export so
that the graph ends at the logits (plus the cached key/value outputs that
use_cache adds and training never reads), with reference gradients for a loss
that otc-compile appends:

- gpt2 (inputs input_ids, attention_mask): mean cross-entropy of the logits
  against `targets` with PyTorch's default ignore_index -100
  (`--loss=cross_entropy:logits:targets`), and mean squared error of the
  logits against a float `logit_targets` (`--loss=mse:logits:logit_targets`);
- llama (input input_ids; llama_mask.onnx also takes attention_mask): mean
  cross-entropy against `targets` with ignore_index -1
  (`--loss=cross_entropy:logits:targets:ignore=-1`).

For every model it writes <model>.onnx (training mode, dynamic batch, no
constant folding), batch.safetensors (the graph inputs and the targets of
every appended loss, global batch 4, sequence 16; the attention_mask
right-pads rows 1-3), grads_<loss>.safetensors (loss and grad/<ONNX
initializer> for every trainable parameter, computed by torch in float64 from
the same float32 weights; buffers such as Llama's rotary inv_freq have no
entry) and bf16_autocast_error_<loss>.json (how far torch's own BF16 autocast
gradients are from float64, the bound the BF16 tests use). A second export of
a model (llama_mask.onnx) gets grads_mask_<loss>.safetensors. It prints the
op histogram and initializer mapping of every graph.

Needs torch, onnx, numpy and transformers 4.40.2 (which works with Debian's
torch 1.13), e.g.

    python3 -m venv --system-site-packages /tmp/hf && /tmp/hf/bin/pip install transformers==4.40.2
    /tmp/hf/bin/python test/e2e/make_hf_goldens.py

Torch 1.13 has only the TorchScript exporter, the one used here; output is
deterministic for a given torch and transformers version.
"""
import argparse
import collections
import copy
import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402

import transformers  # noqa: E402

VOCAB = 96
SEQ = 16
GOLDEN_BATCH = 4
IGNORED_PER_ROW = 2   # every row has the same count, so micro-batch means average to the global mean
OPSET = 17


def gpt2_model():
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.1,
        activation_function="gelu_new")
    config._attn_implementation = "eager"
    return transformers.GPT2LMHeadModel(config)


def llama_model():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
        attention_dropout=0.0, initializer_range=0.1, tie_word_embeddings=False)
    config._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(config)


class Logits(torch.nn.Module):
    """The causal LM as exported: (input_ids[, attention_mask]) -> logits and
    the key/value cache (use_cache=True, as a generation export has it)."""

    def __init__(self, lm, with_mask):
        super().__init__()
        self.lm = lm
        self.with_mask = with_mask

    def forward(self, input_ids, attention_mask=None):
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask,
                      use_cache=True, return_dict=False)
        logits, cache = out[0], out[1]
        flat = [t for layer in cache for t in layer]
        return (logits, *flat)


def perturb_norms(model, gen):
    """LayerNorm/RMSNorm gains and biases away from 1 and 0, so that their
    gradients are not special values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))


MODELS = {
    # name: (builder, {export: graph inputs}, losses); the first export is
    # the main one.
    "gpt2": (gpt2_model, {"gpt2": ["input_ids", "attention_mask"]},
             {"ce": ("cross_entropy", -100), "mse": ("mse", None)}),
    "llama": (llama_model, {"llama": ["input_ids"],
                            "llama_mask": ["input_ids", "attention_mask"]},
              {"ce": ("cross_entropy", -1)}),
}


def golden_batch(inputs, ignore):
    gen = torch.Generator().manual_seed(1234)
    batch = {"input_ids": torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen)}
    if "attention_mask" in inputs:
        # Right padding: row r hides its last r keys from every query.
        mask = torch.ones(GOLDEN_BATCH, SEQ, dtype=torch.int64)
        for row in range(GOLDEN_BATCH):
            mask[row, SEQ - row:] = 0
        batch["attention_mask"] = mask
    targets = torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen)
    for row in range(GOLDEN_BATCH):
        cols = torch.randperm(SEQ, generator=gen)[:IGNORED_PER_ROW]
        targets[row, cols] = ignore
    batch["targets"] = targets
    batch["logit_targets"] = torch.randn(GOLDEN_BATCH, SEQ, VOCAB, generator=gen)
    return batch


def histogram(proto):
    counts = collections.Counter(n.op_type for n in proto.graph.node)
    return ", ".join(f"{op} {c}" for op, c in sorted(counts.items()))


def map_initializers(proto, model):
    """ONNX initializer name -> ('param'|'buffer', torch name), by name, else by value."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    mapping = {}
    for init in proto.graph.initializer:
        if init.name in params:
            mapping[init.name] = ("param", init.name)
            continue
        if init.name in buffers:
            mapping[init.name] = ("buffer", init.name)
            continue
        value = numpy_helper.to_array(init)
        hits = [("param", n) for n, p in params.items()
                if tuple(p.shape) == value.shape and np.array_equal(p.detach().numpy(), value)]
        hits += [("buffer", n) for n, b in buffers.items()
                 if tuple(b.shape) == value.shape and np.array_equal(b.numpy(), value)]
        if len(hits) != 1:
            sys.exit(f"cannot map ONNX initializer {init.name!r} {list(value.shape)}: {hits}")
        mapping[init.name] = hits[0]
    return mapping


def compute_loss(kind, ignore, logits, batch):
    if kind == "cross_entropy":
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               batch["targets"].reshape(-1), ignore_index=ignore)
    return F.mse_loss(logits, batch["logit_targets"].to(logits.dtype))


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def generate(name):
    builder, exports, losses = MODELS[name]
    out = os.path.join(HERE, f"hf-{name}")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    lm = builder()
    perturb_norms(lm, torch.Generator().manual_seed(1))
    model = Logits(lm, False)
    model.train()
    ignore = next(i for k, i in losses.values() if k == "cross_entropy")
    all_inputs = [i for inputs in exports.values() for i in inputs]
    batch = golden_batch(all_inputs, ignore)

    feed = {i: batch[i].numpy() for i in dict.fromkeys(all_inputs)}
    for kind, _ in losses.values():
        feed["targets" if kind == "cross_entropy" else "logit_targets"] = (
            batch["targets" if kind == "cross_entropy" else "logit_targets"].numpy())
    st_io.write(os.path.join(out, "batch.safetensors"), feed)
    for export_name, inputs in exports.items():
        prefix = "" if export_name == name else export_name[len(name) + 1:] + "_"
        export(model, lm, out, export_name, inputs, batch, losses, prefix)
    print("  wrote", ", ".join(f"{f} ({os.path.getsize(os.path.join(out, f))} B)"
                              for f in sorted(os.listdir(out))))


def export(model, lm, out, export_name, inputs, batch, losses, prefix):
    """Exports `model` taking `inputs` to OUT/EXPORT_NAME.onnx and writes the
    golden gradients of every loss (grads_PREFIX<loss>.safetensors), and for
    the main export (no prefix) torch's BF16 autocast error."""
    args = tuple(batch[i] for i in inputs)
    path = os.path.join(out, f"{export_name}.onnx")
    layers = lm.config.num_hidden_layers
    outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    dynamic = {i: {0: "batch"} for i in inputs}
    dynamic.update({o: {0: "batch"} for o in outputs})
    torch.onnx.export(model, args, path, input_names=inputs, output_names=outputs,
                      dynamic_axes=dynamic, opset_version=OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"== {export_name} ({transformers.__version__}, opset {OPSET}): {nparams} parameters, "
          f"{len(proto.graph.node)} nodes")
    print("ops:", histogram(proto))
    mapping = map_initializers(proto, model)
    for onnx_name, (kind, torch_name) in mapping.items():
        shown = onnx_name if onnx_name == torch_name else f"{onnx_name} <- {torch_name}"
        print(f"  init {kind:6} {shown}")

    for tag, (kind, ign) in losses.items():
        ref = copy.deepcopy(model).double()
        logits = ref(*args)[0]
        loss = compute_loss(kind, ign, logits, batch)
        loss.backward()
        ref_params = dict(ref.named_parameters())
        golden = {"loss": np.array(loss.item(), dtype=np.float64)}
        for onnx_name, (k, torch_name) in mapping.items():
            if k == "param":
                golden["grad/" + onnx_name] = ref_params[torch_name].grad.numpy().astype(np.float64)
        st_io.write(os.path.join(out, f"grads_{prefix}{tag}.safetensors"), golden)
        with torch.no_grad():
            loss32 = compute_loss(kind, ign, model(*args)[0], batch).item()
        print(f"  {tag}: loss float64 {loss.item():.12f} float32 {loss32:.8f}")
        if prefix:
            continue

        # torch's own BF16 autocast against float64: the bound of the BF16 tests.
        auto = copy.deepcopy(model)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            aloss = compute_loss(kind, ign, auto(*args)[0], batch)
        aloss.float().backward()
        aparams = dict(auto.named_parameters())
        errors = {"loss": rel_err(aloss.item(), golden["loss"])}
        for g in golden:
            if g.startswith("grad/"):
                torch_name = mapping[g[len("grad/"):]][1]
                errors[g] = rel_err(aparams[torch_name].grad.numpy(), golden[g])
        grad_errors = [e for n, e in errors.items() if n != "loss"]
        record = {
            "what": "relative error ||autocast - float64|| / ||float64|| of torch "
                    f"{torch.__version__} BF16 autocast (cpu) on the golden model and batch",
            "max_grad_rel_err": max(grad_errors),
            "median_grad_rel_err": float(np.median(grad_errors)),
            "loss_rel_err": errors["loss"],
            "per_tensor": errors,
        }
        with open(os.path.join(out, f"bf16_autocast_error_{tag}.json"), "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"  {tag}: autocast max grad rel err {record['max_grad_rel_err']:.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=sorted(MODELS), choices=sorted(MODELS))
    args = ap.parse_args()
    for name in args.models:
        generate(name)


if __name__ == "__main__":
    main()
