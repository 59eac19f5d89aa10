#!/usr/bin/env python3
"""Times greedy generation: otc's `train --generate` (decode_step, one position
at a time with the keys and values cached) against PyTorch's
`model.generate` on the same Hugging Face model, and compares their ids (a
dev-time script: it needs torch, transformers and onnxscript, which CI does
not have; nothing is downloaded: the model is built from a config with
random weights, seeded, as bench/make_hf_onnx.py builds and exports it).

    generate_speed.py [--model gpt2-124m|tiny-gpt2|tiny-llama|llama-1b] [--seq T]
                      [--tokens N] [--prompt-len P] [--rounds R] [--work DIR]
                      [--otc-bin DIR] [--out JSON] [--threads K] [--reuse]

Steps: make_hf_onnx.py's export (README's `Logits` wrapper, the dynamo
exporter with optimize=False, a dynamic batch, dense weights as external
data) into WORK/model.onnx with the model's state dict beside it;
`otc-compile WORK/model.onnx -o WORK/gen --micro-batch 1 --generate
--loss=cross_entropy:logits:targets`; a prompt of P ids drawn with a fixed
seed; then R rounds each (after one untimed warm-up) of
  - otc: `WORK/gen/train --generate N --prompt-ids ... --temperature 0`, the
    whole process's wall time (loading the program and its weights included)
    and the decode loop's own time from its stderr line "generated N ids x B
    rows in S s (...)" (OMP_NUM_THREADS=K);
  - PyTorch: `model.generate(ids, max_new_tokens=N, do_sample=False,
    attention_mask=ones, pad_token_id=0)` in eval mode under no_grad with
    torch.set_num_threads(K), the same weights (the model rebuilt with
    make_hf_onnx's recipe and seed, checked bit for bit against the exported
    state dict), its eager attention as exported; with the KV cache and
    without it (use_cache=False; --no-cache-rounds 0 skips it).
No end-of-sequence id stops PyTorch early (eos_token_id=None): both draw N ids.
Medians are printed as a table and, with --out, written as JSON with the
machine (nproc, the CPU's model name) and the versions. The greedy ids are
compared (random weights can hold near-ties: a difference is reported, not an
error).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import make_hf_onnx  # noqa: E402  (CONFIGS, Logits, main: the export)

MODELS = ("gpt2-124m", "tiny-gpt2", "tiny-llama", "llama-1b")
SEED = 0          # make_hf_onnx's default --seed: the weights
PROMPT_SEED = 1234
GEN_LINE = re.compile(r"generated (\d+) ids x (\d+) rows in ([0-9.eE+-]+) s "
                      r"\((\d+) positions, ([0-9.eE+-]+) ms each\)")


def log(msg):
    print(msg, flush=True)


def machine():
    name = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = int(subprocess.run(["nproc"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError, ValueError):
        nproc = os.cpu_count()
    return {"nproc": nproc, "cpu": name or platform.processor(),
            "platform": platform.platform()}


def versions():
    import onnxscript
    v = {"python": platform.python_version(), "torch": torch.__version__,
         "transformers": transformers.__version__, "onnxscript": onnxscript.__version__,
         "numpy": np.__version__}
    try:
        import onnx
        v["onnx"] = onnx.__version__
    except ImportError:
        pass
    return v


def build_model(name):
    """make_hf_onnx.main's model: its config, eager attention, seeded weights."""
    cls_name, cfg_name, kwargs = make_hf_onnx.CONFIGS[name]
    config = getattr(transformers, cfg_name)(**kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    return getattr(transformers, cls_name)(config).eval()


def export(name, seq, onnx_path, sd_path):
    """make_hf_onnx.py's export path, run as its command line does."""
    argv = ["make_hf_onnx.py", onnx_path, "--model", name, "--seq", str(seq),
            "--state-dict", sd_path, "--seed", str(SEED)]
    saved = sys.argv
    sys.argv = argv
    try:
        make_hf_onnx.main()
    finally:
        sys.argv = saved


def check_weights(model, sd_path):
    """The model PyTorch times holds exactly the exported weights."""
    from safetensors.torch import load_file
    sd = load_file(sd_path)
    own = model.state_dict()
    if set(sd) != set(own):
        raise SystemExit(f"state dict keys differ: {sorted(set(sd) ^ set(own))[:8]}")
    bad = [k for k in sd if not torch.equal(sd[k], own[k])]
    if bad:
        raise SystemExit(f"rebuilt weights differ from the exported ones: {bad[:8]}")
    model.load_state_dict(sd)  # the same values; the exported tensors for certain


def onnx_output_name(onnx_path):
    try:
        import onnx
        m = onnx.load(onnx_path, load_external_data=False)
        return [o.name for o in m.graph.output]
    except ImportError:
        return None


def run_checked(cmd, env=None, what=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(f"\n{what or cmd[0]} failed (exit {p.returncode}):\n  "
                         + " ".join(cmd) + "\n--- stdout ---\n" + p.stdout
                         + "--- stderr ---\n" + p.stderr)
        raise SystemExit(1)
    return p, dt


def otc_generate(train, n, prompt, env):
    cmd = [train, "--generate", str(n), "--prompt-ids", ",".join(map(str, prompt)),
           "--temperature", "0"]
    p, wall = run_checked(cmd, env=env, what="train --generate")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        raise SystemExit(f"train --generate printed {len(lines)} lines, expected 1:\n{p.stdout}")
    ids = [int(x) for x in lines[0].split()]
    m = GEN_LINE.search(p.stderr)
    if not m:
        raise SystemExit(f"no 'generated ...' line on train's stderr:\n{p.stderr}")
    return {"cmd": cmd, "ids": ids, "wall_s": wall, "loop_s": float(m.group(3)),
            "rows": int(m.group(2)), "positions": int(m.group(4)),
            "ms_per_position": float(m.group(5)), "stderr_line": m.group(0)}


def torch_generate(model, prompt, n, use_cache):
    ids = torch.tensor([prompt], dtype=torch.int64)
    mask = torch.ones_like(ids)
    gc = transformers.GenerationConfig(max_new_tokens=n, min_new_tokens=0, do_sample=False,
                                       num_beams=1, pad_token_id=0, eos_token_id=None,
                                       bos_token_id=None, use_cache=use_cache)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, generation_config=gc)
        dt = time.perf_counter() - t0
    out = out[0].tolist()
    if out[:len(prompt)] != list(prompt) or len(out) != len(prompt) + n:
        raise SystemExit(f"PyTorch generate returned {len(out)} ids, expected "
                         f"{len(prompt)} + {n} starting with the prompt")
    return out[len(prompt):], dt


def med(xs):
    return statistics.median(xs) if xs else None


def compare(a, b):
    agree = sum(x == y for x, y in zip(a, b))
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return {"agree": agree, "of": min(len(a), len(b)), "first_difference": first}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=MODELS, default="tiny-gpt2")
    ap.add_argument("--seq", type=int, default=256, help="the export's sequence length")
    ap.add_argument("--tokens", type=int, default=40, help="ids generated (N)")
    ap.add_argument("--prompt-len", type=int, default=8, help="prompt ids (P)")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (R); medians")
    ap.add_argument("--no-cache-rounds", type=int, default=None,
                    help="rounds of PyTorch with use_cache=False (default: --rounds; "
                         "0 skips it)")
    ap.add_argument("--work", default="/tmp/genbench", help="scratch directory")
    ap.add_argument("--otc-bin", default="/work/main/build/bin")
    ap.add_argument("--out", help="write the results here as JSON")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch threads, and OMP_NUM_THREADS for train")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse WORK's export and program when made with the same "
                         "--model and --seq")
    a = ap.parse_args()
    if a.prompt_len < 1 or a.tokens < 1:
        ap.error("--prompt-len and --tokens must be at least 1")
    if a.prompt_len + a.tokens > a.seq:
        ap.error(f"--prompt-len {a.prompt_len} + --tokens {a.tokens} exceed --seq {a.seq}")
    nc_rounds = a.rounds if a.no_cache_rounds is None else a.no_cache_rounds

    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    sd_path = os.path.join(work, "model.safetensors")
    gen_dir = os.path.join(work, "gen")
    stamp_path = os.path.join(work, "stamp.json")
    stamp = {"model": a.model, "seq": a.seq, "seed": SEED}
    compile_bin = os.path.join(a.otc_bin, "otc-compile")
    train = os.path.join(gen_dir, "train")

    torch.set_num_threads(a.threads)
    mach, vers = machine(), versions()
    log(f"machine: {mach['nproc']} cores, {mach['cpu']}; torch {vers['torch']}, "
        f"transformers {vers['transformers']}, onnxscript {vers['onnxscript']}; "
        f"{a.threads} threads")

    reused = False
    if a.reuse and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            reused = json.load(f) == stamp and os.path.exists(train) \
                and os.path.exists(sd_path)
    timings = {}
    if not reused:
        if os.path.exists(stamp_path):
            os.remove(stamp_path)
        t0 = time.perf_counter()
        export(a.model, a.seq, onnx_path, sd_path)
        timings["export_s"] = time.perf_counter() - t0
        outs = onnx_output_name(onnx_path)
        log(f"ONNX outputs: {outs}")
        if outs is not None and "logits" not in outs:
            raise SystemExit(f"the export's outputs are {outs}, not 'logits': "
                             "--loss=cross_entropy:logits:targets would not apply")
        cmd = [compile_bin, onnx_path, "-o", gen_dir, "--micro-batch", "1", "--generate",
               "--loss=cross_entropy:logits:targets"]
        log("$ " + " ".join(cmd))
        p, timings["compile_s"] = run_checked(cmd, what="otc-compile")
        for line in (p.stdout + p.stderr).splitlines():
            if "warning" in line or "note" in line:
                log("  " + line)
        log(f"compiled in {timings['compile_s']:.1f} s")
        with open(stamp_path, "w") as f:
            json.dump(stamp, f)
    else:
        log(f"reusing {onnx_path} and {gen_dir}")

    model = build_model(a.model)
    check_weights(model, sd_path)
    vocab = model.config.vocab_size
    nparams = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(PROMPT_SEED)
    prompt = [int(x) for x in rng.integers(0, vocab, size=a.prompt_len)]
    log(f"{a.model}: {nparams / 1e6:.2f}M parameters, vocabulary {vocab}, export "
        f"sequence {a.seq}; prompt ({a.prompt_len} ids, seed {PROMPT_SEED}): "
        + ",".join(map(str, prompt)) + f"; {a.tokens} new ids, {a.rounds} rounds")

    # otc: the whole process and its decode loop.
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    otc_generate(train, a.tokens, prompt, env)  # warm-up (page cache, first load)
    otc_runs = [otc_generate(train, a.tokens, prompt, env) for _ in range(a.rounds)]
    log("$ " + " ".join(otc_runs[0]["cmd"]))
    log("  " + otc_runs[0]["stderr_line"])
    otc_all = otc_runs[0]["ids"]
    if otc_all[:a.prompt_len] != prompt or len(otc_all) != a.prompt_len + a.tokens:
        raise SystemExit(f"train printed {len(otc_all)} ids, expected the prompt and "
                         f"{a.tokens}: {otc_all}")
    otc_ids = otc_all[a.prompt_len:]
    otc_same = all(r["ids"] == otc_all for r in otc_runs)

    # PyTorch: the generate call alone.
    torch_generate(model, prompt, a.tokens, True)  # warm-up
    pt = [torch_generate(model, prompt, a.tokens, True) for _ in range(a.rounds)]
    pt_ids = pt[0][0]
    pt_nc = [torch_generate(model, prompt, a.tokens, False) for _ in range(nc_rounds)]

    cmp_cache = compare(otc_ids, pt_ids)
    cmp_nc = compare(otc_ids, pt_nc[0][0]) if pt_nc else None

    res = {
        "model": a.model, "parameters": nparams, "vocab": vocab, "seq": a.seq,
        "tokens": a.tokens, "prompt_len": a.prompt_len, "rounds": a.rounds,
        "no_cache_rounds": nc_rounds, "threads": a.threads, "prompt": prompt,
        "machine": mach, "versions": vers, "reused_build": reused, **timings,
        "otc": {
            "command": " ".join(otc_runs[0]["cmd"]),
            "wall_s": [r["wall_s"] for r in otc_runs],
            "loop_s": [r["loop_s"] for r in otc_runs],
            "ms_per_position": [r["ms_per_position"] for r in otc_runs],
            "positions": otc_runs[0]["positions"], "rows": otc_runs[0]["rows"],
            "wall_s_median": med([r["wall_s"] for r in otc_runs]),
            "loop_s_median": med([r["loop_s"] for r in otc_runs]),
            "ids": otc_ids, "ids_same_every_round": otc_same,
        },
        "pytorch": {
            "attention": "eager",
            "cache_s": [t for _, t in pt], "cache_s_median": med([t for _, t in pt]),
            "no_cache_s": [t for _, t in pt_nc],
            "no_cache_s_median": med([t for _, t in pt_nc]),
            "ids": pt_ids, "no_cache_ids": pt_nc[0][0] if pt_nc else None,
        },
        "agreement": {"otc_vs_pytorch_cache": cmp_cache,
                      "otc_vs_pytorch_no_cache": cmp_nc},
    }
    pc = res["pytorch"]["cache_s_median"]
    pn = res["pytorch"]["no_cache_s_median"]
    ow, ol = res["otc"]["wall_s_median"], res["otc"]["loop_s_median"]
    res["ratios"] = {
        "otc_wall_over_pytorch_cache": ow / pc,
        "otc_loop_over_pytorch_cache": ol / pc,
        "otc_wall_over_pytorch_no_cache": ow / pn if pn else None,
        "otc_loop_over_pytorch_no_cache": ol / pn if pn else None,
    }

    n = a.tokens
    log("")
    log(f"{a.model}, {n} ids after {a.prompt_len}, medians of {a.rounds} "
        f"({a.threads} threads, {mach['nproc']} cores, {mach['cpu']}):")
    rows = [("otc train --generate (process)", ow, ow / pc),
            ("otc decode loop (its stderr)", ol, ol / pc),
            ("PyTorch generate, KV cache", pc, 1.0)]
    if pn is not None:
        rows.append(("PyTorch generate, use_cache=False", pn, pn / pc))
    log(f"  {'':36s} {'seconds':>9s} {'ms/id':>8s} {'ids/s':>8s} {'/ PyTorch cache':>16s}")
    for label, s, r in rows:
        log(f"  {label:36s} {s:9.4f} {1e3 * s / n:8.2f} {n / s:8.1f} {r:16.2f}")
    log(f"  otc ms per position (median): {med(res['otc']['ms_per_position']):.3f} "
        f"over {res['otc']['positions']} positions")
    d = cmp_cache
    log(f"greedy ids, otc vs PyTorch (cache): {d['agree']} of {d['of']} agree; first "
        f"difference: {'none' if d['first_difference'] is None else 'new id ' + str(d['first_difference'])}")
    if cmp_nc is not None:
        same_pt = pt_nc[0][0] == pt_ids
        log(f"greedy ids, otc vs PyTorch (no cache): {cmp_nc['agree']} of {cmp_nc['of']}"
            f" agree; PyTorch cache vs no cache identical: {same_pt}")
        res["agreement"]["pytorch_cache_vs_no_cache_identical"] = same_pt
    if not otc_same:
        log("note: otc's ids differed between rounds")
    if d["first_difference"] is not None:
        i = d["first_difference"]
        log(f"  otc    : {' '.join(map(str, otc_ids))}")
        log(f"  PyTorch: {' '.join(map(str, pt_ids))}")
        log(f"  (at new id {i}: otc {otc_ids[i]}, PyTorch {pt_ids[i]}; random weights "
            "can hold near-ties)")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
