//===- Fp8Cost.h - what an FP8 GEMM costs, and whether it pays --*- C++ -*-===//
//
// Under --precision=fp8 the step-time model decides which GEMMs run FP8:
// the product on the device's FP8 curve (DeviceModel::fp8Gemm) plus its
// share of its operands' quantization must take less time than the
// product on the BF16 curve. Quantizing a tensor is one bandwidth-bound
// launch over it (otck.fp8_quantize), reading the BF16 tensor once and
// writing its FP8 copy, one byte an element, in each layout its readers
// take, at the scale of the amax the copy saw on its previous quantization
// (gathering this one's on the way; a copy's first quantization adds an
// amax pass, once a run, which the model leaves out). One copy serves
// every FP8 GEMM of a function reading that tensor in that format, and a
// parameter's is made once per optimizer step (ir/Fp8.h), so otc-fp8-gemms
// (chooseFp8Gemms, passes/Passes.h) charges each reader its share;
// Predictor (perf/StepTime.cpp) prices the otck.fp8_quantize ops the
// program makes with the same functions, so the choice and the prediction
// agree.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PERF_FP8COST_H
#define OTC_PERF_FP8COST_H

#include "perf/LaunchModel.h"

#include <cstdint>

namespace otc {

/// The launch that quantizes a BF16 tensor of `elements` to FP8 on
/// `device` in `layouts` layouts (1 or 2: 2 bytes read and 1 written per
/// layout, an element), priced by its bytes with its launch.
LaunchCost fp8QuantizeCost(const DeviceModel &device, int64_t elements,
                           int layouts = 1);

/// Seconds of the product M x N x K (one GEMM, BF16 result) on `device`:
/// on its FP8 curve with FP8 operands when `fp8` (its operands'
/// quantization not included), else on its BF16 curve; launch included.
double gemmProductSeconds(const DeviceModel &device, int64_t m, int64_t n,
                          int64_t k, bool fp8);

/// Whether the M x N x K product is predicted faster in FP8, both
/// operands' quantization included (each a copy of its own, one layout),
/// than in BF16 on `device`; false on a device without FP8 GEMMs
/// (fp8Gemm.rate 0).
bool fp8GemmPays(const DeviceModel &device, int64_t m, int64_t n, int64_t k);

} // namespace otc

#endif // OTC_PERF_FP8COST_H
