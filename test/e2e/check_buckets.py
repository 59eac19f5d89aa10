#!/usr/bin/env python3
"""Reads a cpu program's source (model.cpp) for its gradient buckets (ABI
version 7): the kBucketRanges table, the otcrt_gradients_ready hooks in
otc_micro_step, and the gradient slots' macros (`#define slN OTC_SLOT(float,
OFFSET)  // grad:NAME`, with kSlots' sizes), and checks that the ranges cover
exactly the gradient slots' bytes, each element once.

    check_buckets.py MODEL.cpp ELEMENTS

Prints the version, the bucket count and the hooks' buckets in micro_step's
order, then "N elements, each once, all gradients" or what is wrong.
"""
import re
import sys


def main():
    src = open(sys.argv[1]).read()
    want = int(sys.argv[2])
    version = int(re.search(r"kProgram = \{\n  (\d+),", src).group(1))
    table = re.search(r"kBucketRanges\[\] = \{\n(.*?)\};", src, re.S).group(1)
    ranges = [tuple(int(x) for x in m) for m in
              re.findall(r"\{(\d+), (\d+), (\d+), (\d+)\}", table)]
    micro = src[src.index("static void otc_micro_step"):]
    micro = micro[:micro.index("\n}\n")]
    hooks = [int(k) for k in re.findall(r"otcrt_gradients_ready\((\d+)\);", micro)]
    buckets = sorted(set(r[0] for r in ranges))
    print("version %d, %d buckets, hooks in micro_step: %s"
          % (version, len(buckets), " ".join(map(str, hooks))))
    # The gradient slots: kSlots rows of OTC_SLOT_GRAD (name, offset, bytes).
    grads = [(t, int(o), int(b)) for t, o, b in
             re.findall(r'\{"[^"]*", OTC_SLOT_GRAD, OTC_(F32|BF16), \d+, kShape\d+, (\d+), (\d+)\}', src)]
    covered = {}
    for bucket, bf16, offset, count in ranges:
        width = 2 if bf16 else 4
        for i in range(count):
            at = offset + i * width
            covered[at] = covered.get(at, 0) + 1
    slot_bytes = set()
    for dtype, offset, nbytes in grads:
        width = 2 if dtype == "BF16" else 4
        for at in range(offset, offset + nbytes, width):
            slot_bytes.add(at)
    twice = [a for a, c in covered.items() if c > 1]
    outside = [a for a in covered if a not in slot_bytes]
    missing = [a for a in slot_bytes if a not in covered]
    if twice or outside or missing or len(covered) != want:
        print("%d elements: %d twice, %d outside the gradients, %d missing"
              % (len(covered), len(twice), len(outside), len(missing)))
    else:
        print("%d elements, each once, all gradients" % len(covered))


if __name__ == "__main__":
    main()
