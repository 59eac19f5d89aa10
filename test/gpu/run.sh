#!/usr/bin/env bash
# The run half of the GPU tests (made by test/gpu/build.sh, copied next to
# the programs it built): on a machine with an NVIDIA GPU and python3 with
# numpy, runs every cuda program on its batch and compares the loss and
# every gradient with the cpu target's dump (relative L2 error within the
# model's tolerance: 1e-4 in FP32, 2e-2 in BF16), and the golden models also
# with PyTorch's float64 gradients (1e-4), under every recomputation policy;
# the BF16 programs run twice: with the attention the runtime picks (cuDNN's
# SDPA when it was built with it) and with OTCRT_ATTENTION=fallback (its own
# kernels); the Hugging Face GPT-2 programs (GEMMs with bias, addend, GELU
# and dGELU epilogues) run again with OTCRT_GEMM_EPILOGUE=fallback (cuBLASLt's
# plain products and the runtime's epilogue kernel); trains one model two
# steps under compute-sanitizer memcheck where
# it is installed. The first model also runs with --no-cuda-graphs, whose
# gradient dump and parameters after three steps must equal, bit for bit,
# those of the default run (graphs replayed from the second call of each step
# function on), and must stop on a bad label with a message naming it: when
# the driver loads the batch, and (with the host's check off) from the
# kernels' error record after the micro-step; its first step's gradient norm
# must be that of the cpu program's gradients. NCCL's sums run over a
# communicator of this GPU alone (OTC_TEST_COLLECTIVES_ALONE), after the
# backward and overlapped with it (the programs compiled for 2 ranks), each
# bit for bit the one-rank program's; on a machine with 2 GPUs or more and
# mpirun, the programs for 2 ranks (overlapped, and ZeRO-1) run on 2 GPUs
# against the cpu program (else a SKIP line), and again with the ranks
# started as torchrun starts them (TCP, no MPI). Evaluation (eval_step) gives
# the step's own loss on the step's windows at learning rate 0; sampling
# (decode_step) draws the cpu program's ids.
#
# Prints one line per check, PASS, FAIL or SKIP (a check that cannot run
# here: fewer than 2 GPUs, no mpirun, no compute-sanitizer, a part that
# build.sh leaves out when it cannot make it, or a check whose program
# failed above), and a final line with the counts against the number of
# checks this bundle expects, counted from manifest.txt before anything
# runs (tally.sh); exits 1 when any check failed or fewer (or more) were
# reported than expected.
#
# With OTC_GPU_RESULTS=DIR, every line is also appended to DIR/results.txt as
# it is printed and the logs are copied to DIR as each check finishes, so
# that a run cut off by a time limit still reports what it got to.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
results=${OTC_GPU_RESULTS:-}
if [[ -n $results ]]; then
  mkdir -p "$results"
  exec > >(tee -a "$results/results.txt") 2>&1
