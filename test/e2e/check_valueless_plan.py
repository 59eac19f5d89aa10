#!/usr/bin/env python3
"""For valueless-plan.test: plans each named hf5 export (ARCH/EXPORT) with
otc-compile --plan-only twice, as is and with OTC_TEST_VALUELESS_ELEMENTS=1,
and compares the two plan.json files' parameters, constants, ties, split and
removed parameters and memory. Prints one line each and a summary.

    check_valueless_plan.py OTC_COMPILE HF5_DIR WORK ARCH/EXPORT...
"""
import json
import os
import subprocess
import sys

KEYS = ("params_count", "untrained_initializers", "tied_initializers",
        "split_initializers", "removed_parameters", "memory_bytes")


def plan(otc, model, out, env):
    subprocess.run([otc, model, "-o", out, "--micro-batch", "4", "--plan-only",
                    "--loss=cross_entropy:logits:targets"],
                   check=True, capture_output=True, env=env)
    p = json.load(open(os.path.join(out, "plan.json")))
    return {k: p.get(k) for k in KEYS}


def main():
    otc, root, work = sys.argv[1:4]
    passed = failed = 0
    for name in sys.argv[4:]:
        model = os.path.join(root, name + ".onnx")
        tag = name.replace("/", "-")
        full = plan(otc, model, os.path.join(work, tag + "-full"), dict(os.environ))
        env = dict(os.environ, OTC_TEST_VALUELESS_ELEMENTS="1")
        valueless = plan(otc, model, os.path.join(work, tag + "-valueless"), env)
        diff = [k for k in KEYS if full[k] != valueless[k]]
        print(f"{name} {'same plan' if not diff else 'differs in ' + ', '.join(diff)}")
        passed += not diff
        failed += bool(diff)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
