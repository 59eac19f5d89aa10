#!/usr/bin/env bash
# The cpu target side by side with PyTorch on this machine: both halves of
# bench/speed.py for the cpu target, FP32, at two configurations, GPT-2's
# shape at 4 x 256 with an 8192-token vocabulary (micro-batch 8) and GPT-2
# 124M at sequence 256 (micro-batch 4); PyTorch eager at each thread count
# from 1 to the cores (the fastest reported) and torch.compile where the
# installed torch has it; otc's step as the cpu device model predicted it
# beside the measured one. One JSON per configuration in bench/results
# (<date>-cpu-<model>.json).
#
# On a machine shared with others a run's speed drifts by 10% within
# minutes: otc, PyTorch eager and torch.compile run ROUNDS times (default 3)
# one after another, and each one's median round is reported.
#
#   bench/speed-cpu.sh [OUT] [speed.py run options: --steps 12 ...]
#   OTC_BIN: otc's bin directory (default build/bin); PYTHON: a python3 with
#   numpy and onnx, and torch for the PyTorch side (default /usr/bin/python3)
set -euo pipefail
out=${1:-/tmp/otc-speed-cpu}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
export OTC_BIN=${OTC_BIN:-$here/../build/bin}
for model in gpt2-small-cpu gpt2-124m-seq256; do
  "$py" "$here/speed.py" build "$out/$model" --target cpu --model "$model"
  "$py" "$here/speed.py" run "$out/$model" --steps 12 --warmup 3 --python "$py" \
      --rounds "${ROUNDS:-3}" "$@"
done
