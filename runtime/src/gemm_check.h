// The rules of an OtcrtGemm descriptor (otcrt/abi.h), shared by the cpu and
// cuda GEMMs so that both refuse the same calls with the same words: the
// check of a descriptor and its pointers (and those of otcrt_gemm_fp8's and
// otcrt_gemm_sums's calls), the one-line description of a call that every
// GEMM message carries (sizes, types, transposes, layout, epilogue), and
// the error line itself. Header-only, so that a program compiling the host
// GEMM from source beside libotcrt_cuda.a (the GPU kernel test) gets no
// second definition.
#ifndef OTCRT_GEMM_CHECK_H
#define OTCRT_GEMM_CHECK_H

#include "otcrt/abi.h"
#include "otcrt/fp8.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace otcrt {

/// "f32", "bf16", or "type N" for anything else.
inline std::string gemmTypeName(int32_t dtype) {
  if (dtype == OTC_F32)
    return "f32";
  if (dtype == OTC_BF16)
    return "bf16";
  return "type " + std::to_string(dtype);
}

/// The epilogue as the messages name it: "none", "bias", "add", "add+bias",
/// "gelu", "gelu+bias", "dgelu".
inline std::string gemmEpilogueName(int32_t epilogue, bool withBias) {
  switch (epilogue) {
  case OTCRT_GEMM_NONE:
    return "none";
  case OTCRT_GEMM_BIAS:
    return "bias";
  case OTCRT_GEMM_ADD:
    return withBias ? "add+bias" : "add";
  case OTCRT_GEMM_GELU:
    return withBias ? "gelu+bias" : "gelu";
  case OTCRT_GEMM_DGELU:
    return "dgelu";
  }
  return "epilogue " + std::to_string(epilogue);
}

/// "M=32 N=128 K=32 batch=1, bf16 x bf16 -> bf16, transA 0 transB 0,
/// epilogue gelu+bias (bf16), lda 32 ldb 128 ldc 128, strides 0 0 4096".
inline std::string describeGemm(const OtcrtGemm &g, const void *bias) {
  auto n = [](int64_t v) { return std::to_string(v); };
  return "M=" + n(g.m) + " N=" + n(g.n) + " K=" + n(g.k) +
         " batch=" + n(g.batch) + ", " + gemmTypeName(g.ab_type) + " x " +
         gemmTypeName(g.ab_type) + " -> " + gemmTypeName(g.c_type) +
         ", transA " + n(g.trans_a) + " transB " + n(g.trans_b) +
         ", epilogue " + gemmEpilogueName(g.epilogue, bias != nullptr) + " (" +
         gemmTypeName(g.epilogue_type) + "), lda " + n(g.lda) + " ldb " +
         n(g.ldb) + " ldc " + n(g.ldc) + ", strides " + n(g.stride_a) + " " +
         n(g.stride_b) + " " + n(g.stride_c);
}

