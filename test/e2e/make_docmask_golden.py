#!/usr/bin/env python3
"""Generates test/e2e/hf-docmask/: a tiny Hugging Face Llama (transformers
5.x) exported with a 4-D attention mask input ([batch, 1, T, T], what
packed pre-training with documents that must not see each other needs), a
token shard whose documents start with a separator token, and PyTorch's
float64 losses of the first step's windows with and without masks that stop
attention at document boundaries (test/e2e/doc-mask.test).

Two exports of the same model: `model_float.onnx` with eager attention and
an additive float mask (0 where a query sees a key, the float32 minimum
where not: Hugging Face's convention) and `model_bool.onnx` with SDPA
attention and a boolean mask (true where a query sees a key). Dev-time:
PyPI's torch 2.15.0, transformers 5.24.0, onnxscript 0.7.2 (the versions
this was generated with); nothing is downloaded. Writes the models (weights
inlined), tokens.bin (a shard whose header records the separator, as
otc-data --tokenizer writes it) and losses.json.

The document-masked loss is checked here against a second computation:
every document of a window run as a sequence of its own (rotary positions
are relative, so a document's logits do not depend on where it starts).

    make_docmask_golden.py [OUTDIR]
"""
import json
import os
import struct
import sys

import onnx
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from make_hf_onnx import Logits  # noqa: E402  README's wrapper
sys.path.insert(0, HERE)
from hf_export import save_inline  # noqa: E402

T, BATCH, VOCAB, SEP = 16, 2, 64, 1


def doc_mask(window):
    """[T, T] bool: query q sees key k when k <= q and both lie in the same
    document (a document starts at each separator token)."""
    doc = torch.cumsum((window == SEP).long(), 0)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return causal & (doc[:, None] == doc[None, :])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "hf-docmask")
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(2)
    # Documents of 3 to 9 tokens, each starting with the separator.
    tokens = []
    while len(tokens) < 4 * T + 1:
        n = int(torch.randint(3, 10, (1,), generator=g))
        tokens += [SEP] + torch.randint(2, VOCAB, (n - 1,), generator=g).tolist()
    tokens = tokens[:4 * T + 1]
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(tokens), SEP + 1, *([0] * 252)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    t = torch.tensor(tokens)
    # The first step at micro-batch 2: windows 0 and 1 (T + 1 tokens, stride T).
    ids = torch.stack([t[w * T:w * T + T] for w in range(BATCH)])
    targets = torch.stack([t[w * T + 1:w * T + T + 1] for w in range(BATCH)])
    docs = torch.stack([doc_mask(row) for row in ids])[:, None]
    causal = torch.ones(BATCH, 1, T, T, dtype=torch.bool).tril()

    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=256,
                                      initializer_range=0.3)  # attention that matters
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    losses = {}
    for kind, attn in (("float", "eager"), ("bool", "sdpa")):
        model.config._attn_implementation = attn
        wrapped = Logits(model).eval()
        example = causal if kind == "bool" else additive(causal, torch.float32)
        path = os.path.join(out, f"model_{kind}.onnx")
        batch_dim = torch.export.Dim("batch")
        torch.onnx.export(wrapped, (ids, example), path, dynamo=True, optimize=False,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["logits"],
                          dynamic_shapes={"input_ids": {0: batch_dim},
                                          "attention_mask": {0: batch_dim}})
        save_inline(path)
        double = Logits(model).double()
        for name, mask in (("doc", docs), ("causal", causal)):
            feed = mask if kind == "bool" else additive(mask, torch.float64)
            with torch.no_grad():
                logits = double(ids, feed)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                     targets.reshape(-1))
            losses[f"{kind}_{name}"] = loss.item()
    # The document-masked loss again: each document as a sequence of its own
    # (the same within the float32 rotary tables' rounding).
    model.config._attn_implementation = "eager"
    double = model.double()
    total = 0.0
    with torch.no_grad():
        for b in range(BATCH):
            doc = torch.cumsum((ids[b] == SEP).long(), 0)
            for d in doc.unique():
                at = (doc == d).nonzero().flatten()
                logits = double(input_ids=ids[b, at][None], use_cache=False).logits[0]
                total += torch.nn.functional.cross_entropy(
                    logits, targets[b, at], reduction="sum").item()
    split = total / (BATCH * T)
    for kind in ("float", "bool"):
        assert abs(losses[f"{kind}_doc"] - split) < 1e-6, (losses, split)
    assert abs(losses["float_doc"] - losses["float_causal"]) > 1e-3, losses
    losses["documents_one_by_one"] = split
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump(losses, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {out}: {losses} (torch {torch.__version__}, "
          f"transformers {transformers.__version__})")


def additive(mask, dtype):
    """Hugging Face's additive form of a boolean mask."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(
        ~mask, torch.finfo(torch.float32).min)


if __name__ == "__main__":
    main()
