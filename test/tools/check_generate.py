#!/usr/bin/env python3
"""Checks otc-run --generate's ids against the logits of plain otc-run runs
(the interpreter on --inputs, one run per prefix: another path through
otc-run): with --temperature 0 every new id is the prefix's largest logit;
with --top-k K each one lies among the K largest; with --top-p P among the
fewest largest whose softmax (at the temperature) reaches P.

    check_generate.py OTC_RUN MODEL T IDS... -- [--temperature X] [--top-k K] [--top-p P]

IDS is the line --generate printed (the prompt's ids first, PROMPT of them:
given as the first of IDS' count with --prompt N). Prints one line per new
id that breaks its rule, then "generate ok" or "generate differs".
"""
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import numpy as np  # noqa: E402
import st_io  # noqa: E402


def logits_after(otc_run, model, T, prefix, work):
    ctx = prefix[-T:]
    idx = np.zeros((1, T), np.int64)
    idx[0, :len(ctx)] = ctx
    inp, out = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    st_io.write(inp, {"idx": idx, "targets": np.zeros((1, T), np.int64)})
    subprocess.run([otc_run, model, "--inputs", inp, "--outputs", out, "--dim", "batch=1"],
                   check=True)
    return st_io.read(out)["logits"].reshape(T, -1)[len(ctx) - 1].astype(np.float64)


def main():
    args = sys.argv[1:]
    split = args.index("--")
    otc_run, model, T, prompt = args[0], args[1], int(args[2]), int(args[3])
    ids = [int(x) for x in args[4:split]]
    opts = args[split + 1:]
    temperature, top_k, top_p = 1.0, 0, 1.0
    for k in range(0, len(opts), 2):
        if opts[k] == "--temperature":
            temperature = float(opts[k + 1])
        elif opts[k] == "--top-k":
            top_k = int(opts[k + 1])
        elif opts[k] == "--top-p":
            top_p = float(opts[k + 1])
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        for n in range(prompt, len(ids)):
            row = logits_after(otc_run, model, T, ids[:n], work)
            order = sorted(range(len(row)), key=lambda i: -row[i])
            if temperature == 0:
                allowed = {order[0]}
            else:
                allowed = set(order[:top_k] if top_k > 0 else order)
                if top_p < 1:
                    kept = order[:top_k] if top_k > 0 else order
                    p = np.exp((row[kept] - row[kept[0]]) / temperature)
                    reach, total, m = 0.0, p.sum(), 0
                    while m < len(kept) and reach < top_p * total:
                        reach += p[m]
                        m += 1
                    allowed = set(kept[:max(m, 1)])
            if ids[n] not in allowed:
                bad += 1
                print("id %d at %d is not among %s" % (ids[n], n, sorted(allowed)[:8]))
    print("generate ok" if not bad else "generate differs")


if __name__ == "__main__":
    main()