/// Why the call (g, pointers) breaks the rules of otcrt/abi.h, or "" when
/// it keeps them.
inline std::string gemmInvalid(const OtcrtGemm &g, const void *a, const void *b,
                               const void *c, const void *bias,
                               const void *addend, const void *aux) {
  if ((g.trans_a != 0 && g.trans_a != 1) || (g.trans_b != 0 && g.trans_b != 1))
    return "trans_a and trans_b must be 0 or 1";
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0)
    return "negative size";
  if (g.batch > INT32_MAX)
    return "batch above INT32_MAX";
  if (g.ab_type != OTC_F32 && g.ab_type != OTC_BF16)
    return "A and B must be f32 or bf16";
  if (g.c_type != OTC_F32 && !(g.c_type == OTC_BF16 && g.ab_type == OTC_BF16))
    return "C must be f32, or bf16 with bf16 A and B";
  if (g.epilogue_type != g.c_type)
    return "bias and aux must have C's type";
  if (g.epilogue < OTCRT_GEMM_NONE || g.epilogue > OTCRT_GEMM_DGELU)
    return "unknown epilogue";
  auto atLeast = [](int64_t ld, int64_t cols) {
    return ld >= (cols > 1 ? cols : 1);
  };
  if (!atLeast(g.lda, g.trans_a ? g.m : g.k) ||
      !atLeast(g.ldb, g.trans_b ? g.k : g.n) || !atLeast(g.ldc, g.n))
    return "a leading dimension below its matrix's columns";
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_c < 0)
    return "negative batch stride";
  if (g.batch > 1 && g.stride_c != 0 && g.m > 0 && g.n > 0 &&
      g.stride_c < (g.m - 1) * g.ldc + g.n)
    return "batch entries of C overlap";
  bool plain = g.epilogue == OTCRT_GEMM_NONE;
  if (!plain && g.ab_type != g.c_type)
    return "an epilogue needs A, B and C of one type";
  if (!plain && g.batch > 1 && g.stride_c == 0)
    return "an epilogue needs one C per batch entry";
  bool gelu = g.epilogue == OTCRT_GEMM_GELU || g.epilogue == OTCRT_GEMM_DGELU;
  if (gelu && g.beta != 0.0f)
    return "a GELU epilogue needs beta = 0";
  if (g.m > 0 && g.n > 0 && g.batch > 0) {
    if (!c)
      return "C is NULL";
    if (g.k > 0 && (!a || !b))
      return "A or B is NULL";
  }
  if (g.epilogue == OTCRT_GEMM_BIAS && !bias)
    return "the bias epilogue without a bias";
  if ((plain || g.epilogue == OTCRT_GEMM_DGELU) && bias)
    return "a bias with an epilogue that takes none";
  if ((g.epilogue == OTCRT_GEMM_ADD) != (addend != nullptr))
    return g.epilogue == OTCRT_GEMM_ADD ? "the add epilogue without an addend"
                                        : "an addend without the add epilogue";
  if (gelu != (aux != nullptr))
    return gelu ? "a GELU epilogue without aux" : "aux without a GELU epilogue";
  if (g.epilogue == OTCRT_GEMM_GELU && aux == c && g.m > 0 && g.n > 0 &&
      g.batch > 0)
    return "aux is C (the GELU epilogue writes both)";
  return "";
}

/// Why an FP8 call (otcrt_gemm_fp8) breaks its rules beyond otcrt_gemm's,
/// or "".
inline std::string gemmFp8Invalid(const OtcrtGemm &g, int32_t aFormat,
                                  int32_t bFormat) {
  auto known = [](int32_t f) {
    return f == OTCRT_FP8_E4M3 || f == OTCRT_FP8_E5M2;
  };
  if (!known(aFormat) || !known(bFormat))
    return "an FP8 format that is neither E4M3 nor E5M2";
  if (aFormat == OTCRT_FP8_E5M2 && bFormat == OTCRT_FP8_E5M2)
    return "FP8 operands both E5M2";
  if (g.ab_type != OTC_BF16)
    return "FP8 operands quantized from other than bf16";
  return "";
}

/// The layout of A's FP8 copy the product reads, A as [M, K]
/// (OTCRT_FP8_AS_STORED or OTCRT_FP8_TRANSPOSED), and of B's, B as [N, K].
inline int32_t fp8CopyLayoutOfA(const OtcrtGemm &g) {
  return g.trans_a ? OTCRT_FP8_TRANSPOSED : OTCRT_FP8_AS_STORED;
}
inline int32_t fp8CopyLayoutOfB(const OtcrtGemm &g) {
  return g.trans_b ? OTCRT_FP8_AS_STORED : OTCRT_FP8_TRANSPOSED;
}

/// Why a call of otcrt_gemm_fp8_copies breaks its rules beyond
/// otcrt_gemm_fp8's, or "": one dense product (the copies are dense), each
/// copy holding the layout the product reads (otcrt/abi.h).
inline std::string gemmFp8CopiesInvalid(const OtcrtGemm &g, const void *aCopy,
                                        int32_t aLayouts, const void *bCopy,
                                        int32_t bLayouts) {
  if (g.batch != 1 || g.lda != (g.trans_a ? g.m : g.k) ||
      g.ldb != (g.trans_b ? g.k : g.n))
    return "FP8 copies of other than one dense product";
  if (!aCopy || !bCopy || !(aLayouts & fp8CopyLayoutOfA(g)) ||
      !(bLayouts & fp8CopyLayoutOfB(g)))
    return "FP8 copies without the layout the product reads";
  return "";
}

