"""Checks otc-chunk-loss's choice of chunk against the step-time model's own
prices, as plan.json reports them: plans the model with each candidate
chunk forced (--loss-chunk-rows: the balanced chunkings of 1 to 64 chunks,
rounded up to 64 rows, one chunk of all rows included), reads the predicted
time of the otc.linear_cross_entropy_with_grad call, and checks that the
default plan took the smallest chunk within 3% of the fastest (one chunk:
the head left as it was, no call in the default plan).

    check_loss_chunk.py OTC_COMPILE MODEL ROWS VOCAB ELEMENT_BYTES WORK [ARGS...]

Prints "pick N rows (of M candidates), fastest F rows: ok" or what differs.
"""
import json
import os
import re
import subprocess
import sys


def plan(otc, model, work, args, extra):
    out = os.path.join(work, "p" + "".join(e.strip("-=") for e in extra))
    subprocess.run([otc, model, "-o", out, "--plan-only", *args, *extra],
                   check=True, capture_output=True)
    with open(os.path.join(out, "plan.json")) as f:
        kernels = json.load(f)["time"]["kernels"]
    return sum(k["ms"] * k["calls"] for k in kernels
               if k["kind"] == "linear_cross_entropy")


def main():
    otc, model, rows, vocab, elem, work = sys.argv[1:7]
    args = sys.argv[7:]
    rows, vocab, elem = int(rows), int(vocab), int(elem)
    os.makedirs(work, exist_ok=True)
    sizes = []
    for k in range(1, 65):
        n = min(rows, -(-(-(-rows // k)) // 64) * 64)
        if n not in sizes:
            sizes.append(n)
    ir = subprocess.run([otc, model, "--compile-to=plan", *args],
                        check=True, capture_output=True, text=True).stdout
    found = re.search(r"chunk_rows = (\d+)", ir)
    pick = int(found.group(1)) if found else rows
    ms = {n: plan(otc, model, work, args, [f"--loss-chunk-rows={n}"])
          for n in sizes}
    best = min(ms.values())
    want = min(n for n in sizes if ms[n] <= best * 1.03)
    fastest = min(sizes, key=lambda n: ms[n])
    print(f"pick {pick} rows (of {len(sizes)} candidates), fastest {fastest} "
          f"rows: {'ok' if pick == want else f'expected {want}'}")


if __name__ == "__main__":
    main()
