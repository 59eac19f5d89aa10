#!/usr/bin/env python3
"""Checks a train run's JSONL log and Chrome trace: every JSONL line parses,
step events are numbered 1..N with finite losses, every record carries its
wall-clock time (Unix seconds, within the last hour) and the seconds since
the run started, both never decreasing, the trace is one JSON array of events
with a span per step and per micro-step and a memory counter. Prints a
summary line per file."""
import json
import math
import sys
import time


def main():
    jsonl, trace, steps, micros = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    events = [json.loads(l) for l in open(jsonl)]
    now = time.time()
    stamps = [(e["time"], e["elapsed_s"]) for e in events]
    assert all(now - 3600 < t <= now and 0 <= el < 3600 for t, el in stamps), stamps
    assert stamps == sorted(stamps), stamps
    step_events = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in step_events] == list(range(1, steps + 1)), step_events
    assert all(math.isfinite(e["loss"]) and e["tokens_per_s"] > 0 for e in step_events)
    kinds = sorted({e["event"] for e in events})
    print(f"jsonl: {len(step_events)} steps, events {kinds}, keys {sorted(step_events[0])}")
    spans = json.load(open(trace))
    names = [e["name"] for e in spans if e.get("ph") == "X"]
    counters = [e for e in spans if e.get("ph") == "C" and e["name"] == "memory"]
    n_steps = sum(1 for n in names if n.startswith("step "))
    n_micro = sum(1 for n in names if n.startswith("micro-step "))
    print(f"trace: {n_steps} steps, {n_micro} micro-steps, "
          f"{sum(1 for n in names if n == 'optimizer_step')} optimizer steps, "
          f"{len(counters)} memory samples")
    assert n_steps == steps and n_micro == steps * micros and len(counters) == steps


if __name__ == "__main__":
    main()
