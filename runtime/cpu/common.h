// Private helpers of the host kernels of libotcrt_cpu: bfloat16 load and
// store (the upper half of an IEEE float, rounded to nearest even, NaN kept
// a quiet NaN), the typed load/store used by the kernels templated on the
// storage type, and the dropout keep test of OTCRT_DROPOUT_BITS followed by
// the splitmix64 finalizer.
#ifndef OTCRT_CPU_COMMON_H
#define OTCRT_CPU_COMMON_H

#include "otcrt/bf16.h"
#include "otcrt/kernels.h"

#include <cstdint>
#include <cstring>

namespace otcrt {
namespace cpu {

/// The float whose upper half is `h` (otcrt/bf16.h).
inline float bf16ToFloat(otcrt_bf16 h) { return otcrt_bf16_to_float(h); }

/// `f` rounded to the nearest bfloat16, ties to even; a NaN stays a (quiet)
/// NaN of the same sign, infinities stay infinities (otcrt/bf16.h).
inline otcrt_bf16 floatToBf16(float f) { return otcrt_float_to_bf16(f); }

/// e^x in FP32 for the kernels' vectorized loops (no library call, no
/// branch: the runtime is built with -fno-trapping-math, so the clamp's
/// selects become blends): 0 below -87 (e^-87 = 1.6e-38: a hidden score's
/// -inf gives exactly 0), x clamped to 88 above (e^88 = 1.65e38 stands for
/// anything larger; a NaN passes the clamp and makes the result NaN), then
/// x = n ln 2 + r with ln 2 in two
/// parts and |r| <= ln 2 / 2, e^r by its Taylor series to r^7 (relative
/// error below 1e-8 there), 2^n from the exponent bits: within 2 units in
/// the last place of e^x in [-87, 88].
inline float expFast(float x) {
  const bool under = x < -87.0f;
  x = under ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  float t = x * 1.44269504088896341f;
  int32_t n = static_cast<int32_t>(t + (t < 0.0f ? -0.5f : 0.5f));
  float fn = static_cast<float>(n);
  float r = x - fn * 0.693145751953125f - fn * 1.428606820309417e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t bits = (static_cast<uint32_t>(n) + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return under ? 0.0f : p * scale;
}

/// Loads element `v` of a float or bfloat16 tensor as a float.
inline float load(float v) { return v; }
inline float load(otcrt_bf16 v) { return bf16ToFloat(v); }

/// Stores `v` into a float or bfloat16 element.
inline void store(float *p, float v) { *p = v; }
inline void store(otcrt_bf16 *p, float v) { *p = floatToBf16(v); }

/// The uniform [0, 1) draw of dropout for the 64 bits of
/// OTCRT_DROPOUT_BITS: the splitmix64 finalizer, top 53 bits.
inline double dropoutUniform(uint64_t bits) {
  uint64_t h = bits + 0x9E3779B97F4A7C15ull;
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

/// True when element `index` of a tensor dropped with (key, stream, ratio)
/// is kept.
inline bool dropoutKeep(uint64_t key, uint64_t stream, uint64_t index,
                        float ratio) {
  return dropoutUniform(OTCRT_DROPOUT_BITS(key, stream, index)) >=
         static_cast<double>(ratio);
}

} // namespace cpu
} // namespace otcrt

#endif // OTCRT_CPU_COMMON_H
