"""Compares a train log's first step loss with its validation loss.

Prints "val loss = step loss" when they agree within 2e-6 (the log's six
decimals), else both values.
"""
import re
import sys

text = open(sys.argv[1]).read()
step = re.search(r"^step +1/\d+ \| loss ([0-9.]+)", text, re.M)
val = re.search(r"^val loss ([0-9.]+) at step 1 ", text, re.M)
if not step or not val:
    print("MISSING step or val loss")
    sys.exit(0)
a, b = float(step.group(1)), float(val.group(1))
if abs(a - b) <= 2e-6:
    print("val loss = step loss")
else:
    print(f"val loss {b} != step loss {a}")
