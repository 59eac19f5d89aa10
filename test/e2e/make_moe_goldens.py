#!/usr/bin/env python3
"""Generates test/e2e/hf-moe/: tiny mixture-of-experts models of Hugging Face
transformers 5.x (Qwen3-MoE and Mixtral: 4 experts, top-2, every layer
sparse; DeepSeek-V3: 4 routed experts in 2 groups, top-2 within the best
group by ScatterElements of the group scores, a shared expert, a dense
first layer, multi-head latent attention) exported by README's recipe (dynamo, optimize=False, the Logits
wrapper, inputs input_ids and attention_mask) with
`experts_implementation="batched_mm"` (the default `grouped_mm` does not
export), and float64 reference gradients (test/e2e/hf-moe-gradients.test).
The export routes tokens with TopK and gathers each token's expert weights.

Dev-time: PyPI's torch 2.15.0, transformers 5.24.0, onnxscript 0.7.2
(the versions this was generated with); nothing is downloaded. Writes, per
model, NAME.onnx (weights inlined), and one batch.safetensors (input_ids,
attention_mask of ones, targets [2, 16] int64) with NAME_grads.safetensors
(`loss` and grad/<initializer name>: the mean cross-entropy of the logits
against the targets, computed by torch from a .double() copy of the same
weights). `qwen3_moe_ts.onnx` is the Qwen3-MoE model by the TorchScript
exporter (batched_mm experts; golden names by the initializers, see
export_torchscript). `mixtral_aux.onnx` is Mixtral with output_router_logits (router
aux loss coefficient 0.02) exported with its own loss: the wrapper takes
input_ids and labels and returns Hugging Face's loss, the shifted
cross-entropy plus the coefficient times the load-balancing loss; its
golden is that loss's float64 gradients on mixtral_aux_batch.safetensors
(batch.safetensors' input_ids, and its targets as labels).
`mixtral_aux_logits.onnx` is the same model exported without labels: it
returns the logits and Hugging Face's unscaled `aux_loss`, which
`--loss=cross_entropy:logits:targets+0.02*aux_loss` adds to the appended
cross-entropy; mixtral_aux_logits_batch.safetensors holds input_ids and the
labels shifted left as targets (-100 at the end), so that loss is
mixtral_aux.onnx's and its golden is mixtral_aux_grads.safetensors.

    make_moe_goldens.py [OUTDIR]
"""
import os
import sys

import onnx
import onnx.numpy_helper
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from make_hf_onnx import Logits  # noqa: E402  README's wrapper
sys.path.insert(0, HERE)
from hf_export import golden_grads, save_inline  # noqa: E402

SEQ, BATCH, VOCAB = 16, 2, 96


class LogitsAux(torch.nn.Module):
    """The logits and the router's load-balancing loss (unscaled), the
    model called without labels."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        out = self.model(input_ids=input_ids, use_cache=False)
        return out.logits, out.aux_loss


class WithLoss(torch.nn.Module):
    """The model's own loss (labels shifted inside, plus the router's
    load-balancing term where the config asks for it)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


def configs():
    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256)
    return {
        "qwen3_moe": (transformers.Qwen3MoeForCausalLM, transformers.Qwen3MoeConfig(
            intermediate_size=64, moe_intermediate_size=16, num_experts=4,
            num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True, **common)),
        "mixtral": (transformers.MixtralForCausalLM, transformers.MixtralConfig(
            intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, **common)),
        "deepseek_v3": (transformers.DeepseekV3ForCausalLM, transformers.DeepseekV3Config(
            intermediate_size=64, moe_intermediate_size=16, n_routed_experts=4,
            num_experts_per_tok=2, n_shared_experts=1, n_group=2, topk_group=1,
            first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=4,
            qk_nope_head_dim=4, v_head_dim=8,
            **dict(common, num_key_value_heads=4))),
    }


