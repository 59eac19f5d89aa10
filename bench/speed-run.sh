#!/usr/bin/env bash
# The run half of the speed benchmark (bench/speed.py run) over what
# bench/speed-build.sh wrote to OUT: needs only the GPU, python3 with numpy,
# and PyTorch where it imports (then eager and torch.compile run beside
# otc). Generates the weights and random token shards itself, trains each
# program 30 steps and writes bench/results/<date>-<gpu>.json (or
# OUT/results/ when OUT was carried without the repository: OUT/run.sh).
#
#   bench/speed-run.sh OUT [--steps 30] [--warmup 5] [--no-torch]
#                          [--results DIR] [--peak-tflops X]
# Exit status 77 when there is no GPU.
set -euo pipefail
out=${1:?usage: speed-run.sh OUT [options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON:-python3}" "$here/speed.py" run "$out" "$@"
