#!/usr/bin/env python3
"""Generates test/e2e/hf5/<arch>/: tiny Hugging Face transformers 5.x models
exported to ONNX by today's PyTorch (the default dynamo exporter and the old
TorchScript exporter), with float64 reference gradients of a cross-entropy
loss that otc-compile appends (`--loss=cross_entropy:logits:targets`).

Fourteen architectures (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM,
Qwen3ForCausalLM, MistralForCausalLM, GemmaForCausalLM, Gemma2ForCausalLM,
Gemma3ForCausalLM, Phi3ForCausalLM, GPTNeoXForCausalLM, GPTJForCausalLM,
GptOssForCausalLM, BertForMaskedLM, ModernBertForMaskedLM, the last also
with SDPA as modernbert_sdpa), each
built from a config written here (vocab 96, hidden 32, 2 layers, 4 heads, 2 KV
heads where the architecture has GQA, intermediate 64, 16 positions, dropouts
0, initializer_range 0.1, eager attention, float32, pad_token_id None so that
no embedding has a padding_idx, the architecture's default weight tying),
random weights seeded by torch.manual_seed(0); every 1-D parameter (norm gains
and biases) and every other bias gets N(0, 0.1) noise so that its gradient is not a special value,
except in llama_fresh (one layer, weights as initialized: the dynamo
exporter merges its all-ones norm weights into one initializer, and the
golden holds the gradient of each merged parameter under its own name).
Nothing is downloaded.

Every model is wrapped as (input_ids[, attention_mask]) -> logits (use_cache
False, so no key/value outputs) and exported four ways:

- dynamo.onnx / dynamo_mask.onnx: torch.onnx.export(dynamo=True) with its
  defaults (optimize=True, default opset), dynamic batch (torch.export.Dim);
  a fixed batch 4 if the dynamic export fails (recorded in the manifest);
- ts.onnx / ts_mask.onnx: torch.onnx.export(dynamo=False), default opset and
  do_constant_folding=True (what a user gets: Linear weights become folded
  transposed copies named onnx::MatMul_N), dynamic batch via dynamic_axes;
  retried with use_cache=True if the first try fails inside torch.

The *_mask exports take input_ids and attention_mask (int64); the others only
input_ids. Files are saved with their weights inlined (the dynamo exporter
writes <file>.onnx.data beside the graph by default; the manifest records what
each exporter wrote) and without the dynamo exporter's per-node
pkg.torch.onnx.stack_trace metadata (absolute paths and this script's line
numbers; the other node metadata stays).

Per architecture it writes
- batch.safetensors: input_ids, attention_mask (rows 1-3 right-padded: row r
  has its last r positions 0) and targets [4, 16] int64, with -100 (PyTorch's
  default ignore_index) at 2 positions per row, so micro-batch means average
  to the global mean;
- grads_<dynamo|ts>[_mask].safetensors, one per ONNX file: `loss` and
  grad/<ONNX initializer name> (float64, computed by torch from a .double()
  copy of the same float32 weights: mean cross-entropy of the logits against
  targets, ignore_index -100; the mask variants feed the attention_mask). An
  initializer is matched to a parameter by value, exactly: identical, else the
  transpose of a 2-D parameter (TorchScript's and the dynamo optimizer's
  folded Linear weights), else a reshape of it (the dynamo optimizer folds
  the position-embedding lookup of a static sequence, wpe[arange(16)], to a
  [1, 16, 32] constant; only a reshape because the sequence uses every
  position), else 1 + it (both exporters fold Gemma's RMSNorm `1 + weight`;
  the gradient is the same). Every parameter appears exactly once, under its
  most direct initializer in that order (an initializer named like the
  parameter first), with the gradient laid out in the initializer's shape.
  Other initializers (constants, rotary tables, masks, a second copy of a
  tied or folded weight) have no entry. Some gradients are zero but for
  rounding (BERT's attention key biases: softmax ignores a per-query
  constant); the manifest lists them (near_zero_golden_grads), since a
  relative tolerance cannot check them;
- manifest.json: config, versions, parameter and state-dict names, and per
  ONNX file the exporter, opset, op histogram, initializer -> parameter map
  (transposed, relation, tied_copy), the other initializers and a check of the graph's
  logits and loss by onnx.reference against torch.

Environment (pinned; the script refuses other versions unless --any-version):

    python3.11 -m venv /work/venv-hf
    /work/venv-hf/bin/pip install torch==2.15.0 transformers==5.24.0 \\
        onnxscript==0.7.2 onnx-ir==1.1.0 onnx==1.23.2 safetensors==0.8.0 numpy==2.4.6
    /work/venv-hf/bin/python test/e2e/make_hf5_goldens.py

(`--archs llama gemma2` regenerates some architectures only.) The output is
deterministic for these versions: the script re-executes itself with
PYTHONHASHSEED=0 (transformers iterates a set of strings while building
Gemma3's graph, so its node order would otherwise vary from run to run).
"""
import argparse
import collections
import copy
import importlib.metadata
import inspect
import json
import os
import shutil
import sys
import tempfile
import warnings

