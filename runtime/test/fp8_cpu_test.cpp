// Unit tests of FP8 storage (otcrt/fp8.h) against values derived by hand
// from the formats' definitions (E4M3: 3 mantissa bits, normals from 2^-6,
// subnormals in steps of 2^-9, largest 448; E5M2: 2 bits, 2^-14, 2^-16,
// 57344), and of the host otcrt_gemm_fp8, whose products are checked
// against sums worked out by hand from those roundings: a call site's first
// call scaled from its own operands, later ones from the previous call's
// amax; and of otcrt_fp8_quantize with otcrt_gemm_fp8_copies: one copy in
// both layouts read by two products, its amax per copy site.
#include "cpu/kernels_cpu.h"
#include "otcrt/abi.h"
#include "otcrt/bf16.h"
#include "otcrt/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

float e4m3(float x) {
  return otcrt_fp8_to_float(otcrt_float_to_fp8(x, OTCRT_FP8_E4M3),
                            OTCRT_FP8_E4M3);
}
float e5m2(float x) {
  return otcrt_fp8_to_float(otcrt_float_to_fp8(x, OTCRT_FP8_E5M2),
                            OTCRT_FP8_E5M2);
}

TEST(Fp8Rounding, E4M3NearestEven) {
  EXPECT_EQ(e4m3(1.0f), 1.0f);
  // Spacing 1/8 in [1, 2): 1.0625 lies halfway between 1 (mantissa 000,
  // even) and 1.125; 1.1875 between 1.125 (001) and 1.25 (010, even).
  EXPECT_EQ(e4m3(1.0625f), 1.0f);
  EXPECT_EQ(e4m3(1.1875f), 1.25f);
  EXPECT_EQ(e4m3(1.07f), 1.125f);
  EXPECT_EQ(e4m3(-3.3f), -3.25f); // spacing 1/4 in [2, 4)
  EXPECT_EQ(e4m3(0.0f), 0.0f);
  EXPECT_EQ(otcrt_float_to_fp8(1.0f, OTCRT_FP8_E4M3), 0x38); // 0 0111 000
  EXPECT_EQ(otcrt_float_to_fp8(-2.0f, OTCRT_FP8_E4M3), 0xc0);
}

TEST(Fp8Rounding, E4M3Saturates) {
  EXPECT_EQ(e4m3(448.0f), 448.0f);
  EXPECT_EQ(otcrt_float_to_fp8(448.0f, OTCRT_FP8_E4M3), 0x7e);
  EXPECT_EQ(e4m3(449.0f), 448.0f);
  EXPECT_EQ(e4m3(464.0f), 448.0f); // halfway to 480, which E4M3 lacks
  EXPECT_EQ(e4m3(1e9f), 448.0f);
  EXPECT_EQ(e4m3(INFINITY), 448.0f);
  EXPECT_EQ(e4m3(-500.0f), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3(NAN)));
  EXPECT_EQ(otcrt_float_to_fp8(NAN, OTCRT_FP8_E4M3) & 0x7f, 0x7f);
}

TEST(Fp8Rounding, E4M3Subnormals) {
  const float s = std::ldexp(1.0f, -9); // the smallest subnormal
  EXPECT_EQ(e4m3(s), s);
  EXPECT_EQ(otcrt_float_to_fp8(s, OTCRT_FP8_E4M3), 0x01);
  EXPECT_EQ(e4m3(0.5f * s), 0.0f); // halfway to 0: even
  EXPECT_EQ(e4m3(0.75f * s), s);
  EXPECT_EQ(e4m3(1.5f * s), 2 * s); // halfway between 1 and 2 steps: 2
  EXPECT_EQ(e4m3(2.5f * s), 2 * s); // between 2 and 3: 2
  EXPECT_EQ(e4m3(0.2f * s), 0.0f);
  EXPECT_EQ(e4m3(7.5f * s), 8 * s); // rounds up into the smallest normal
  EXPECT_EQ(otcrt_float_to_fp8(8 * s, OTCRT_FP8_E4M3), 0x08);
  EXPECT_EQ(e4m3(std::ldexp(1.0f, -6)), std::ldexp(1.0f, -6));
}

TEST(Fp8Rounding, E5M2) {
  EXPECT_EQ(e5m2(1.125f), 1.0f); // spacing 1/4: halfway, even 1.0
  EXPECT_EQ(e5m2(1.375f), 1.5f); // halfway between 1.25 and 1.5 (even)
  EXPECT_EQ(e5m2(57344.0f), 57344.0f);
  EXPECT_EQ(otcrt_float_to_fp8(57344.0f, OTCRT_FP8_E5M2), 0x7b);
  EXPECT_EQ(e5m2(61440.0f), 57344.0f);
  EXPECT_EQ(e5m2(INFINITY), 57344.0f);
  const float s = std::ldexp(1.0f, -16);
  EXPECT_EQ(e5m2(s), s);
  EXPECT_EQ(e5m2(0.5f * s), 0.0f);
  EXPECT_EQ(e5m2(1.5f * s), 2 * s);
  EXPECT_TRUE(std::isnan(e5m2(NAN)));
}

