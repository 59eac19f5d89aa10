"""How otc-compile's time grows with the size of the graph.

Writes long chains and deep narrow GPT stacks (bench/make_long_onnx.py) at
1k to 20k ONNX nodes and times the whole `otc-compile` on each, under
--remat none, selective, full and auto (its budget halfway between the
planned peaks of full and none), with CXX=true so that the host compiler,
whose time is not otc's, is a no-op: import, planning, emission, plan.json,
report.html and the initial parameters are all timed. Prints one table of
seconds per run, wall and CPU (user + system: on a shared machine the
wall time counts waiting for a core), then the slowest phases of the largest
runs (--timing, wall). Not a test: it prints figures.

    python3 bench/compile_scaling.py [--otc-bin build/bin] [--work DIR]
        [--sizes 1000,2000,4000,8000,20000] [--kinds chain,gpt]
        [--policies none,selective,full,auto]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_once(otc_bin, model, out, remat, budget=None):
    cmd = [os.path.join(otc_bin, "otc-compile"), model, "-o", out,
           "--micro-batch", "2", "--remat=" + remat, "--timing"]
    if budget:
        cmd.append(f"--memory-budget={budget}")
    env = dict(os.environ, CXX="true")
    t0 = time.time()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    secs = (time.time() - t0,
            c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
    if r.returncode != 0:
        return None, secs, {}, r.stderr.strip().splitlines()[-1]
    phases = {}
    for line in r.stderr.splitlines():
        m = re.match(r"otc-compile: time: (.+?)\s+([0-9.]+) s$", line)
        if m:
            phases[m.group(1)] = phases.get(m.group(1), 0) + float(m.group(2))
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f), secs, phases, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--otc-bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--work", default="/tmp/otc-compile-scaling")
    ap.add_argument("--sizes", default="1000,2000,4000,8000,20000")
    ap.add_argument("--kinds", default="chain,gpt")
    ap.add_argument("--policies", default="none,selective,full,auto")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    kinds = a.kinds.split(",")
    policies = a.policies.split(",")

    print(f"{'graph':<8} {'nodes':>6}  " +
          "  ".join(f"{p:>13}" for p in policies) +
          "   (seconds: wall / CPU, user + system)")
    slowest = {}
    for kind in kinds:
        for n in sizes:
            model = os.path.join(a.work, f"{kind}-{n}.onnx")
            gen = subprocess.run(
                [sys.executable, os.path.join(HERE, "make_long_onnx.py"),
                 model, "--kind", kind, "--nodes", str(n)],
                check=True, capture_output=True, text=True).stdout
            nodes = int(re.search(r"(\d+) nodes", gen).group(1))
            peaks, cells = {}, []
            for p in policies:
                out = os.path.join(a.work, f"{kind}-{n}-{p}")
                budget = None
                if p == "auto":
                    if "none" not in peaks or "full" not in peaks:
                        cells.append(f"{'-':>13}")
                        continue
                    budget = (peaks["none"] + peaks["full"]) // 2
                plan, secs, phases, err = compile_once(a.otc_bin, model, out,
                                                       p, budget)
                if plan is None:
                    cells.append(f"{'fail':>13}")
                    print(f"  {kind}-{n} {p}: {err}", file=sys.stderr)
                    continue
                peaks[p] = plan["memory_bytes"]["total_peak"]
                cells.append(f"{secs[0]:6.2f}/{secs[1]:6.2f}")
                slowest[(kind, p)] = (nodes, phases)
            print(f"{kind:<8} {nodes:>6}  " + "  ".join(cells), flush=True)
    print("\nslowest phases of the largest graphs (--timing, seconds):")
    for (kind, p), (nodes, phases) in slowest.items():
        top = sorted(phases.items(), key=lambda kv: -kv[1])[:4]
        print(f"  {kind} {nodes} {p}: " +
              ", ".join(f"{k} {v:.2f}" for k, v in top))


if __name__ == "__main__":
    main()
