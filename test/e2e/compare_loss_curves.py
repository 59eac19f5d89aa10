"""Compares the step losses and gradient norms of train --log-jsonl files
against the first one: prints, per file, the largest relative difference
and PASS when it is within --rtol, else FAIL with the first step that
differs. The files must log the same steps.

    compare_loss_curves.py REFERENCE.jsonl OTHER.jsonl... [--rtol 1e-6]
"""
import argparse
import json
import sys


def steps(path):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "step":
                out[r["step"]] = (r["loss"], r["grad_norm"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reference")
    ap.add_argument("others", nargs="+")
    ap.add_argument("--rtol", type=float, default=1e-6)
    a = ap.parse_args()
    ref = steps(a.reference)
    ok = True
    for path in a.others:
        got = steps(path)
        if sorted(got) != sorted(ref) or not ref:
            print(f"{path}: steps {sorted(got)} differ from {sorted(ref)}: FAIL")
            ok = False
            continue
        worst, first = 0.0, None
        for s in sorted(ref):
            for want, have in zip(ref[s], got[s]):
                rel = abs(have - want) / max(abs(want), 1e-30)
                worst = max(worst, rel)
                if rel > a.rtol and first is None:
                    first = s
        verdict = "PASS" if first is None else f"FAIL (step {first})"
        print(f"{len(ref)} steps, max rel diff {worst:.1e}: {verdict}")
        ok = ok and first is None
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
