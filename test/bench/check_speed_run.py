#!/usr/bin/env python3
"""Checks what `bench/speed.py run` left in OUT and RESULTS (see
speed-smoke.test) against independent facts: params.json (written from the
ONNX graph by the build half) for the initial weights' names and shapes,
GPT-2's initialization scales, llm.c's shard header, each program's
plan.json for the planned peak, and ln(vocab) for the first loss of a model
whose predictions start near uniform.

    check_speed_run.py OUT RESULTS          numpy
"""
import glob
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import st_io  # noqa: E402


def main():
    out, results = sys.argv[1], sys.argv[2]
    params = json.load(open(os.path.join(out, "params.json")))
    init = st_io.read(os.path.join(out, "run", "init.safetensors"))
    same = sorted(init) == sorted(p["name"] for p in params) and all(
        list(init[p["name"]].shape) == p["shape"] and init[p["name"]].dtype == np.float32
        for p in params)
    stds = {n: float(t.std()) for n, t in init.items()}
    std_ok = (abs(stds["wte.weight"] - 0.02) < 0.002
              and all(stds[n] == 0 for n in init if n.endswith(".bias"))
              and all(np.all(init[n] == 1) for n in init
                      if n.endswith(".weight") and init[n].ndim == 1))
    print(f"init: {len(init)} tensors {'match' if same else 'DO NOT match'} params.json; "
          f"std {'ok' if std_ok else 'WRONG'}")

    raw = open(os.path.join(out, "run", "random_000000.bin"), "rb").read()
    header = np.frombuffer(raw[:1024], "<i4")
    tokens = np.frombuffer(raw[1024:], "<u2")
    magic = header[0] == 20240520 and header[1] == 1 and header[2] == len(tokens)
    print(f"shard: magic {'ok' if magic else 'WRONG'}, tokens "
          f"{'below 256' if tokens.max() < 256 else 'OUT OF RANGE'}")

    (path,) = glob.glob(os.path.join(results, "*-cpu-smoke.json"))
    res = json.load(open(path))
    assert res["gpu"] == "cpu"
    for run in res["runs"]:
        mb = run["micro_batch"]
        keys = ("otc_tokens_per_s", "torch_compile_tokens_per_s", "otc_peak_bytes",
                "predicted_peak_bytes", "ms_per_step", "mfu")
        keys_ok = all(k in run for k in keys) and run["otc_tokens_per_s"] > 0
        plan = json.load(open(os.path.join(out, f"mb{mb}", "plan.json")))
        pred_ok = run["predicted_peak_bytes"] == plan["memory_bytes"]["total_peak"]
        loss_ok = abs(run["otc_loss_first"] - math.log(256)) < 0.1
        print(f"mb{mb}: keys {'ok' if keys_ok else 'MISSING'}, predicted "
              f"{'=' if pred_ok else '!='} plan.json total_peak, first loss "
              f"{'near' if loss_ok else 'FAR FROM'} ln 256")


if __name__ == "__main__":
    main()
