#!/usr/bin/env python3
"""The figures bench/speed.py prints: its build and run summaries, and the
reference figures and targets beside them (ANCHORS.md): llm.c and
torch.compile on an H100, otc's speed, memory, compile-time and source-size
targets. Copied with speed.py into a build's folder."""

# Figures to print beside the measured ones (ANCHORS.md, issue 12): H100,
# GPT-2 124M, BF16, by micro-batch.
LLMC_TOKENS_PER_S = {8: 442e3, 16: 493e3}
TORCH_COMPILE_H100_TOKENS_PER_S = {8: 412e3, 16: 458e3}
OTC_TARGET_TOKENS_PER_S = {8: 450e3, 16: 500e3}
PEAK_TARGET_BYTES = {8: 5.0 * 2**30}
# The budget of the "fit" program: llm.c's measured 5.0 GiB at micro-batch 8
# (plan.json's total_peak counts the CUDA context and the libraries' buffers
# outside the arena, as the measured peak does).
FIT_BUDGET = "5.0GiB"
PEAK_VS_PLAN_TOLERANCE = 0.03
COMPILE_TARGET_S = 60.0
SOURCE_TARGET_BYTES = 300 * 1000

GIB = 2**30

def log(msg):
    print(msg, flush=True)


def fmt_bytes(b):
    if b is None:
        return "n/a"
    return f"{b / GIB:.2f} GiB" if b >= GIB else f"{b / 2**20:.1f} MiB"


def fmt_rate(r):
    return "n/a" if r is None else f"{r / 1e3:.1f}K"


def print_build(info):
    cores = info.get("cpu_cores")
    log(f"\nbuild ({info['model']}, {info['target']}, {info['precision']}, "
        f"{cores} cores, otc {info.get('otc_commit')}):")
    log(f"  {'micro-batch':>11} {'compile s':>10} {'(otc s)':>8} {'kernels':>8} {'launches':>9} "
        f"{'lib calls':>10} {'source':>10} {'train':>9} {'planned peak':>13}")
    for p in info["programs"]:
        otc_s = p.get("otc_seconds")
        label = str(p["micro_batch"]) + (" (fit)" if p.get("name", "").endswith("-fit") else "")
        log(f"  {label:>11} {p['compile_seconds']:>10.1f} "
            f"{'?' if otc_s is None else f'{otc_s:.1f}':>8} {p['kernels']:>8} "
            f"{p['kernel_launches']:>9} {p['library_calls']:>10} "
            f"{p['source_bytes'] / 1000:>8.0f}KB {p['train_bytes'] / 2**20:>7.1f}MB "
            f"{fmt_bytes(p['predicted_peak_bytes']):>13}")
    fns = sorted({f for p in info["programs"] for f in p["library_functions"]})
    log(f"  library functions ({len(fns)}): {', '.join(fns)}")
    if info["target"] == "cuda" and info["model"] == "gpt2-124m":
        worst_s = max(p["compile_seconds"] for p in info["programs"])
        worst_b = max(p["source_bytes"] for p in info["programs"])
        log(f"  targets: compile under {COMPILE_TARGET_S:.0f} s on 2 cores "
            f"(here {worst_s:.1f} s on {cores}: {'met' if worst_s < COMPILE_TARGET_S else 'NOT met'}); "
            f"model.cu under {SOURCE_TARGET_BYTES // 1000} KB "
            f"(here {worst_b / 1000:.0f} KB: {'met' if worst_b < SOURCE_TARGET_BYTES else 'NOT met'})")
        for p in info["programs"]:
            limit = PEAK_TARGET_BYTES.get(p["micro_batch"])
            if limit and p["grad_accum"] == 1:
                log(f"  {p.get('name', p['micro_batch'])} (--remat={p.get('remat')}): planned peak "
                    f"{fmt_bytes(p['predicted_peak_bytes'])} (target: at most "
                    f"{fmt_bytes(limit)} measured; the plan is "
                    f"{'within it' if p['predicted_peak_bytes'] <= limit else 'ABOVE it'})")


def print_run(res):
    print_build(res["build"])
    h100 = res["model"] == "gpt2-124m" and "H100" in (res["gpu"] or "")
    log(f"\nrun ({res['gpu']}, {res['steps']} steps, the first {res['warmup_steps']} "
        f"not timed; MFU "
        + (f"over {res['peak_tflops']} TFLOP/s, {res['mfu_formula']}):" if res["peak_tflops"]
           else "n/a):"))
    if res.get("llmc"):
        log(f"  {'; '.join(res['llmc']['build'][:2]) or 'llm.c'}")
    for r in res["runs"]:
        mb = r["micro_batch"]
        plan = f", {r['name']}: --remat={r['remat']}" if r.get("name", "").endswith("-fit") else ""
        log(f"  micro-batch {mb} ({r['tokens_per_step']} tokens per step{plan}):")
        for key, label in (("otc", "otc"), ("llmc", "llm.c"),
                           ("torch_eager", "PyTorch eager"), ("torch_compile", "torch.compile")):
            if r.get(f"{key}_error"):
                log(f"    {label:<15} {r[key + '_error']}")
                continue
            tps = r.get(f"{key}_tokens_per_s")
            if tps is None:
                continue
            mfu = r.get(f"{key}_mfu")
            threads = r.get(f"{key}_ms_by_threads")
            log(f"    {label:<15} {fmt_rate(tps):>8} tokens/s  {r[key + '_ms_per_step']:9.2f} ms/step"
                f"  MFU {'n/a' if mfu is None else f'{100 * mfu:.1f}%':>6}"
                f"  peak {fmt_bytes(r.get(key + '_peak_bytes'))}"
                + ("" if not threads else "  (ms by threads: " + ", ".join(
                    f"{t}: {ms:.0f}" for t, ms in threads.items()) + ")")
                + ("" if not r.get(f"{key}_ms_per_step_rounds") else "  (rounds: " + ", ".join(
                    f"{ms:.0f}" for ms in r[f"{key}_ms_per_step_rounds"]) + ")"))
        if r.get("predicted_tokens_per_s"):
            log(f"    {'otc predicted':<15} {fmt_rate(r['predicted_tokens_per_s']):>8} tokens/s"
                f"  {r['predicted_step_ms']:9.2f} ms/step (plan.json time, before the run)")
        refs = []
        # The H100 references are GPT-2 124M's at sequence 1024.
        if mb in LLMC_TOKENS_PER_S and res["model"] == "gpt2-124m":
            refs.append(f"llm.c {fmt_rate(LLMC_TOKENS_PER_S[mb])}")
            refs.append(f"torch.compile {fmt_rate(TORCH_COMPILE_H100_TOKENS_PER_S[mb])}")
            refs.append(f"otc target {fmt_rate(OTC_TARGET_TOKENS_PER_S[mb])}")
        if refs:
            log(f"    H100 figures    {', '.join(refs)} tokens/s"
                + ("" if h100 else " (measured on an H100: compare with care)"))
        if r.get("otc_peak_bytes") and res["target"] == "cuda":
            line = (f"    otc memory      measured {fmt_bytes(r['otc_peak_bytes'])} "
                    f"({r['otc_peak_source']}), planned {fmt_bytes(r['predicted_peak_bytes'])}"
                    f" ({100 * r['peak_vs_plan']:+.1f}%; target within "
                    f"{100 * PEAK_VS_PLAN_TOLERANCE:.0f}%")
            if mb in PEAK_TARGET_BYTES and res["model"] == "gpt2-124m":
                line += f", at most {fmt_bytes(PEAK_TARGET_BYTES[mb])}"
            log(line + ")")
