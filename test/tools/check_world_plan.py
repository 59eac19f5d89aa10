"""Checks plan.json of one program planned for 1 rank and for N ranks
(otc-compile --world-size) against the ring all-reduce written out here:
the gradient bytes are the gradient slots' (params_count elements of the
gradients' storage type, memory_bytes.grads), the all-reduce takes
LATENCY + 2 (N - 1) / N * bytes / BUS_BANDWIDTH, the step is the one-rank
step plus that, and tokens/s count every rank's tokens.

With --sharded (otc-compile --shard-optimizer, ZeRO-1) the gradients are
reduce-scattered instead, LATENCY + (N - 1) / N * bytes / BUS_BANDWIDTH, and
the parameters the steps read (memory_bytes.params: the BF16 copies under
bf16, whose FP32 masters are gathered only for checkpoints, else the FP32
parameters) all-gathered the same way; the optimizer step is each rank's part
of the one-rank one, and the moments too (and under BF16 the FP32 masters):
N times a rank's moments are the one-rank moments (its parameters' own
elements) up to the groups' padding:
at most 127 elements after each of the T trained tensors and N x 128 to
make N equal parts, 8 bytes an element.

Where the target overlaps the sum with the backward (plan.json's
bucket_bytes), each bucket is one all-reduce of its bytes, and the step adds
only the exposed part: at least the last bucket's, at most all of them.

    check_world_plan.py ONE_RANK_PLAN N_RANK_PLAN N BUS_GB_S LATENCY_US [--sharded T]

Prints one line per check and "world plan: ok" or what differs.
"""
import json
import sys


def main():
    one_path, many_path, n, bus, latency = sys.argv[1:6]
    n, bus, latency = int(n), float(bus) * 1e9, float(latency) * 1e-6
    with open(one_path) as f:
        one = json.load(f)
    with open(many_path) as f:
        many = json.load(f)
    t1, tn = one["time"], many["time"]
    dp = tn["data_parallel"]
    grads = many["memory_bytes"]["grads"]
    sharded = "--sharded" in sys.argv[6:]
    tensors = int(sys.argv[7]) if sharded else 0
    if not sharded and "bucket_bytes" in dp:
        # Overlapped: one all-reduce per bucket (the buckets cover the
        # gradients); the step waits for at least the last bucket's and at
        # most all of them.
        each = [(latency + 2.0 * (n - 1) / n * b / bus) * 1e3 for b in dp["bucket_bytes"]]
        want_ms = sum(each)
        checks = [
            ("buckets cover the gradients", sum(dp["bucket_bytes"]) == grads),
            ("all-reduce ms = the buckets'", abs(dp["all_reduce_ms"] - want_ms) <= 1e-3),
            ("exposed between the last bucket's and all",
             each[-1] - 1e-3 <= dp["exposed_ms"] <= want_ms + 1e-3),
            ("step = one rank's + exposed",
             abs(tn["step_ms"] - t1["step_ms"] - dp["exposed_ms"]) <= 2e-3),
        ]
        want_ms = dp["exposed_ms"]
    elif not sharded:
        want_ms = (latency + 2.0 * (n - 1) / n * grads / bus) * 1e3
        checks = [
            ("all-reduce ms", abs(dp["all_reduce_ms"] - want_ms) <= 1e-3),
            ("step = one rank's + all-reduce",
             abs(tn["step_ms"] - t1["step_ms"] - want_ms) <= 2e-3),
        ]
    else:
        mem1, memn = one["memory_bytes"], many["memory_bytes"]
        gather = memn["params"]
        rs = (latency + (n - 1) / n * grads / bus) * 1e3
        ag = (latency + (n - 1) / n * gather / bus) * 1e3
        want_ms = rs + ag
        pad = (tensors + n) * 128 * 8
        checks = [
            ("no all-reduce", "all_reduce_ms" not in dp),
            ("gather bytes = the parameters the steps read", dp["gather_bytes"] == gather),
            ("reduce-scatter ms", abs(dp["reduce_scatter_ms"] - rs) <= 1e-3),
            ("all-gather ms", abs(dp["all_gather_ms"] - ag) <= 1e-3),
            ("exposed = both", abs(dp["exposed_ms"] - want_ms) <= 2e-3),
            ("moments: 1/N of one rank's, up to padding",
             0 <= memn["optimizer"] * n - mem1["optimizer"] <= pad),
            ("state per parameter per rank: FP32 8 whole and the moments' 8 over N;"
             " BF16 4 whole and the masters' and moments' 12 over N",
             abs(many["state_bytes_per_param_per_rank"] -
                 ((4 + 12.0 / n) if mem1["master_params"] else (8 + 8.0 / n))) <= 1e-3),
            ("masters: 1/N of one rank's (BF16), up to padding",
             0 <= memn["master_params"] * n - mem1["master_params"] <= pad / 2),
            ("optimizer step at most one rank's",
             tn["optimizer_step_ms"] <= t1["optimizer_step_ms"]),
            ("step = one rank's, its optimizer step a rank's part, + both",
             abs(tn["step_ms"] - (t1["step_ms"] - t1["optimizer_step_ms"] +
                                  tn["optimizer_step_ms"]) - want_ms) <= 2e-3),
        ]
    checks = [
        ("one rank has no data_parallel", "data_parallel" not in t1),
        ("world_size", dp["world_size"] == n),
        ("gradient bytes = memory_bytes.grads", dp["gradient_bytes"] == grads),
    ] + checks + [
        # plan.json rounds the step to 0.1 us and tokens/s to 1.
        ("tokens/s of all ranks",
         abs(tn["tokens_per_s"] /
             (n * t1["tokens_per_s"] * t1["step_ms"] / tn["step_ms"]) - 1) <= 2e-3),
        ("per rank", abs(dp["tokens_per_s_per_rank"] * n - tn["tokens_per_s"]) <= n),
    ]
    bad = [name for name, ok in checks if not ok]
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    print(f"communication {dp['exposed_ms']:.4f} ms, expected {want_ms:.4f}")
    print("world plan: " + ("ok" if not bad else "differs: " + ", ".join(bad)))


if __name__ == "__main__":
    main()
