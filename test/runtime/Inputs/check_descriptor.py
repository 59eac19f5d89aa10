"""Prints the throughput fields of an emitted program's descriptor (ABI
version 11: precision, tokens and model FLOPs of a micro-step; version 12
appends `bidirectional` and 13 `prediction_rows`, printed too) against
plan.json's: FLOPs per step (flops.model) over grad-accum, and tokens per
step (flops.model / flops.per_token) over grad-accum.

usage: check_descriptor.py PROGRAM.cpp PLAN.json GRAD_ACCUM
"""
import json
import re
import sys

source = open(sys.argv[1]).read()
plan = json.load(open(sys.argv[2]))
accum = int(sys.argv[3])
body = source[source.index("static const OtcProgram kProgram = {"):]
body = body[:body.index("};")]
version = int(re.search(r"\{\s*(\d+),", body).group(1))
precision, tokens, flops, bidirectional, rows = re.search(
    r"(OTC_PRECISION_\w+), (\d+), (\d+)LL(?:, (\d))?(?:, (nullptr|\"\w*\"))?$",
    body).groups()
model = plan["flops"]["model"]
per_token = plan["flops"].get("per_token")
print("version", version, precision,
      "" if bidirectional is None else "bidirectional " + bidirectional,
      "" if rows is None else "prediction_rows " + rows)
print("tokens", tokens,
      "matches plan.json" if per_token and
      abs(int(tokens) * accum - model / per_token) < 1e-6 * model
      else "differs from plan.json")
print("flops", "matches plan.json" if int(flops) * accum == model
      else "differs from plan.json: %s x %d vs %s" % (flops, accum, model))
