#!/usr/bin/env bash
# `make demo`: compiles the example model (a PyTorch-exported MLP with its
# cross-entropy loss) into a training program and trains it on one batch,
# printing the loss as it falls. Uses the cuda target when a GPU answers,
# else the cpu target.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/test/e2e/mlp/mlp.onnx
batch=$root/test/e2e/mlp/batch.safetensors
out=$build/demo
target=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   [[ -f $build/lib/libotcrt_cuda.a ]]; then
  target=cuda
fi
echo "== otc demo: $model (target $target)"
"$build/bin/otc-compile" "$model" -o "$out" --target=$target --micro-batch 4 --grad-accum 2 --report
echo "== training 200 AdamW steps on one batch of 8 (2 micro-batches of 4)"
"$out/train" --batch "$batch" --steps 200 --lr 1e-2 --log-every 20