/// The sums of an otcrt_gemm_sums call as its messages name them: "sums
/// of A -> bf16, accumulate 1".
inline std::string describeGemmSums(int32_t sumsOf, int32_t sumsType,
                                    int32_t accumulate) {
  std::string of = sumsOf == OTCRT_GEMM_SUMS_A   ? "A"
                   : sumsOf == OTCRT_GEMM_SUMS_B ? "B"
                                                 : std::to_string(sumsOf);
  return "sums of " + of + " -> " + gemmTypeName(sumsType) + ", accumulate " +
         std::to_string(accumulate);
}

/// Why a call of otcrt_gemm_sums breaks its rules beyond otcrt_gemm's
/// (checked first, with no bias, addend or aux), or "": a plain product
/// (epilogue NONE, alpha 1) of one batch entry, the summed operand a dense
/// K x W matrix (W = M: A with trans_a 1 and lda M; W = N: B with trans_b 0
/// and ldb N; the leading dimension 1 when W is 0), present when K and W
/// are not 0, and a sums vector when W is not 0. M or N 0 (the product
/// empty) and K 0 (the sums 0) are valid.
inline std::string gemmSumsInvalid(const OtcrtGemm &g, const void *a,
                                   const void *b, const void *sums,
                                   int32_t sumsOf, int32_t sumsType,
                                   int32_t accumulate) {
  if (sumsOf != OTCRT_GEMM_SUMS_A && sumsOf != OTCRT_GEMM_SUMS_B)
    return "sums_of must be OTCRT_GEMM_SUMS_A or OTCRT_GEMM_SUMS_B";
  if (sumsType != OTC_F32 && sumsType != OTC_BF16)
    return "the sums must be f32 or bf16";
  if (accumulate != 0 && accumulate != 1)
    return "accumulate_sums must be 0 or 1";
  if (g.epilogue != OTCRT_GEMM_NONE)
    return "sums with an epilogue";
  if (g.batch != 1)
    return "sums of other than one batch entry";
  if (g.alpha != 1.0f)
    return "sums with alpha other than 1";
  const bool ofA = sumsOf == OTCRT_GEMM_SUMS_A;
  const int64_t width = ofA ? g.m : g.n;
  const int64_t dense = width > 1 ? width : 1;
  if (ofA ? g.trans_a != 1 || g.lda != dense : g.trans_b != 0 || g.ldb != dense)
    return ofA ? "the sums of A need A stored K x M (trans_a 1, lda M)"
               : "the sums of B need B stored K x N (trans_b 0, ldb N)";
  if (g.k > 0 && width > 0 && !(ofA ? a : b))
    return ofA ? "A is NULL" : "B is NULL";
  if (width > 0 && !sums)
    return "sums is NULL";
  return "";
}

/// Prints "otcrt: gemm_sums: error: <why> (<describeGemm>, <sums>)" on
/// stderr and returns 1.
inline int gemmSumsFailed(const OtcrtGemm &g, int32_t sumsOf, int32_t sumsType,
                          int32_t accumulate, const std::string &why) {
  std::fprintf(stderr, "otcrt: gemm_sums: error: %s (%s, %s)\n", why.c_str(),
               describeGemm(g, nullptr).c_str(),
               describeGemmSums(sumsOf, sumsType, accumulate).c_str());
  return 1;
}

/// Prints "otcrt: gemm: error: <why> (<describeGemm>)" on stderr and
/// returns 1, the status of a failed call.
inline int gemmFailed(const OtcrtGemm &g, const void *bias,
                      const std::string &why) {
  std::fprintf(stderr, "otcrt: gemm: error: %s (%s)\n", why.c_str(),
               describeGemm(g, bias).c_str());
  return 1;
}

} // namespace otcrt

#endif // OTCRT_GEMM_CHECK_H
