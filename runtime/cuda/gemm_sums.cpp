// otcrt_gemm_sums (otcrt/abi.h) for libotcrt_cuda: a plain product that also
// sums one operand over its depth, the bias gradient of a weight gradient's
// GEMM. The product runs with cuBLASLt's bias-gradient epilogue of the
// summed operand (gemmWithSums, gemm_cublaslt.cpp), which writes the FP32
// sums: straight into the call's sums when they are FP32 and not
// accumulated, else into an FP32 scratch buffer ([W], scratch.h) that a small
// kernel (launchGemmSumsFinish, gemm_epilogue.cu) adds to the old sums and
// rounds once. Where cuBLASLt declines the epilogue for a shape (no
// algorithm, every algorithm failing, OTCRT_GEMM_EPILOGUE=fallback), the
// shape runs as otcrt_gemm's plain product and the runtime's column sums
// (column_sum.cu): otcrt_column_sum_* straight into FP32 sums,
// otcrt_column_sum_into_* into accumulated sums of the operands' type, else
// into the scratch buffer and the finishing kernel. A product of depth 0 or
// an empty one has no epilogue to ask for: otcrt_gemm, then the same column
// sums (depth 0: the finishing kernel alone, s = 0). The scratch buffer is
// allocated by a shape's first call, outside a graph capture, as the
// routes are: later calls neither allocate nor synchronize.
#include "cuda/gemm.h"
#include "cuda/scratch.h"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "src/gemm_check.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

using namespace otcrt;
using namespace otcrt::cuda;

namespace {

/// One otcrt_gemm_sums call; once checked, its summed operand is a dense
/// K x width matrix of the operands' type.
struct SumsCall {
  const OtcrtGemm &g;
  const void *a, *b;
  void *c, *sums;
  int32_t of, type, accumulate;
  cudaStream_t stream;

  const void *summed() const { return of == OTCRT_GEMM_SUMS_A ? a : b; }
  int64_t width() const { return of == OTCRT_GEMM_SUMS_A ? g.m : g.n; }
  /// Whether FP32 sums can go straight into the call's (else through the
  /// scratch and the finishing kernel).
  bool direct() const { return type == OTC_F32 && accumulate == 0; }
  /// The error line of the call, and its status.
  int failed(const std::string &why) const {
    return gemmSumsFailed(g, of, type, accumulate, why);
  }
  /// The plain product, otcrt_gemm's.
  int product() const {
    return otcrt_gemm(&g, a, b, c, nullptr, nullptr, nullptr, stream);
  }
};

/// The column sums of the summed operand in FP32 into `out` ([width]).
int columnSumsInto(const SumsCall &k, float *out) {
  if (k.g.ab_type == OTC_BF16)
    return otcrt_column_sum_bf16(k.g.k, k.width(),
                                 static_cast<const otcrt_bf16 *>(k.summed()),
                                 out, k.stream);
  return otcrt_column_sum_f32(
      k.g.k, k.width(), static_cast<const float *>(k.summed()), out, k.stream);
}

/// The call's sums by the runtime's column sums (the product run apart):
/// straight into the sums where their type and accumulation let one of
/// otcrt_column_sum_* write them, else through `scratch` and the finishing
/// kernel. Depth 0: the finishing kernel alone (s = 0).
int columnSums(const SumsCall &k, float *scratch) {
  const bool bf16 = k.type == OTC_BF16;
  if (k.g.k == 0)
    return launchGemmSumsFinish(nullptr, k.sums, k.width(), bf16,
                                k.accumulate != 0, k.stream);
  if (k.direct())
    return columnSumsInto(k, static_cast<float *>(k.sums));
  if (k.accumulate != 0 && k.type == k.g.ab_type)
    return bf16 ? otcrt_column_sum_into_bf16(
                      k.g.k, k.width(),
                      static_cast<const otcrt_bf16 *>(k.summed()),
                      static_cast<otcrt_bf16 *>(k.sums), k.stream)
                : otcrt_column_sum_into_f32(
                      k.g.k, k.width(), static_cast<const float *>(k.summed()),
                      static_cast<float *>(k.sums), k.stream);
  if (int status = columnSumsInto(k, scratch))
    return status;
  return launchGemmSumsFinish(scratch, k.sums, k.width(), bf16,
                              k.accumulate != 0, k.stream);
}

/// A call with M, N and K positive: cuBLASLt's product and sums (into the
/// sums, or `scratch` and the finishing kernel), or where its shape
/// declines them, the plain product and the column sums.
int productAndSums(const SumsCall &k, float *scratch) {
  const GemmSums lt{k.of, k.type, k.accumulate, k.sums,
                    k.direct() ? static_cast<float *>(k.sums) : scratch};
  int status = gemmWithSums(k.g, k.a, k.b, k.c, lt, k.stream);
  if (status == 0) {
    if (!k.direct() &&
        launchGemmSumsFinish(scratch, k.sums, k.width(), k.type == OTC_BF16,
                             k.accumulate != 0, k.stream))
      return k.failed("the kernel that finishes the sums did not launch");
    return 0;
  }
  if (status != kGemmSumsDeclined)
    return status;
  // Declined (its line printed once): the plain product, the column sums.
  if (k.product())
    return k.failed("its fallback's plain product failed (the line above)");
  if (columnSums(k, scratch))
    return k.failed("the column sums did not launch");
  setLastGemmRoute(GemmRoute::kCublasLtFallback);
  return 0;
}

int gemmSums(const SumsCall &k) {
  setLastGemmRoute(GemmRoute::kNone);
  std::string why = gemmInvalid(k.g, k.a, k.b, k.c, nullptr, nullptr, nullptr);
  if (why.empty())
    why = gemmSumsInvalid(k.g, k.a, k.b, k.sums, k.of, k.type, k.accumulate);
  if (!why.empty())
    return k.failed(why);
  // The scratch, where the FP32 sums cannot go straight into the call's
  // (allocated by a shape's first call, outside a capture).
  float *scratch = nullptr;
  if (!k.direct() && k.g.k > 0 && k.width() > 0) {
    scratch = reinterpret_cast<float *>(otcrt::cuda::scratch(
        ScratchUse::GemmSums, static_cast<size_t>(k.width()) * sizeof(float),
        k.stream));
    if (!scratch)
      return k.failed("no scratch for " + std::to_string(k.width()) +
                      " FP32 sums (cudaMalloc failed, or it would run inside "
                      "a CUDA graph capture)");
  }
  if (k.g.m > 0 && k.g.n > 0 && k.g.k > 0)
    return productAndSums(k, scratch);
  // No product to take the epilogue (C = beta C, or nothing): the sums
  // apart.
  if (k.product())
    return k.failed("its plain product failed (the line above)");
  if (k.width() > 0 && columnSums(k, scratch))
    return k.failed("the column sums did not launch");
  return 0;
}

} // namespace

extern "C" int otcrt_gemm_sums(const OtcrtGemm *g, const void *a, const void *b,
                               void *c, void *sums, int32_t sums_of,
                               int32_t sums_type, int32_t accumulate_sums,
                               void *stream) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm_sums: error: no descriptor\n");
    return 1;
  }
  return gemmSums({*g, a, b, c, sums, sums_of, sums_type, accumulate_sums,
                   static_cast<cudaStream_t>(stream)});
}
