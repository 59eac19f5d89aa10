#!/usr/bin/env bash
# The build half of the GPU tests: compiles every golden model and every
# codegen test model for the cuda target, and for the cpu target as the
# reference, on a machine with otc and the CUDA toolkit (no GPU needed).
# The cpu programs run here and dump their loss and gradients; the cuda
# programs, their batches, those dumps and run.sh go to OUTDIR, which a GPU
# machine (python3 with numpy, no otc) runs with `OUTDIR/run.sh`: every cuda
# kernel, the kernel library's included, is then checked against the cpu
# target's implementation (and the golden models against PyTorch's float64
# gradients, under every recomputation policy); one model trains under
# compute-sanitizer memcheck; otcrt-cuda-kernel-tests compares each library
# kernel with the host one directly. One model also gets a batch with a label
# out of range and one with a token id out of range, which the cuda program
# must reject on load and, with that check off, through the kernels' error
# record.
#
#   test/gpu/build.sh OUTDIR        (OTC_BIN: otc's bin directory, default build/bin)
#
# Also writes OUTDIR.tar.xz, the folder as one archive small enough to carry
# to a GPU machine in one call (see the end of this script).
set -euo pipefail
out=${1:?usage: build.sh OUTDIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
bin=${OTC_BIN:-$src/build/bin}
py=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
manifest="$out/manifest.txt"
: > "$manifest"

# One model: NAME ONNX BATCH RTOL GOLDEN(or -) then otc-compile options.
add() {
  local name=$1 model=$2 batch=$3 rtol=$4 golden=$5
  shift 5
  echo "gpu-tests: building $name" >&2
  "$bin/otc-compile" "$model" -o "$out/$name/cpu" --target=cpu "$@" >/dev/null
  "$out/$name/cpu/train" --batch "$batch" --dump-grads "$out/$name/cpu.st" --quiet
  # With STEPS=1: the parameters after 3 steps too, which the cuda
  # program's (its AdamW kernel) must match (run.sh).
  if [[ ${STEPS:-0} == 1 ]]; then
    "$out/$name/cpu/train" --batch "$batch" --steps 3 --save "$out/$name/cpu-steps" --quiet
    cp -L "$out/$name/cpu-steps/model.safetensors" "$out/$name/cpu-steps.safetensors"
    rm -rf "$out/$name/cpu-steps"
  fi
  "$bin/otc-compile" "$model" -o "$out/$name/cuda" --target=cuda "$@" >/dev/null
  cp "$batch" "$out/$name/batch.safetensors"
  [[ $golden == - ]] || cp "$golden" "$out/$name/golden.safetensors"
  # The cpu program and sources are not needed on the GPU machine.
  rm -rf "$out/$name/cpu"
  rm -f "$out/$name/cuda/model.cu"
  # NAME RTOL golden|-: run.sh counts a check against PyTorch for golden.
  echo "$name $rtol $([[ $golden == - ]] && echo - || echo golden)" >> "$manifest"
}

freeze='--freeze=^rope_(cos|sin)$'
for m in gpt2-opset14/gpt2 gpt2-opset17/gpt2 gpt2-opset18/gpt2 \
         llama-opset14/llama llama-opset17/llama llama-opset18/llama; do
  d=$(dirname "$m")
  STEPS=$([[ $d == gpt2-opset17 ]] && echo 1 || echo 0) \
  add "$d" "$src/test/e2e/$m.onnx" "$src/test/e2e/$d/batch.safetensors" 1e-4 \
      "$src/test/e2e/$d/grads.safetensors" --micro-batch 2 --grad-accum 2 "$freeze"
done
for m in gpt2-opset17/gpt2 llama-opset17/llama; do
  d=$(dirname "$m")
  STEPS=1 add "$d-bf16" "$src/test/e2e/$m.onnx" "$src/test/e2e/$d/batch.safetensors" 2e-2 - \
      --micro-batch 4 --precision=bf16 "$freeze"
done
# FP8 GEMMs (--precision=fp8 --fp8-gemms=all: every GEMM of the tiny model,
# which the step-time model would leave BF16, through cuBLASLt's FP8 path)
# against the cpu program's emulation of them, operands rounded alike: the
# loss and gradients within 0.5 relative, FP8's noise (a value one BF16 unit
# apart on the two sides rounds now and then to the neighbouring FP8 value,
# a step of 6-25% that later products spread), far under what a wrong
# scale or layout gives.
add gpt2-opset17-fp8 "$src/test/e2e/gpt2-opset17/gpt2.onnx" \
    "$src/test/e2e/gpt2-opset17/batch.safetensors" 0.5 - \
    --micro-batch 4 --precision=fp8 --fp8-gemms=all

# The same two programs compiled for 2 ranks (--world-size 2): the cuda
# program queues each gradient bucket's NCCL all-reduce on a communication
# stream as the backward finishes it. run.sh runs them alone, through a
# communicator of one GPU, against the programs above.
for spec in "gpt2-opset17 --micro-batch 2 --grad-accum 2" \
            "gpt2-opset17-bf16 --micro-batch 4 --precision=bf16"; do
  set -- $spec
  d=$1
  shift
  echo "gpu-tests: building $d/cuda-dp2" >&2
  "$bin/otc-compile" "$src/test/e2e/gpt2-opset17/gpt2.onnx" -o "$out/$d/cuda-dp2" \
      --target=cuda --world-size 2 "$@" "$freeze" >/dev/null
  rm -f "$out/$d/cuda-dp2/model.cu"
done

# For a machine with 2 GPUs or more (run.sh skips them elsewhere): the FP32
# program for 2 ranks of 1 x 2 micro-batches each (the batch's 4 rows split
# over the ranks), with its buckets overlapped and with ZeRO-1.
for z in "" "--shard-optimizer"; do
  name=cuda-mgpu${z:+-z}
  echo "gpu-tests: building gpt2-opset17/$name" >&2
  "$bin/otc-compile" "$src/test/e2e/gpt2-opset17/gpt2.onnx" -o "$out/gpt2-opset17/$name" \
      --target=cuda --world-size 2 $z --micro-batch 1 --grad-accum 2 "$freeze" >/dev/null
  rm -f "$out/gpt2-opset17/$name/model.cu"
done

# Every recomputation policy on one golden model, each compared with
# PyTorch's float64 gradients: none, selective, full, and auto with a budget
# halfway between the planned peaks of full and none on the cuda target (so
# that it recomputes some blocks and keeps others).
# Hugging Face GPT-2 (tanh GELU): its MLP GEMMs carry the gelu and dgelu
# epilogues (cuBLASLt's GELU_AUX_BIAS and DGELU), in FP32 and BF16.
hf=$src/test/e2e/hf-gpt2
add hf-gpt2 "$hf/gpt2.onnx" "$hf/batch.safetensors" 1e-4 "$hf/grads_ce.safetensors" \
    --micro-batch 2 --grad-accum 2 --loss=cross_entropy:logits:targets
add hf-gpt2-bf16 "$hf/gpt2.onnx" "$hf/batch.safetensors" 2e-2 - \
    --micro-batch 4 --precision=bf16 --loss=cross_entropy:logits:targets

# A mixture of experts (otc.expert_matmul, top_k) against PyTorch's
# float64 gradients.
moe=$src/test/e2e/hf-moe
add hf-mixtral "$moe/mixtral.onnx" "$moe/batch.safetensors" 1e-4 "$moe/mixtral_grads.safetensors" \
    --micro-batch 1 --grad-accum 2 --loss=cross_entropy:logits:targets
add hf-mixtral-bf16 "$moe/mixtral.onnx" "$moe/batch.safetensors" 3e-2 "$moe/mixtral_grads.safetensors" \
    --micro-batch 2 --precision=bf16 --loss=cross_entropy:logits:targets

# A transformers-5 golden's masked dynamo export as NAME (FP32 against
# PyTorch's float64 gradients) and NAME-bf16 (against the cpu program).
add_hf5() {
  local d=$src/test/e2e/hf5/$2
  add "$1" "$d/dynamo_mask.onnx" "$d/batch.safetensors" 1e-4 \
      "$d/grads_dynamo_mask.safetensors" --micro-batch 4 --loss=cross_entropy:logits:targets
  add "$1-bf16" "$d/dynamo_mask.onnx" "$d/batch.safetensors" 3e-2 - \
      --micro-batch 4 --precision=bf16 --loss=cross_entropy:logits:targets
}

# Attention on the kernel library's own kernels where cuDNN's graphs do not
# compute what the model asks: Gemma 2's soft-capped scores (with a padding
# mask) and T5's relative position bias, whose gradient (dS) the fused
# attention returns. FP32 against PyTorch's float64 gradients, BF16 against
# the cpu program.
add_hf5 hf-gemma2 gemma2
# GPT-OSS's attention sinks (the fallback kernels' in FP32, cuDNN's sink
# token in BF16 where cuDNN is 9.13 or newer) and its experts, with a
# padding mask and a sliding window.
add_hf5 hf-gpt-oss gpt_oss
# Mistral's sliding window under a padding mask: the key padding given to
# cuDNN as lengths beside its diagonal band (BF16, against the cpu
# program) and hiding its keys in the fallback kernels (FP32, against
# PyTorch's float64 gradients).
add_hf5 hf-mistral mistral
# ModernBERT's bidirectional window (|i - j| <= 4) under a padding mask:
# cuDNN's band with left bound 5 and right bound 4 beside the lengths
# (BF16, against the cpu program), the fallback kernels' (FP32, against
# PyTorch's float64 gradients).
add_hf5 hf-modernbert modernbert
# BERT's loss at 14 of its 16 positions (--sparse-prediction: the golden
# batch counts 14 targets a row): the gathered rows and their gradients
# summed back by otcrt_gather_grad, FP32 against PyTorch's float64
# gradients, BF16 against the cpu program.
bert=$src/test/e2e/hf5/bert
add hf-bert-sparse "$bert/dynamo_mask.onnx" "$bert/batch.safetensors" 1e-4 \
    "$bert/grads_dynamo_mask.safetensors" --micro-batch 4 \
    --loss=cross_entropy:logits:targets --sparse-prediction=14
add hf-bert-sparse-bf16 "$bert/dynamo_mask.onnx" "$bert/batch.safetensors" 3e-2 - \
    --micro-batch 4 --precision=bf16 --loss=cross_entropy:logits:targets \
    --sparse-prediction=14
# BERT's head with its trained decoder bias in chunks of 5 rows (the bias
# added by the head's cuBLASLt product, its gradient summed beside dw's by
# the bias-gradient epilogue), and BART's frozen final_logits_bias: FP32
# against PyTorch's float64 gradients, BF16 against the cpu program.
add hf-bert-chunk-bias "$bert/dynamo.onnx" "$bert/batch.safetensors" 1e-4 \
    "$bert/grads_dynamo.safetensors" --micro-batch 4 \
    --loss=cross_entropy:logits:targets --loss-chunk-rows=5
add hf-bert-chunk-bias-bf16 "$bert/dynamo.onnx" "$bert/batch.safetensors" 3e-2 - \
    --micro-batch 4 --precision=bf16 --loss=cross_entropy:logits:targets \
    --loss-chunk-rows=5
# Llama's head held [C, V] (the TorchScript export's transposed copy) in
# chunks of 5 rows: the call's w_layout 1, FP32 against PyTorch's float64
# gradients, BF16 against the cpu program.
llama=$src/test/e2e/hf5/llama
add hf-llama-chunk-ts "$llama/ts.onnx" "$llama/batch.safetensors" 1e-4 \
    "$llama/grads_ts.safetensors" --micro-batch 4 \
    --loss=cross_entropy:logits:targets --loss-chunk-rows=5
add hf-llama-chunk-ts-bf16 "$llama/ts.onnx" "$llama/batch.safetensors" 3e-2 - \
    --micro-batch 4 --precision=bf16 --loss=cross_entropy:logits:targets \
    --loss-chunk-rows=5
ed=$src/test/e2e/hf-encdec
add hf-bart-chunk-bias "$ed/bart.onnx" "$ed/bart_batch.safetensors" 1e-4 \
    "$ed/bart_grads.safetensors" --micro-batch 2 \
    --loss=cross_entropy:logits:targets --loss-chunk-rows=5
add hf-t5 "$ed/t5.onnx" "$ed/t5_batch.safetensors" 1e-4 "$ed/t5_grads.safetensors" \
    --micro-batch 2 --loss=cross_entropy:logits:targets
add hf-t5-bf16 "$ed/t5.onnx" "$ed/t5_batch.safetensors" 3e-2 - \
    --micro-batch 2 --precision=bf16 --loss=cross_entropy:logits:targets

gpt2=$src/test/e2e/gpt2-opset17
peak() {
  "$bin/otc-compile" "$gpt2/gpt2.onnx" -o "$out/plan-$1" --target=cuda --plan-only \
      --micro-batch 2 --grad-accum 2 --remat="$1" "$freeze" >/dev/null 2>&1
  "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["memory_bytes"]["total_peak"])' \
      "$out/plan-$1/plan.json"
  rm -rf "$out/plan-$1"
}
budget=$(( ($(peak none) + $(peak full)) / 2 ))
for policy in none selective full auto; do
  opts=(--remat="$policy")
  [[ $policy == auto ]] && opts+=(--memory-budget="$budget")
  add "gpt2-remat-$policy" "$gpt2/gpt2.onnx" "$gpt2/batch.safetensors" 1e-4 \
      "$gpt2/grads.safetensors" --micro-batch 2 --grad-accum 2 "$freeze" "${opts[@]}"
done

# The codegen test models, on random batches made here.
batches="$out/batches"
mkdir -p "$batches"
"$py" "$src/test/gpu/make_batches.py" "$batches"
for spec in "attention_gqa 2 2" "attention 2 2" "layernorm_gelu 4 1" "embedding 2 2" \
            "rotary 3 1" "dropout 2 2" "trig 2 2" "routing 2 2" \
            "scatter 2 2" "conv 2 2"; do
  set -- $spec
  add "$1" "$src/test/codegen/Inputs/$1.onnx" "$batches/$1.safetensors" 1e-4 - \
      --micro-batch "$2" --grad-accum "$3"
done

# A batch whose target at [1, 1] (row 17 of micro-batch 0) is the vocabulary
# size, one past the last class, and one whose token there is.
"$py" - "$src/test/e2e" "$out/gpt2-opset17/batch.safetensors" \
    "$out/gpt2-opset17/bad-label.safetensors" "$out/gpt2-opset17/bad-token.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import st_io
for name, path in (("targets", sys.argv[3]), ("idx", sys.argv[4])):
    t = st_io.read(sys.argv[2])
    t[name] = t[name].copy()
    t[name][1, 1] = 64
    st_io.write(path, t)
PY

# Sampling (decode_step, --generate): the Llama golden's ids drawn by the
# cpu program, greedy and seeded, which the cuda program's must equal.
llama=$src/test/e2e/hf-llama
mkdir -p "$out/generate"
for target in cpu cuda; do
  "$bin/otc-compile" "$llama/llama.onnx" -o "$out/generate/$target" --target=$target \
      --micro-batch 2 --loss=cross_entropy:logits:targets --generate >/dev/null
done
"$out/generate/cpu/train" --generate 12 --prompt-ids 1,2,3 --temperature 0 \
    > "$out/generate/want-greedy.txt" 2>/dev/null
"$out/generate/cpu/train" --generate 12 --prompt-ids 7 --seed 4 \
    > "$out/generate/want-seed4.txt" 2>/dev/null
rm -rf "$out/generate/cpu" "$out/generate/cuda/model.cu"

# The model run under compute-sanitizer memcheck (two training steps: the
# forward, backward and optimizer kernels, in BF16 like the benchmark).
echo "gpt2-opset17-bf16" > "$out/memcheck.txt"

# The kernel library's own GPU test: each cuda kernel against the host one.
[[ -x $bin/otcrt-cuda-kernel-tests ]] && cp "$bin/otcrt-cuda-kernel-tests" "$out/"
# The GEMM forms and the LM head's loss timed (bench/kernels; session.sh
# runs it after the checks).
[[ -x $bin/otc-kernel-bench ]] && cp "$bin/otc-kernel-bench" "$out/"
cp "$src/test/e2e/st_io.py" "$src/test/e2e/compare_grads.py" \
   "$src/test/e2e/launch_tcp.py" "$out/"
cp "$src/test/gpu/run.sh" "$out/run.sh"
cp "$src/test/gpu/tally.sh" "$out/tally.sh"
chmod +x "$out/run.sh"
echo "gpu-tests: $(wc -l < "$manifest") programs in $out ($(du -sh "$out" | cut -f1)); run $out/run.sh on a GPU machine"

# The same folder as one archive for a device call, which carries 64 MiB
# with the working tree: the programs share most of their bytes (the
# runtime), which xz's 64 MiB dictionary (-9) finds across files. Unpack
# and run there: tar -xJf gpu-tests.tar.xz && gpu-tests/run.sh.
archive="$out.tar.xz"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -9 -T2 > "$archive"
echo "gpu-tests: $archive: $(du -b "$archive" | cut -f1) bytes" \
     "(the folder: $(du -sb "$out" | cut -f1) bytes)"
