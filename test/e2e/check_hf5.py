#!/usr/bin/env python3
"""Checks one architecture of test/e2e/hf5/ (models exported by today's
PyTorch, see make_hf5_goldens.py) end to end: for every export its manifest
lists as written, otc-compile appends the mean cross-entropy of the logits
(ignore index -100), the cpu program runs one forward/backward on the golden
batch (global batch 4: micro-batch 4, and 2 x grad-accum 2 where the export
has a dynamic batch) and writes its gradients, which must match PyTorch's
float64 ones within --rtol per tensor (compare_grads.py; gradients that are
zero in exact arithmetic within --zero-atol), with exactly the golden's
names: one gradient per PyTorch parameter, none for constants or the copy of
a tied weight. plan.json's params_count must equal PyTorch's
`sum(p.numel() for p in model.parameters())`.

The state-dict checks (otc-export -o *.safetensors) use the manifest's map
from each initializer to PyTorch's state dict (found by the generator by
comparing values with the model's own tensors) as the oracle:
- `state-dict ref`: with --reference holding PyTorch's state dict (rebuilt
  from the initializers through that map), the output has exactly PyTorch's
  state-dict names, each equal to PyTorch's tensor;
- `state-dict trained`: with a checkpoint whose every trained weight is
  moved off its exported value, each state-dict tensor is that weight under
  the map (transposed, reshaped, minus Gemma's folded 1), tied names alike;
- `state-dict graph`: without a reference, the names the graph and the
  exporter's metadata give: the full state dict, or the count of weights
  left unresolved (`needs-reference N`) where the exporter folded a weight
  into something the graph cannot undo, or the names it lacks (`lacks ...`)
  where nothing in the graph shows them; the tensors it writes must be
  PyTorch's, and it may write no name PyTorch lacks;
- `state-dict zero-tie` (a tied bias, BERT's): with that bias zero in the
  model and the reference, as a fresh model has it, the trained export
  writes the trained bias under both of its names.

Prints `<export> <config> PASS|FAIL (why)` per check and `N passed, M failed`;
exits 1 on a failure. numpy only."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st_io  # noqa: E402


def compare(ours, golden, rtol, zero_atol):
    """The names that fail, and the names in one file only."""
    bad = []
    for name, ref in golden.items():
        got = ours.get(name)
        if got is None or got.size != ref.size:
            bad.append(name)
            continue
        ref = np.asarray(ref, dtype=np.float64).ravel()
        got = np.asarray(got, dtype=np.float64).ravel()
        rn, gn = np.linalg.norm(ref), np.linalg.norm(got)
        if rn <= zero_atol and gn <= zero_atol:
            continue
        if np.linalg.norm(got - ref) / max(rn, 1e-30) > rtol:
            bad.append(name)
    return bad, sorted(set(ours) ^ set(golden))


def to_state_dict(value, relation, shape):
    """PyTorch's tensor from an initializer's value under the manifest's
    relation between them."""
    if relation == "transposed":
        value = value.T
    elif relation == "reshaped":
        value = value.reshape(shape)
    elif relation == "one_plus":
        value = value - np.float32(1)
    return np.ascontiguousarray(value)


def pytorch_state_dict(model_path, export, manifest):
    """PyTorch's state dict, from the exported initializers and the map."""
    inits = {t.name: numpy_helper.to_array(t).astype(np.float32)
             for t in onnx.load(model_path).graph.initializer}
    shapes = {k: tuple(v) for k, v in manifest["parameters"].items()}
    out, how = {}, {}
    for init, m in export["initializers"].items():
        if not isinstance(m, dict) or m.get("tied_copy"):
            continue
        name, rel = m["state_dict"], m["relation"]
        out[name] = to_state_dict(inits[init], rel, shapes.get(name))
        how[name] = (init, rel)
    # Parameters the exporter merged by value (a fresh model's all-ones
    # norms): PyTorch's value is that of the one initializer they share,
    # which otc splits into a copy under each state-dict name.
    for p in export.get("unmapped_parameters", []):
        same = [k for k, v in out.items()
                if v.shape == tuple(shapes[p]) and how[k][1] == "identical"
                and np.array_equal(v, np.broadcast_to(v.ravel()[0], v.shape))]
        if same:
            out[p], how[p] = out[same[0]], (p, "identical")
    for src, aliases in manifest["tied_aliases"].items():
        for a in aliases:
            out[a], how[a] = out[src], how[src]
    return out, how


