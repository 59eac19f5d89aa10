#!/usr/bin/env python3
"""Training speed of GPT-2 124M: otc's cuda program beside PyTorch eager and
torch.compile, in two halves so that the machine that has otc and the one
that has the GPU need not be the same.

    speed.py build OUT [--otc-bin DIR] [--micro-batches 8,16] [--grad-accum 1]
                       [--target cuda|cpu] [--tiny]
        needs otc (OTC_BIN or --otc-bin, default build/bin of this repository)
        and python3 with onnx and numpy; no GPU. Writes the GPT-2 124M ONNX
        graph (bench/make_gpt2_onnx.py: 12 layers, 768 wide, 12 heads, vocab
        50304, sequence 1024, dense random weights), compiles it with
        `otc-compile --target=cuda --precision=bf16 --micro-batch MB
        --grad-accum K` for each micro-batch, prints the compile wall time,
        kernel count (`__global__` in model.cu), kernel launches, library
        calls, model.cu size and plan.json's planned total_peak, and writes
        OUT/build.json. Keeps only what the run half needs: OUT/mbN/train and
        plan.json, OUT/params.json (parameter names and shapes), this script,
        speed_torch.py, st_io.py and OUT/run.sh; a few MB in all.

    OUT/run.sh [--steps 30] [--warmup 5] [--no-torch] [--results DIR] ...
    speed.py run OUT [same options]
        needs only the GPU (nvidia-smi), python3 with numpy, and PyTorch where
        it imports. Generates GPT-2-style initial weights (N(0, 0.02), the
        residual projections N(0, 0.02/sqrt(2L)), LayerNorm 1 and biases 0)
        and a shard of uniformly random tokens, trains each program --steps
        steps, and, where torch imports, the same model in PyTorch eager and
        with torch.compile (speed_torch.py: BF16 autocast, SDPA causal
        attention, fused AdamW, same micro-batch and sequence). Prints tokens/s, ms per step, MFU,
        measured and planned peak memory beside the targets, and writes
        RESULTS/<YYYY-MM-DD>-<gpu>.json (RESULTS: --results, else bench/results
        when run from the repository, else OUT/results).
        Where OUT/llmc/train_gpt2cu exists (bench/llmc-build.sh), llm.c
        trains the same model after otc at each micro-batch (`-e d12`: its
        own GPT-2 initialization; the same token shard; --steps steps) and
        its figures are recorded as llmc_* beside otc's (--no-llmc: not).

Step timing: the first --warmup steps (CUDA graph capture, cuBLASLt
algorithm choice, torch.compile's compilation) are left out; ms per step is
the mean of the others, tokens/s their tokens over their time. With
--grad-accum 1 (the default) a step is one micro-batch of MB x 1024 tokens
plus the optimizer update, as in the llm.c and torch.compile figures measured
beside it (ANCHORS.md: llm.c 18.5 ms per 8192-token step at micro-batch 8);
llm.c's 0.5M-token steps are --grad-accum 64 at micro-batch 8 (32 at 16).

MFU = tokens/s x (6 N + 6 L h T) / peak, llm.c's count (N parameters with
the position table, L layers, h width, T sequence; 6 L h T is the attention
scores and weighted sum, forward and backward, over the causal half: PaLM's
12 L h T halved), over 989.4 TFLOP/s
(BF16 dense, H100/H200 SXM; A100 312; else --peak-tflops). otc's own MFU
(plan.json flops.model, as `train` prints it) is recorded as mfu_plan.

Peak memory: the largest per-process figure of `nvidia-smi
--query-compute-apps` polled every 0.2 s while the program runs (the CUDA
context and library handles included), for otc and PyTorch alike (where
nvidia-smi shows no process, as in some containers: the device-wide figure
above the one before the run started); otc's
`train` also reports device memory in use per step (memory_bytes), and
PyTorch its max_memory_reserved: both are recorded. Predicted: plan.json
memory_bytes.total_peak (the arena, the libraries' buffers and the CUDA
context).

--model llama-1b or qwen3-0.6b times the Llama family instead (sequence
2048; bench/make_llama_onnx.py's graph for otc, Hugging Face's
LlamaForCausalLM of the same shape for PyTorch; no llm.c), writing
<date>-<gpu>-<model>.json; --model llama-tiny is its cpu smoke test.

--tiny --target cpu builds a 2-layer, 64-wide model for the cpu target, so
that both halves run in seconds without a GPU (a smoke test of this script;
its figures mean nothing).
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IN_REPO = os.path.exists(os.path.join(HERE, "make_gpt2_onnx.py"))
for _p in (HERE, os.path.join(HERE, "..", "test", "e2e")):
    if os.path.exists(os.path.join(_p, "st_io.py")):
        sys.path.insert(0, _p)
        break
import st_io  # noqa: E402

GPT2 = dict(layers=12, embd=768, heads=12, vocab=50304, seq=1024, gelu="tanh")
TINY = dict(layers=2, embd=64, heads=4, vocab=256, seq=64, gelu="tanh")
# --model: the shapes a build compiles, and its default micro-batches.
MODELS = {
    "gpt2-124m": (GPT2, [8, 16]),
    "gpt2-tiny": (TINY, [2, 4]),
    # The cpu target's side-by-side configurations: GPT-2 124M at sequence
    # 256, and a GPT-2-shaped 4 x 256 model with an 8192-token vocabulary.
    "gpt2-124m-seq256": (dict(GPT2, seq=256), [4]),
    "gpt2-small-cpu": (dict(layers=4, embd=256, heads=4, vocab=8192, seq=256,
                            gelu="tanh"), [8]),
    # The Llama family (family "llama": bench/make_llama_onnx.py's graph,
    # Hugging Face's LlamaForCausalLM of the same config on the PyTorch
    # side): Llama 3.2 1B's shape, and Qwen3 0.6B's without its q/k norms
    # (LlamaForCausalLM with head_dim 128 is that model exactly), both at
    # sequence 2048 with tied embeddings.
    "llama-1b": (dict(family="llama", layers=16, embd=2048, heads=32, kv_heads=8,
                      head_dim=64, ffn=8192, vocab=128256, seq=2048,
                      rope_theta=500000.0), [2, 4]),
    "qwen3-0.6b": (dict(family="llama", layers=28, embd=1024, heads=16, kv_heads=8,
                        head_dim=128, ffn=3072, vocab=151936, seq=2048,
                        rope_theta=1000000.0), [4, 8]),
    "llama-tiny": (dict(family="llama", layers=2, embd=64, heads=4, kv_heads=2,
                        head_dim=16, ffn=128, vocab=256, seq=64,
                        rope_theta=500000.0), [2, 4]),
}
REAL_VOCAB = 50257  # GPT-2's tokens; the table is padded to 50304

from speed_report import FIT_BUDGET, log, print_build, print_run  # noqa: E402

# ----------------------------------------------------------------------------
# Build half
# ----------------------------------------------------------------------------

def otc_bin_dir(arg):
    if arg:
        return arg
    if os.environ.get("OTC_BIN"):
        return os.environ["OTC_BIN"]
    return os.path.join(HERE, "..", "build", "bin")


def source_figures(path):
    """Kernel count, launches and library calls of an emitted program."""
    with open(path) as f:
        text = f.read()
    # Library calls, the GEMMs included, are OTC_LIB(fn, ...); launches are
    # OTC_LAUNCH(kN, ...) (the macros of codegen/EmitProgram.cpp).
    lib = re.findall(r"\bOTC_LIB\((otcrt_[A-Za-z0-9_]+)", text)
    return {
        "source_bytes": len(text.encode()),
        "kernels": text.count("__global__"),
        "kernel_launches": len(re.findall(r"\bOTC_LAUNCH\(k[0-9]+", text)),
        "library_calls": len(lib),
        "library_functions": sorted(set(lib)),
    }


def timed_compile(cmd):
    """Runs otc-compile; returns (wall seconds, seconds until it starts the
    host compiler (nvcc or c++), stderr), or (None, None, stderr) on failure.
    The difference of the two is the host compiler's time."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    host, lines = None, []
    for line in p.stderr:
        if host is None and line.startswith("otc-compile: building"):
            host = time.time() - t0
        lines.append(line)
    p.wait()
    secs = time.time() - t0
    if p.returncode != 0:
        return None, None, "".join(lines)
    return secs, host, "".join(lines)


