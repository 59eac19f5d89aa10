#!/usr/bin/env python3
"""Generates test/e2e/hf-encdec/: tiny vision and encoder-decoder models of
Hugging Face transformers 5.x, exported as a user would, and float64
reference gradients (test/e2e/hf-encdec-gradients.test):

  vit    ViTForImageClassification (a Conv patch embedding, a class token,
         learned positions, bidirectional attention): pixel_values -> logits
  clip   CLIPForImageClassification's vision tower (pre-norm, QuickGELU)
  bart   BartForConditionalGeneration: input_ids, decoder_input_ids -> logits
         (cross-attention, tied embeddings)
  t5     T5ForConditionalGeneration (relative position buckets through Abs,
         Log and Min; RMS norms), exported by the TorchScript exporter: the
         dynamo exporter fails inside torch on T5's attention reshape
  whisper WhisperForConditionalGeneration: input_features (8 mel bins, 32
         frames) through two Conv1d (the second of stride 2) and sinusoidal
         positions, decoder_input_ids -> logits
  t5_eager T5 built with eager attention (t5 is SDPA's: the attribute set
         after construction leaves T5 on SDPA): the decoder adds its
         relative bias to the scores, then the causal mask
  bart_ts BART exported by the TorchScript exporter, which writes the
         buffer final_logits_bias as a folded `onnx::Add_N` (no gradient
         in PyTorch: none in the golden)

    make_encdec_goldens.py [OUT_DIR [NAME...]]   (NAMEs: only those written)

The dynamo exports use README's recipe (optimize=False, a dynamic batch).
Dev-time: PyPI's torch 2.15.0, transformers 5.24.0, onnxscript 0.7.2 (the
versions this was generated with); nothing is downloaded. Writes NAME.onnx
(weights inlined), NAME_batch.safetensors (the inputs and `targets`) and
NAME_grads.safetensors (`loss` and grad/<parameter name>: the mean
cross-entropy of the logits against the targets, computed by torch from a
.double() copy of the same weights). The TorchScript exporter writes some
weights as transposed copies (`onnx::MatMul_N`), and a tied weight may
take another of its names: their gradients are written under the
initializer's name (transposed for a copy), found by comparing values. The
token ids avoid the padding token, whose embedding row PyTorch leaves
without a gradient (padding_idx: nothing in the ONNX graph says so).

    make_encdec_goldens.py [OUTDIR]
"""
import os
import sys

import onnx
import onnx.numpy_helper
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hf_export import golden_grads, save_inline  # noqa: E402
VOCAB, SEQ, BATCH, CLASSES = 96, 12, 2, 5


class Image(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


class Speech(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features, decoder_input_ids):
        return self.model(input_features=input_features,
                          decoder_input_ids=decoder_input_ids, use_cache=False).logits


class Seq2Seq(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids,
                          use_cache=False).logits


def models():
    small = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    vit = transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=32, image_size=16, patch_size=4, num_labels=CLASSES, **small))
    clip = transformers.CLIPForImageClassification(transformers.CLIPConfig(
        vision_config=dict(hidden_size=32, image_size=16, patch_size=4, **small),
        text_config=dict(hidden_size=32, **small), num_labels=CLASSES))
    bart = transformers.BartForConditionalGeneration(transformers.BartConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        vocab_size=VOCAB, max_position_embeddings=64))
    t5 = transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=VOCAB,
        relative_attention_num_buckets=8, relative_attention_max_distance=16))
    whisper = transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        vocab_size=VOCAB, num_mel_bins=8, max_source_positions=16,
        max_target_positions=32, pad_token_id=1, bos_token_id=2, eos_token_id=3,
        decoder_start_token_id=2))
    # T5 again, built with eager attention (the attribute set after
    # construction, as the loop below does, leaves T5 on SDPA): its decoder
    # adds the relative bias to the scores, then the causal mask. Its own
    # seed, so the others' weights are what they were without it.
    with torch.random.fork_rng():
        torch.manual_seed(5)
        t5_eager = transformers.T5ForConditionalGeneration(transformers.T5Config(
            d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            vocab_size=VOCAB, relative_attention_num_buckets=8,
            relative_attention_max_distance=16, attn_implementation="eager"))
    # BART for the TorchScript exporter, its own seed too.
    with torch.random.fork_rng():
        torch.manual_seed(7)
        bart_ts = transformers.BartForConditionalGeneration(transformers.BartConfig(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
            vocab_size=VOCAB, max_position_embeddings=64))
    return {"vit": (vit, True), "clip": (clip, True), "bart": (bart, False),
            "t5": (t5, False), "whisper": (whisper, False),
            "t5_eager": (t5_eager, False), "bart_ts": (bart_ts, False)}


def main():
    # hf-encdec [NAME...]: only those written (every model is still built and
    # run in order, so each one's inputs are the same either way).
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "hf-encdec")
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    built = models()
    g = torch.Generator().manual_seed(3)
    for name, (model, image) in built.items():
        model.config._attn_implementation = "eager"
        model.eval()
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 1:  # norm gains and biases: not the defaults
                    p.add_(0.1 * torch.randn_like(p))
        if image:
            wrapped = Image(model).eval()
            inputs = {"pixel_values": torch.randn(BATCH, 3, 16, 16, generator=g)}
            targets = torch.randint(0, CLASSES, (BATCH,), generator=g)
        elif name == "whisper":
            wrapped = Speech(model).eval()
            inputs = {"input_features": torch.randn(BATCH, 8, 32, generator=g),
                      "decoder_input_ids": torch.randint(2, VOCAB, (BATCH, SEQ), generator=g)}
            targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        else:
            wrapped = Seq2Seq(model).eval()
            # No padding token (BART's 1, T5's 0): PyTorch's embedding gives
            # its row no gradient (padding_idx), which the ONNX graph does
            # not say.
            inputs = {"input_ids": torch.randint(2, VOCAB, (BATCH, SEQ), generator=g),
                      "decoder_input_ids": torch.randint(2, VOCAB, (BATCH, SEQ), generator=g)}
            targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        if only and name not in only:
            continue
        path = os.path.join(out, name + ".onnx")
        args = tuple(inputs.values())
        names = list(inputs)
        if name.startswith("t5") or name.endswith("_ts"):
            torch.onnx.export(wrapped, args, path, dynamo=False, input_names=names,
                              output_names=["logits"],
                              dynamic_axes={n: {0: "batch"} for n in names})
        else:
            batch = torch.export.Dim("batch")
            torch.onnx.export(wrapped, args, path, dynamo=True, optimize=False,
                              input_names=names, output_names=["logits"],
                              dynamic_shapes={n: {0: batch} for n in names})
        m = save_inline(path)
        save_file(dict(inputs, targets=targets), os.path.join(out, name + "_batch.safetensors"))
        double = wrapped.double()
        feed = [v.double() if v.is_floating_point() else v for v in args]
        logits = double(*feed)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1))
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
        grads = golden_grads(double, loss, inits)
        save_file(grads, os.path.join(out, name + "_grads.safetensors"))
        print(f"wrote {path}: loss {loss.item():.6f}, {len(grads) - 1} gradients "
              f"(torch {torch.__version__}, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
