// otcrt_gemm_sums (otcrt/abi.h) on host pointers, in libotcrt_cpu: the
// product as otcrt_gemm computes it (cpu/gemm.cpp), then the column sums of
// the summed operand, a dense K x W matrix, as otcrt_column_sum forms them
// (cpu/column_sum.cpp: each column in FP32, its rows in order), and each sum
// (plus the old value with accumulate_sums) rounded once to the sums' type.
// The call is checked first (gemm_check.h), so a refused call writes
// nothing. Also the oracle the GPU test compares the cuda target's sums with.
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "src/gemm_check.h"

#include <string>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

/// sums[w] = s[w] (+ sums[w] with `accumulate`), rounded once to T.
template <typename T>
void finishSums(const float *s, int64_t width, bool accumulate, T *sums) {
  for (int64_t w = 0; w < width; ++w)
    store(sums + w, accumulate ? load(sums[w]) + s[w] : s[w]);
}

} // namespace

int gemmSums(const OtcrtGemm &g, const void *a, const void *b, void *c,
             void *sums, int32_t sumsOf, int32_t sumsType, int32_t accumulate) {
  std::string why = gemmInvalid(g, a, b, c, nullptr, nullptr, nullptr);
  if (why.empty())
    why = gemmSumsInvalid(g, a, b, sums, sumsOf, sumsType, accumulate);
  if (!why.empty())
    return gemmSumsFailed(g, sumsOf, sumsType, accumulate, why);
  if (int status = gemm(g, a, b, c, nullptr, nullptr, nullptr))
    return status;
  const bool ofA = sumsOf == OTCRT_GEMM_SUMS_A;
  const int64_t width = ofA ? g.m : g.n;
  const void *x = ofA ? a : b;
  // The FP32 sums, kept per thread between calls; K == 0 leaves them 0.
  static thread_local std::vector<float> s;
  s.assign(static_cast<size_t>(width), 0.0f);
  if (g.k > 0 && width > 0) {
    if (g.ab_type == OTC_BF16)
      columnSum(g.k, width, static_cast<const otcrt_bf16 *>(x), s.data());
    else
      columnSum(g.k, width, static_cast<const float *>(x), s.data());
  }
  if (sumsType == OTC_BF16)
    finishSums(s.data(), width, accumulate != 0,
               static_cast<otcrt_bf16 *>(sums));
  else
    finishSums(s.data(), width, accumulate != 0, static_cast<float *>(sums));
  return 0;
}

} // namespace cpu
} // namespace otcrt
