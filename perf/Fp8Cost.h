//===- Fp8Cost.h - what an FP8 GEMM costs, and whether it pays --*- C++ -*-===//
//
// Under --precision=fp8 the step-time model decides per GEMM whether FP8
// pays: the product on the device's FP8 curve (DeviceModel::fp8Gemm) plus
// the quantization of both operands must take less time than the product
// on the BF16 curve. Quantizing an operand is one bandwidth-bound launch
// over it, reading the BF16 operand and writing its FP8 copy, one byte an
// element, at the scale of the amax its call site saw on its previous call
// (gathering this call's on the way; a site's first call adds an amax
// pass, once a run, which the model leaves out). Predictor::gemm (perf/
// StepTime.cpp) prices the GEMMs otc-fp8-gemms marked with the same
// functions, so the choice and the prediction agree.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PERF_FP8COST_H
#define OTC_PERF_FP8COST_H

#include "perf/LaunchModel.h"

#include <cstdint>

namespace otc {

/// The launch that quantizes a BF16 operand of `elements` to FP8 on
/// `device` (2 bytes read and 1 written an element), priced by its bytes
/// with its launch.
LaunchCost fp8QuantizeCost(const DeviceModel &device, int64_t elements);

/// Seconds of the product M x N x K (one GEMM, BF16 result) on `device`:
/// on its FP8 curve with FP8 operands when `fp8` (its operands'
/// quantization not included), else on its BF16 curve; launch included.
double gemmProductSeconds(const DeviceModel &device, int64_t m, int64_t n,
                          int64_t k, bool fp8);

/// Whether the M x N x K product is predicted faster in FP8, both
/// operands' quantization included, than in BF16 on `device`; false on a
/// device without FP8 GEMMs (fp8Gemm.rate 0).
bool fp8GemmPays(const DeviceModel &device, int64_t m, int64_t n, int64_t k);

} // namespace otc

#endif // OTC_PERF_FP8COST_H
