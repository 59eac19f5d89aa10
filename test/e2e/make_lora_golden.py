#!/usr/bin/env python3
"""Generates test/e2e/hf-lora/: a tiny Hugging Face Llama wrapped by peft's
LoRA (r 4, alpha 8, on q_proj and v_proj; lora_B drawn from N(0, 0.1^2), not
peft's zeros, so that its values tell), exported by README's recipe (dynamo,
optimize=False, the Logits wrapper), and what peft itself writes for it:
adapter_model.safetensors and adapter_config.json (peft_model.save_pretrained)
(test/e2e/lora-adapter.test). Also batch.safetensors (input_ids,
attention_mask, targets [4, 16]) for training; lora_ts_same.onnx: that
model exported by the TorchScript exporter; and lora_ts.onnx: the same
architecture with peft's own initialization (lora_B zeros) exported by the
TorchScript exporter, with the adapter peft saves for it
(adapter_ts.safetensors). TorchScript's scopes drop peft's LoraModel level
and its lora_A / lora_B ModuleDicts, and the exporter merges the equal zero
lora_B weights into shared initializers (lora-ts-names.test).

Dev-time: PyPI's torch 2.15.0, transformers 5.24.0, onnxscript 0.7.2 and
peft 0.21.2 (the versions this was generated with); nothing is downloaded.

The round trip this enables was checked when it was generated: the export
trained 20 steps by otc (--freeze on the base model's names), its adapter
written by `otc-export --peft-adapter` and loaded by
PeftModel.from_pretrained gave PyTorch the loss otc computed with the
trained checkpoint (4.455603 both).

    make_lora_golden.py [OUTDIR]
"""
import os
import shutil
import sys

import peft
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from make_hf_onnx import Logits  # noqa: E402  README's wrapper
sys.path.insert(0, HERE)
from hf_export import save_inline  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "hf-lora")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=96,
                                      max_position_embeddings=64)
    config._attn_implementation = "eager"
    base = transformers.LlamaForCausalLM(config).eval()
    model = peft.get_peft_model(base, peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    saved = os.path.join(out, "peft")
    model.save_pretrained(saved)
    for f in ("adapter_model.safetensors", "adapter_config.json"):
        shutil.move(os.path.join(saved, f), os.path.join(out, f))
    shutil.rmtree(saved)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 96, (4, 16), generator=g)
    mask = torch.ones(4, 16, dtype=torch.int64)
    save_file({"input_ids": ids, "attention_mask": mask,
               "targets": torch.randint(0, 96, (4, 16), generator=g)},
              os.path.join(out, "batch.safetensors"))
    path = os.path.join(out, "lora.onnx")
    batch = torch.export.Dim("batch")
    torch.onnx.export(Logits(model).eval(), (ids, mask), path, dynamo=True,
                      optimize=False, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_shapes={"input_ids": {0: batch}, "attention_mask": {0: batch}})
    save_inline(path)
    torch.onnx.export(Logits(model).eval(), (ids, mask),
                      os.path.join(out, "lora_ts_same.onnx"), dynamo=False,
                      opset_version=17, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})
    torchscript_export(config, ids, mask, out)
    print(f"wrote {out} (torch {torch.__version__}, transformers "
          f"{transformers.__version__}, peft {peft.__version__})")


def torchscript_export(config, ids, mask, out):
    """The model as peft initializes it (lora_B zeros), by TorchScript, and
    the adapter peft saves for it."""
    torch.manual_seed(1)
    base = transformers.LlamaForCausalLM(config).eval()
    model = peft.get_peft_model(base, peft.LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    saved = os.path.join(out, "peft_ts")
    model.save_pretrained(saved)
    shutil.move(os.path.join(saved, "adapter_model.safetensors"),
                os.path.join(out, "adapter_ts.safetensors"))
    shutil.rmtree(saved)
    path = os.path.join(out, "lora_ts.onnx")
    torch.onnx.export(Logits(model).eval(), (ids, mask), path, dynamo=False,
                      opset_version=17, input_names=["input_ids", "attention_mask"],
                      output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})


if __name__ == "__main__":
    main()