TEST(Fp8Rounding, Scale) {
  EXPECT_EQ(otcrt_fp8_scale(448.0f, OTCRT_FP8_E4M3), 1.0f);
  EXPECT_EQ(otcrt_fp8_scale(2.0f, OTCRT_FP8_E5M2), 28672.0f);
  EXPECT_EQ(otcrt_fp8_scale(0.0f, OTCRT_FP8_E4M3), 1.0f);
  EXPECT_EQ(otcrt_fp8_scale(INFINITY, OTCRT_FP8_E4M3), 1.0f);
  // An amax BF16 holds but whose max / amax overflows a float: 2^126, and
  // its inverse 2^-126 (the smallest normal float), not infinity and 0.
  EXPECT_EQ(otcrt_fp8_scale(1e-38f, OTCRT_FP8_E4M3), 0x1p126f);
  EXPECT_EQ(1.0f / otcrt_fp8_scale(1e-38f, OTCRT_FP8_E5M2), 0x1p-126f);
  EXPECT_EQ(otcrt_fp8_scale(448.0f * 0x1p-125f, OTCRT_FP8_E4M3), 0x1p125f);
}

/// A row-major M x K times K x N (both BF16, trans none) into BF16 C.
OtcrtGemm plain(int64_t M, int64_t N, int64_t K) {
  OtcrtGemm g{};
  g.m = M;
  g.n = N;
  g.k = K;
  g.batch = 1;
  g.alpha = 1.0f;
  g.ab_type = OTC_BF16;
  g.c_type = OTC_BF16;
  g.epilogue_type = OTC_BF16;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = K;
  g.ldb = N;
  g.ldc = N;
  return g;
}

std::vector<uint16_t> bf16s(const std::vector<float> &v) {
  std::vector<uint16_t> out;
  for (float x : v)
    out.push_back(otcrt_float_to_bf16(x));
  return out;
}

TEST(GemmFp8Cpu, RoundsEachOperandAfterItsScale) {
  otcrt::cpu::forgetFp8Scales();
  // A = [448, 1.0625, 0, ...] (1 x 16): amax 448, scale 1, so 1.0625 rounds
  // to 1.0 in E4M3. B (16 x 1) = [0, 3, 0, ...]: amax 3, scaled to 448
  // exactly. C = 448 * 0 + 1.0 * 3 = 3, where BF16 would give 3.1875.
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  a[0] = 448.0f;
  a[1] = 1.0625f;
  b[1] = 3.0f;
  std::vector<uint16_t> ha = bf16s(a), hb = bf16s(b), c(1, 0);
  OtcrtGemm g = plain(1, 1, 16);
  ASSERT_EQ(otcrt_gemm_fp8(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3, ha.data(),
                           hb.data(), c.data(), nullptr, nullptr, nullptr,
                           nullptr),
            0);
  EXPECT_EQ(otcrt_bf16_to_float(c[0]), 3.0f);
  ASSERT_EQ(otcrt_gemm(&g, ha.data(), hb.data(), c.data(), nullptr, nullptr,
                       nullptr, nullptr),
            0);
  EXPECT_EQ(otcrt_bf16_to_float(c[0]), 3.1875f);
}

TEST(GemmFp8Cpu, ScalesBackTheProduct) {
  otcrt::cpu::forgetFp8Scales();
  // A = [0.5, 0.25] (1 x 2, padded to K = 16 with zeros), amax 0.5: scale
  // 896, values 448 and 224 (exact). B (E5M2) = [2, 4]: scale 14336,
  // values 28672 and 57344 (exact). C = (448 * 28672 + 224 * 57344) /
  // (896 * 14336) = 2, the exact 0.5 * 2 + 0.25 * 4.
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  a[0] = 0.5f;
  a[1] = 0.25f;
  b[0] = 2.0f;
  b[1] = 4.0f;
  std::vector<uint16_t> ha = bf16s(a), hb = bf16s(b), c(1, 0);
  OtcrtGemm g = plain(1, 1, 16);
  ASSERT_EQ(otcrt_gemm_fp8(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E5M2, ha.data(),
                           hb.data(), c.data(), nullptr, nullptr, nullptr,
                           nullptr),
            0);
  EXPECT_EQ(otcrt_bf16_to_float(c[0]), 2.0f);
}