def git_commit(src):
    try:
        return subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def write_model(cfg, work):
    """The ONNX graph of `cfg` in `work`: GPT-2's (make_gpt2_onnx.py, dense
    random weights) or, family "llama", make_llama_onnx.py's with sparse
    zero weights (the program is compiled from shapes; the run half makes
    the weights)."""
    if cfg.get("family") == "llama":
        model = os.path.join(work, "llama.onnx")
        cmd = [sys.executable, os.path.join(HERE, "make_llama_onnx.py"), model,
               "--layers", str(cfg["layers"]), "--embd", str(cfg["embd"]),
               "--heads", str(cfg["heads"]), "--kv-heads", str(cfg["kv_heads"]),
               "--head-dim", str(cfg["head_dim"]), "--ffn", str(cfg["ffn"]),
               "--vocab", str(cfg["vocab"]), "--seq", str(cfg["seq"]),
               "--rope-theta", str(cfg["rope_theta"]), "--tied", "--weights", "sparse"]
    else:
        model = os.path.join(work, "gpt2.onnx")
        cmd = [sys.executable, os.path.join(HERE, "make_gpt2_onnx.py"), model,
               "--layers", str(cfg["layers"]), "--embd", str(cfg["embd"]),
               "--heads", str(cfg["heads"]), "--vocab", str(cfg["vocab"]),
               "--seq", str(cfg["seq"]), "--gelu", cfg["gelu"]]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return model


