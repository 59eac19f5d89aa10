"""Checks that report.html draws the compiled plan's point of the recompute
frontier at plan.json's activations_peak.

    check_report_point.py OUT_DIR

Prints "compiled point: N bytes, plan: M bytes, same" (or "differs"), or
"no compiled point" when the report has none.
"""
import json
import re
import sys


def main():
    out = sys.argv[1]
    plan = json.load(open(out + "/plan.json"))["memory_bytes"]["activations_peak"]
    html = open(out + "/report.html").read()
    m = re.search(r"<circle class='compiled'[^>]*><title>[^<]*: (\d+) bytes", html)
    if not m:
        print("no compiled point")
        return
    got = int(m.group(1))
    print(f"compiled point: {got} bytes, plan: {plan} bytes, "
          f"{'same' if got == plan else 'differs'}")


if __name__ == "__main__":
    main()
