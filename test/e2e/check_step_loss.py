"""Checks a train log's first step loss against a value of a JSON file.

    check_step_loss.py LOG JSON KEY [--rtol R]

Prints "KEY: loss L, expected E: PASS" or FAIL.
"""
import argparse
import json
import re

ap = argparse.ArgumentParser()
ap.add_argument("log")
ap.add_argument("json")
ap.add_argument("key")
ap.add_argument("--rtol", type=float, default=1e-5)
a = ap.parse_args()
text = open(a.log).read()
m = re.search(r"^step +1/\d+ \| loss ([0-9.]+)", text, re.M)
expected = json.load(open(a.json))[a.key]
if not m:
    print(f"{a.key}: no step 1 loss in {a.log}: FAIL")
else:
    loss = float(m.group(1))
    ok = abs(loss - expected) <= a.rtol * abs(expected)
    print(f"{a.key}: loss {loss:.6f}, expected {expected:.6f}: {'PASS' if ok else 'FAIL'}")
