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