TEST(GemmFp8Cpu, ScaleSpansTheWholeTransposedOperand) {
  otcrt::cpu::forgetFp8Scales();
  // B stored transposed (N x K = 2 x 16): row 0 holds 1000, row 1 holds
  // 1.5, so one scale, 448 / 1000, covers both: 1.5 x 0.448 = 0.672 rounds
  // in E4M3 (spacing 1/16 in [0.5, 1)) to 0.6875, which is 1.5346 scaled
  // back. A = ones (amax 1, exact). Column 1 of C sums 16 of them:
  // 24.554, BF16 24.5 (spacing 1/8), where BF16 operands give exactly 24;
  // column 0: 16000.
  std::vector<float> a(16, 1.0f), b(32, 0.0f);
  for (int j = 0; j < 16; ++j) {
    b[j] = 1000.0f;
    b[16 + j] = 1.5f;
  }
  std::vector<uint16_t> ha = bf16s(a), hb = bf16s(b), c(2, 0);
  OtcrtGemm g = plain(1, 2, 16);
  g.trans_b = 1;
  g.ldb = 16;
  g.ldc = 2;
  ASSERT_EQ(otcrt_gemm_fp8(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3, ha.data(),
                           hb.data(), c.data(), nullptr, nullptr, nullptr,
                           nullptr),
            0);
  EXPECT_EQ(otcrt_bf16_to_float(c[0]), 16000.0f);
  EXPECT_EQ(otcrt_bf16_to_float(c[1]), 24.5f);
}

TEST(GemmFp8Cpu, LaterCallsScaleFromThePreviousAmax) {
  otcrt::cpu::forgetFp8Scales();
  // One call site (one descriptor) three times. B = [1, 8, 0, ...]: amax 8,
  // exact at scale 56 every time. First call, A = [448, 1.5]: its own amax
  // 448, scale 1: C = 448 + 12 = 460. Second call, A = [896, 1.5], at the
  // first call's amax (448, scale 1): 896 is held at 448, C = 460 again
  // (its own amax would give scale 0.5 and C = 908). Third call, the same
  // A, at the second's amax (896, scale 0.5): C = 908.
  static const OtcrtGemm g = plain(1, 1, 16);
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  b[0] = 1.0f;
  b[1] = 8.0f;
  const std::vector<uint16_t> hb = bf16s(b);
  std::vector<uint16_t> c(1, 0);
  const float first[] = {448.0f, 896.0f, 896.0f};
  const float want[] = {460.0f, 460.0f, 908.0f};
  for (int call = 0; call < 3; ++call) {
    a[0] = first[call];
    a[1] = 1.5f;
    std::vector<uint16_t> ha = bf16s(a);
    ASSERT_EQ(otcrt_gemm_fp8(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3, ha.data(),
                             hb.data(), c.data(), nullptr, nullptr, nullptr,
                             nullptr),
              0);
    EXPECT_EQ(otcrt_bf16_to_float(c[0]), want[call]) << "call " << call;
  }
}

/// One otcrt_fp8_quantize of `x` (rows x cols) into a copy of `layouts`.
std::vector<uint8_t> quantized(const OtcrtFp8Quantize &q,
                               const std::vector<uint16_t> &x) {
  std::vector<uint8_t> copy(
      static_cast<size_t>(otcrt_fp8_copy_bytes(q.rows * q.cols, q.layouts)));
  EXPECT_EQ(otcrt_fp8_quantize(&q, x.data(), copy.data(), nullptr), 0);
  return copy;
}

