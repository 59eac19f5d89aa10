#!/usr/bin/env python3
"""Exports a Hugging Face model at the size people train, along README's
"Bring your model" recipe, for the compile-time benchmarks and the checks of
the user's path at real size (a dev-time script: it needs PyPI's torch,
transformers and onnxscript, which CI does not have; nothing is downloaded:
the model is built from a config with random weights, seeded).

    make_hf_onnx.py OUT.onnx --model gpt2-124m|llama-1b|qwen3-0.6b|gemma2-2b|gemma3-1b|
                                     gpt-oss-20b|pythia-160m|gptj-160m|modernbert-base|
                                     bert-base|phi3-mini|vit-base|clip-vit-b16|bart-base|
                                     t5-base|whisper-base|tiny-gpt2|tiny-llama
                    [--seq T] [--layers N] [--set KEY=VALUE ...]
                    [--exporter dynamo|torchscript] [--state-dict SD]

The model is wrapped as README shows (`Logits`: `self.model` holds the
Hugging Face model, forward(input_ids, attention_mask) returns the logits;
an image classifier's forward(pixel_values), an encoder-decoder's
forward(input_ids, decoder_input_ids) and Whisper's forward(input_features,
decoder_input_ids), as test/e2e/hf-encdec's goldens), exported with a
dynamic batch (dynamo: optimize=False unless --optimize, as
README's recipe), and saved with its weights as external data
(OUT.onnx.data, dense: 500 MB at GPT-2 124M, 5 GB at Llama 1B). --state-dict
also writes the Hugging Face model's state dict (safetensors), the reference
otc-export --reference takes. Versions used: torch 2.15.0, transformers
5.24.0, onnxscript 0.7.2 (printed; other versions may export other graphs).
"""
import argparse
import inspect
import time

import torch
import transformers

