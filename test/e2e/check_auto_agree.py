"""Checks that otc-plan (--remat=auto's search on a module) and otc-compile
--remat=auto choose the same blocks for the same budget: both go through one
solver (planner/RematSearch.h).

    check_auto_agree.py MODEL --micro-batch N [--points 6] [--extra ARG]...

The module otc-plan reads is otc-compile's own IR after differentiation
(--compile-to=differentiate with the same --extra flags), which carries the
compile's configuration (precision, grad-accum, target: the module's
otc.config), so otc-plan plans under the same one. Budgets are swept from
below the smallest plan to above the largest; a refused budget must be
refused by both, naming the same smallest. Prints one line per budget and a
verdict line; exits 1 on a disagreement.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def compile_plan(model, mb, extra, remat, budget=None):
    out = tempfile.mkdtemp()
    cmd = ["otc-compile", model, "-o", out, "--micro-batch", str(mb),
           "--plan-only", "--remat=" + remat] + extra
    if budget is not None:
        cmd.append(f"--memory-budget={budget}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f), ""


def smallest(err):
    # otc-compile's "is 1.01 MiB (1055999 bytes)", otc-plan's "is 1055999 bytes".
    m = re.search(r"the smallest that fits is (?:\S+ \S+ \()?(\d+) bytes", err)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--points", type=int, default=6)
    ap.add_argument("--extra", action="append", default=[])
    a = ap.parse_args()

    ir = os.path.join(tempfile.mkdtemp(), "step.mlir")
    with open(ir, "w") as f:
        subprocess.run(["otc-compile", a.model, "--micro-batch",
                        str(a.micro_batch), "--compile-to=differentiate"] +
                       a.extra, stdout=f, check=True)

    def opt_blocks(budget):
        r = subprocess.run(["otc-plan", ir, f"--memory-budget={budget}"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr
        m = re.search(r'otc.remat = \{blocks = "([nsf]*)"', r.stdout)
        return m.group(1), ""

    none, _ = compile_plan(a.model, a.micro_batch, a.extra, "none")
    full, _ = compile_plan(a.model, a.micro_batch, a.extra, "full")
    lo = min(full["memory_bytes"]["total_peak"],
             none["memory_bytes"]["total_peak"])
    hi = none["memory_bytes"]["total_peak"]
    budgets = [lo - 1] + [lo + (hi - lo) * i // (a.points - 1)
                          for i in range(a.points)]
    ok, seen = True, set()
    for budget in budgets:
        plan, cerr = compile_plan(a.model, a.micro_batch, a.extra, "auto",
                                  budget)
        blocks, oerr = opt_blocks(budget)
        if plan is None or blocks is None:
            same = (plan is None and blocks is None and
                    smallest(cerr) is not None and
                    smallest(cerr) == smallest(oerr))
            print(f"budget {budget}: refused by "
                  f"{'both, naming ' + str(smallest(cerr)) if same else 'one only'}")
            ok &= same
            continue
        same = plan["remat"]["blocks"] == blocks
        seen.add(blocks)
        print(f"budget {budget}: otc-compile {plan['remat']['blocks']} "
              f"otc-plan {blocks}{'' if same else ' DIFFERENT'}")
        ok &= same
    print(f"{len(seen)} distinct choices")
    print("auto: otc-plan and otc-compile agree" if ok else "auto: DISAGREE")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
