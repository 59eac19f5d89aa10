#!/usr/bin/env bash
# Proves that a program shaped like the code generator's cuda-target output
# (kernels + a static OtcProgram + main calling otcrt_main, plus a call to
# otcrt_gemm, otcrt_gemm_sums, otcrt_gemm_fp8, otcrt_attention_fwd_bf16,
# otcrt_check_launch and launches on otcrt_stream) compiles with nvcc and
# links against libotcrt_cuda.a, cuBLASLt and cudart, plus LINK_ARGS
# (cuDNN's libraries when the runtime's attention uses them, as otc-compile
# adds them); then runs the GPU-free paths of the resulting binary (--help,
# --data, a missing --init file, --trace-sync without --trace).
# Usage: check_cuda_link.sh LIB_DIR INCLUDE_DIR [LINK_ARGS...]
#        (exit 77 = skipped)
set -euo pipefail

lib_dir=${1:?usage: check_cuda_link.sh LIB_DIR INCLUDE_DIR}
include_dir=${2:?usage: check_cuda_link.sh LIB_DIR INCLUDE_DIR}
shift 2
link_args=("$@")
nvcc=${NVCC:-$(command -v nvcc || true)}
if [[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc=/usr/local/cuda/bin/nvcc
fi
if [[ -z "$nvcc" ]]; then
  echo "check_cuda_link: SKIP: nvcc not found"
  exit 77
fi
if [[ ! -f "$lib_dir/libotcrt_cuda.a" ]]; then
  echo "check_cuda_link: FAIL: $lib_dir/libotcrt_cuda.a does not exist"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/fake.cu" <<'CU'
// Fake cuda-target program: one PARAM/GRAD pair, one INPUT, LOSS, LR, STEP.
#include "otcrt/abi.h"
#include "otcrt/kernels.h"

static const int64_t kW[] = {4, 4};
static const int64_t kX[] = {2, 4};
static const OtcSlot kSlots[] = {
    {"w", OTC_SLOT_PARAM, OTC_F32, 2, kW, 0, 64},
    {"w", OTC_SLOT_GRAD, OTC_F32, 2, kW, 64, 64},
    {"x", OTC_SLOT_INPUT, OTC_F32, 2, kX, 128, 32},
    {"", OTC_SLOT_LOSS, OTC_F32, 0, nullptr, 160, 4},
    {"", OTC_SLOT_LR, OTC_F32, 0, nullptr, 164, 4},
    {"", OTC_SLOT_STEP, OTC_F32, 0, nullptr, 168, 4},
};

__global__ void fill(float *p, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

static void zeroGrads(char *arena) {
  cudaStream_t s = (cudaStream_t)otcrt_stream();
  fill<<<1, 32, 0, s>>>(reinterpret_cast<float *>(arena + 64), 16, 0.0f);
  otcrt_check_launch(__FILE__, __LINE__);
}

static void microStep(char *arena) {
  cudaStream_t s = (cudaStream_t)otcrt_stream();
  float *w = reinterpret_cast<float *>(arena);
  float *x = reinterpret_cast<float *>(arena + 128);
  float *g = reinterpret_cast<float *>(arena + 64);
  // g += x^T x (4x2 * 2x4), exercising the transposed cuBLASLt path.
  static const OtcrtGemm acc = {1, 0, 4, 4, 2, 1, 1.0f, 1.0f, OTC_F32, OTC_F32,
                                OTC_F32, OTCRT_GEMM_NONE, 4, 4, 4, 0, 0, 16};
  static const OtcrtGemm fwd = {0, 1, 2, 4, 4, 1, 1.0f, 0.0f, OTC_F32, OTC_F32,
                                OTC_F32, OTCRT_GEMM_NONE, 4, 4, 4, 0, 0, 8};
  if (otcrt_gemm(&acc, x, x, g, nullptr, nullptr, nullptr, s) != 0)
    otcrt_kernel_failed("otcrt_gemm", "fake", 1);
  if (otcrt_gemm(&fwd, x, w, x, nullptr, nullptr, nullptr, s) != 0)
    otcrt_kernel_failed("otcrt_gemm", "fake", 1);
  // g += x^T x again, with the column sums of x (its A) added into 4 floats
  // past the slots.
  float *sums = reinterpret_cast<float *>(arena + 192);
  if (otcrt_gemm_sums(&acc, x, x, g, sums, OTCRT_GEMM_SUMS_A, OTC_F32, 1, s) !=
      0)
    otcrt_kernel_failed("otcrt_gemm_sums", "fake", 1);
  // The FP8 GEMM's entry point (an empty product: nothing to quantize).
  static const OtcrtGemm fp8 = {0, 1, 0, 16, 16, 1, 1.0f, 0.0f, OTC_BF16,
                                OTC_BF16, OTC_BF16, OTCRT_GEMM_NONE, 16, 16,
                                16, 0, 0, 0};
  if (otcrt_gemm_fp8(&fp8, 0, 0, x, w, x, nullptr, nullptr, nullptr, s) != 0)
    otcrt_kernel_failed("otcrt_gemm_fp8", "fake", 1);
  // Causal self-attention of x viewed as [1, 1, 2, 8] bf16 into w (links the
  // attention entry points and, through them, cuDNN when the runtime uses
  // it); its lse [1, 1, 2] past the slots.
  OtcrtAttention a = {1, 1, 1, 2, 2, 8, 0.35f, 1, 0.0f, nullptr, 0, {0, 0, 0, 0}};
  const otcrt_bf16 *h = reinterpret_cast<const otcrt_bf16 *>(x);
  otcrt_bf16 *o = reinterpret_cast<otcrt_bf16 *>(w);
  float *lse = reinterpret_cast<float *>(arena + 176);
  if (otcrt_attention_fwd_bf16(&a, h, h, h, nullptr, o, lse, s) != 0)
    otcrt_kernel_failed("attention_fwd", "fake", 1);
  fill<<<1, 1, 0, s>>>(reinterpret_cast<float *>(arena + 160), 1, 1.0f);
  otcrt_check_launch(__FILE__, __LINE__);
}

static void optimizerStep(char *) {}

static const OtcProgram kProgram = {1, "cuda", "fake.onnx", 208, 2, 1, 6, kSlots,
                                    zeroGrads, microStep, optimizerStep};

int main(int argc, char **argv) { return otcrt_main(argc, argv, &kProgram); }
CU

echo "check_cuda_link: compiling with $nvcc"
"$nvcc" -std=c++17 -O2 -I"$include_dir" "$work/fake.cu" -o "$work/train" \
  -L"$lib_dir" -lotcrt_cuda "${link_args[@]}" -lcublasLt -lcudart

fail=0
expect() { # expect EXIT_CODE PATTERN ARGS...
  local want=$1 pattern=$2 rc=0 out
  shift 2
  out=$("$work/train" "$@" 2>&1) || rc=$?
  if [[ $rc -ne $want ]] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "check_cuda_link: FAIL: train $* -> exit $rc (want $want), output:"
    echo "$out"
    fail=1
  fi
}
expect 0 "usage:" --help
expect 0 "no-cuda-graphs" --help
expect 2 "otc train: error: --trace-sync needs --trace" --batch b.safetensors --trace-sync
expect 1 "otc train: error: " --data a.bin
expect 2 "otc train: error: --batch" --steps 3
expect 1 "otc train: error: cannot load initial parameters" --batch "$work/none.safetensors" --init "$work/none.safetensors"

if [[ $fail -ne 0 ]]; then
  exit 1
fi
echo "check_cuda_link: PASS"
