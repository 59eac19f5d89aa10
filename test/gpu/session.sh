#!/usr/bin/env bash
# One call on a lent GPU machine: the GPU tests' run half, the speed
# benchmark's run half and a per-kernel trace of GPT-2 124M, in that order,
# each inside its share of a wall-clock budget, with everything written to
# RESULTS as it comes (at most 8 files, so that a remote call returns them).
#
# The build halves run first on a build machine:
#   make test-gpu                                   # build/test/gpu-tests.tar.xz
#   OTC_BIN=build/bin bench/speed-build.sh /tmp/otc-speed
#   (LLMC_CHECKOUT=PATH before it also builds llm.c into otc-speed/llmc)
#   tar -C /tmp -cJf .dev/otc-speed.tar.xz otc-speed
#   cp build/test/gpu-tests.tar.xz .dev/
# and, for a same-machine A/B of a compile option, a second speed build
# (run in place of the PyTorch runs), e.g.
#   OTC_BIN=build/bin bench/speed-build.sh /tmp/otc-speed-variant \
#     --extra=--no-pack-attention --micro-batches 16 --fit-budget none
#   tar -C /tmp -cJf .dev/otc-speed-variant.tar.xz otc-speed-variant
# and, to time the Llama family too (Llama 3.2 1B's shape; or qwen3-0.6b):
#   OTC_BIN=build/bin bench/speed-build.sh /tmp/otc-speed-llama --model llama-1b
#   tar -C /tmp -cJf .dev/otc-speed-llama.tar.xz otc-speed-llama
# then, on the GPU machine, from the repository root:
#   test/gpu/session.sh .dev RESULTS [SECONDS]      # default budget 540 s
#
# RESULTS receives: gpu-results.txt (one line per check), gpu-logs.tar.xz
# (with kernel-bench.txt and .json: bench/kernels/kernel_bench.cu),
# speed-*.json and speed-logs.tar.xz (bench/speed.py run, first without and
# then with PyTorch, or under OTC_SESSION_VARIANT's settings or the variant
# build: speed-variant.json; llm.c's figures, llmc_*, beside otc's in
# speed-otc.json and speed-torch.json when the bundle holds
# otc-speed/llmc/train_gpt2cu),
# speed-llama.json when the bundles hold otc-speed-llama.tar.xz (the Llama
# family beside PyTorch), trace-compare.txt (bench/compare_trace.py: predicted
# against measured milliseconds per kernel at micro-batch 8 and 16),
# traces.tar.xz (the traces compared), session.txt (what ran, when).
#
# Exits with the GPU tests' status: run.sh's (0 only when every check it
# expects reported and none failed; 124 when its share of the budget ran
# out first), or 1 when the bundles do not unpack. The speed half's exits
# are in session.txt; they do not change the status.
set -uo pipefail
bundles=$(cd "${1:?usage: session.sh BUNDLES RESULTS [SECONDS]}" && pwd)
mkdir -p "${2:?usage: session.sh BUNDLES RESULTS [SECONDS]}"
results=$(cd "$2" && pwd)
budget=${3:-540}
start=$(date +%s)
work=${TMPDIR:-/tmp}/otc-session
rm -rf "$work" && mkdir -p "$work"
left() { echo $((budget - ($(date +%s) - start))); }
say() { echo "session: [$(( $(date +%s) - start ))s] $*" | tee -a "$results/session.txt"; }
# share FRACTION_PERCENT MIN: seconds for the next stage, at least MIN and
# at most what is left less 15 s to pack the results.
share() { local s=$(( ($(left) - 15) * $1 / 100 )); (( s < $2 )) && s=$2; echo "$s"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
  --format=csv,noheader 2>&1 | tee -a "$results/session.txt"

say "unpacking"
tar -C "$work" -xJf "$bundles/gpu-tests.tar.xz" && tar -C "$work" -xJf "$bundles/otc-speed.tar.xz" ||
  { say "unpacking failed"; exit 1; }

t=$(share 45 60)
say "gpu tests (limit ${t}s)"
OTC_GPU_RESULTS="$work/gpu-results" timeout "$t" "$work/gpu-tests/run.sh" > /dev/null 2>&1
gpu_status=$?
case $gpu_status in
  0) say "gpu tests exit 0" ;;
  124) say "gpu tests exit 124: cut off after ${t}s (no summary line)" ;;
  *) say "gpu tests exit $gpu_status: $(tail -1 "$work/gpu-results/results.txt" 2>/dev/null)" ;;
esac
cp -f "$work/gpu-results/results.txt" "$results/gpu-results.txt" 2>/dev/null
# The GEMM forms and the LM head's loss, timed; its table and JSON go with
# the logs (gpu-logs.tar.xz) and its table ends the output.
if [[ -x $work/gpu-tests/otc-kernel-bench ]]; then
  say "kernel benchmark"
  timeout 90 "$work/gpu-tests/otc-kernel-bench" \
    --json "$work/gpu-results/kernel-bench.json" > "$work/gpu-results/kernel-bench.txt" 2>&1
  say "kernel benchmark exit $?"
fi
tar -C "$work" -cJf "$results/gpu-logs.tar.xz" gpu-results 2>/dev/null

sp=$work/otc-speed
t=$(share 40 60)
say "speed, otc alone (limit ${t}s)"
timeout "$t" "$sp/run.sh" --no-torch --steps 25 --results "$work/speed-otc" \
  > "$work/speed-otc.log" 2>&1
