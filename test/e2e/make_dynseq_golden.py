#!/usr/bin/env python3
"""Generates test/e2e/hf-dynseq/: a tiny Hugging Face Llama (transformers
5.x) exported by README's recipe with a dynamic sequence dimension as well as
a dynamic batch (dynamo, optimize=False, the Logits wrapper, inputs
input_ids and attention_mask), and float64 reference gradients at sequence
48 that otc reaches by binding it: `otc-compile --dim seq=48`. Its rotary
table and masks then depend on a bound dimension, not on constants of the
export (test/e2e/hf-dynseq-gradients.test).

Dev-time: PyPI's torch 2.15.0, transformers 5.24.0, onnxscript 0.7.2
(the versions this was generated with); nothing is downloaded. Writes
model.onnx (weights inlined), batch.safetensors (input_ids, attention_mask of
ones, targets [2, 48] int64) and grads.safetensors (`loss` and
grad/<initializer name>: the mean cross-entropy of the logits against the
targets, computed by torch from a .double() copy of the same weights).

    make_dynseq_golden.py [OUTDIR]
"""
import os
import sys

import onnx
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from make_hf_onnx import Logits  # noqa: E402  README's wrapper
sys.path.insert(0, HERE)
from hf_export import golden_grads, save_inline  # noqa: E402

SEQ, BATCH, VOCAB = 48, 2, 96


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "hf-dynseq")
    os.makedirs(out, exist_ok=True)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=256)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # norm gains: not all ones, so no merge
                p.add_(0.1 * torch.randn_like(p))
    wrapped = Logits(model).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    path = os.path.join(out, "model.onnx")
    batch_dim, seq_dim = torch.export.Dim("batch"), torch.export.Dim("seq", max=256)
    torch.onnx.export(wrapped, (ids[:, :32], mask[:, :32]), path, dynamo=True,
                      optimize=False, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_shapes={"input_ids": {0: batch_dim, 1: seq_dim},
                                      "attention_mask": {0: batch_dim, 1: seq_dim}})
    save_inline(path)
    save_file({"input_ids": ids, "attention_mask": mask, "targets": targets},
              os.path.join(out, "batch.safetensors"))
    double = Logits(model).double()
    logits = double(ids, mask)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    grads = golden_grads(double, loss)
    save_file(grads, os.path.join(out, "grads.safetensors"))
    print(f"wrote {out}: loss {loss.item():.6f}, {len(grads) - 1} gradients "
          f"(torch {torch.__version__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
