#!/usr/bin/env bash
# The run half of the GPU tests (made by test/gpu/build.sh, copied next to
# the programs it built): on a machine with an NVIDIA GPU and python3 with
# numpy, runs every cuda program on its batch and compares the loss and
# every gradient with the cpu target's dump (relative L2 error within the
# model's tolerance: 1e-4 in FP32, 2e-2 in BF16), and the golden models also
# with PyTorch's float64 gradients (1e-4). The BF16 programs run twice: with
# the attention the runtime picks (cuDNN's SDPA when it was built with it)
# and with OTCRT_ATTENTION=fallback (its own kernels). Prints one line per
# check and a summary; exits 1 when any check fails.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
py=${PYTHON:-python3}
pass=0 fail=0
check() {
  local what=$1
  shift
  if "$py" compare_grads.py "$@" > "$what.log" 2>&1; then
    echo "PASS $what: $(tail -1 "$what.log")"
    pass=$((pass + 1))
  else
    echo "FAIL $what: $(tail -1 "$what.log") (see $here/$what.log)"
    fail=$((fail + 1))
  fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
if [[ -x ./otcrt-cuda-kernel-tests ]]; then
  if ./otcrt-cuda-kernel-tests > kernel-tests.log 2>&1; then
    echo "PASS kernel library: $(tail -1 kernel-tests.log)"
    pass=$((pass + 1))
  else
    echo "FAIL kernel library: $(tail -1 kernel-tests.log) (see $here/kernel-tests.log)"
    fail=$((fail + 1))
  fi
fi
while read -r name rtol; do
  if ! "$name/cuda/train" --batch "$name/batch.safetensors" \
        --dump-grads "$name/cuda.st" --quiet > "$name-run.log" 2>&1; then
    echo "FAIL $name: the cuda program failed: $(tail -1 "$name-run.log")"
    fail=$((fail + 1))
    continue
  fi
  grep -m1 "otcrt: attention:" "$name-run.log" | sed "s/^/$name: /"
  check "$name-vs-cpu" "$name/cuda.st" "$name/cpu.st" --rtol "$rtol"
  [[ -f $name/golden.safetensors ]] &&
    check "$name-vs-pytorch" "$name/cuda.st" "$name/golden.safetensors" --rtol 1e-4
  if [[ $name == *-bf16 ]]; then
    if OTCRT_ATTENTION=fallback "$name/cuda/train" --batch "$name/batch.safetensors" \
          --dump-grads "$name/cuda-fallback.st" --quiet > "$name-fallback-run.log" 2>&1; then
      check "$name-fallback-attention-vs-cpu" "$name/cuda-fallback.st" "$name/cpu.st" \
        --rtol "$rtol"
    else
      echo "FAIL $name: the cuda program failed with OTCRT_ATTENTION=fallback:" \
           "$(tail -1 "$name-fallback-run.log")"
      fail=$((fail + 1))
    fi
  fi
done < manifest.txt
echo "gpu tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
