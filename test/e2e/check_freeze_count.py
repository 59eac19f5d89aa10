"""Checks the count otc trains under --freeze against PyTorch's rule.

    check_freeze_count.py PLAN.json MANIFEST.json PATTERN

The oracle is what a PyTorch user writes for the same pattern,
`p.requires_grad = not re.search(PATTERN, name)` over the model's
named_parameters (the manifest's `parameters`, names and shapes as
PyTorch listed them): the trainable values are summed and compared with
plan.json's params_count. numpy not needed.
"""
import json
import re
import sys


def main():
    plan = json.load(open(sys.argv[1]))
    params = json.load(open(sys.argv[2]))["parameters"]
    pattern = sys.argv[3]
    want = 0
    for name, shape in params.items():
        if re.search(pattern, name):
            continue
        n = 1
        for d in shape:
            n *= d
        want += n
    got = plan["params_count"]
    print(f"trained {got}, PyTorch's trainable {want}: {'PASS' if got == want else 'FAIL'}")


if __name__ == "__main__":
    main()