say "speed exit $?"
cp -f "$work"/speed-otc/*.json "$results/speed-otc.json" 2>/dev/null
# Its programs' logs (otc's, llm.c's), which the later runs' would overwrite.
mkdir -p "$work/logs-otc" && cp -f "$sp"/run/*.log "$work/logs-otc/" 2>/dev/null
tail -30 "$work/speed-otc.log"

# Per-kernel times: the micro-batch 8 and 16 programs traced (eager
# launches with events around each span), against plan.json's prediction.
if [[ -f $sp/run/init.safetensors ]]; then
  for mb in mb8 mb16; do
    [[ -x $sp/$mb/train ]] || continue
    say "trace $mb"
    timeout 60 "$sp/$mb/train" --data "$sp/run/random_000000.bin" \
      --init "$sp/run/init.safetensors" --steps 6 --grad-clip 1 \
      --trace "$work/trace-$mb.json" > "$work/trace-$mb.log" 2>&1
    say "trace $mb exit $?"
    { echo "== $mb"; python3 "$sp/compare_trace.py" "$sp/$mb/plan.json" \
        "$work/trace-$mb.json" --skip-steps 2 --min-share 0.005; } \
      >> "$results/trace-compare.txt" 2>&1
  done
  # The traces themselves, for every kernel below the share printed above.
  (cd "$work" && tar -cJf "$results/traces.tar.xz" trace-mb*.json 2>/dev/null)
  cat "$results/trace-compare.txt"
fi

# A variant of the runtime's settings, when OTC_SESSION_VARIANT names one
# (e.g. OTCRT_ATTENTION_DETERMINISTIC=0): the speed benchmark again under
# it, in place of the PyTorch runs.
if [[ -n ${OTC_SESSION_VARIANT:-} ]]; then
  t=$(( $(left) - 20 ))
  say "speed, otc alone, with $OTC_SESSION_VARIANT (limit ${t}s)"
  env $OTC_SESSION_VARIANT timeout "$t" "$sp/run.sh" --no-torch --no-llmc --steps 25 \
    --results "$work/speed-variant" > "$work/speed-variant.log" 2>&1
  say "speed with $OTC_SESSION_VARIANT exit $?"
  cp -f "$work"/speed-variant/*.json "$results/speed-variant.json" 2>/dev/null
  tail -12 "$work/speed-variant.log"
fi

# A variant build (otc-speed-variant.tar.xz): its programs, the same
# weights and tokens (the same seed), in place of the PyTorch runs.
variant_build=
if [[ -f $bundles/otc-speed-variant.tar.xz && -z ${OTC_SESSION_VARIANT:-} ]] &&
   tar -C "$work" -xJf "$bundles/otc-speed-variant.tar.xz"; then
  variant_build=1
  t=$(( $(left) - 20 ))
  say "speed, otc alone, the variant build (limit ${t}s)"
  timeout "$t" "$work/otc-speed-variant/run.sh" --no-torch --steps 25 \
    --results "$work/speed-variant" > "$work/speed-variant.log" 2>&1
  say "speed of the variant build exit $?"
  cp -f "$work"/speed-variant/*.json "$results/speed-variant.json" 2>/dev/null
  tail -12 "$work/speed-variant.log"
fi

# The Llama family (otc-speed-llama.tar.xz: speed-build.sh --model llama-1b
# or qwen3-0.6b): otc, then PyTorch eager and torch.compile of Hugging
# Face's LlamaForCausalLM of the same shape, in half of what is left.
if [[ -f $bundles/otc-speed-llama.tar.xz ]] &&
   tar -C "$work" -xJf "$bundles/otc-speed-llama.tar.xz"; then
  t=$(share 50 120)
  say "speed, the Llama family with PyTorch (limit ${t}s)"
  timeout "$t" "$work/otc-speed-llama/run.sh" --steps 12 --warmup 4 \
    --results "$work/speed-llama" > "$work/speed-llama.log" 2>&1
  say "speed of the Llama family exit $?"
  cp -f "$work"/speed-llama/*.json "$results/speed-llama.json" 2>/dev/null
  tail -16 "$work/speed-llama.log"
fi

t=$(( $(left) - 20 ))
if [[ -n ${OTC_SESSION_VARIANT:-} || -n $variant_build ]]; then
  say "no PyTorch runs with a variant"
elif (( t > 90 )); then
  say "speed with PyTorch eager and torch.compile (limit ${t}s)"
  timeout "$t" "$sp/run.sh" --steps 25 --results "$work/speed-torch" > "$work/speed-torch.log" 2>&1
  say "speed with torch exit $?"
  cp -f "$work"/speed-torch/*.json "$results/speed-torch.json" 2>/dev/null
  tail -30 "$work/speed-torch.log"
else
  say "no time left for the PyTorch runs (${t}s)"
fi
tar -C "$work" -cJf "$results/speed-logs.tar.xz" --exclude='*.safetensors' --exclude='*.bin' \
  --exclude=train speed-otc.log speed-torch.log speed-variant.log speed-llama.log \
  trace-mb8.log trace-mb16.log otc-speed/run \
  logs-otc \
  2>/dev/null
[[ -f $work/gpu-results/kernel-bench.txt ]] && cat "$work/gpu-results/kernel-bench.txt"

say "done; gpu tests exit $gpu_status"
exit "$gpu_status"