def compare_state_dict(got, want, atol=1e-6):
    """Why `got` is not `want`, or ""."""
    if set(got) != set(want):
        return (f"names: missing {sorted(set(want) - set(got))[:3]}, "
                f"extra {sorted(set(got) - set(want))[:3]}")
    for k, v in want.items():
        g = got[k]
        if g.shape != v.shape:
            return f"{k}: shape {g.shape}, PyTorch {v.shape}"
        if not np.allclose(g, v, rtol=0, atol=atol):
            return f"{k}: differs by {np.abs(g - v).max():.3g}"
    return ""


def check_zero_ties(args, model, manifest, stem, want, how, ckpt, report):
    """`state-dict zero-tie`: a tied bias as a fresh model has it, zeros
    (BERT's cls.predictions.bias, the decoder's bias under its parent's
    name), which equal every other zero tensor by value: with the bias zero
    in the model and the reference, the trained export writes the trained
    bias under both names."""
    for src, aliases in manifest["tied_aliases"].items():
        names = [src] + aliases
        if not src.endswith("bias") or not all(n in how for n in names):
            continue
        init = how[src][0]
        m = onnx.load(model)
        for t in m.graph.initializer:
            if t.name == init:
                t.CopyFrom(numpy_helper.from_array(
                    np.zeros_like(numpy_helper.to_array(t)), t.name))
        zmodel = os.path.join(args.work, f"{stem}-zero-tie.onnx")
        onnx.save(m, zmodel)
        ref = {k: (np.zeros_like(v) if k in names else v) for k, v in want.items()}
        zref = os.path.join(args.work, f"{stem}-zero-tie-reference.safetensors")
        st_io.write(zref, ref)
        ck = os.path.join(args.work, f"{stem}-moved.safetensors")
        out = os.path.join(args.work, f"{stem}-zero-tie-sd.safetensors")
        r = subprocess.run([args.otc_export, zmodel, "--weights", ck, "--reference",
                            zref, "-o", out], capture_output=True, text=True)
        why = (r.stderr.strip().splitlines() or ["?"])[-1] if r.returncode else ""
        if not why:
            got = st_io.read(out)
            for n in names:
                if n not in got or not np.allclose(got[n], ckpt[init], rtol=0, atol=1e-6):
                    why = f"{n} is not the trained {init}"
                    break
        report(f"{stem} state-dict zero-tie", not why, why)


