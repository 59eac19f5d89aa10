#!/usr/bin/env bash
# The build half of the speed benchmark (bench/speed.py build): on a machine
# with otc and the CUDA toolkit (no GPU needed), writes the GPT-2 124M graph,
# compiles it for the cuda target in BF16 at micro-batch 8 and 16 (sequence
# 1024, grad-accum 1), prints compile time, kernel count, library calls,
# model.cu size and the planned peak, and leaves in OUT only what the GPU
# side needs (the train programs, plan.json, params.json, the run script:
# a few MB; no weights). Then carry OUT to a GPU machine and run OUT/run.sh
# there (see bench/README.md).
#
#   bench/speed-build.sh OUT [speed.py build options: --grad-accum K,
#                             --micro-batches 8,16, --tiny --target cpu, ...]
#   OTC_BIN: otc's bin directory (default: build/bin of this repository)
#   LLMC_CHECKOUT: a checkout of llm.c (github:karpathy/llm.c at f1e2ace);
#     when set, bench/llmc-build.sh builds its train_gpt2cu + cuDNN into
#     OUT/llmc, which the run half times beside otc in the same call
set -euo pipefail
out=${1:?usage: speed-build.sh OUT [options]}
shift
here=$(cd "$(dirname "$0")" && pwd)
export OTC_BIN=${OTC_BIN:-$here/../build/bin}
"${PYTHON:-/usr/bin/python3}" "$here/speed.py" build "$out" "$@"
if [[ -n ${LLMC_CHECKOUT:-} ]]; then
  "$here/llmc-build.sh" "$LLMC_CHECKOUT" "$out"
fi
