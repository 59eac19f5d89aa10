#!/usr/bin/env python3
"""Checks that a train program's log shows the loss falling: parses the step
lines ("step    1/200 | loss 2.302585 | lr ... | ... ms") and the optional
"final loss X" line of LOG (a file, or - for stdin), prints the first and
final loss, and exits 1 unless final <= first / --factor (2 if the log has no
step lines). The final loss is the "final loss" line when present, otherwise
the last step line."""
import argparse
import math
import re
import sys

STEP = re.compile(r"^step\s+(\d+)/(\d+)\s+\|\s+loss\s+(\S+)")
FINAL = re.compile(r"^final loss\s+(\S+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--factor", type=float, default=10.0)
    args = ap.parse_args()
    text = sys.stdin.read() if args.log == "-" else open(args.log).read()
    steps, final = [], None
    for line in text.splitlines():
        m = STEP.match(line.strip())
        if m:
            steps.append((int(m.group(1)), float(m.group(3))))
        m = FINAL.match(line.strip())
        if m:
            final = float(m.group(1))
    if not steps:
        print("check_loss_drop: error: no step lines in the log")
        return 2
    first = steps[0][1]
    if final is None:
        final = steps[-1][1]
    ok = math.isfinite(final) and final <= first / args.factor
    print(f"first loss {first:.6f} (step {steps[0][0]}), final loss {final:.6f}, "
          f"ratio {first / final if final else float('inf'):.2f}, "
          f"required factor {args.factor:g}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
