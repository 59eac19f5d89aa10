// The private interface of the cuda GEMM (otcrt_gemm of otcrt/abi.h, in
// cuda/gemm_cublaslt.cpp): the runtime's epilogue kernel (gemm_epilogue.cu),
// which finishes a product cuBLASLt computed without the epilogue it
// declined, and computes a product of depth 0 alone; the quantize kernels of
// the FP8 GEMM (fp8_quantize.cu, for gemm_fp8.cpp); the product with
// cuBLASLt's bias-gradient epilogue and the kernel that finishes its sums,
// for otcrt_gemm_sums (gemm_sums.cpp); the switch that forces that path for
// every epilogue (as OTCRT_GEMM_EPILOGUE=fallback does), and the route the
// last call took, for the GPU test.
#ifndef OTCRT_CUDA_GEMM_H
#define OTCRT_CUDA_GEMM_H

#include "otcrt/abi.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace otcrt {
namespace cuda {

/// What the epilogue kernel does to each element of C, with x the FP32
/// value it forms: x = v + beta * x_in (when x_in is not null and beta is
/// not 0) + bias[j] (when bias is not null).
enum class GemmEpilogueOp : int32_t {
  kStore = 0, ///< C = x
  kGelu = 1,  ///< aux = x, C = gelu(x)
  kDgelu = 2  ///< C = x gelu'(aux)
};

/// One launch of the epilogue kernel over batch x m x n elements of C.
/// `v` (FP32) is the product, null for 0; it may be C itself (an FP32 C
/// the product was written into). x_in, bias, aux and C are of one storage
/// type (float, or bfloat16 when `bf16`); x_in and aux are laid out like C.
struct GemmEpilogue {
  int64_t m = 0, n = 0, batch = 0;
  const float *v = nullptr;
  int64_t ldv = 0, strideV = 0;
  const void *xIn = nullptr;
  float beta = 0.0f;
  const void *bias = nullptr;
  void *aux = nullptr;
  GemmEpilogueOp op = GemmEpilogueOp::kStore;
  void *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  bool bf16 = false;
};

/// Queues the epilogue kernel on `stream`: 0, or 1 on a launch error. No
/// allocation, no synchronization; each element rounds once to its storage
/// type and depends on nothing else, so results repeat bit for bit.
int launchGemmEpilogue(const GemmEpilogue &e, cudaStream_t stream);

/// One quantization of an FP8 GEMM's operand (fp8_quantize.cu): `x`, a
/// BF16 matrix of `rows` x `cols` with row stride `ld`, is written to
/// `out` as FP8 of `format` (OtcrtFp8Format), row-major [rows, cols], or
/// [cols, rows] when `transpose`; scaled by otcrt_fp8_scale of `*prev`, the
/// amax its call site saw on its previous call (with `first`, the site's
/// first call, x's own, computed into `*prev` by a pass before), 1 / scale
/// written to `*invScale`. The pass gathers x's amax in `*cur` and, in its
/// last block (`*counter` counts the finished ones), moves it to `*prev`
/// for the next call and zeroes `*cur` and `*counter` (device memory,
/// zeroed when the site is made). With `alsoTransposed` (and `transpose`
/// false), the pass writes the [cols, rows] transpose there too: one copy
/// in both layouts (otcrt_fp8_quantize).
struct Fp8Quantize {
  const uint16_t *x = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  bool transpose = false;
  int32_t format = 0;
  uint8_t *out = nullptr;
  uint8_t *alsoTransposed = nullptr;
  float *prev = nullptr, *cur = nullptr, *invScale = nullptr;
  unsigned *counter = nullptr;
  bool first = false;
};

/// Queues the quantize kernel of `q` on `stream` (the amax pass before it
/// on a site's first call): 0, or 1 on a launch error. No allocation, no
/// synchronization.
int launchFp8Quantize(const Fp8Quantize &q, cudaStream_t stream);

/// Forgets the amax every FP8 call site saw (the GPU test: each call then
/// scales from its own operands, as a site's first call does).
void forgetFp8Scales();

/// The sums otcrt_gemm_sums asks cuBLASLt's bias-gradient epilogue for:
/// those of operand `of` (OtcrtGemmSumsOf), written in FP32 to `out` ([W]:
/// the call's own sums when they are FP32 and not accumulated, else a
/// scratch buffer the finishing kernel reads), for a call whose sums are
/// `sums`, of `type`, `accumulate` 0 or 1. Each field keys the route.
struct GemmSums {
  int32_t of = 0, type = 0, accumulate = 0;
  const void *sums = nullptr;
  float *out = nullptr;
};

/// gemmWithSums's status when the call's shape runs without cuBLASLt's
/// epilogue (declined, or OTCRT_GEMM_EPILOGUE=fallback): nothing was run,
/// and the caller runs the plain product and the runtime's column sums.
constexpr int kGemmSumsDeclined = -1;

/// The product of a valid otcrt_gemm_sums call `g` (M, N and K positive)
/// with cuBLASLt writing the FP32 sums of `sums` (gemm_cublaslt.cpp), on
/// the route of its shape, which its first call chooses (outside a graph
/// capture) as otcrt_gemm's first call chooses an epilogue's, one line on
/// stderr per shape cuBLASLt declines: 0 (lastGemmRoute() kCublasLt),
/// kGemmSumsDeclined, or 1 after one line on stderr.
int gemmWithSums(const OtcrtGemm &g, const void *a, const void *b, void *c,
                 const GemmSums &sums, cudaStream_t stream);

/// Queues sums[w] = s[w] (0 when `s` is null) plus, with `accumulate`, the
/// old sums[w], formed in FP32 and rounded once to sums' type (bfloat16
/// with `bf16`, else float), for w < width (gemm_epilogue.cu): 0, or 1 on a
/// launch error. No allocation, no synchronization.
int launchGemmSumsFinish(const float *s, void *sums, int64_t width, bool bf16,
                         bool accumulate, cudaStream_t stream);

/// How the last otcrt_gemm call of this thread computed its result. For
/// otcrt_gemm_sums: kCublasLt, cuBLASLt's bias-gradient epilogue (and the
/// kernel finishing bf16 or accumulated sums); kCublasLtFallback, the plain
/// product and the runtime's column sums; with M, N or K 0, that of its
/// otcrt_gemm call (the sums formed apart).
enum class GemmRoute {
  kCublasLt,         ///< cuBLASLt alone (with its epilogue, if any)
  kCublasLtFallback, ///< cuBLASLt's plain product + the epilogue kernel
  kEpilogueOnly,     ///< K == 0: the epilogue kernel alone
  kNone              ///< nothing to compute, or an error
};
GemmRoute lastGemmRoute();
/// Sets what lastGemmRoute() says (otcrt_gemm_sums: its own routes).
void setLastGemmRoute(GemmRoute route);

/// Turns the timing of each new shape's algorithms on or off, whatever
/// OTCRT_GEMM_TUNE says (shapes already run keep their algorithm).
void setGemmTuning(bool on);

/// Forces (true) or stops forcing (false) the fallback for every epilogue,
/// whatever OTCRT_GEMM_EPILOGUE says; shapes keep the plan of each setting.
void forceGemmEpilogueFallback(bool on);

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_GEMM_H
