/* FP8 storage for the GEMMs of --precision=fp8 (otcrt_gemm_fp8, otcrt/
 * abi.h): the rounding of a float to E4M3 (sign, 4 exponent bits of bias 7,
 * 3 mantissa bits; normals from 2^-6, subnormals down to 2^-9, largest
 * finite 448, no infinities) or E5M2 (5 exponent bits of bias 15, 2
 * mantissa bits; normals from 2^-14, subnormals down to 2^-16, largest
 * finite 57344), to nearest with ties to even and saturating: a magnitude
 * past the largest finite one (an infinity too) is held there, a NaN is
 * the format's NaN (0x7f with its sign). The exact widening back, and the
 * per-tensor scale of an operand. Host and device functions, so the cpu
 * emulation and the cuda quantize kernel write the same bytes; the
 * reference interpreter keeps its own rounding as the oracle. C-compatible. */
#ifndef OTCRT_FP8_H
#define OTCRT_FP8_H

#include "otcrt/bf16.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/// The formats of otcrt_gemm_fp8's operands.
enum OtcrtFp8Format { OTCRT_FP8_E4M3 = 0, OTCRT_FP8_E5M2 = 1 };

/// The largest finite value of `format`.
static OTCRT_HD inline float otcrt_fp8_max(int32_t format) {
  return format == OTCRT_FP8_E4M3 ? 448.0f : 57344.0f;
}

/// `f` rounded to the nearest value of `format` (its byte).
static OTCRT_HD inline uint8_t otcrt_float_to_fp8(float f, int32_t format) {
  const int e4m3 = format == OTCRT_FP8_E4M3;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint32_t maxCode = e4m3 ? 0x7eu : 0x7bu;
  const uint32_t bits = otcrt_float_bits(f);
  const uint32_t sign = (bits >> 24) & 0x80u, magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return (uint8_t)(sign | 0x7fu);
  const int exponent = (int)(magnitude >> 23) - 127;
  if (exponent > bias + 1) /* at least 2^(bias + 2): past either max */
    return (uint8_t)(sign | maxCode);
  if (magnitude < 0x00800000u) /* zero or an FP32 subnormal: rounds to 0 */
    return (uint8_t)sign;
  /* The value in units of the spacing near it, 2^(e - mbits), e its
     exponent but at least the smallest normal one, 1 - bias. */
  const int e = exponent < 1 - bias ? 1 - bias : exponent;
  const int shift = 23 - mbits + (e - exponent);
  if (shift > 25) /* below a quarter of the smallest subnormal */
    return (uint8_t)sign;
  const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u)))
    ++q;
  /* q counts spacings of 2^(e - mbits): a subnormal below 2^mbits, else
     its leading bit is the implicit one (a carry to 2^(mbits + 1) is the
     next binade's 1.0, which the same sum encodes). */
  uint32_t code = q < (1u << mbits)
                      ? q
                      : ((uint32_t)(e + bias) << mbits) + (q - (1u << mbits));
  if (code > maxCode)
    code = maxCode;
  return (uint8_t)(sign | code);
}

/// The float value of byte `x` of `format` (exact).
static OTCRT_HD inline float otcrt_fp8_to_float(uint8_t x, int32_t format) {
  const int e4m3 = format == OTCRT_FP8_E4M3;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint32_t code = x & 0x7fu;
  float v;
  if (e4m3 ? code == 0x7fu : code > 0x7cu)
    v = NAN;
  else if (!e4m3 && code == 0x7cu)
    v = INFINITY;
  else {
    const uint32_t E = code >> mbits, M = code & ((1u << mbits) - 1u);
    v = E == 0 ? ldexpf((float)M, 1 - bias - mbits)
               : ldexpf((float)(M + (1u << mbits)), (int)E - bias - mbits);
  }
  return (x & 0x80u) ? -v : v;
}

/// The largest scale: 2^126, whose inverse is still a normal float. An amax
/// below max / 2^126 (about 1e-36, which BF16 can hold) would otherwise give
/// an infinite scale, zeros made NaN and a zero inverse.
#define OTCRT_FP8_MAX_SCALE 8.5070591730234616e37f

/// The scale an operand of largest magnitude `amax` is multiplied by before
/// its rounding to `format`: max / amax, at most OTCRT_FP8_MAX_SCALE, or 1
/// when amax is 0 or not finite.
static OTCRT_HD inline float otcrt_fp8_scale(float amax, int32_t format) {
  if (!(amax > 0.0f && amax <= 3.4028234663852886e38f))
    return 1.0f;
  const float s = otcrt_fp8_max(format) / amax;
  return s < OTCRT_FP8_MAX_SCALE ? s : OTCRT_FP8_MAX_SCALE;
}

/// The layouts of an FP8 copy (OtcrtFp8Quantize::layouts, a mask).
enum OtcrtFp8Layout { OTCRT_FP8_AS_STORED = 1, OTCRT_FP8_TRANSPOSED = 2 };

/// `n` bytes rounded up to 256.
static OTCRT_HD inline int64_t otcrt_fp8_copy_padded(int64_t n) {
  return (n + 255) / 256 * 256;
}

/// Where `layout` starts in a copy of `n` values holding `layouts`: as
/// stored at 0, the transpose after it (at 0 when alone).
static OTCRT_HD inline int64_t otcrt_fp8_copy_offset(int64_t n, int32_t layouts,
                                                     int32_t layout) {
  return layout == OTCRT_FP8_TRANSPOSED && (layouts & OTCRT_FP8_AS_STORED)
             ? otcrt_fp8_copy_padded(n)
             : 0;
}

/// Where the float 1 / s of a copy of `n` values holding `layouts` lies:
/// after its layouts.
static OTCRT_HD inline int64_t otcrt_fp8_copy_scale_offset(int64_t n,
                                                           int32_t layouts) {
  return ((layouts & 1) + ((layouts >> 1) & 1)) * otcrt_fp8_copy_padded(n);
}

/// The bytes of a copy of `n` values holding `layouts` (the compiler's
/// buffer, ir/Fp8.h fp8CopyBytes): its layouts, then 256 for the scale.
static OTCRT_HD inline int64_t otcrt_fp8_copy_bytes(int64_t n,
                                                    int32_t layouts) {
  return otcrt_fp8_copy_scale_offset(n, layouts) + 256;
}

#endif /* OTCRT_FP8_H */