CONFIGS = {
    # GPT-2 124M: vocabulary 50,257, 1024 positions.
    "gpt2-124m": ("GPT2LMHeadModel", "GPT2Config",
                  dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024)),
    # Llama 3.2 1B's shape.
    "llama-1b": ("LlamaForCausalLM", "LlamaConfig",
                 dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      max_position_embeddings=131072, rope_theta=500000.0,
                      tie_word_embeddings=True)),
    # Qwen3 0.6B's shape.
    "qwen3-0.6b": ("Qwen3ForCausalLM", "Qwen3Config",
                   dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                        vocab_size=151936, max_position_embeddings=40960,
                        tie_word_embeddings=True)),
    # Gemma 2 2B's shape: attention logits soft-capped at 50 (the final ones
    # at 30), a 4096-key sliding window on alternate layers, head size 256.
    "gemma2-2b": ("Gemma2ForCausalLM", "Gemma2Config",
                  dict(hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                       num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                       vocab_size=256000, max_position_embeddings=8192,
                       sliding_window=4096, attn_logit_softcapping=50.0,
                       final_logit_softcapping=30.0, query_pre_attn_scalar=256)),
    # Gemma 3 1B's shape: a 512-key sliding window on five layers of six
    # (the config's default layer_types), RoPE base 1e6 on the full layers
    # and 1e4 on the local ones, q/k norms, one key/value head of 256.
    "gemma3-1b": ("Gemma3ForCausalLM", "Gemma3TextConfig",
                  dict(hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                       num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                       vocab_size=262144, max_position_embeddings=32768,
                       sliding_window=512, query_pre_attn_scalar=256,
                       rope_parameters={
                           "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                           "sliding_attention": {"rope_type": "default",
                                                 "rope_theta": 10000.0}},
                       tie_word_embeddings=True)),
    # Pythia 160M's shape (GPT-NeoX): partial rotary, 16 of a head's 64
    # features (rotary_pct 0.25), fused q/k/v, parallel attention and MLP.
    "pythia-160m": ("GPTNeoXForCausalLM", "GPTNeoXConfig",
                    dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                         num_attention_heads=12, vocab_size=50304,
                         max_position_embeddings=2048, rotary_pct=0.25,
                         tie_word_embeddings=False)),
    # GPT-J's form at Pythia 160M's size: interleaved partial rotary (16 of
    # 64 features).
    "gptj-160m": ("GPTJForCausalLM", "GPTJConfig",
                  dict(n_embd=768, n_layer=12, n_head=12, n_inner=3072, vocab_size=50304,
                       n_positions=2048, rotary_dim=16, tie_word_embeddings=False)),
    # GPT-OSS 20B's shape: attention sinks, a 128-key sliding window on
    # alternate layers, 32 experts (top 4) with clamped SwiGLU, YaRN RoPE
    # (the config's default). --layers and --set num_local_experts=N make
    # a part of it that fits a smaller machine.
    "gpt-oss-20b": ("GptOssForCausalLM", "GptOssConfig",
                    dict(hidden_size=2880, intermediate_size=2880, num_hidden_layers=24,
                         num_attention_heads=64, num_key_value_heads=8, head_dim=64,
                         vocab_size=201088, num_local_experts=32, num_experts_per_tok=4,
                         sliding_window=128, max_position_embeddings=131072)),
    # ModernBERT-base's shape (an encoder, masked LM head): every third
    # layer global, the others local, a bidirectional sliding window
    # (|i - j| <= 64: local_attention 128).
    "modernbert-base": ("ModernBertForMaskedLM", "ModernBertConfig",
                        dict(hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                             num_attention_heads=12, vocab_size=50368,
                             max_position_embeddings=8192, global_attn_every_n_layers=3,
                             local_attention=128, pad_token_id=None)),
    # BERT-base's shape (uncased: vocabulary 30,522): the classic encoder,
    # post-norm, absolute positions, full attention, a masked LM head.
    "bert-base": ("BertForMaskedLM", "BertConfig",
                  dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                       num_attention_heads=12, vocab_size=30522,
                       max_position_embeddings=512)),
    # Phi-3-mini's shape: fused q/k/v and gate/up projections (one GEMM
    # each, sliced after), 32 heads of 96, vocabulary 32,064. 3.8 B
    # parameters: --layers makes a part of it for a smaller machine.
    "phi3-mini": ("Phi3ForCausalLM", "Phi3Config",
                  dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
                       max_position_embeddings=4096, pad_token_id=None,
                       tie_word_embeddings=False)),
    # ViT-B/16 at 224 x 224 (ImageNet's 1,000 classes): a Conv patch
    # embedding, a class token, learned positions, bidirectional attention.
    "vit-base": ("ViTForImageClassification", "ViTConfig",
                 dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                      num_attention_heads=12, image_size=224, patch_size=16,
                      num_labels=1000)),
    # CLIP ViT-B/16's vision tower (pre-norm, QuickGELU) under
    # CLIPForImageClassification; the text tower is built, not exported.
    "clip-vit-b16": ("CLIPForImageClassification", "CLIPConfig",
                     dict(vision_config=dict(hidden_size=768, intermediate_size=3072,
                                             num_hidden_layers=12, num_attention_heads=12,
                                             image_size=224, patch_size=16),
                          text_config=dict(hidden_size=512, intermediate_size=2048,
                                           num_hidden_layers=12, num_attention_heads=8),
                          num_labels=1000)),
    # BART-base: 6 + 6 layers of 768, cross-attention, tied embeddings.
    "bart-base": ("BartForConditionalGeneration", "BartConfig",
                  dict(d_model=768, encoder_layers=6, decoder_layers=6,
                       encoder_attention_heads=12, decoder_attention_heads=12,
                       encoder_ffn_dim=3072, decoder_ffn_dim=3072, vocab_size=50265,
                       max_position_embeddings=1024)),
    # T5-base (v1.0): 12 + 12 layers of 768, relative position buckets,
    # RMS norms; exported by the TorchScript exporter (the dynamo export
    # fails inside torch on T5's attention reshape).
    "t5-base": ("T5ForConditionalGeneration", "T5Config",
                dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12,
                     vocab_size=32128)),
    # Whisper-base: 80 mel bins, 3,000 frames (30 s) through two Conv1d,
    # 6 + 6 layers of 512, decoder tokens up to 448.
    "whisper-base": ("WhisperForConditionalGeneration", "WhisperConfig",
                     dict(d_model=512, encoder_layers=6, decoder_layers=6,
                          encoder_attention_heads=8, decoder_attention_heads=8,
                          encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=51865,
                          num_mel_bins=80, max_source_positions=1500,
                          max_target_positions=448)),
    # A small GPT-2 (tied embedding, Conv1D biases) for quick checks.
    "tiny-gpt2": ("GPT2LMHeadModel", "GPT2Config",
                  dict(n_layer=2, n_embd=64, n_head=4, n_positions=1024, vocab_size=256)),
    # A small Llama for quick checks of the same path.
    "tiny-llama": ("LlamaForCausalLM", "LlamaConfig",
                   dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                        max_position_embeddings=4096)),
}


def parse_sets(sets):
    """KEY=VALUE strings as config overrides (ints and floats parsed)."""
    out = {}
    for item in sets or []:
        key, _, value = item.partition("=")
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                pass
        out[key] = value
    return out


def build_config(model, layers=None, sets=None, experts="batched_mm"):
    """The model's config: CONFIGS[model] with `layers` layers and the
    `sets` overrides, eager attention, and for a mixture of experts the
    experts' implementation `experts` (batched_mm exports; the default
    grouped_mm does not)."""
    cls_name, cfg_name, kwargs = CONFIGS[model]
    if layers:
        if "num_layers" in kwargs:  # T5: encoder and decoder
            kwargs = dict(kwargs, num_layers=layers)
        elif "encoder_layers" in kwargs:
            kwargs = dict(kwargs, encoder_layers=layers, decoder_layers=layers)
        elif "vision_config" in kwargs:
            kwargs = dict(kwargs, vision_config=dict(kwargs["vision_config"],
                                                     num_hidden_layers=layers))
        else:
            key = "n_layer" if "n_layer" in kwargs else "num_hidden_layers"
            kwargs = dict(kwargs, **{key: layers})
    kwargs = dict(kwargs, **parse_sets(sets))
    config = getattr(transformers, cfg_name)(**kwargs)
    config._attn_implementation = "eager"
    if "num_local_experts" in kwargs:
        config._experts_implementation = experts
    return cls_name, config


