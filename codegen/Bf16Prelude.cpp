//===- Bf16Prelude.cpp - BF16 storage in the generated programs -----------===//
//
// The source every program with BF16 buffers starts with: `otc_bf16`, whose
// loads widen to float and whose stores round to nearest even, in
// __host__ __device__ functions so that both targets round identically (bit
// for bit as the runtime's kernels).
//
//===----------------------------------------------------------------------===//

#include "codegen/Bf16Prelude.h"
#include "ir/OtckDialect.h"

using namespace mlir;
using namespace otc;

namespace {

/// BF16 emulation shared by the cpu and cuda targets: the same bit-level
/// round to nearest even in host and device code.
static const char kBf16Prelude[] = R"(#if defined(__CUDACC__)
#define OTC_HD __host__ __device__
#else
#define OTC_HD
#endif
/// float -> bfloat16 bits, round to nearest, ties to even; NaN stays NaN.
static OTC_HD inline uint16_t otc_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
/// bfloat16 bits -> float (exact).
static OTC_HD inline float otc_bf16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float((uint32_t)h << 16);
#else
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
/// A bfloat16 in memory: arithmetic happens in float, every store rounds.
struct otc_bf16 {
  uint16_t bits;
  otc_bf16() = default;
  OTC_HD explicit otc_bf16(float f) : bits(otc_f32_to_bf16(f)) {}
  OTC_HD operator float() const { return otc_bf16_to_f32(bits); }
  OTC_HD otc_bf16 &operator=(float f) {
    bits = otc_f32_to_bf16(f);
    return *this;
  }
};

)";

} // namespace

const char *otc::bf16Prelude() { return kBf16Prelude; }

bool otc::usesBf16(ModuleOp module) {
  bool found = false;
  module.walk([&](otck::BufferOp b) {
    found |= b.getType().getElementType().isBF16();
  });
  return found;
}