TEST(GemmFp8CopiesCpu, OneCopyServesBothLayouts) {
  otcrt::cpu::forgetFp8Scales();
  // W (2 x 16): row 0 all 8, row 1 all 1.5: amax 8, scale 56 for the one
  // copy. 8 x 56 = 448 (exact); 1.5 x 56 = 84 lies halfway between 80
  // (1.010 x 2^6, even) and 88 in E4M3: 80, which is 1.428571 scaled back.
  // Product 1 reads W as B with trans_b ([N, K] = [2, 16], as stored):
  // ones (1 x 16) x W^T = [128, 16 x 1.428571 = 22.857 -> BF16 22.875]
  // (BF16 operands: 24). Product 2 reads the same copy as B = W ([K, N] =
  // [2, 16], its transpose): [1, 1] x W = 8 + 1.428571 = 9.428571 -> BF16
  // 9.4375 in every column (BF16 operands: 9.5).
  std::vector<float> w(32);
  for (int j = 0; j < 16; ++j) {
    w[j] = 8.0f;
    w[16 + j] = 1.5f;
  }
  const std::vector<uint16_t> hw = bf16s(w);
  static const OtcrtFp8Quantize qw = {2, 16, OTCRT_FP8_E4M3, 3};
  std::vector<uint8_t> cw = quantized(qw, hw);
  // The scale lies after both layouts: 1 / 56.
  float inv;
  std::memcpy(&inv, cw.data() + 512, sizeof inv);
  EXPECT_EQ(inv, 1.0f / 56.0f);

  const std::vector<uint16_t> ones = bf16s(std::vector<float>(16, 1.0f));
  static const OtcrtFp8Quantize q1 = {1, 16, OTCRT_FP8_E4M3, 1};
  std::vector<uint8_t> c1 = quantized(q1, ones);
  OtcrtGemm g1 = plain(1, 2, 16);
  g1.trans_b = 1;
  g1.ldb = 16;
  g1.ldc = 2;
  std::vector<uint16_t> out1(2, 0);
  ASSERT_EQ(otcrt_gemm_fp8_copies(&g1, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3,
                                  c1.data(), 1, cw.data(), 3, ones.data(),
                                  hw.data(), out1.data(), nullptr, nullptr,
                                  nullptr, nullptr),
            0);
  EXPECT_EQ(otcrt_bf16_to_float(out1[0]), 128.0f);
  EXPECT_EQ(otcrt_bf16_to_float(out1[1]), 22.875f);

  const std::vector<uint16_t> two = bf16s({1.0f, 1.0f});
  static const OtcrtFp8Quantize q2 = {1, 2, OTCRT_FP8_E4M3, 1};
  std::vector<uint8_t> c2 = quantized(q2, two);
  OtcrtGemm g2 = plain(1, 16, 2);
  std::vector<uint16_t> out2(16, 0);
  ASSERT_EQ(otcrt_gemm_fp8_copies(&g2, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3,
                                  c2.data(), 1, cw.data(), 3, two.data(),
                                  hw.data(), out2.data(), nullptr, nullptr,
                                  nullptr, nullptr),
            0);
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(otcrt_bf16_to_float(out2[j]), 9.4375f) << "column " << j;
  // A copy without the layout a product reads is refused.
  EXPECT_NE(otcrt_gemm_fp8_copies(&g2, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3,
                                  c2.data(), 1, c1.data(), 1, two.data(),
                                  hw.data(), out2.data(), nullptr, nullptr,
                                  nullptr, nullptr),
            0);
}

TEST(GemmFp8CopiesCpu, ACopySiteScalesFromItsPreviousAmax) {
  otcrt::cpu::forgetFp8Scales();
  // One copy site twice, as LaterCallsScaleFromThePreviousAmax's call site:
  // A = [448, 1.5] (own amax, scale 1), then [896, 1.5] at 448's scale
  // (896 held at 448). B = [1, 8] (amax 8, exact): C = 460 both times.
  static const OtcrtFp8Quantize qa = {1, 16, OTCRT_FP8_E4M3, 1};
  static const OtcrtFp8Quantize qb = {16, 1, OTCRT_FP8_E4M3, 2};
  std::vector<float> a(16, 0.0f), b(16, 0.0f);
  b[0] = 1.0f;
  b[1] = 8.0f;
  const std::vector<uint16_t> hb = bf16s(b);
  OtcrtGemm g = plain(1, 1, 16);
  for (float first : {448.0f, 896.0f}) {
    a[0] = first;
    a[1] = 1.5f;
    const std::vector<uint16_t> ha = bf16s(a);
    std::vector<uint8_t> ca = quantized(qa, ha), cb = quantized(qb, hb);
    std::vector<uint16_t> c(1, 0);
    ASSERT_EQ(otcrt_gemm_fp8_copies(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3,
                                    ca.data(), 1, cb.data(), 2, ha.data(),
                                    hb.data(), c.data(), nullptr, nullptr,
                                    nullptr, nullptr),
              0);
    EXPECT_EQ(otcrt_bf16_to_float(c[0]), 460.0f) << "A[0] " << first;
  }
}

TEST(GemmFp8Cpu, RefusesTwoE5M2OperandsAndF32) {
  otcrt::cpu::forgetFp8Scales();
  std::vector<uint16_t> ha(16, 0), hb(16, 0), c(1, 0);
  OtcrtGemm g = plain(1, 1, 16);
  EXPECT_NE(otcrt_gemm_fp8(&g, OTCRT_FP8_E5M2, OTCRT_FP8_E5M2, ha.data(),
                           hb.data(), c.data(), nullptr, nullptr, nullptr,
                           nullptr),
            0);
  g.ab_type = OTC_F32;
  g.c_type = OTC_F32;
  g.epilogue_type = OTC_F32;
  std::vector<float> fa(16, 0.0f), fb(16, 0.0f), fc(1, 0.0f);
  EXPECT_NE(otcrt_gemm_fp8(&g, OTCRT_FP8_E4M3, OTCRT_FP8_E4M3, fa.data(),
                           fb.data(), fc.data(), nullptr, nullptr, nullptr,
                           nullptr),
            0);
}

} // namespace