PINS = {
    "torch": "2.15.0",
    "transformers": "5.24.0",
    "onnxscript": "0.7.2",
    "onnx-ir": "1.1.0",
    "onnx": "1.23.2",
}

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "hf5")

VOCAB = 96
SEQ = 16
GOLDEN_BATCH = 4
IGNORE = -100
IGNORED_PER_ROW = 2

COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=SEQ, initializer_range=0.1,
              pad_token_id=None)
LLAMA_LIKE = dict(COMMON, num_key_value_heads=2, head_dim=8, attention_dropout=0.0)

# Architectures whose 1-D parameters keep their initial values (no noise).
FRESH = {"llama_fresh"}
# Architectures exported with Hugging Face's default attention, SDPA (the
# others: eager): the dynamo exporter writes onnxscript's NaN guard after
# the softmax, the TorchScript exporter a -inf fill with no guard.
SDPA = {"modernbert_sdpa"}

# dir name: (model class, config class, config kwargs)
ARCHS = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, n_inner=64,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.1,
        pad_token_id=None)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(LLAMA_LIKE)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(LLAMA_LIKE)),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(LLAMA_LIKE)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(LLAMA_LIKE, sliding_window=8)),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(LLAMA_LIKE)),
    # Soft-capping thresholds near the tensors' magnitudes, so that tanh is
    # not linear; layer 0 slides (window 8 < 16), layer 1 is full.
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(
        LLAMA_LIKE, query_pre_attn_scalar=8, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        attn_logit_softcapping=1.0, final_logit_softcapping=1.0)),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", dict(
        LLAMA_LIKE, query_pre_attn_scalar=8, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"])),
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(
        LLAMA_LIKE, resid_pdrop=0.0, embd_pdrop=0.0, original_max_position_embeddings=SEQ)),
    # A freshly initialized model, as a user training from scratch exports
    # it: every norm weight is all ones, and the dynamo exporter's optimizer
    # keeps one initializer for all of them (otc splits it per module).
    "llama_fresh": ("LlamaForCausalLM", "LlamaConfig", dict(LLAMA_LIKE, num_hidden_layers=1)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        COMMON, hidden_dropout=0.0, attention_dropout=0.0)),
    # Interleaved (GPT-J style) partial rotary: pairs (2i, 2i + 1) of the
    # first rotary_dim = 4 of the 8 features of a head rotate.
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, n_inner=64,
        rotary_dim=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        initializer_range=0.1, pad_token_id=None)),
    # Attention sinks (a learned logit per head in each softmax), a
    # sliding window of 8 on layer 0, and a mixture of 4 experts (top 2)
    # whose gated activation is clamped.
    "gpt_oss": ("GptOssForCausalLM", "GptOssConfig", dict(
        LLAMA_LIKE, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"])),
    "bert": ("BertForMaskedLM", "BertConfig", dict(
        COMMON, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, type_vocab_size=2)),
    # Layer 0 global, layer 1 local: a bidirectional sliding window,
    # |i - j| <= local_attention / 2 = 4 (of 16 positions).
    "modernbert": ("ModernBertForMaskedLM", "ModernBertConfig", dict(
        COMMON, global_attn_every_n_layers=2, local_attention=8,
        attention_dropout=0.0, embedding_dropout=0.0, mlp_dropout=0.0)),
    # The same with SDPA, ModernBERT's default attention (SDPA).
    "modernbert_sdpa": ("ModernBertForMaskedLM", "ModernBertConfig", dict(
        COMMON, global_attn_every_n_layers=2, local_attention=8,
        attention_dropout=0.0, embedding_dropout=0.0, mlp_dropout=0.0)),
}


def check_versions(any_version):
    found = {}
    for pkg in PINS:
        try:
            found[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            found[pkg] = None
    bad = {p: v for p, v in found.items() if v != PINS[p]}
    if bad and not any_version:
        lines = [f"  {p}: installed {v}, pinned {PINS[p]}" for p, v in bad.items()]
        sys.exit("make_hf5_goldens: the installed versions differ from the pins "
                 "(the goldens would change); see the docstring for the venv, or pass "
                 "--any-version:\n" + "\n".join(lines))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archs", nargs="+", default=list(ARCHS), choices=list(ARCHS))
    ap.add_argument("--any-version", action="store_true",
                    help="run even if torch/transformers/onnx/onnxscript differ from the pins")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    versions = check_versions(args.any_version)
    if os.environ.get("PYTHONHASHSEED") != "0":
        # transformers iterates sets of strings while building some graphs
        # (Gemma3Model.forward: `for layer_type in set(config.layer_types)`),
        # so node order would follow the per-process string hash seed.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable] + sys.argv)
    gen = Generator(versions, args.out)
    for arch in args.archs:
        gen.generate(arch)


STACK_TRACE = "pkg.torch.onnx.stack_trace"


def strip_stack_traces(proto):
    """Drops the dynamo exporter's per-node Python stack traces (metadata
    only; they hold absolute paths and this script's line numbers, so the
    files would change with where the venv lives and with any edit here).
    The other node metadata (namespace, class hierarchy, fx node, name
    scopes) stays. Returns how many nodes had one."""
    count = 0
    for node in proto.graph.node:
        keep = [p for p in node.metadata_props if p.key != STACK_TRACE]
        if len(keep) != len(node.metadata_props):
            count += 1
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
    return count


RELATIONS = ("identical", "transposed", "reshaped", "one_plus")


def relation(param, value):
    """How initializer VALUE holds PARAM (both numpy float32), or None."""
    if param.size != value.size:
        return None
    if param.shape == value.shape and np.array_equal(param, value):
        return "identical"
    if param.ndim == 2 and param.shape[::-1] == value.shape and np.array_equal(param.T, value):
        return "transposed"
    if np.array_equal(param.reshape(-1), value.reshape(-1)):
        return "reshaped"
    if np.array_equal(np.float32(1) + param.reshape(-1), value.reshape(-1)):
        return "one_plus"
    return None


# ---------------------------------------------------------------------------
# Everything below imports torch lazily (after the version check).

class Generator:
    def __init__(self, versions, out):
        global np, onnx, numpy_helper, torch, F, transformers, st_io
        import numpy as np
        import onnx
        import torch
        import torch.nn.functional as F
        import transformers
        from onnx import numpy_helper
        sys.path.insert(0, HERE)
        import st_io
        self.versions = versions
        self.out = out
        warnings.filterwarnings("ignore")
        torch.use_deterministic_algorithms(True)
        transformers.logging.set_verbosity_error()

    # -- model -------------------------------------------------------------
    def build(self, arch):
        cls_name, cfg_name, kwargs = ARCHS[arch]
        config = getattr(transformers, cfg_name)(**kwargs)
        config._attn_implementation = "sdpa" if arch in SDPA else "eager"
        if "num_local_experts" in kwargs:
            # The default grouped_mm takes no float64 (the reference).
            config._experts_implementation = "batched_mm"
        base = getattr(transformers, cls_name)
        takes_cache = "use_cache" in inspect.signature(base.forward).parameters

        class LogitsOnly(base):
            """(input_ids[, attention_mask]) -> logits; same parameter names
            as the transformers class."""
            otc_use_cache = False

            def forward(self, input_ids, attention_mask=None):
                kw = {"use_cache": self.otc_use_cache} if takes_cache else {}
                out = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kw)
                return out.logits if hasattr(out, "logits") else out[0]

        LogitsOnly.__name__ = LogitsOnly.__qualname__ = base.__name__
        LogitsOnly.__module__ = base.__module__
        torch.manual_seed(0)
        model = LogitsOnly(config)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for name, p in model.named_parameters():
                # Biases of every rank (GPT-OSS's experts' [E, N] ones start
                # as zeros, equal across layers).
                if (p.dim() == 1 or name.endswith("_bias")) and arch not in FRESH:
                    p.add_(0.1 * torch.randn(p.shape, generator=gen))
        model.eval()
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
                sys.exit(f"{arch}: {m} has a padding_idx (its gradient would not be the ONNX one)")
        return model

    def golden_batch(self):
        gen = torch.Generator().manual_seed(1234)
        input_ids = torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen)
        mask = torch.ones(GOLDEN_BATCH, SEQ, dtype=torch.int64)
        for row in range(GOLDEN_BATCH):
            mask[row, SEQ - row:] = 0
        targets = torch.randint(0, VOCAB, (GOLDEN_BATCH, SEQ), generator=gen)
        for row in range(GOLDEN_BATCH):
            cols = torch.randperm(SEQ, generator=gen)[:IGNORED_PER_ROW]
            targets[row, cols] = IGNORE
        return {"input_ids": input_ids, "attention_mask": mask, "targets": targets}

    def loss_of(self, logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                               ignore_index=IGNORE)

    def reference(self, model, args, targets):
        """float64 loss and parameter gradients from a .double() copy."""
        ref = copy.deepcopy(model).double()
        loss = self.loss_of(ref(*args), targets)
        loss.backward()
        grads = {n: p.grad.detach().numpy().astype(np.float64) for n, p in ref.named_parameters()}
        with torch.no_grad():
            logits32 = model(*args)
            loss32 = self.loss_of(logits32, targets).item()
        return loss.item(), grads, logits32.numpy(), loss32

    # -- export ------------------------------------------------------------
    def export(self, model, exporter, inputs, args, path):
        """Exports to a scratch dir, records what the exporter wrote, saves
        PATH with inlined weights. Returns (info, proto) or (info, None)."""
        info = {"exporter": exporter, "inputs": inputs, "attempts": []}
        scratch = tempfile.mkdtemp(prefix="hf5_")
        try:
            for attempt in self.attempts(exporter, inputs):
                target = os.path.join(scratch, os.path.basename(path))
                for f in os.listdir(scratch):
                    os.remove(os.path.join(scratch, f))
                model.otc_use_cache = attempt.pop("use_cache")
                desc = {k: str(v) for k, v in attempt.items()}
                desc["use_cache"] = model.otc_use_cache
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        torch.onnx.export(model, args, target, input_names=inputs,
                                          output_names=["logits"], **attempt)
                except Exception as e:  # noqa: BLE001 - recorded in the manifest
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    desc["error"] = f"{type(e).__name__}: {first}"[:400]
                    info["attempts"].append(desc)
                    print(f"    {os.path.basename(path)}: attempt {desc} failed")
                    continue
                info["attempts"].append(desc)
                info["exporter_wrote"] = sorted(os.listdir(scratch))
                info["use_cache"] = model.otc_use_cache
                info["dynamic_batch"] = ("dynamic_shapes" in attempt or "dynamic_axes" in attempt)
                proto = onnx.load(target)  # pulls in external data if any
                stripped = strip_stack_traces(proto)
                if stripped:
                    info["stripped_node_metadata"] = f"{STACK_TRACE} of {stripped} nodes"
                onnx.save(proto, path, save_as_external_data=False)
                info["status"] = "ok"
                return info, onnx.load(path)
            info["status"] = "failed"
            info["error"] = info["attempts"][-1]["error"] if info["attempts"] else "no attempt"
            return info, None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            model.otc_use_cache = False

    def attempts(self, exporter, inputs):
        if exporter == "dynamo":
            batch = torch.export.Dim("batch")
            yield dict(dynamo=True, dynamic_shapes={i: {0: batch} for i in inputs}, use_cache=False)
            yield dict(dynamo=True, use_cache=False)  # fixed batch 4
        else:
            axes = {i: {0: "batch"} for i in inputs + ["logits"]}
            yield dict(dynamo=False, dynamic_axes=axes, use_cache=False)
            yield dict(dynamo=False, dynamic_axes=axes, use_cache=True)

    # -- initializer mapping -------------------------------------------------
    def map_initializers(self, proto, model, aliases):
        """Matches every float initializer to the parameter it holds, by
        value: RELATIONS in order of preference (identical, the transpose of
        a 2-D parameter, a reshape of it, or 1 + it as folded from Gemma's
        RMSNorm `x * (1 + weight)`). Returns (mapping, primary, constants,
        nonfloat, missing): mapping initializer -> {state_dict, transposed,
        relation[, tied_copy]}; primary parameter -> (initializer, relation),
        the one initializer whose gradient the golden holds."""
        params = {n: p.detach().numpy() for n, p in model.named_parameters()}
        hits = collections.defaultdict(list)  # param -> [(init, relation)]
        constants, nonfloat = {}, {}
        for init in proto.graph.initializer:
            value = numpy_helper.to_array(init)
            found = []
            if value.dtype == np.float32:
                for n, a in params.items():
                    rel = relation(a, value)
                    if rel:
                        found.append((n, rel))
            if len(found) > 1:
                best = min(RELATIONS.index(r) for _, r in found)
                found = [f for f in found if RELATIONS.index(f[1]) == best]
            if len(found) > 1:
                named = [f for f in found if init.name in (f[0], *aliases.get(f[0], ()))]
                if len(named) != 1:
                    sys.exit(f"initializer {init.name!r} matches several parameters: {found}")
                found = named
            if found:
                hits[found[0][0]].append((init.name, found[0][1]))
            elif np.issubdtype(value.dtype, np.floating):
                constants[init.name] = {"dtype": str(value.dtype), "shape": list(value.shape),
                                        "numel": int(value.size)}
            else:
                nonfloat[init.name] = {"dtype": str(value.dtype), "shape": list(value.shape)}
        mapping, primary = {}, {}
        for pname, inits in hits.items():
            names = (pname, *aliases.get(pname, ()))
            order = sorted(range(len(inits)), key=lambda i: (
                RELATIONS.index(inits[i][1]), inits[i][0] not in names, i))
            for rank, i in enumerate(order):
                iname, rel = inits[i]
                mapping[iname] = {"state_dict": pname, "transposed": rel == "transposed",
                                  "relation": rel}
                if rank:
                    mapping[iname]["tied_copy"] = True
                else:
                    primary[pname] = (iname, rel)
        missing = [n for n in params if n not in primary]
        return mapping, primary, constants, nonfloat, missing

    # -- checks --------------------------------------------------------------
    def onnx_check(self, path, feed, logits32, targets, loss64):
        try:
            from onnx.reference import ReferenceEvaluator
            got = ReferenceEvaluator(path).run(["logits"], feed)[0]
            loss = self.loss_of(torch.from_numpy(np.asarray(got, np.float64)), targets).item()
            return {"max_abs_logit_diff_vs_torch_fp32": float(np.abs(got - logits32).max()),
                    "loss_from_onnx_logits": loss,
                    "loss_rel_diff_vs_golden": abs(loss - loss64) / abs(loss64)}
        except Exception as e:  # noqa: BLE001
            return {"error": f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"[:300]}

    # -- per architecture ----------------------------------------------------
    def generate(self, arch):
        cls_name, cfg_name, kwargs = ARCHS[arch]
        out = os.path.join(self.out, arch)
        os.makedirs(out, exist_ok=True)
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
        model = self.build(arch)
        nparams = sum(p.numel() for p in model.parameters())
        print(f"== {arch} ({cls_name}): {nparams} parameters")
        batch = self.golden_batch()
        st_io.write(os.path.join(out, "batch.safetensors"), {k: v.numpy() for k, v in batch.items()})

        sd_keys = list(model.state_dict().keys())
        param_names = [n for n, _ in model.named_parameters()]
        ptrs = {p.data_ptr(): n for n, p in model.named_parameters()}
        aliases = collections.defaultdict(list)
        for k, t in model.state_dict(keep_vars=True).items():
            if isinstance(t, torch.nn.Parameter) and ptrs.get(t.data_ptr()) not in (None, k):
                aliases[ptrs[t.data_ptr()]].append(k)
        config = model.config
        manifest = {
            "architecture": cls_name,
            "config_class": cfg_name,
            "config_kwargs": kwargs,
            "attn_implementation": config._attn_implementation,
            "tie_word_embeddings": bool(getattr(config, "tie_word_embeddings", False)),
            "versions": dict(self.versions, numpy=np.__version__,
                             python=sys.version.split()[0]),
            "seed": {"torch.manual_seed": 0, "norm_noise_generator": 1, "batch_generator": 1234},
            "num_parameters": nparams,
            "parameters": {n: list(p.shape) for n, p in model.named_parameters()},
            "tied_aliases": {k: v for k, v in aliases.items()},
            "state_dict": sd_keys,
            "buffers": [n for n, _ in model.named_buffers()],
            "batch": {"file": "batch.safetensors", "global_batch": GOLDEN_BATCH, "seq": SEQ,
                      "ignore_index": IGNORE, "ignored_per_row": IGNORED_PER_ROW,
                      "attention_mask": "row r right-padded: its last r positions are 0"},
            "loss": "mean cross-entropy of logits vs targets, ignore_index -100 "
                    "(--loss=cross_entropy:logits:targets)",
            "exports": {},
        }
        assert len(param_names) == len(set(param_names))

        for variant, inputs in (("", ["input_ids"]), ("_mask", ["input_ids", "attention_mask"])):
            args = tuple(batch[i] for i in inputs)
            loss64, grads, logits32, loss32 = self.reference(model, args, batch["targets"])
            print(f"  {variant or 'nomask'}: loss float64 {loss64:.12f} float32 {loss32:.8f}")
            feed = {i: batch[i].numpy() for i in inputs}
            for exporter, short in (("dynamo", "dynamo"), ("torchscript", "ts")):
                fname = f"{short}{variant}.onnx"
                path = os.path.join(out, fname)
                info, proto = self.export(model, exporter, inputs, args, path)
                manifest["exports"][fname] = info
                if proto is None:
                    print(f"  {fname}: FAILED: {info['error']}")
                    continue
                self.describe(info, proto)
                mapping, primary, constants, nonfloat, missing = self.map_initializers(
                    proto, model, aliases)
                golden = {"loss": np.array(loss64, dtype=np.float64)}
                shapes = {i.name: tuple(i.dims) for i in proto.graph.initializer}
                for pname in param_names:
                    if pname in primary:
                        iname, rel = primary[pname]
                        g = grads[pname].T if rel == "transposed" else grads[pname]
                        golden["grad/" + iname] = np.ascontiguousarray(g.reshape(shapes[iname]))
                    elif arch in FRESH:
                        # A parameter the exporter merged into another's
                        # initializer: otc gives it its own, named after it.
                        golden["grad/" + pname] = grads[pname]
                norms = {k: float(np.linalg.norm(v)) for k, v in golden.items() if k != "loss"}
                scale = float(np.median(list(norms.values())))
                # Gradients that are zero but for rounding (BERT's key biases:
                # softmax ignores a per-query constant), which a relative
                # tolerance cannot check.
                near_zero = {k: n for k, n in norms.items() if n < 1e-12 * scale}
                gname = f"grads_{short}{variant}.safetensors"
                st_io.write(os.path.join(out, gname), golden)
                info.update({
                    "golden": gname,
                    "golden_loss": loss64,
                    "initializers": mapping,
                    "unmapped_parameters": missing,
                    "near_zero_golden_grads": near_zero,
                    "constants": constants,
                    "nonfloat_initializers": nonfloat,
                    "onnx_reference_check": self.onnx_check(path, feed, logits32,
                                                            batch["targets"], loss64),
                })
                rels = collections.Counter(m["relation"] for m in mapping.values())
                ncopy = sum(1 for m in mapping.values() if m.get("tied_copy"))
                print(f"  {fname}: opset {info['opset']}, {info['nodes']} nodes, "
                      f"{len(mapping)} parameter initializers ({dict(rels)}, {ncopy} copies), "
                      f"{len(constants)} float constants, {len(nonfloat)} other; "
                      f"dynamic batch {info['dynamic_batch']}; check {info['onnx_reference_check']}")
                print(f"    ops: {', '.join(f'{k} {v}' for k, v in info['op_histogram'].items())}")
                if missing:
                    print(f"    WARNING: parameters without an initializer: {missing}")
                if near_zero:
                    print(f"    note: gradients zero but for rounding: {near_zero}")

        with open(os.path.join(out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        print("  wrote", ", ".join(f"{f} ({os.path.getsize(os.path.join(out, f))} B)"
                                  for f in sorted(os.listdir(out))))

    def describe(self, info, proto):
        ops = collections.Counter(
            (f"{n.domain}:{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type)
            for n in proto.graph.node)
        info["opset"] = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
        info["opset_imports"] = {o.domain or "ai.onnx": o.version for o in proto.opset_import}
        info["ir_version"] = proto.ir_version
        info["producer"] = f"{proto.producer_name} {proto.producer_version}".strip()
        info["nodes"] = len(proto.graph.node)
        info["op_histogram"] = dict(sorted(ops.items()))
        info["local_functions"] = [f"{f.domain}:{f.name}" for f in proto.functions]
        info["graph_inputs"] = [i.name for i in proto.graph.input]
        info["graph_outputs"] = [o.name for o in proto.graph.output]
        try:
            onnx.checker.check_model(proto)
            info["checker"] = "ok"
        except Exception as e:  # noqa: BLE001
            info["checker"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"[:300]


if __name__ == "__main__":
    main()