def kind(cls_name):
    """What the model reads: "tokens" (input_ids, attention_mask), "image"
    (pixel_values), "seq2seq" (input_ids, decoder_input_ids) or "speech"
    (input_features, decoder_input_ids)."""
    if cls_name.endswith("ForImageClassification"):
        return "image"
    if cls_name.startswith("Whisper"):
        return "speech"
    if cls_name.endswith("ForConditionalGeneration"):
        return "seq2seq"
    return "tokens"


def vocab_size(config):
    """The number of classes the logits hold (an image classifier's labels)."""
    return getattr(config, "vocab_size", None) or config.num_labels


def example_inputs(cls_name, config, batch, seq, generator=None):
    """The wrapper's inputs, in order: random tokens, images or mel
    features (seq: the tokens of the encoder and of the decoder)."""
    k = kind(cls_name)
    g = dict(generator=generator) if generator is not None else {}
    if k == "image":
        size = getattr(config, "vision_config", config).image_size
        return {"pixel_values": torch.randn(batch, 3, size, size, **g)}
    tokens = lambda: torch.randint(0, config.vocab_size, (batch, seq), **g)  # noqa: E731
    if k == "speech":
        return {"input_features": torch.randn(batch, config.num_mel_bins,
                                              2 * config.max_source_positions, **g),
                "decoder_input_ids": tokens()}
    if k == "seq2seq":
        return {"input_ids": tokens(), "decoder_input_ids": tokens()}
    return {"input_ids": tokens(), "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def wrap(model, cls_name):
    """README's wrapper for the model's kind (Logits for a language model)."""
    return {"image": Image, "speech": Speech, "seq2seq": Seq2Seq,
            "tokens": Logits}[kind(cls_name)](model)


class Image(torch.nn.Module):
    """An image classifier: pixel_values -> logits [batch, classes]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder: the decoder's logits [batch, T, vocabulary]."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                          use_cache=False).logits


class Speech(torch.nn.Module):
    """Whisper: mel features and the decoder's tokens -> its logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features, decoder_input_ids):
        return self.model(input_features=input_features,
                          decoder_input_ids=decoder_input_ids, use_cache=False).logits


class Logits(torch.nn.Module):
    """README's wrapper: the graph ends at the logits."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        # An encoder (ModernBERT) has no cache to turn off.
        takes_cache = "use_cache" in inspect.signature(type(self.model).forward).parameters
        kw = {"use_cache": False} if takes_cache else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **kw).logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", choices=sorted(CONFIGS), default="gpt2-124m")
    ap.add_argument("--seq", type=int, default=None, help="example sequence (default: 1024, "
                    "2048 for Llama)")
    ap.add_argument("--batch", type=int, default=2, help="example batch (dynamic in the export)")
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo")
    ap.add_argument("--state-dict", help="also write the model's state dict here")
    ap.add_argument("--optimize", action="store_true",
                    help="the dynamo exporter's optimizer on (its default; it drops zero "
                         "biases): README's recipe exports with optimize=False")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=None,
                    help="fewer layers than the model's (its width, heads and "
                         "vocabulary kept)")
    ap.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="a config value (repeatable): num_local_experts=4, vocab_size=32768")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    seq = a.seq or (2048 if "llama" in a.model or "qwen" in a.model else
                    448 if "whisper" in a.model else 1024)
    cls_name, config = build_config(a.model, a.layers, a.set)
    torch.manual_seed(a.seed)
    model = getattr(transformers, cls_name)(config).eval()
    n = sum(p.numel() for p in model.parameters())
    print(f"{a.model}: {n / 1e6:.1f}M parameters, sequence {seq}")
    if a.state_dict:
        from safetensors.torch import save_file
        save_file({k: v.contiguous().clone() for k, v in model.state_dict().items()}, a.state_dict)
    wrapped = wrap(model, cls_name).eval()
    inputs = example_inputs(cls_name, config, a.batch, seq)
    names = list(inputs)
    exporter = a.exporter
    if cls_name.startswith("T5") and exporter == "dynamo":
        print("T5: the TorchScript exporter (the dynamo export fails inside torch)")
        exporter = "torchscript"
    t0 = time.time()
    if exporter == "dynamo":
        batch = torch.export.Dim("batch")
        torch.onnx.export(wrapped, tuple(inputs.values()), a.out, dynamo=True,
                          optimize=a.optimize, input_names=names, output_names=["logits"],
                          dynamic_shapes={n: {0: batch} for n in names},
                          external_data=True)
    else:
        torch.onnx.export(wrapped, tuple(inputs.values()), a.out, dynamo=False,
                          input_names=names, output_names=["logits"],
                          dynamic_axes={n: {0: "batch"} for n in names})
    print(f"exported {a.out} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