def build(a):
    out = os.path.abspath(a.out)
    otc_bin = os.path.abspath(otc_bin_dir(a.otc_bin))
    compiler = os.path.join(otc_bin, "otc-compile")
    if not os.access(compiler, os.X_OK):
        sys.exit(f"speed build: error: no otc-compile in {otc_bin} (set OTC_BIN or --otc-bin)")
    model_name = "gpt2-tiny" if a.tiny else a.model
    cfg, default_mbs = MODELS[model_name]
    cfg = dict(cfg)
    mbs = [int(x) for x in a.micro_batches.split(",")] if a.micro_batches else \
        default_mbs
    precision = a.precision or ("fp32" if a.target == "cpu" else "bf16")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "params.json")):
        os.remove(os.path.join(out, "params.json"))
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    model = write_model(cfg, work)
    if cfg.get("family") != "llama":
        import onnx
        graph = onnx.load(model, load_external_data=False).graph
        params = [{"name": t.name, "shape": list(t.dims)} for t in graph.initializer]
        with open(os.path.join(out, "params.json"), "w") as f:
            json.dump(params, f, indent=1)

    # One program per micro-batch with the default plan, and one more at the
    # memory target's micro-batch planned under --fit-budget by --remat=auto
    # (the fastest plan whose total peak, the CUDA context and the libraries'
    # buffers included as in the measured peak, fits).
    fit = a.fit_budget
    if fit is None and a.target == "cuda" and model_name == "gpt2-124m":
        fit = FIT_BUDGET
    specs = [(f"mb{mb}", mb, []) for mb in mbs]
    if fit and fit != "none":
        fit_mb = 8 if 8 in mbs else mbs[0]
        specs.insert([m for _, m, _ in specs].index(fit_mb) + 1,
                     (f"mb{fit_mb}-fit", fit_mb, ["--remat=auto", f"--memory-budget={fit}"]))
    programs = []
    for name, mb, opts in specs:
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        cmd = [compiler, model, "-o", d, f"--target={a.target}",
               f"--precision={precision}", "--micro-batch", str(mb),
               "--grad-accum", str(a.grad_accum)] + a.extra + opts
        log(f"speed build: {' '.join(cmd)}")
        secs, host_secs, err = timed_compile(cmd)
        if secs is None:
            sys.stderr.write(err)
            sys.exit(f"speed build: error: otc-compile failed at micro-batch {mb}")
        src = os.path.join(d, "model.cu" if a.target == "cuda" else "model.cpp")
        fig = source_figures(src)
        with open(os.path.join(d, "plan.json")) as f:
            plan = json.load(f)
        rec = {
            "name": name,
            "micro_batch": mb,
            "grad_accum": a.grad_accum,
            "remat": plan.get("remat", {}).get("policy"),
            "compile_seconds": round(secs, 2),
            "otc_seconds": round(host_secs, 2) if host_secs is not None else None,
            **fig,
            "train_bytes": os.path.getsize(os.path.join(d, "train")),
            "params_count": plan["params_count"],
            "predicted_peak_bytes": plan["memory_bytes"]["total_peak"],
            # The step-time prediction (plan.json `time`, issue 13).
            "predicted_tokens_per_s": plan.get("time", {}).get("tokens_per_s"),
            "predicted_step_ms": plan.get("time", {}).get("step_ms"),
            "predicted_device": plan.get("time", {}).get("device"),
            "planned_memory_bytes": plan["memory_bytes"],
            "model_flops_per_step": plan["flops"]["model"],
            "command": " ".join(os.path.relpath(c, out) if c.startswith(out) else c
                                for c in cmd),
        }
        programs.append(rec)
        # The parameters train loads (--init), by the slots of its program:
        # the graph's initializers less the constants otc folds in.
        if not os.path.exists(os.path.join(out, "params.json")):
            params = safetensors_shapes(os.path.join(d, "init.safetensors"))
            with open(os.path.join(out, "params.json"), "w") as f:
                json.dump(params, f, indent=1)
        # The GPU side needs only train and plan.json (MFU, the plan's peak).
        for name in ("model.cu", "model.cpp", "init.safetensors", "report.html"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                os.remove(p)
    shutil.rmtree(work)

    info = {
        "date": datetime.date.today().isoformat(),
        "host": socket.gethostname(),
        "cpu_cores": os.cpu_count(),
        "otc_bin": otc_bin,
        "otc_commit": git_commit(otc_bin),
        "bench_commit": git_commit(HERE),
        "note": "build figures only: compiled on a machine with otc; the run half "
                "(OUT/run.sh) measures speed and memory on a GPU",
        "target": a.target,
        "precision": precision,
        "model": model_name,
        "config": cfg,
        "extra_options": a.extra,
        "programs": programs,
    }
    with open(os.path.join(out, "build.json"), "w") as f:
        json.dump(info, f, indent=1)
    for name in ("speed.py", "speed_report.py", "speed_torch.py", "compare_trace.py"):
        shutil.copy(os.path.join(HERE, name), os.path.join(out, name))
    shutil.copy(st_io.__file__, os.path.join(out, "st_io.py"))
    run_sh = os.path.join(out, "run.sh")
    with open(run_sh, "w") as f:
        f.write("#!/usr/bin/env bash\n"
                "# The run half of bench/speed.py (see its header): on the GPU machine,\n"
                "#   OUT/run.sh [--steps 30] [--no-torch] [--results DIR]\n"
                "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
                "exec \"${PYTHON:-python3}\" \"$here/speed.py\" run \"$here\" \"$@\"\n")
    os.chmod(run_sh, 0o755)

    print_build(info)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "**"), recursive=True)
               if os.path.isfile(p))
    log(f"speed build: wrote {out}/build.json; {size / 2**20:.1f} MiB to carry; "
        f"run {out}/run.sh on a GPU machine")


# ----------------------------------------------------------------------------
# Run half
# ----------------------------------------------------------------------------

def gpu_info():
    """(name, driver) of GPU 0, or None without nvidia-smi or a GPU."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if r.returncode != 0 or not lines:
        return None
    name, _, driver = lines[0].partition(",")
    return name.strip(), driver.strip()


def peak_tflops_for(name, override):
    if override:
        return override
    if name and re.search(r"H100|H200|GH200", name):
        return 989.4
    if name and "A100" in name:
        return 312.0
    return None


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def device_memory_used():
    """Device-wide memory in use on GPU 0 (nvidia-smi), or None."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                            "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True, timeout=10)
        return int(r.stdout.split()[0]) * 2**20
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


