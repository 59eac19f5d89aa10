/* bfloat16 storage: the one rounding of a float to the nearest bfloat16
 * (ties to even; a NaN stays a quiet NaN of the same sign, infinities stay
 * infinities) and the exact widening back, as host and device functions, so
 * that the cpu kernels, the cuda kernels, the host GEMM and the generated
 * programs (whose BF16 prelude includes this header) all round bit for bit
 * alike. A bfloat16 is the upper 16 bits of an IEEE float32. C-compatible;
 * the reference interpreter keeps its own rounding (APFloat) as the oracle. */
#ifndef OTCRT_BF16_H
#define OTCRT_BF16_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define OTCRT_HD __host__ __device__
#else
#define OTCRT_HD
#endif

/// The bits of float `f`.
static OTCRT_HD inline uint32_t otcrt_float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

/// `f` rounded to the nearest bfloat16 (its bits).
static OTCRT_HD inline uint16_t otcrt_float_to_bf16(float f) {
  uint32_t bits = otcrt_float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

/// The float whose upper half is `h` (exact).
static OTCRT_HD inline float otcrt_bf16_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float((uint32_t)h << 16);
#else
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

#endif /* OTCRT_BF16_H */
