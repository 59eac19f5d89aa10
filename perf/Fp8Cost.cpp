//===- Fp8Cost.cpp - what an FP8 GEMM costs, and whether it pays ----------===//
//
// The prices of perf/Fp8Cost.h.
//
//===----------------------------------------------------------------------===//

#include "perf/Fp8Cost.h"

using namespace otc;

LaunchCost otc::fp8QuantizeCost(const DeviceModel &d, int64_t elements,
                                int layouts) {
  // One pass: the BF16 tensor read, its FP8 copy written in each layout
  // (its amax gathered on the way, for the next quantization's scale).
  return priceRoofline(d, 0, (2.0 + double(layouts)) * double(elements));
}

double otc::gemmProductSeconds(const DeviceModel &d, int64_t m, int64_t n,
                               int64_t k, bool fp8) {
  double flops = 2.0 * double(m) * double(n) * double(k);
  double operandBytes = (fp8 ? 1.0 : 2.0) * double(k) * double(m + n);
  double bytes = operandBytes + 2.0 * double(m) * double(n);
  const GemmRate &curve = fp8 ? d.fp8Gemm : d.bf16Gemm;
  double seconds =
      gemmSeconds(curve, flops, k, gemmWaveEfficiency(d, m, n, k, /*batch=*/1));
  return priceRoofline(d, seconds, bytes).total();
}

bool otc::fp8GemmPays(const DeviceModel &d, int64_t m, int64_t n, int64_t k) {
  if (!(d.fp8Gemm.rate > 0) || m <= 0 || n <= 0 || k <= 0)
    return false;
  double fp8 = gemmProductSeconds(d, m, n, k, /*fp8=*/true) +
               fp8QuantizeCost(d, m * k).total() +
               fp8QuantizeCost(d, k * n).total();
  return fp8 < gemmProductSeconds(d, m, n, k, /*fp8=*/false);
}