def build(name):
    """Model `name` of configs() with eager attention and batched_mm
    experts, seeded, its norm gains moved off 1 (so that no merge applies)."""
    cls, config = configs()[name]
    config._attn_implementation = "eager"
    config._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return model


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "hf-moe")
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    save_file({"input_ids": ids, "attention_mask": mask, "targets": targets},
              os.path.join(out, "batch.safetensors"))
    for name in configs():
        model = build(name)
        path = os.path.join(out, name + ".onnx")
        batch_dim = torch.export.Dim("batch")
        torch.onnx.export(Logits(model).eval(), (ids, mask), path, dynamo=True,
                          optimize=False, input_names=["input_ids", "attention_mask"],
                          output_names=["logits"],
                          dynamic_shapes={"input_ids": {0: batch_dim},
                                          "attention_mask": {0: batch_dim}})
        save_inline(path)
        double = Logits(model).double()
        logits = double(ids, mask)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 targets.reshape(-1))
        grads = golden_grads(double, loss)
        save_file(grads, os.path.join(out, name + "_grads.safetensors"))
        print(f"wrote {path}: loss {loss.item():.6f}, {len(grads) - 1} gradients "
              f"(torch {torch.__version__}, transformers {transformers.__version__})")
    export_aux(out, ids, targets)
    export_torchscript(out, ids, mask, targets)


def export_torchscript(out, ids, mask, targets):
    """Qwen3-MoE (the weights of qwen3_moe.onnx) by the TorchScript
    exporter, batched_mm experts. Its golden names each weight the exporter
    wrote as a transposed copy (`onnx::MatMul_N`) by the copy, transposed
    (found by comparing values)."""
    model = build("qwen3_moe")
    path = os.path.join(out, "qwen3_moe_ts.onnx")
    torch.onnx.export(Logits(model).eval(), (ids, mask), path, dynamo=False,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})
    m = save_inline(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    double = Logits(model).double()
    logits = double(ids, mask)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    grads = golden_grads(double, loss, inits)
    save_file(grads, os.path.join(out, "qwen3_moe_ts_grads.safetensors"))
    print(f"wrote {path}: loss {loss.item():.6f}, {len(grads) - 1} gradients")


def export_aux(out, ids, labels):
    """Mixtral with its router's load-balancing loss in the exported loss."""
    cls, config = configs()["mixtral"]
    config.output_router_logits = True
    config.router_aux_loss_coef = 0.02
    config._attn_implementation = "eager"
    config._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    model = cls(config).eval()
    path = os.path.join(out, "mixtral_aux.onnx")
    batch_dim = torch.export.Dim("batch")
    torch.onnx.export(WithLoss(model).eval(), (ids, labels), path, dynamo=True,
                      optimize=False, input_names=["input_ids", "labels"],
                      output_names=["loss"],
                      dynamic_shapes={"input_ids": {0: batch_dim}, "labels": {0: batch_dim}})
    save_inline(path)
    double = WithLoss(model).double()
    loss = double(ids, labels)
    grads = golden_grads(double, loss)
    save_file(grads, os.path.join(out, "mixtral_aux_grads.safetensors"))
    save_file({"input_ids": ids, "labels": labels},
              os.path.join(out, "mixtral_aux_batch.safetensors"))
    aux = model.double()(input_ids=ids, labels=labels, use_cache=False).aux_loss
    print(f"wrote {path}: loss {loss.item():.6f} (aux {aux.item():.6f})")

    # The same weights, exported to return the logits and aux_loss.
    torch.manual_seed(0)
    model = cls(config).eval()
    path = os.path.join(out, "mixtral_aux_logits.onnx")
    torch.onnx.export(LogitsAux(model).eval(), (ids,), path, dynamo=True,
                      optimize=False, input_names=["input_ids"],
                      output_names=["logits", "aux_loss"],
                      dynamic_shapes={"input_ids": {0: batch_dim}})
    save_inline(path)
    targets = torch.full_like(labels, -100)
    targets[:, :-1] = labels[:, 1:]
    save_file({"input_ids": ids, "targets": targets},
              os.path.join(out, "mixtral_aux_logits_batch.safetensors"))
    logits, aux = LogitsAux(model).double()(ids)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    print(f"wrote {path}: cross-entropy {ce.item():.6f} + 0.02 x aux {aux.item():.6f} = "
          f"{(ce + 0.02 * aux).item():.6f}")


if __name__ == "__main__":
    main()
