"""Memory and recompute benchmark of the planner on a GPT-2 124M-shaped graph.

Builds the graph (bench/make_gpt2_onnx.py: 12 layers, 768 wide, 12 heads,
vocab 50304, sequence 1024; dense random weights, as an export holds them) and runs
`otc-compile --plan-only` at micro-batch 4 for --remat none, selective, full
and auto at five budgets between the smallest plan and the largest, then
none, selective and full again with --no-fuse (the exported ops as they are,
no fused attention, norms, activations or loss). Prints, per run: activation
peak, recompute FLOPs per step, arena / lower bound, and compile time, then
the activation peaks with and without fusion side by side. Then the LM
head and its loss in chunks (otc-chunk-loss) against one [rows, vocabulary]
buffer (--no-chunked-loss): GPT-2 FP32 micro-batch 4 --remat=full, GPT-2
BF16 micro-batch 8 on the cuda target, and with --llama a Llama-3-1B-shaped
graph (bench/make_llama_onnx.py) at micro-batch 4, BF16, cuda. Not a test:
it prints figures.

    python3 bench/memory.py [--otc-bin build/bin] [--work /tmp/otc-bench]
                            [--llama]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_plan(otc_bin, model, out, remat, budget=None, extra=()):
    cmd = [os.path.join(otc_bin, "otc-compile"), model, "-o", out,
           "--micro-batch", "4", "--plan-only", "--remat=" + remat, *extra]
    if budget:
        cmd.append(f"--memory-budget={budget}")
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.time() - t0
    if r.returncode != 0:
        return None, secs, r.stderr.strip().splitlines()[-1]
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f), secs, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--otc-bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--work", default="/tmp/otc-bench")
    ap.add_argument("--llama", action="store_true",
                    help="also the chunked loss on a Llama-3-1B-shaped graph")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "gpt2-124m.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(HERE, "make_gpt2_onnx.py"), model],
                       check=True)

    gib = 1 << 30
    rows = []

    def run(label, remat, budget=None, extra=()):
        plan, secs, err = compile_plan(a.otc_bin, model,
                                       os.path.join(a.work, label.replace(" ", "_")),
                                       remat, budget, extra)
        if plan is None:
            rows.append((label, None, None, None, None, secs, err))
            return None
        m, f = plan["memory_bytes"], plan["flops"]
        rows.append((label, m["activations_peak"], f["recompute"], m["arena"],
                     m["lower_bound"], secs, plan["remat"].get("blocks", "")))
        return plan

    none = run("none", "none")
    selective = run("selective", "selective")
    full = run("full", "full")
    lo, hi = full["memory_bytes"]["total_peak"], none["memory_bytes"]["total_peak"]
    for i in range(5):
        budget = int(lo + (hi - lo) * i / 4)
        run(f"auto {budget / gib:.2f} GiB", "auto", budget)

    unfused = {p: run(p + " --no-fuse", p, extra=("--no-fuse",))
               for p in ("none", "selective", "full")}
    fused = {"none": none, "selective": selective, "full": full}

    print(f"GPT-2 124M shaped, seq 1024, micro-batch 4, fp32, params "
          f"{none['params_count']:,}; model FLOPs per step {none['flops']['model']:.4g}")
    print(f"{'policy':<18}{'act. peak GiB':>14}{'recompute TFLOP':>17}"
          f"{'arena GiB':>11}{'arena/lower':>13}{'compile s':>11}  blocks")
    for label, act, rec, arena, lower, secs, extra in rows:
        if act is None:
            print(f"{label:<18}{'failed':>14}  {extra}")
            continue
        print(f"{label:<18}{act / gib:>14.3f}{rec / 1e12:>17.3f}{arena / gib:>11.3f}"
              f"{arena / lower:>13.4f}{secs:>11.1f}  {extra}")

    print()
    print(f"{'activation peak GiB':<20}{'--no-fuse':>11}{'fused':>9}")
    for p in ("none", "selective", "full"):
        before, after = unfused[p], fused[p]
        if before is None or after is None:
            print(f"{p:<20}{'failed':>11}")
            continue
        print(f"{p:<20}{before['memory_bytes']['activations_peak'] / gib:>11.3f}"
              f"{after['memory_bytes']['activations_peak'] / gib:>9.3f}")

    # The LM head and its loss: chunked (default) against --no-chunked-loss.
    heads = [("GPT-2 fp32 mb4 full", model, "4", ["--remat=full"]),
             ("GPT-2 bf16 mb8 cuda", model, "8",
              ["--precision=bf16", "--target=cuda"])]
    if a.llama:
        llama = os.path.join(a.work, "llama3-1b.onnx")
        if not os.path.exists(llama):
            subprocess.run([sys.executable, os.path.join(HERE, "make_llama_onnx.py"),
                            llama, "--size", "1b"], check=True)
        heads.append(("Llama-3-1B bf16 mb4 cuda", llama, "4",
                      ["--precision=bf16", "--target=cuda"]))
    print()
    print(f"{'LM head and loss':<26}{'act. GiB':>10}{'chunked':>9}"
          f"{'total GiB':>11}{'chunked':>9}{'step ms':>12}{'chunked':>12}")
    for label, path, mb, extra in heads:
        plans = []
        for chunked in (False, True):
            out = os.path.join(a.work, label.replace(" ", "_") + str(chunked))
            cmd = [os.path.join(a.otc_bin, "otc-compile"), path, "-o", out,
                   "--micro-batch", mb, "--plan-only", *extra]
            if not chunked:
                cmd.append("--no-chunked-loss")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                plans.append(None)
                continue
            with open(os.path.join(out, "plan.json")) as f:
                plans.append(json.load(f))
        if None in plans:
            print(f"{label:<26}{'failed':>10}")
            continue
        m0, m1 = (p["memory_bytes"] for p in plans)
        t0, t1 = (p["time"]["step_ms"] for p in plans)
        print(f"{label:<26}{m0['activations_peak'] / gib:>10.3f}"
              f"{m1['activations_peak'] / gib:>9.3f}{m0['total_peak'] / gib:>11.3f}"
              f"{m1['total_peak'] / gib:>9.3f}{t0:>12.2f}{t1:>12.2f}")


if __name__ == "__main__":
    main()