class MemoryPoller:
    """Device memory of one process, polled with nvidia-smi every 0.2 s on a
    thread while it runs: its own figure (--query-compute-apps), and the
    device-wide figure above the one before it started, for where the
    per-process one is not shown (a container's pids)."""

    def __init__(self, pid, enabled, baseline=None):
        self.pid, self.peak, self.device_peak = pid, None, None
        self.baseline = baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if enabled else None
        if self._thread:
            self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                    "--format=csv,noheader,nounits"],
                                   capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                return
            for line in r.stdout.splitlines():
                pid, _, mib = line.partition(",")
                if pid.strip() == str(self.pid) and mib.strip().isdigit():
                    b = int(mib) * 2**20
                    self.peak = b if self.peak is None else max(self.peak, b)
            used = device_memory_used()
            if used is not None and self.baseline is not None:
                d = used - self.baseline
                self.device_peak = d if self.device_peak is None else max(self.device_peak, d)
            self._stop.wait(0.2)

    def stop(self):
        """Returns (peak bytes, how it was measured), or (None, None)."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        if self.peak is not None:
            return self.peak, "nvidia-smi, per process"
        if self.device_peak is not None:
            return self.device_peak, "nvidia-smi, device-wide above the idle figure"
        return None, None


def run_polled(cmd, log_path, gpu, timeout, env=None):
    """Runs cmd with stdout+stderr to log_path (in env, else this process's
    environment), polling its device memory. Returns (exit status, (device
    peak bytes, source) or (None, None), host max RSS bytes)."""
    baseline = device_memory_used() if gpu else None
    with open(log_path, "w") as logf:
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
        poller = MemoryPoller(p.pid, gpu, baseline)
        deadline = time.time() + timeout
        status = None
        while status is None:
            pid, st, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(st)
                break
            if time.time() > deadline:
                p.kill()
                _, st, ru = os.wait4(p.pid, 0)
                status = 124
                break
            time.sleep(0.1)
        p.returncode = status
        peak = poller.stop()
    return status, peak, ru.ru_maxrss * 1024


def gpt2_init(params, layers, seed):
    """GPT-2's initialization by parameter name (make_gpt2_onnx.py's names)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in params:
        name, shape = p["name"], p["shape"]
        if name.endswith(".bias"):
            out[name] = np.zeros(shape, np.float32)
        elif len(shape) == 1:
            out[name] = np.ones(shape, np.float32)
        else:
            std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
            out[name] = (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)
    return out


