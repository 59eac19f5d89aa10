// The three GEMMs of each chunk of rows of otcrt_linear_cross_entropy_*
// (otcrt/kernels.h) as OtcrtGemm descriptors, FP32 accumulation, shared by
// the cpu and cuda calls so that both compute the same products. Header-
// only, as gemm_check.h, for the GPU kernel test that compiles the host
// call from source beside libotcrt_cuda.a.
#ifndef OTCRT_LINEAR_CROSS_ENTROPY_GEMMS_H
#define OTCRT_LINEAR_CROSS_ENTROPY_GEMMS_H

#include "otcrt/abi.h"
#include "otcrt/kernels.h"

#include <cstdint>

namespace otcrt {

struct LinearCrossEntropyGemms {
  int64_t hidden, classes;
  /// h's and w's OtcDType (OTC_F32 or OTC_BF16).
  int32_t type;
  /// w stored [hidden, classes] (OTCRT_W_HIDDEN_CLASSES: a TorchScript
  /// export's transposed copy of the head) rather than [classes, hidden].
  bool wByHidden = false;

  /// Whether `layout` is an OtcrtHeadLayout the calls take.
  static bool knownLayout(int32_t layout) {
    return layout == OTCRT_W_CLASSES_HIDDEN || layout == OTCRT_W_HIDDEN_CLASSES;
  }

  /// chunk[n, classes] = h[n, hidden] wᵀ (h w with wByHidden; + bias[j] on
  /// column j, with `bias`: OTCRT_GEMM_BIAS, the bias of h's type), in h's
  /// type.
  OtcrtGemm head(int64_t n, bool bias = false) const {
    OtcrtGemm g = plain(n, classes, hidden, type, hidden,
                        wByHidden ? classes : hidden, classes);
    g.trans_b = wByHidden ? 0 : 1;
    if (bias)
      g.epilogue = OTCRT_GEMM_BIAS;
    return g;
  }
  /// dh[n, hidden] = dlogits[n, classes] w (wᵀ with wByHidden), FP32.
  OtcrtGemm dh(int64_t n) const {
    OtcrtGemm g = plain(n, hidden, classes, OTC_F32, classes,
                        wByHidden ? classes : hidden, hidden);
    g.trans_b = wByHidden ? 1 : 0;
    return g;
  }
  /// dw[classes, hidden] (+)= dlogits[n, classes]ᵀ h[n, hidden] (with
  /// wByHidden dw[hidden, classes] (+)= h[n, hidden]ᵀ dlogits[n, classes]), of
  /// `dwType`; added to dw's values (beta 1) with `add`. With a bias's
  /// gradient, the call of otcrt_gemm_sums that also sums dlogits' columns
  /// (dlogitsSums: dlogits is A, or B with wByHidden, stored n x classes).
  OtcrtGemm dw(int64_t n, int32_t dwType, bool add) const {
    // w [hidden, classes]: dw = h[n, hidden]ᵀ dlogits[n, classes], A = h.
    OtcrtGemm g =
        wByHidden ? plain(hidden, classes, n, dwType, hidden, classes, classes)
                  : plain(classes, hidden, n, dwType, classes, hidden, hidden);
    g.trans_a = 1;
    g.beta = add ? 1.0f : 0.0f;
    return g;
  }
  /// dw's operands A and B: (dlogits, h), or (h, dlogits) with wByHidden.
  const void *dwA(const void *dlogits, const void *h) const {
    return wByHidden ? h : dlogits;
  }
  const void *dwB(const void *dlogits, const void *h) const {
    return wByHidden ? dlogits : h;
  }
  /// Which operand of dw's product otcrt_gemm_sums sums for the bias's
  /// gradient: dlogits, A or B.
  int32_t dlogitsSums() const {
    return wByHidden ? OTCRT_GEMM_SUMS_B : OTCRT_GEMM_SUMS_A;
  }

private:
  /// m x n x k over operands of `type`, C of `cType`, row strides lda,
  /// ldb, ldc.
  OtcrtGemm plain(int64_t m, int64_t n, int64_t k, int32_t cType,
                  int64_t lda, int64_t ldb, int64_t ldc) const {
    OtcrtGemm g{};
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = 1;
    g.alpha = 1.0f;
    g.ab_type = type;
    g.c_type = g.epilogue_type = cType;
    g.epilogue = OTCRT_GEMM_NONE;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    return g;
  }
};

} // namespace otcrt

#endif // OTCRT_LINEAR_CROSS_ENTROPY_GEMMS_H