def check_state_dict(args, model, export, manifest, stem, report):
    want, how = pytorch_state_dict(model, export, manifest)
    ref = os.path.join(args.work, f"{stem}-reference.safetensors")
    st_io.write(ref, want)
    out = os.path.join(args.work, f"{stem}-sd.safetensors")

    def export_sd(extra):
        if os.path.exists(out):
            os.remove(out)
        return subprocess.run([args.otc_export, model, "-o", out] + extra,
                              capture_output=True, text=True)

    r = export_sd(["--reference", ref])
    why = (r.stderr.strip().splitlines() or ["?"])[-1] if r.returncode else \
        compare_state_dict(st_io.read(out), want)
    report(f"{stem} state-dict ref", not why, why)

    # A checkpoint that moves every trained weight: each state-dict tensor
    # must follow its initializer through the map.
    golden = st_io.read(os.path.join(args.arch_dir, export["golden"]))
    inits = {t.name: numpy_helper.to_array(t).astype(np.float32)
             for t in onnx.load(model).graph.initializer}
    ckpt = {}
    for i, key in enumerate(sorted(k for k in golden if k.startswith("grad/"))):
        name = key[len("grad/"):]
        base = inits[name] if name in inits else want[name]
        ckpt[name] = base + np.float32(0.001 * (i + 1))
    ck = os.path.join(args.work, f"{stem}-moved.safetensors")
    st_io.write(ck, ckpt)
    moved = {}
    for name, (init, rel) in how.items():
        v = ckpt.get(init)
        if v is None:  # an initializer otc does not train
            v = inits[init]
        moved[name] = to_state_dict(v, rel, want[name].shape)
    r = export_sd(["--weights", ck, "--reference", ref])
    why = (r.stderr.strip().splitlines() or ["?"])[-1] if r.returncode else \
        compare_state_dict(st_io.read(out), moved)
    report(f"{stem} state-dict trained", not why, why)

    check_zero_ties(args, model, manifest, stem, want, how, ckpt, report)

    r = export_sd([])
    if r.returncode:
        unresolved = sum(line.startswith("otc-export: unresolved")
                         for line in r.stderr.splitlines())
        print(f"{stem} state-dict graph needs-reference {unresolved}")
        return
    got = st_io.read(out)
    lacking = sorted(set(want) - set(got))
    why = compare_state_dict(got, {k: v for k, v in want.items() if k in got})
    if lacking and not why:
        # What a graph cannot show: the second name of a tied bias.
        print(f"{stem} state-dict graph lacks {' '.join(lacking)}")
        return
    report(f"{stem} state-dict graph", not why, why)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arch_dir")
    ap.add_argument("--otc-compile", default="otc-compile")
    ap.add_argument("--otc-export", default="otc-export")
    ap.add_argument("--work", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--zero-atol", type=float, default=1e-6)
    args = ap.parse_args()

    with open(os.path.join(args.arch_dir, "manifest.json")) as f:
        manifest = json.load(f)
    batch = os.path.join(args.arch_dir, "batch.safetensors")
    passed = failed = 0

    def report(label, ok, why=""):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print(f"{label} {'PASS' if ok else 'FAIL'}{'' if ok else ' (' + why + ')'}")

    for onnx_name, export in sorted(manifest["exports"].items()):
        if export.get("status") != "ok":
            continue
        stem = onnx_name[:-len(".onnx")]
        model = os.path.join(args.arch_dir, onnx_name)
        check_state_dict(args, model, export, manifest, stem, report)
        golden = st_io.read(os.path.join(args.arch_dir, export["golden"]))
        configs = [("mb4", ["--micro-batch", "4"])]
        if export.get("dynamic_batch"):
            configs.append(("mb2x2", ["--micro-batch", "2", "--grad-accum", "2"]))
        for label, flags in configs:
            out = os.path.join(args.work, f"{stem}-{label}")
            what = f"{stem} {label}"
            r = subprocess.run([args.otc_compile, model, "-o", out,
                                "--loss=cross_entropy:logits:targets"] + flags,
                               capture_output=True, text=True)
            if r.returncode:
                report(what, False, "compile: " + r.stderr.strip().splitlines()[-1])
                continue
            with open(os.path.join(out, "plan.json")) as f:
                count = json.load(f)["params_count"]
            if label == "mb4":
                report(f"{stem} count", count == manifest["num_parameters"],
                       f"{count} trained, PyTorch has {manifest['num_parameters']}")
            dump = os.path.join(out, "grads.safetensors")
            r = subprocess.run([os.path.join(out, "train"), "--batch", batch,
                                "--dump-grads", dump], capture_output=True, text=True)
            if r.returncode:
                report(what, False, "train: " + r.stderr.strip().splitlines()[-1])
                continue
            bad, odd = compare(st_io.read(dump), golden, args.rtol, args.zero_atol)
            report(what, not bad and not odd,
                   f"mismatched {bad[:3]} names in one file only {odd[:3]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