def llama_init(params, seed):
    """Llama's initialization by parameter name (make_llama_onnx.py's
    names, as Hugging Face's LlamaForCausalLM initializes them): the norms'
    weights 1, every matrix N(0, 0.02)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in params:
        name, shape = p["name"], p["shape"]
        if len(shape) == 1:
            out[name] = np.ones(shape, np.float32)
        else:
            out[name] = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
    return out


def token_range(cfg):
    """The token ids the benchmark draws from: GPT-2's 50,257 real tokens
    (its table is padded), else the whole vocabulary."""
    return cfg["vocab"] if cfg.get("family") == "llama" else min(REAL_VOCAB, cfg["vocab"])


def write_shard(path, tokens):
    """llm.c's shard format (runtime/include/otcrt/shards.h): version 1,
    uint16 tokens, or version 2, uint32, for a vocabulary past 65,536."""
    wide = int(tokens.max(initial=0)) > 0xFFFF
    header = np.zeros(256, np.int32)
    header[0], header[1], header[2] = 20240520, 2 if wide else 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.astype("<i4").tobytes())
        f.write(tokens.astype("<u4" if wide else "<u2").tobytes())


def safetensors_shapes(path):
    """[{name, shape}] of a safetensors file, from its header alone."""
    import struct
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return [{"name": k, "shape": v["shape"]} for k, v in header.items()
            if k != "__metadata__"]


def steady(values, warmup):
    """The values after the warm-up steps (the second half if too few)."""
    return values[warmup:] if len(values) > warmup else values[len(values) // 2:]


def run_otc(out, prog, info, a, gpu, shard, init_path, rundir):
    mb = prog["micro_batch"]
    name = prog.get("name", f"mb{mb}")
    d = os.path.join(out, name)
    jsonl = os.path.join(rundir, f"otc-{name}.jsonl")
    logp = os.path.join(rundir, f"otc-{name}.log")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    cmd = [os.path.join(d, "train"), "--data", shard, "--init", init_path,
           "--steps", str(a.steps), "--lr", "3e-4", "--seed", "0",
           "--grad-clip", str(a.grad_clip),
           "--log-every", "1", "--log-jsonl", jsonl]
    log(f"speed run: otc micro-batch {mb}: {' '.join(cmd)}")
    status, dev_peak, rss = run_polled(cmd, logp, gpu, a.timeout)
    rec = {"otc_log": os.path.relpath(logp, out)}
    if status != 0:
        with open(logp) as f:
            tail = f.read().strip().splitlines()[-1:] or ["(no output)"]
        log(f"speed run: otc micro-batch {mb} failed ({status}): {tail[0]}")
        rec["otc_error"] = f"exit {status}: {tail[0]}"
        return rec
    steps = [json.loads(ln) for ln in open(jsonl) if ln.strip()]
    steps = [s for s in steps if s.get("event") == "step"]
    st = steady(steps, a.warmup)
    secs = sum(s["ms"] for s in st) / 1e3
    tokens = sum(s.get("tokens", 0) for s in st)
    mem = [s["memory_bytes"] for s in steps if "memory_bytes" in s]
    mfu_plan = [s["mfu"] for s in st if "mfu" in s]
    rec.update({
        "otc_steps_timed": len(st),
        "otc_ms_per_step": secs * 1e3 / len(st),
        "otc_ms_per_step_median": float(np.median([s["ms"] for s in st])),
        "otc_tokens_per_s": tokens / secs if secs > 0 else None,
        "otc_mfu_plan": float(np.mean(mfu_plan)) if mfu_plan else None,
        "otc_loss_first": steps[0]["loss"],
        "otc_loss_last": steps[-1]["loss"],
        "otc_device_memory_in_use_bytes": max(mem) if mem else None,
        "otc_host_max_rss_bytes": rss,
    })
    if gpu:
        peak, source = dev_peak
        if peak is None:
            peak, source = rec["otc_device_memory_in_use_bytes"], \
                "train's memory_bytes (device total - free)"
        rec["otc_peak_bytes"], rec["otc_peak_source"] = peak, source
    else:
        rec["otc_peak_bytes"] = rss
        rec["otc_peak_source"] = "host max RSS (cpu target)"
    return rec


# llm.c's step line (train_gpt2.cu's printf0 "step %4d/%d | loss %7.6f
# (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f
# tok/s"): the step's milliseconds between CUDA events around the micro-steps
# and the update. Its tok/s is a running average, so tokens/s is taken from
# the milliseconds instead.
LLMC_STEP = re.compile(r"step\s+(\d+)/(\d+) \| loss (\S+) .*\| ([0-9.]+) ms \| "
                       r"(-?[0-9.]+)% bf16 MFU")


def llmc_steps(lines):
    """The steps of llm.c's output: step number, loss, ms and its own MFU.

    >>> llmc_steps(["val loss 11.007545",
    ...   "step    1/30 | loss 11.009962 (+nanz)| norm 15.4338 (+nanz)| lr 3.00e-04 "
    ...   "| 93.81 ms | 29.0% bf16 MFU | 87326 tok/s",
    ...   "step   12/30 | loss -nan (+0.00z)| norm 2.1000 (+0.12z)| lr 3.00e-04 "
    ...   "| 18.52 ms | 42.5% bf16 MFU | 441234 tok/s",
    ...   "step   13/30 | loss 10.97 (+nanz)| norm 0.49 (+nanz)| lr 3.00e-04 "
    ...   "| 17.17 ms | -100.0% bf16 MFU | 477855 tok/s",
    ...   "total average iteration time: 18.600000 ms"])
    [(1, 11.009962, 93.81, 0.29), (12, nan, 18.52, 0.425), (13, 10.97, 17.17, -1.0)]
    """
    out = []
    for ln in lines:
        m = LLMC_STEP.match(ln)
        if m:
            out.append((int(m[1]), float(m[3]), float(m[4]), float(m[5]) / 100))
    return out


def llmc_env(binary, python):
    """The environment train_gpt2cu runs in: where ldd finds some of its
    libraries (cuDNN, cuBLASLt, NVRTC) nowhere, the nvidia/*/lib folders of
    python's wheels (PyTorch's nvidia-cudnn-cu13, nvidia-cublas, ...) are
    added after LD_LIBRARY_PATH. Returns (environment, folders added,
    libraries still not found)."""
    def not_found(env):
        try:
            r = subprocess.run(["ldd", binary], capture_output=True, text=True,
                               env=env, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [ln.split()[0] for ln in r.stdout.splitlines() if "not found" in ln]

    env = dict(os.environ)
    if not not_found(env):
        return env, [], []
    r = subprocess.run([python, "-c", "import glob, os, nvidia\n"
                        "for p in nvidia.__path__:\n"
                        "    print(*sorted(glob.glob(os.path.join(p, '*', 'lib'))), sep='\\n')"],
                       capture_output=True, text=True)
    dirs = [d for d in r.stdout.splitlines() if d.strip()]
    env["LD_LIBRARY_PATH"] = ":".join(
        [p for p in [env.get("LD_LIBRARY_PATH")] if p] + dirs)
    return env, dirs, not_found(env)


def run_llmc(out, binary, env, mb, grad_accum, cfg, a, gpu, shard, rundir):
    """llm.c's train_gpt2cu at micro-batch mb: GPT-2 124M from its own
    initialization (-e d12), grad_accum micro-batches a step (-d), the
    shard for training and validation (validation twice, 2 batches, outside
    the timed steps; no sampling, no HellaSwag, no checkpoints)."""
    tag = f"llmc-mb{mb}" + (f"-ga{grad_accum}" if grad_accum > 1 else "")
    logp = os.path.join(rundir, f"{tag}.log")
    tokens_per_step = mb * grad_accum * cfg["seq"]
    cmd = [binary, "-e", "d12", "-b", str(mb), "-t", str(cfg["seq"]),
           "-d", str(tokens_per_step), "-x", str(a.steps), "-v", "10000", "-m", "2",
           "-s", "0", "-h", "0", "-i", shard, "-j", shard,
           "-o", os.path.join(rundir, tag)]
    log(f"speed run: llm.c micro-batch {mb}: {' '.join(cmd)}")
    status, dev_peak, rss = run_polled(cmd, logp, gpu, a.timeout, env=env)
    rec = {"llmc_log": os.path.relpath(logp, out)}
    with open(logp, errors="replace") as f:
        lines = f.read().splitlines()
    steps = llmc_steps(lines)
    if status != 0 or not steps:
        tail = [ln for ln in lines if ln.strip()][-1:] or ["(no output)"]
        log(f"speed run: llm.c micro-batch {mb} failed ({status}): {tail[0]}")
        rec["llmc_error"] = f"exit {status}: {tail[0]}"
        return rec
    st = steady(steps, a.warmup)
    ms = [s[2] for s in st]
    rec.update({
        "llmc_steps_timed": len(st),
        "llmc_ms_per_step": sum(ms) / len(ms),
        "llmc_ms_per_step_median": float(np.median(ms)),
        "llmc_tokens_per_s": tokens_per_step * len(ms) / (sum(ms) / 1e3),
        # llm.c prints -100% where it has no NVML to read the GPU's peak.
        "llmc_mfu_own": (float(np.mean([s[3] for s in st]))
                         if all(s[3] >= 0 for s in st) else None),
        "llmc_loss_first": steps[0][1],
        "llmc_loss_last": steps[-1][1],
        "llmc_host_max_rss_bytes": rss,
    })
    rec["llmc_peak_bytes"], rec["llmc_peak_source"] = dev_peak
    return rec


def llmc_setup(out, info, gpu, a):
    """(train_gpt2cu, its environment, the results' llmc record) where
    OUT/llmc/train_gpt2cu can run here, else (None, None, None) with one
    line said."""
    binary = os.path.join(out, "llmc", "train_gpt2cu")
    if a.no_llmc or not gpu:
        return None, None, None
    if not os.access(binary, os.X_OK):
        log(f"speed run: llm.c not run: no {binary} (bench/llmc-build.sh builds it)")
        return None, None, None
    if info["model"] != "gpt2-124m":
        log(f"speed run: llm.c not run: it trains GPT-2 124M, not {info['model']}")
        return None, None, None
    env, dirs, lost = llmc_env(binary, a.python)
    if lost:
        log(f"speed run: llm.c not run: ldd finds no {', '.join(lost)} "
            f"(nor in {a.python}'s nvidia wheels)")
        return None, None, None
    note = os.path.join(out, "llmc", "commit.txt")
    build = open(note).read().splitlines() if os.path.exists(note) else []
    return binary, env, {
        "build": build,
        "ld_library_path_added": dirs,
        "grad_clip": 1.0,  # fixed in train_gpt2.cu
        "initialization": "llm.c's own (-e d12: seed 42)",
    }


def torch_available(py):
    r = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def run_torch(out, mb, mode, cfg, a, gpu, rundir, threads=0):
    tag = f"torch-{mode}-mb{mb}" + (f"-t{threads}" if threads else "")
    logp = os.path.join(rundir, f"{tag}.log")
    res = os.path.join(rundir, f"{tag}.json")
    if os.path.exists(res):
        os.remove(res)
    cmd = [a.python, os.path.join(HERE, "speed_torch.py"), "--mode", mode,
           "--micro-batch", str(mb), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--config", json.dumps(cfg), "--result", res,
           "--grad-clip", str(a.grad_clip), "--threads", str(threads)]
    log(f"speed run: torch {mode} micro-batch {mb}" +
        (f", {threads} thread(s)" if threads else ""))
    status, dev_peak, rss = run_polled(cmd, logp, gpu, a.timeout)
    key = f"torch_{mode}"
    if status != 0 or not os.path.exists(res):
        with open(logp) as f:
            tail = f.read().strip().splitlines()[-1:] or ["(no output)"]
        log(f"speed run: torch {mode} micro-batch {mb} failed ({status}): {tail[0]}")
        return {f"{key}_error": f"exit {status}: {tail[0]}"}
    with open(res) as f:
        r = json.load(f)
    if r.get("unavailable"):
        log(f"speed run: torch {mode}: {r['unavailable']}")
        return {f"{key}_error": r["unavailable"]}
    rec = {f"{key}_{k}": v for k, v in r.items()}
    peak, source = dev_peak
    if not gpu:
        peak, source = rss, "host max RSS"
    elif peak is None:
        peak, source = r.get("max_memory_reserved"), "torch.cuda.max_memory_reserved"
    rec[f"{key}_peak_bytes"], rec[f"{key}_peak_source"] = peak, source
    return rec


def cpu_thread_counts():
    """1, 2, 4, ... up to this machine's cores, and the cores themselves."""
    n = os.cpu_count() or 1
    counts, t = [], 1
    while t < n:
        counts.append(t)
        t *= 2
    return counts + [n]


def best_threads(out, mb, mode, cfg, a, rundir):
    """PyTorch on the cpu at each thread count (torch.set_num_threads): the
    fastest run's figures as torch_<mode>_*, every count's ms per step in
    torch_<mode>_ms_by_threads; the last failure's record if none ran."""
    key, best, failed, by = f"torch_{mode}", None, {}, {}
    for t in cpu_thread_counts():
        rec = run_torch(out, mb, mode, cfg, a, False, rundir, threads=t)
        ms = rec.get(f"{key}_ms_per_step")
        if ms is None:
            failed = rec
            if "torch.compile" in rec.get(f"{key}_error", ""):
                break  # not in this torch: no other count will have it
            continue
        by[str(t)] = ms
        if best is None or ms < best[f"{key}_ms_per_step"]:
            best = rec
    if best is None:
        return failed
    return dict(best, **{f"{key}_ms_by_threads": by})


def alternate_rounds(rec, out, prog, info, a, gpu, shard, init_path, rundir, cfg,
                     torch_ver, llmc=None):
    """--rounds R: R - 1 more rounds of otc, llm.c (llmc: its run at a
    micro-batch), PyTorch eager and torch.compile one after another (each
    PyTorch mode at the thread count that was fastest in the first round),
    so that a machine's slow spell falls on all of them alike; each one's ms
    per step becomes the median of its rounds, every round's in
    <key>_ms_per_step_rounds."""
    mb = prog["micro_batch"]
    keys = ["otc"] + (["llmc"] if llmc else []) + \
        (["torch_eager", "torch_compile"] if torch_ver else [])
    rounds = {k: [rec[f"{k}_ms_per_step"]] for k in keys
              if rec.get(f"{k}_ms_per_step") is not None}
    for r in range(1, a.rounds):
        log(f"speed run: round {r + 1} of {a.rounds}")
        for k in rounds:
            if k == "otc":
                got = run_otc(out, prog, info, a, gpu, shard, init_path, rundir)
            elif k == "llmc":
                got = llmc(mb)
            else:
                mode = k.split("_", 1)[1]
                threads = rec.get(f"{k}_threads") or 0
                got = run_torch(out, mb, mode, cfg, a, gpu, rundir,
                                threads=threads if not gpu else 0)
            if got.get(f"{k}_ms_per_step") is not None:
                rounds[k].append(got[f"{k}_ms_per_step"])
    for k, ms in rounds.items():
        rec[f"{k}_ms_per_step_rounds"] = ms
        rec[f"{k}_ms_per_step"] = float(np.median(ms))
        rec[f"{k}_tokens_per_s"] = rec["tokens_per_step"] / (rec[f"{k}_ms_per_step"] / 1e3)


def flops_per_token(cfg, n_params):
    """llm.c's count: 6 N plus the attention's 6 L (heads x head size) T."""
    width = cfg["heads"] * cfg["head_dim"] if "head_dim" in cfg else cfg["embd"]
    return 6 * n_params + 6 * cfg["layers"] * width * cfg["seq"]


def run(a):
    out = os.path.abspath(a.out)
    with open(os.path.join(out, "build.json")) as f:
        info = json.load(f)
    with open(os.path.join(out, "params.json")) as f:
        params = json.load(f)
    cfg = info["config"]
    target = info["target"]
    g = gpu_info()
    if target == "cuda" and g is None:
        log("speed run: no GPU (nvidia-smi finds none): the cuda programs in "
            f"{out} await a GPU machine")
        return 77
    gpu = g is not None and target == "cuda"
    gpu_name, driver = g if gpu else ("cpu", None)
    peak_tflops = peak_tflops_for(gpu_name if gpu else None, a.peak_tflops)
    rundir = os.path.join(out, "run")
    os.makedirs(rundir, exist_ok=True)

    log(f"speed run: {info['model']} on {gpu_name}; generating weights and tokens")
    init_path = os.path.join(rundir, "init.safetensors")
    st_io.write(init_path, llama_init(params, a.seed) if cfg.get("family") == "llama"
                else gpt2_init(params, cfg["layers"], a.seed))
    max_tokens = max(p["micro_batch"] * p["grad_accum"] for p in info["programs"]) * \
        (cfg["seq"] + 1) * (a.steps + 2)
    rng = np.random.default_rng(a.seed + 1)
    shard = os.path.join(rundir, "random_000000.bin")
    write_shard(shard, rng.integers(0, token_range(cfg), max_tokens))

    torch_ver = None if a.no_torch else torch_available(a.python)
    if not a.no_torch and torch_ver is None:
        log(f"speed run: torch does not import in {a.python}: PyTorch runs skipped")

    llmc_bin, llmc_environ, llmc_info = llmc_setup(out, info, gpu, a)

    runs = []
    torch_runs = {}  # PyTorch runs once per micro-batch
    llmc_runs = {}  # and llm.c once per micro-batch and accumulation
    for prog in info["programs"]:
        mb = prog["micro_batch"]
        tokens_per_step = mb * prog["grad_accum"] * cfg["seq"]
        rec = {"name": prog.get("name", f"mb{mb}"), "remat": prog.get("remat"),
               "micro_batch": mb, "grad_accum": prog["grad_accum"], "seq": cfg["seq"],
               "tokens_per_step": tokens_per_step,
               "predicted_peak_bytes": prog["predicted_peak_bytes"],
               "predicted_tokens_per_s": prog.get("predicted_tokens_per_s"),
               "predicted_step_ms": prog.get("predicted_step_ms")}
        rec.update(run_otc(out, prog, info, a, gpu, shard, init_path, rundir))
        llmc = None
        if llmc_bin:
            def llmc(m, ga=prog["grad_accum"]):
                return run_llmc(out, llmc_bin, llmc_environ, m, ga, cfg, a, gpu,
                                shard, rundir)
            if (mb, prog["grad_accum"]) not in llmc_runs:
                llmc_runs[mb, prog["grad_accum"]] = llmc(mb)
            rec.update(llmc_runs[mb, prog["grad_accum"]])
        if torch_ver:
            if mb not in torch_runs:
                torch_runs[mb] = {}
                for mode in ("eager", "compile"):
                    if gpu:
                        torch_runs[mb].update(
                            run_torch(out, mb, mode, cfg, a, gpu, rundir))
                    else:
                        torch_runs[mb].update(
                            best_threads(out, mb, mode, cfg, a, rundir))
            rec.update(torch_runs[mb])
        if a.rounds > 1:
            alternate_rounds(rec, out, prog, info, a, gpu, shard, init_path, rundir,
                             cfg, torch_ver, llmc)
        fpt = flops_per_token(cfg, prog["params_count"])
        rec["flops_per_token"] = fpt
        for key in ("otc", "llmc", "torch_eager", "torch_compile"):
            tps = rec.get(f"{key}_tokens_per_s")
            if tps and peak_tflops:
                rec[f"{key}_mfu"] = tps * fpt / (peak_tflops * 1e12)
        # The headline names the issue asks for.
        rec["ms_per_step"] = rec.get("otc_ms_per_step")
        rec["mfu"] = rec.get("otc_mfu")
        if rec.get("otc_peak_bytes"):
            rec["peak_vs_plan"] = rec["otc_peak_bytes"] / rec["predicted_peak_bytes"] - 1
        for k in ("torch_eager_tokens_per_s", "torch_compile_tokens_per_s"):
            rec.setdefault(k, None)
        rec["build"] = {k: prog[k] for k in ("compile_seconds", "kernels",
                                             "kernel_launches", "library_calls",
                                             "source_bytes", "train_bytes")}
        runs.append(rec)

    result = {
        "gpu": gpu_name,
        "driver": driver,
        "date": datetime.date.today().isoformat(),
        "host": socket.gethostname(),
        "model": info["model"],
        "target": target,
        "precision": info["precision"],
        "config": cfg,
        "otc_commit": info.get("otc_commit"),
        "torch_version": torch_ver,
        **({"llmc": llmc_info} if llmc_info else {}),
        "steps": a.steps,
        "warmup_steps": a.warmup,
        "grad_clip": a.grad_clip,
        "peak_tflops": peak_tflops,
        "mfu_formula": "tokens_per_s * (6*N + 6*L*h*T) / peak_tflops",
        "micro_batches": [r["micro_batch"] for r in runs],
        "runs": runs,
        "build": info,
    }
    results_dir = a.results or (os.path.join(HERE, "results") if IN_REPO
                                else os.path.join(out, "results"))
    os.makedirs(results_dir, exist_ok=True)
    label = slug(gpu_name) if gpu else ("cpu-smoke" if info["model"] == "gpt2-tiny"
                                        else f"cpu-{info['model']}")
    if gpu and info["model"] != "gpt2-124m":
        label += f"-{info['model']}"
    path = os.path.join(results_dir, f"{result['date']}-{label}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print_run(result)
    log(f"speed run: wrote {path}")
    failed = [r["micro_batch"] for r in runs if "otc_error" in r]
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile the programs (needs otc)")
    b.add_argument("out")
    b.add_argument("--otc-bin", help="otc's bin directory (default $OTC_BIN, else build/bin)")
    b.add_argument("--micro-batches", help="comma-separated (default 8,16; --tiny 2,4)")
    b.add_argument("--grad-accum", type=int, default=1)
    b.add_argument("--target", choices=("cuda", "cpu"), default="cuda")
    b.add_argument("--precision", choices=("fp32", "bf16", "fp8"),
                   help="default bf16 (cuda), fp32 (cpu); fp8: the GEMMs the "
                   "step-time model picks run FP8 (README, \"FP8 GEMMs\")")
    b.add_argument("--tiny", action="store_true",
                   help="a 2-layer model (smoke test; --model gpt2-tiny)")
    b.add_argument("--model", choices=sorted(MODELS), default="gpt2-124m",
                   help="the shapes to compile (default gpt2-124m)")
    b.add_argument("--fit-budget", help="also build the memory target's micro-batch with "
                   f"--remat=auto under this budget (default {FIT_BUDGET} for GPT-2 124M on "
                   "cuda; none to skip)")
    b.add_argument("--extra", action="append", default=[],
                   help="one more otc-compile option (repeatable), e.g. --extra=--remat=selective")
    r = sub.add_parser("run", help="train the programs (needs the GPU)")
    r.add_argument("out")
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--warmup", type=int, default=5, help="steps left out of the timing")
    r.add_argument("--no-torch", action="store_true")
    r.add_argument("--no-llmc", action="store_true",
                   help="do not run OUT/llmc/train_gpt2cu (llm.c) where it exists")
    r.add_argument("--results", help="directory for <date>-<gpu>.json")
    r.add_argument("--peak-tflops", type=float, help="peak for MFU (default: known GPUs)")
    r.add_argument("--python", default=sys.executable, help="python for the PyTorch runs")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--grad-clip", type=float, default=1.0,
                   help="global gradient-norm clipping for otc and PyTorch alike "
                        "(llm.c's default 1.0; 0: off)")
    r.add_argument("--timeout", type=float, default=1800, help="seconds per training run")
    r.add_argument("--rounds", type=int, default=1,
                   help="run otc and PyTorch this many times, one after another, and "
                        "report each one's median (a noisy machine)")
    a = ap.parse_args()
    if a.cmd == "build":
        build(a)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
