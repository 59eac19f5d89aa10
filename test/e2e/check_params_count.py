#!/usr/bin/env python3
"""For hf5-params-count.test: for each test/e2e/hf5/<arch> and each export
named, plans it with otc-compile (--plan-only) and compares plan.json's
params_count with PyTorch's own count in the manifest (num_parameters:
sum(p.numel() for p in model.parameters())), printing one PASS/FAIL line
each and a summary. A constant the exporter computed (a rotary table) or a
tensor trained twice would show as a difference.

    check_params_count.py OTC_COMPILE HF5_DIR WORK EXPORT...
"""
import json
import os
import subprocess
import sys


def main():
    otc, root, work = sys.argv[1:4]
    exports = sys.argv[4:]
    passed = failed = 0
    for arch in sorted(os.listdir(root)):
        manifest = os.path.join(root, arch, "manifest.json")
        if not os.path.exists(manifest):
            continue
        want = json.load(open(manifest))["num_parameters"]
        for e in exports:
            model = os.path.join(root, arch, e + ".onnx")
            out = os.path.join(work, f"{arch}-{e}")
            r = subprocess.run([otc, model, "-o", out, "--micro-batch", "4", "--plan-only",
                                "--loss=cross_entropy:logits:targets"],
                               capture_output=True, text=True)
            if r.returncode:
                print(f"{arch} {e} FAIL: {r.stderr.strip()}")
                failed += 1
                continue
            got = json.load(open(os.path.join(out, "plan.json")))["params_count"]
            ok = got == want
            print(f"{arch} {e} params {got} torch {want} {'PASS' if ok else 'FAIL'}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
