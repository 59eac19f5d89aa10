// The epilogue kernel of the cuda GEMM (gemm.h): one grid-stride pass over
// the elements of C that adds beta times C's old value (or the addend) and
// the bias to the FP32 product, applies GELU (keeping its input in aux) or
// GELU's gradient (reading aux), and stores with one rounding. The math is
// that of the host GEMM's epilogues (cpu/gemm.cpp), term for term in
// the same order, so the two agree to the accuracy of tanhf. And the kernel
// that finishes otcrt_gemm_sums's FP32 sums (adds the old sums, rounds once
// to their type), as cpu/gemm_sums.cpp does.
#include "common.cuh"
#include "gemm.h"

namespace otcrt {
namespace cuda {
namespace {

/// sqrt(2 / pi) and the cubic coefficient of GELU's tanh form.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float geluTanh(float x) {
  float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ float geluTanhDerivative(float x) {
  float th = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

template <typename T> __global__ void epilogueKernel(GemmEpilogue e) {
  const int64_t total = e.batch * e.m * e.n;
  const T *xIn = e.beta != 0.0f ? static_cast<const T *>(e.xIn) : nullptr;
  const T *bias = static_cast<const T *>(e.bias);
  T *aux = static_cast<T *>(e.aux);
  T *c = static_cast<T *>(e.c);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % e.n, row = i / e.n;
    const int64_t r = row % e.m, b = row / e.m;
    const int64_t at = b * e.strideC + r * e.ldc + j;
    float x = e.v ? e.v[b * e.strideV + r * e.ldv + j] : 0.0f;
    if (e.op == GemmEpilogueOp::kDgelu) {
      store(&c[at], x * geluTanhDerivative(load(aux[at])));
      continue;
    }
    if (xIn)
      x += e.beta * load(xIn[at]);
    if (bias)
      x += load(bias[j]);
    if (e.op == GemmEpilogueOp::kGelu) {
      store(&aux[at], x);
      store(&c[at], geluTanh(x));
    } else {
      store(&c[at], x);
    }
  }
}

/// sums[w] = (old sums[w] with `accumulate`) + s[w], rounded once.
template <typename T>
__global__ void sumsFinishKernel(const float *s, T *sums, int64_t width,
                                 bool accumulate) {
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       w < width; w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = s ? s[w] : 0.0f;
    store(&sums[w], accumulate ? load(sums[w]) + v : v);
  }
}

} // namespace

int launchGemmSumsFinish(const float *s, void *sums, int64_t width, bool bf16,
                         bool accumulate, cudaStream_t stream) {
  if (width <= 0)
    return 0;
  const int64_t blocks = (width + kBlock - 1) / kBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  if (bf16)
    sumsFinishKernel<<<grid, kBlock, 0, stream>>>(
        s, static_cast<otcrt_bf16 *>(sums), width, accumulate);
  else
    sumsFinishKernel<<<grid, kBlock, 0, stream>>>(s, static_cast<float *>(sums),
                                                  width, accumulate);
  return launchStatus();
}

int launchGemmEpilogue(const GemmEpilogue &e, cudaStream_t stream) {
  const int64_t total = e.batch * e.m * e.n;
  if (total <= 0)
    return 0;
  int64_t blocks = (total + kBlock - 1) / kBlock;
  unsigned grid = static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
  if (e.bf16)
    epilogueKernel<otcrt_bf16><<<grid, kBlock, 0, stream>>>(e);
  else
    epilogueKernel<float><<<grid, kBlock, 0, stream>>>(e);
  return launchStatus();
}

} // namespace cuda
} // namespace otcrt