fi
# Copies the logs written so far to the results folder.
keep_logs() { [[ -z $results ]] || cp -f ./*.log "$results/" 2>/dev/null || true; }
py=${PYTHON:-python3}
# shellcheck source=tally.sh
source ./tally.sh
check() {
  local what=$1
  shift
  if "$py" compare_grads.py "$@" > "$what.log" 2>&1; then
    pass "$what: $(tail -1 "$what.log")"
  else
    fail "$what: $(tail -1 "$what.log") (see $here/$what.log)"
  fi
  keep_logs
}
# manifest.txt: NAME RTOL [golden|-] per program (the third column is
# absent from older bundles: then golden.safetensors's presence decides).
manifest=()
if [[ -f manifest.txt ]]; then
  mapfile -t manifest < manifest.txt
fi
golden_of() { # golden_of NAME COLUMN: golden or -
  if [[ -n $2 ]]; then echo "$2"
  elif [[ -f $1/golden.safetensors ]]; then echo golden
  else echo -
  fi
}
# The checks expected, one line each, counted before anything runs.
expect 1 # the kernel library
[[ ${#manifest[@]} -gt 0 ]] || expect 1 # the manifest itself
for line in "${manifest[@]}"; do
  read -r name rtol golden <<< "$line"
  expect 1                                                  # NAME-vs-cpu
  [[ $(golden_of "$name" "${golden:-}") == golden ]] && expect 1 # NAME-vs-pytorch
  [[ $name == *-bf16 ]] && expect 1                         # fallback attention
  [[ $name == hf-gpt2* ]] && expect 1                       # fallback GEMM epilogues
done
expect 7 # gpt2-opset17: graphs-vs-eager (2), 3 steps, norm, bad label (2), bad token
expect 1 # gpt2-opset17-bf16: 3 steps
expect 2 # NCCL at world size 1 (FP32, BF16)
expect 6 # overlapped NCCL sums (FP32, BF16): gradients, 3 steps, trace
expect 4 # 2 GPUs (overlapped, ZeRO-1): gradients, 3 steps
expect 2 # 2 GPUs started as torchrun starts them (overlapped, ZeRO-1): gradients
expect 1 # memcheck
expect 2 # evaluation (FP32, BF16)
expect 2 # sampling (greedy, seeded)
echo "gpu tests: $tally_expected checks expected"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
if [[ -x ./otcrt-cuda-kernel-tests ]]; then
  # Fresh random inputs each run; the log's first line has the seed, which
  # `otcrt-cuda-kernel-tests SEED` replays.
  if ./otcrt-cuda-kernel-tests > kernel-tests.log 2>&1; then
    pass "kernel library ($(head -1 kernel-tests.log)): $(tail -1 kernel-tests.log)"
  else
    fail "kernel library ($(head -1 kernel-tests.log)): $(tail -1 kernel-tests.log)" \
         "(see $here/kernel-tests.log)"
  fi
else
  skip "kernel library: no otcrt-cuda-kernel-tests in the bundle (otc built without it)"
fi
[[ ${#manifest[@]} -gt 0 ]] || fail "manifest.txt: missing or empty"
for line in "${manifest[@]}"; do
  read -r name rtol golden <<< "$line"
  golden=$(golden_of "$name" "${golden:-}")
  if "$name/cuda/train" --batch "$name/batch.safetensors" \
       --dump-grads "$name/cuda.st" --quiet > "$name-run.log" 2>&1 < /dev/null; then
    grep -m1 "otcrt: attention:" "$name-run.log" | sed "s/^/$name: /"
    check "$name-vs-cpu" "$name/cuda.st" "$name/cpu.st" --rtol "$rtol"
    if [[ $golden != golden ]]; then
      :
    elif [[ -f $name/golden.safetensors ]]; then
      check "$name-vs-pytorch" "$name/cuda.st" "$name/golden.safetensors" --rtol 1e-4
    else
      fail "$name-vs-pytorch: no $name/golden.safetensors in the bundle"
    fi
  else
    rm -f "$name/cuda.st"
    fail "$name-vs-cpu: the cuda program failed: $(tail -1 "$name-run.log")"
    [[ $golden == golden ]] && skip "$name-vs-pytorch: the cuda program failed (above)"
  fi
  if [[ $name == *-bf16 ]]; then
    if OTCRT_ATTENTION=fallback "$name/cuda/train" --batch "$name/batch.safetensors" \
          --dump-grads "$name/cuda-fallback.st" --quiet > "$name-fallback-run.log" 2>&1; then
      check "$name-fallback-attention-vs-cpu" "$name/cuda-fallback.st" "$name/cpu.st" \
        --rtol "$rtol"
    else
      fail "$name-fallback-attention-vs-cpu: the cuda program failed with" \
           "OTCRT_ATTENTION=fallback: $(tail -1 "$name-fallback-run.log")"
    fi
  fi
  if [[ $name == hf-gpt2* ]]; then
    # Its GEMM epilogues (bias, addend, GELU, dGELU) on the runtime's
    # fallback: cuBLASLt's plain products and the epilogue kernel.
    if OTCRT_GEMM_EPILOGUE=fallback "$name/cuda/train" --batch "$name/batch.safetensors" \
          --dump-grads "$name/cuda-gemm-fallback.st" --quiet > "$name-gemm-fallback-run.log" 2>&1; then
      check "$name-gemm-fallback-vs-cpu" "$name/cuda-gemm-fallback.st" "$name/cpu.st" \
        --rtol "$rtol"
    else
      fail "$name-gemm-fallback-vs-cpu: the cuda program failed with" \
           "OTCRT_GEMM_EPILOGUE=fallback: $(tail -1 "$name-gemm-fallback-run.log")"
    fi
  fi
done
# CUDA graphs change how work is launched, never what it computes.
same() { # same WHAT FILE_A FILE_B
  if cmp -s "$2" "$3"; then
    pass "$1"
  elif [[ ! -f $2 || ! -f $3 ]]; then
    fail "$1: $([[ -f $2 ]] && echo "$3" || echo "$2") is missing"
  else
    fail "$1: $2 and $3 differ"
  fi
}
# after_steps NAME CUDA_PARAMS FRACTION: the cuda program's parameters after
# 3 steps (lr 1e-3) against the cpu program's. Each update moves an element
# by about lr; where the gradients' last bits differ, an element whose
# gradient is near zero may move another way, so at most FRACTION of the
# elements may be more than lr / 100 per step apart (a wrong update, e.g.
# packets in another order, moves about half of them that far).
after_steps() { # after_steps NAME CUDA_PARAMS FRACTION [LABEL]
  local label=${4:-$1}
  if "$py" - "$1/cpu-steps.safetensors" "$2" "$3" <<'PY' > "$label-steps.log" 2>&1; then
import sys
import numpy as np
import st_io
cpu, cuda = st_io.read(sys.argv[1]), st_io.read(sys.argv[2])
limit = float(sys.argv[3])
assert cpu.keys() == cuda.keys(), "different tensors"
far = total = 0
worst = 0.0
for k in cpu:
    d = np.abs(cpu[k].astype(np.float64) - cuda[k].astype(np.float64))
    far += int(np.sum(d > 3e-5))
    total += d.size
    worst = max(worst, float(d.max()))
print("%d of %d elements more than 3e-5 apart (%.4f%%), max %.3g"
      % (far, total, 100.0 * far / total, worst))
sys.exit(0 if far <= limit * total else 1)
PY
    pass "$label parameters after 3 steps vs cpu: $(tail -1 "$label-steps.log")"
  else
    fail "$label parameters after 3 steps vs cpu: $(tail -1 "$label-steps.log")"
  fi
}
g=gpt2-opset17
if [[ ! -x $g/cuda/train ]]; then
  fail_all "no $g/cuda/train in the bundle" "$g graphs-vs-eager gradients" \
    "$g graphs-vs-eager after 3 steps" "$g parameters after 3 steps vs cpu" \
    "$g gradient norm" "$g bad label reported on load" "$g bad label reported by the device" \
    "$g bad token id reported on load and by the device"
else
  if "$g/cuda/train" --batch "$g/batch.safetensors" --dump-grads "$g/eager.st" \
       --no-cuda-graphs --quiet > "$g-eager.log" 2>&1; then
    same "$g graphs-vs-eager gradients" "$g/cuda.st" "$g/eager.st"
  else
    fail "$g graphs-vs-eager gradients: --no-cuda-graphs failed: $(tail -1 "$g-eager.log")"
  fi
  rm -rf "$g/steps-graphs" "$g/steps-eager"
  "$g/cuda/train" --batch "$g/batch.safetensors" --steps 3 --save "$g/steps-graphs" \
    > "$g-graphs-steps.log" 2>&1
  "$g/cuda/train" --batch "$g/batch.safetensors" --steps 3 --save "$g/steps-eager" \
    --no-cuda-graphs > "$g-eager-steps.log" 2>&1
  if grep -q "cuda graphs: on" "$g-graphs-steps.log" &&
     ! grep -q "warning" "$g-graphs-steps.log"; then
    same "$g graphs-vs-eager after 3 steps" "$g/steps-graphs/model.safetensors" \
      "$g/steps-eager/model.safetensors"
  else
    fail "$g graphs-vs-eager after 3 steps: graphs were not used:" \
         "$(grep -m1 "graph" "$g-graphs-steps.log" || tail -1 "$g-graphs-steps.log")"
  fi
  # The parameters after 3 steps (the AdamW kernel, 4 elements a thread)
  # against the cpu program's, in FP32 and in BF16 below.
  # 60 of this model's 28032 gradients are below 1e-9 at the first step,
  # where epsilon (1e-8) decides the update and their last bits its size:
  # 0.18% of the elements moved apart on an H100.
  after_steps "$g" "$g/steps-graphs/model.safetensors" 0.01
  # The first step's gradient norm (otcrt_sum_squares on the device) is the
  # norm of the cpu program's gradients on the same batch.
  if "$py" - "$g/cpu.st" "$g-graphs-steps.log" <<'PY' > "$g-norm.log" 2>&1; then
import math, sys
import numpy as np
import st_io
grads = st_io.read(sys.argv[1])
want = math.sqrt(sum(float(np.sum(v.astype(np.float64) ** 2))
                     for k, v in grads.items() if k.startswith("grad/")))
line = next(l for l in open(sys.argv[2]) if l.startswith("step "))
got = float(line.split("| norm ")[1].split()[0])
print("norm %.6f, cpu %.6f" % (got, want))
sys.exit(0 if abs(got - want) <= 1e-4 * want else 1)
PY
    pass "$g gradient norm: $(tail -1 "$g-norm.log")"
  else
    fail "$g gradient norm: $(tail -1 "$g-norm.log")"
  fi
  if [[ ! -f $g/bad-label.safetensors ]]; then
    fail_all "no $g/bad-label.safetensors in the bundle" "$g bad label reported on load" \
      "$g bad label reported by the device"
  else
    # The driver checks the batch against the targets' range as it loads it.
    "$g/cuda/train" --batch "$g/bad-label.safetensors" --steps 2 > "$g-bad-host.log" 2>&1
    if grep -q "input 'targets' holds 64 at \[1, 1\], outside \[0, 64)" "$g-bad-host.log" &&
       ! grep -q "^step " "$g-bad-host.log"; then
      pass "$g bad label reported on load"
    else
      fail "$g bad label reported on load: $(tail -1 "$g-bad-host.log")"
    fi
    # Without that check the cross-entropy kernels record it on the device
    # and the driver reports it after the micro-step.
    OTC_TEST_NO_INDEX_CHECK=1 "$g/cuda/train" --batch "$g/bad-label.safetensors" --steps 2 \
      > "$g-bad.log" 2>&1
    if grep -q "label 64 at row 17 is outside \[0, 64)" "$g-bad.log"; then
      pass "$g bad label reported by the device"
    else
      fail "$g bad label reported by the device: $(tail -1 "$g-bad.log")"
    fi
  fi
  if [[ ! -f $g/bad-token.safetensors ]]; then
    fail "$g bad token id reported on load and by the device: no $g/bad-token.safetensors" \
         "in the bundle"
  else
    # A token id past the embedding: on load, and from the generated gather
    # kernel's record.
    "$g/cuda/train" --batch "$g/bad-token.safetensors" --steps 2 > "$g-badtok-host.log" 2>&1
    OTC_TEST_NO_INDEX_CHECK=1 "$g/cuda/train" --batch "$g/bad-token.safetensors" --steps 2 \
      > "$g-badtok.log" 2>&1
    if grep -q "input 'idx' holds 64 at \[1, 1\], outside \[-64, 64)" "$g-badtok-host.log" &&
       grep -q "gather index 64 at position 17 is outside \[-64, 64)" "$g-badtok.log"; then
      pass "$g bad token id reported on load and by the device"
    else
      fail "$g bad token id reported on load and by the device:" \
           "$(tail -1 "$g-badtok-host.log") / $(tail -1 "$g-badtok.log")"
    fi
  fi
fi

# The same in BF16 (BF16 gradients, the FP32 masters and their BF16
# copies written by the one AdamW kernel): the gradients differ from the
# cpu program's in their last BF16 bits, so more elements may move apart
# (the cpu program's FP32 and BF16 parameters: 9% of them; a wrong update
# moves nearly all).
b=gpt2-opset17-bf16
if [[ ! -x $b/cuda/train || ! -f $b/cpu-steps.safetensors ]]; then
  fail "$b parameters after 3 steps vs cpu: no $b/cuda/train or $b/cpu-steps.safetensors" \
       "in the bundle"
else
  rm -rf "$b/steps"
  if "$b/cuda/train" --batch "$b/batch.safetensors" --steps 3 --save "$b/steps" \
       --quiet > "$b-steps-run.log" 2>&1; then
    after_steps "$b" "$b/steps/model.safetensors" 0.2
  else
    fail "$b parameters after 3 steps vs cpu: 3 steps failed: $(tail -1 "$b-steps-run.log")"
  fi
fi
# NCCL at world size 1 (OTC_TEST_COLLECTIVES_ALONE: the gradients' sum of a
# data-parallel run through a communicator of this GPU alone) gives the
# same bits as no sum. NCCL is loaded at run time: from the system, or from
# the nvidia-nccl Python package where that is where it is.
nccl_dir=$("$py" -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)
for g in gpt2-opset17 gpt2-opset17-bf16; do
  if [[ ! -x $g/cuda/train ]]; then
    fail "$g NCCL all-reduce at world size 1: no $g/cuda/train in the bundle"
    continue
  elif [[ ! -f $g/cuda.st ]]; then
    skip "$g NCCL all-reduce at world size 1: no gradients of the cuda program (it failed above)"
    continue
  fi
  if LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}" OTC_TEST_COLLECTIVES_ALONE=1 \
       "$g/cuda/train" --batch "$g/batch.safetensors" --dump-grads "$g/nccl.st" --quiet \
       > "$g-nccl.log" 2>&1; then
    same "$g NCCL all-reduce at world size 1" "$g/cuda.st" "$g/nccl.st"
  else
    fail "$g NCCL all-reduce at world size 1: $(tail -1 "$g-nccl.log")"
  fi
done
# Overlapped sums: the programs compiled for 2 ranks, run alone through
# NCCL, queue each gradient bucket's all-reduce on a communication stream as
# the backward finishes it. One GPU's sum is its own gradients, so the dump
# equals, bit for bit, that of the program compiled for one rank, and so do
# the parameters after 3 steps, where the last micro-step's own graph (the
# sums captured in it) is replayed from the third step on; a traced step
# shows the sums on the communication lane.
dp_reference() { # the 3-step parameters of the program compiled for one rank
  case $1 in
    gpt2-opset17) echo "$1/steps-graphs/model.safetensors" ;;
    *) echo "$1/steps/model.safetensors" ;;
  esac
}
for g in gpt2-opset17 gpt2-opset17-bf16; do
  p=$g/cuda-dp2/train
  dp_checks=("$g overlapped NCCL sums at world size 1, gradients"
             "$g overlapped NCCL sums at world size 1, parameters after 3 steps (graphs)"
             "$g traced step")
  if [[ ! -x $p ]]; then
    fail_all "no $p in the bundle" "${dp_checks[@]}"
    continue
  elif [[ ! -f $g/cuda.st ]]; then
    skip_all "no gradients of the cuda program (it failed above)" "${dp_checks[@]}"
    continue
  fi
  dp=(env LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}" OTC_TEST_COLLECTIVES_ALONE=1)
  if "${dp[@]}" "$p" --batch "$g/batch.safetensors" --dump-grads "$g/dp2.st" --quiet \
       > "$g-dp2.log" 2>&1; then
    same "${dp_checks[0]}" "$g/cuda.st" "$g/dp2.st"
  else
    fail "${dp_checks[0]}: $(tail -1 "$g-dp2.log")"
  fi
  ref=$(dp_reference "$g")
  rm -rf "$g/steps-dp2"
  "${dp[@]}" "$p" --batch "$g/batch.safetensors" --steps 3 --save "$g/steps-dp2" \
    > "$g-dp2-steps.log" 2>&1
  if [[ ! -f $ref ]]; then
    fail "${dp_checks[1]}: no reference $ref"
  elif grep -q "cuda graphs: on" "$g-dp2-steps.log" && ! grep -q "warning" "$g-dp2-steps.log"; then
    same "${dp_checks[1]}" "$ref" "$g/steps-dp2/model.safetensors"
  else
    fail "${dp_checks[1]}: $(grep -m1 -i "graph\|error" "$g-dp2-steps.log" ||
                            tail -1 "$g-dp2-steps.log")"
  fi
  "${dp[@]}" "$p" --batch "$g/batch.safetensors" --steps 1 --trace "$g-dp2-trace.json" \
    --quiet > "$g-dp2-trace.log" 2>&1
  n=$(grep -c '"gradient all-reduce, bucket [0-9]* (overlapped)", "cat": "communication"' \
        "$g-dp2-trace.json" 2>/dev/null || true)
  if [[ ${n:-0} -ge 1 ]]; then
    pass "${dp_checks[2]}: $n overlapped bucket sums on the communication lane"
  else
    fail "${dp_checks[2]}: ${n:-0} overlapped bucket sums in the trace: $(tail -1 "$g-dp2-trace.log")"
  fi
  keep_logs
done
# Two GPUs or more: the FP32 program on 2 ranks (mpirun, one GPU each,
# NCCL), overlapped and sharded (ZeRO-1). The whole batch's gradient that
# rank 0 dumps is the one-process cpu program's within FP32 rounding, and
# the parameters after 3 steps are its too (after_steps).
g=gpt2-opset17
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
mgpu_checks=()
for v in cuda-mgpu cuda-mgpu-z; do
  mgpu_checks+=("$g-$v-2-gpus-vs-cpu" "$g-$v-2-gpus parameters after 3 steps vs cpu")
done
if [[ ! -x $g/cuda-mgpu/train || ! -x $g/cuda-mgpu-z/train ]]; then
  fail_all "no $g/cuda-mgpu/train or $g/cuda-mgpu-z/train in the bundle" "${mgpu_checks[@]}"
elif (( ${gpus:-0} < 2 )); then
  skip_all "${gpus:-0} GPU(s) here" "${mgpu_checks[@]}"
elif ! command -v mpirun > /dev/null; then
  skip_all "no mpirun here" "${mgpu_checks[@]}"
else
  mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
       LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}"
       mpirun --oversubscribe -np 2)
  for v in cuda-mgpu cuda-mgpu-z; do
    rm -rf "$g/steps-$v"
    if "${mpi[@]}" "$g/$v/train" --batch "$g/batch.safetensors" --dump-grads "$g/$v.st" \
         --quiet > "$g-$v.log" 2>&1 &&
       "${mpi[@]}" "$g/$v/train" --batch "$g/batch.safetensors" --steps 3 \
         --save "$g/steps-$v" --quiet >> "$g-$v.log" 2>&1; then
      check "$g-$v-2-gpus-vs-cpu" "$g/$v.st" "$g/cpu.st" --rtol 1e-5
      after_steps "$g" "$g/steps-$v/model.safetensors" 0.01 "$g-$v-2-gpus"
    else
      fail "$g-$v-2-gpus-vs-cpu: the run on 2 GPUs failed: $(tail -1 "$g-$v.log")"
      skip "$g-$v-2-gpus parameters after 3 steps vs cpu: the run on 2 GPUs failed (above)"
    fi
  done
fi
# The same gradients on 2 GPUs with the ranks started as torchrun
# --no-python starts them (launch_tcp.py: RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR, MASTER_PORT; no MPI): NCCL's id goes from rank 0 over the TCP
# rendezvous.
tcp_checks=("$g-cuda-mgpu-2-gpus-tcp-vs-cpu" "$g-cuda-mgpu-z-2-gpus-tcp-vs-cpu")
if [[ ! -x $g/cuda-mgpu/train || ! -x $g/cuda-mgpu-z/train || ! -f launch_tcp.py ]]; then
  fail_all "no $g/cuda-mgpu/train, $g/cuda-mgpu-z/train or launch_tcp.py in the bundle" \
    "${tcp_checks[@]}"
elif (( ${gpus:-0} < 2 )); then
  skip_all "${gpus:-0} GPU(s) here" "${tcp_checks[@]}"
else
  for v in cuda-mgpu cuda-mgpu-z; do
    if env LD_LIBRARY_PATH="${nccl_dir:+$nccl_dir:}${LD_LIBRARY_PATH:-}" \
         "$py" launch_tcp.py -n 2 --timeout 600 -- "$g/$v/train" \
         --batch "$g/batch.safetensors" --dump-grads "$g/$v-tcp.st" --quiet \
         > "$g-$v-tcp.log" 2>&1; then
      check "$g-$v-2-gpus-tcp-vs-cpu" "$g/$v-tcp.st" "$g/cpu.st" --rtol 1e-5
    else
      fail "$g-$v-2-gpus-tcp-vs-cpu: the run over TCP failed: $(tail -1 "$g-$v-tcp.log")"
    fi
  done
fi
# One model trains two steps under compute-sanitizer memcheck (out-of-bounds
# and misaligned device accesses, CUDA API errors); skipped where
# compute-sanitizer is not installed.
sanitizer=$(command -v compute-sanitizer ||
            ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
               2>/dev/null | head -1 || true)
if [[ ! -f memcheck.txt ]]; then
  fail "memcheck: no memcheck.txt in the bundle"
else
  read -r name < memcheck.txt
  if [[ -z $sanitizer ]]; then
    skip "memcheck $name: compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
  elif "$sanitizer" --tool memcheck --error-exitcode 1 "$name/cuda/train" \
        --batch "$name/batch.safetensors" --steps 2 --quiet > memcheck.log 2>&1; then
    pass "memcheck $name: $(grep 'ERROR SUMMARY' memcheck.log | tail -1)"
  else
    fail "memcheck $name: $(grep 'ERROR SUMMARY' memcheck.log | tail -1 ||
                            tail -1 memcheck.log) (see $here/memcheck.log)"
  fi
fi
# Evaluation runs eval_step, the forward and the loss alone: with the
# learning rate at 0 and the step's own windows as the validation data, the
# validation loss is the step's loss that micro_step computed (checked above
# against the cpu program), in FP32 with 2 micro-batches and in BF16.
"$py" - eval-tokens.bin <<'PY'
import struct, sys
tokens = [(i * 7 + i // 5) % 16 for i in range(2049)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
PY
for spec in "gpt2-opset17 2" "gpt2-opset17-bf16 1"; do
  set -- $spec
  if "$1/cuda/train" --data eval-tokens.bin --val-data eval-tokens.bin --val-batches "$2" \
        --steps 1 --lr 0 --no-shuffle > "$1-eval.log" 2>&1 &&
     "$py" - "$1-eval.log" > "$1-eval-check.log" 2>&1 <<'PY'; then
import re, sys
text = open(sys.argv[1]).read()
step = float(re.search(r"^step +1/1 \| loss ([0-9.]+)", text, re.M).group(1))
val = float(re.search(r"^val loss ([0-9.]+) at step 1 ", text, re.M).group(1))
print(f"val loss {val:.6f}, step loss {step:.6f}")
sys.exit(0 if abs(val - step) <= 2e-6 else 1)
PY
    pass "$1-eval-step: $(tail -1 "$1-eval-check.log")"
  else
    fail "$1-eval-step: $(tail -q -n 1 "$1-eval-check.log" "$1-eval.log" 2>/dev/null | tail -1)"
  fi
done
# Sampling: decode_step on the GPU (the keys and values cached in the
# arena, the attention over the cache under the position's mask) draws the
# ids the cpu program drew, greedy and seeded.
for spec in "greedy --temperature 0 --prompt-ids 1,2,3" "seed4 --seed 4 --prompt-ids 7"; do
  set -- $spec
  name=$1
  shift
  if [[ ! -x generate/cuda/train ]]; then
    skip "generate-$name: no generate/cuda/train (a bundle from before sampling)"
  elif generate/cuda/train --generate 12 "$@" > "generate-$name.txt" 2> "generate-$name.log" &&
       cmp -s "generate-$name.txt" "generate/want-$name.txt"; then
    pass "generate-$name: $(cat "generate-$name.txt") ($(tail -1 "generate-$name.log"))"
  else
    fail "generate-$name: cuda $(cat "generate-$name.txt" 2>/dev/null), cpu $(cat "generate/want-$name.txt" 2>/dev/null) $(tail -1 "generate-$name.log" 2>/dev/null)"
  fi
done
keep_logs
tally_summary
