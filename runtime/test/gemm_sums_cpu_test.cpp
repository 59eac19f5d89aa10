// Unit tests of the host otcrt_gemm_sums (cpu/gemm_sums.cpp) against values
// worked out by hand below: the sums of B and of A beside their products, in
// f32 and bf16, with beta 0 and 1; the column sums in row order (a tie that
// rounds away only in that order); sums rounded once to bf16 (ties to even),
// alone and added to their old values; more columns than one block of the
// host's column sums; products of depth 0 and empty products; and calls that
// break the rules of otcrt/abi.h, refused with nothing written.
#include "otcrt/abi.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// The descriptor of a plain product of one batch entry, alpha 1, dense
/// operands (lda, ldb and ldc the columns of A, B and C as stored, at least
/// 1).
OtcrtGemm plain(int transA, int transB, int64_t M, int64_t N, int64_t K,
                float beta, int32_t abType = OTC_F32, int32_t cType = OTC_F32) {
  auto atLeast1 = [](int64_t v) { return v > 1 ? v : int64_t(1); };
  OtcrtGemm g;
  g.trans_a = transA;
  g.trans_b = transB;
  g.m = M;
  g.n = N;
  g.k = K;
  g.batch = 1;
  g.alpha = 1.0f;
  g.beta = beta;
  g.ab_type = abType;
  g.c_type = g.epilogue_type = cType;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = atLeast1(transA ? M : K);
  g.ldb = atLeast1(transB ? K : N);
  g.ldc = atLeast1(N);
  g.stride_a = g.stride_b = g.stride_c = 0;
  return g;
}

int gemmSums(const OtcrtGemm &g, const void *a, const void *b, void *c,
             void *sums, int32_t sumsOf, int32_t sumsType, int32_t accumulate) {
  return otcrt_gemm_sums(&g, a, b, c, sums, sumsOf, sumsType, accumulate,
                         nullptr);
}

/// The BF16 of a float that BF16 holds exactly (its upper half), and a
/// BF16 widened.
uint16_t bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << x << " is not a bf16 value";
  return static_cast<uint16_t>(bits >> 16);
}
float widen(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
std::vector<uint16_t> bf16s(const std::vector<float> &x) {
  std::vector<uint16_t> out;
  for (float v : x)
    out.push_back(bf16(v));
  return out;
}

const float kTwoTo24 = std::ldexp(1.0f, -24);

} // namespace

// The sums of B (stored K x N) beside an f32 product, beta 0 (C and the sums
// start as NaN, neither read).
//   A = | 1 2 3 |   B = | 1  -1    1     |
//       | 4 5 6 |       | 2   0.5  2^-24 |
//                       | 3   4    2^-24 |
// C = A B: row 0 = (1+4+9, -1+1+12, 1+5 2^-24) = (14, 12, ~1);
//          row 1 = (4+10+18, -4+2.5+24, 4+11 2^-24) = (32, 22.5, ~4).
// Column sums of B: 1+2+3 = 6; -1+0.5+4 = 3.5; and in row order
// (1 + 2^-24) + 2^-24 = 1 exactly (each addition a tie that rounds to the
// even 1; the two small terms added first would give 1 + 2^-23).
TEST(GemmSumsCpu, SumsOfBBesideAnF32Product) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {1, -1, 1, 2, 0.5f, kTwoTo24, 3, 4, kTwoTo24};
  std::vector<float> c(6, kNaN), sums(3, kNaN);
  ASSERT_EQ(gemmSums(plain(0, 0, 2, 3, 3, 0.0f), a.data(), b.data(), c.data(),
                     sums.data(), OTCRT_GEMM_SUMS_B, OTC_F32, 0),
            0);
  const float want[] = {14, 12, 1, 32, 22.5f, 4};
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(c[i], want[i], 1e-6) << "C[" << i << "]";
  EXPECT_EQ(sums[0], 6.0f);
  EXPECT_EQ(sums[1], 3.5f);
  EXPECT_EQ(sums[2], 1.0f) << "not summed in row order";
}

// The sums of A (stored K x M, trans_a 1: a weight gradient dY^T X, dY the
// summed [tokens, out]) beside a bf16 product that adds into C (beta 1),
// f32 sums added to their old values.
//   A stored = | 1 2 |   op(A) = | 1 3 5 |   B = | 1 0 |   C = | 1 1 |
//              | 3 4 |           | 2 4 6 |       | 0 1 |       | 1 1 |
//              | 5 6 |                           | 1 1 |
// op(A) B = | 1+5  3+5 | = | 6  8 |, plus C: | 7  9 |.
//           | 2+6  4+6 |   | 8 10 |          | 9 11 |
// Column sums of A: 1+3+5 = 9, 2+4+6 = 12; old sums (0.5, -2): (9.5, 10).
TEST(GemmSumsCpu, SumsOfAAccumulatedBesideABf16Product) {
  const std::vector<uint16_t> a = bf16s({1, 2, 3, 4, 5, 6});
  const std::vector<uint16_t> b = bf16s({1, 0, 0, 1, 1, 1});
  std::vector<uint16_t> c = bf16s({1, 1, 1, 1});
  std::vector<float> sums = {0.5f, -2.0f};
  ASSERT_EQ(gemmSums(plain(1, 0, 2, 2, 3, 1.0f, OTC_BF16, OTC_BF16), a.data(),
                     b.data(), c.data(), sums.data(), OTCRT_GEMM_SUMS_A,
                     OTC_F32, 1),
            0);
  const float want[] = {7, 9, 9, 11};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(widen(c[i]), want[i]) << "C[" << i << "]";
  EXPECT_EQ(sums[0], 9.5f);
  EXPECT_EQ(sums[1], 10.0f);
}

// bf16 sums of f32 operands, each sum formed in f32 and rounded once (to
// nearest, ties to even). B's columns (K = 3):
//   (1, 2^-8, 2^-8):     1 + 2^-7 exactly, a bf16 (0x3F81); rounding each
//                        addition to bf16 would give 1 (two ties to even);
//   (1, 2^-8, 0):        1 + 2^-8, the tie of 1 (0x3F80, even) and
//                        1 + 2^-7 (0x3F81): 0x3F80;
//   (1 + 2^-7, 2^-8, 0): 1 + 3 2^-8, the tie of 0x3F81 and 0x3F82 (even):
//                        0x3F82.
// A = (1, 0, 0), so C = B's first row: (1, 1, 1 + 2^-7).
TEST(GemmSumsCpu, Bf16SumsRoundOnce) {
  const float p7 = std::ldexp(1.0f, -7), p8 = std::ldexp(1.0f, -8);
  const std::vector<float> a = {1, 0, 0};
  const std::vector<float> b = {1, 1, 1 + p7, p8, p8, p8, p8, 0, 0};
  std::vector<float> c(3, kNaN);
  std::vector<uint16_t> sums(3, 0xFFFF);
  ASSERT_EQ(gemmSums(plain(0, 0, 1, 3, 3, 0.0f), a.data(), b.data(), c.data(),
                     sums.data(), OTCRT_GEMM_SUMS_B, OTC_BF16, 0),
            0);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 1.0f);
  EXPECT_EQ(c[2], 1 + p7);
  EXPECT_EQ(sums[0], 0x3F81) << widen(sums[0]);
  EXPECT_EQ(sums[1], 0x3F80) << widen(sums[1]);
  EXPECT_EQ(sums[2], 0x3F82) << widen(sums[2]);
}

// bf16 sums added to their old bf16 values, rounded once. A stored K x M
// (K = 2, M = 3), B = (1, 1)^T, so C = the column sums too (bf16, exact):
//   A stored = | 2^-8  0.5   1   |   sums: 3 2^-9, 0.75, 1.5
//              | 2^-9  0.25  0.5 |
// Old sums (1, -2, 256):
//   1 + 3 2^-9 = 1.005859375, between 1 and 1 + 2^-7 = 1.0078125 and
//     nearer the latter: 0x3F81;
//   -2 + 0.75 = -1.25: 0xBFA0;
//   256 + 1.5 = 257.5, between 256 and 258 (bf16's step there is 2),
//     nearer 258: 0x4381.
TEST(GemmSumsCpu, Bf16SumsAccumulate) {
  const float p8 = std::ldexp(1.0f, -8), p9 = std::ldexp(1.0f, -9);
  const std::vector<uint16_t> a = bf16s({p8, 0.5f, 1, p9, 0.25f, 0.5f});
  const std::vector<uint16_t> b = bf16s({1, 1});
  std::vector<uint16_t> c(3, 0xFFFF), sums = bf16s({1, -2, 256});
  ASSERT_EQ(gemmSums(plain(1, 0, 3, 1, 2, 0.0f, OTC_BF16, OTC_BF16), a.data(),
                     b.data(), c.data(), sums.data(), OTCRT_GEMM_SUMS_A,
                     OTC_BF16, 1),
            0);
  EXPECT_EQ(widen(c[0]), 3 * p9);
  EXPECT_EQ(widen(c[1]), 0.75f);
  EXPECT_EQ(widen(c[2]), 1.5f);
  EXPECT_EQ(sums[0], 0x3F81) << widen(sums[0]);
  EXPECT_EQ(sums[1], 0xBFA0) << widen(sums[1]);
  EXPECT_EQ(sums[2], 0x4381) << widen(sums[2]);
}

// More columns than one block of the host's column sums (256): A stored
// 64 x 300, A[k][i] = (k mod 4) - 1.5 + i / 4. Over k, the first term sums
// to 16 (-1.5 - 0.5 + 0.5 + 1.5) = 0 and the second to 64 i / 4 = 16 i;
// every partial sum is a multiple of 1/4 below 2^13, exact in f32. B (stored
// N x K, trans_b 1) all ones: C[i][j] = 16 i too. Old sums -i: 15 i.
TEST(GemmSumsCpu, SumsOfManyColumns) {
  const int64_t K = 64, M = 300, N = 2;
  std::vector<float> a(K * M), b(N * K, 1.0f), c(M * N, kNaN), sums(M);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < M; ++i)
      a[k * M + i] = static_cast<float>(k % 4) - 1.5f + 0.25f * i;
  for (int64_t i = 0; i < M; ++i)
    sums[i] = -static_cast<float>(i);
  ASSERT_EQ(gemmSums(plain(1, 1, M, N, K, 0.0f), a.data(), b.data(), c.data(),
                     sums.data(), OTCRT_GEMM_SUMS_A, OTC_F32, 1),
            0);
  for (int64_t i = 0; i < M; ++i) {
    ASSERT_EQ(sums[i], 15.0f * i) << "column " << i;
    for (int64_t j = 0; j < N; ++j)
      ASSERT_EQ(c[i * N + j], 16.0f * i) << "C[" << i << "][" << j << "]";
  }
}

// Depth 0: C = beta C and the sums 0 (their old values with accumulate_sums,
// rounded once: unchanged); A and B may be NULL. An empty product (M or N
// 0): C may be NULL, and the sums are still formed. No column (W = 0): the
// sums may be NULL.
TEST(GemmSumsCpu, DepthZeroAndEmptyProducts) {
  std::vector<float> c = {2, 4, 6, 8, 10, 12}, sums(3, kNaN);
  ASSERT_EQ(gemmSums(plain(0, 0, 2, 3, 0, 0.5f), nullptr, nullptr, c.data(),
                     sums.data(), OTCRT_GEMM_SUMS_B, OTC_F32, 0),
            0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c[i], i + 1.0f);
  for (float s : sums)
    EXPECT_EQ(s, 0.0f);
  std::vector<uint16_t> old = bf16s({1, -2.5f, 3}), bfSums = old;
  ASSERT_EQ(gemmSums(plain(0, 0, 2, 3, 0, 1.0f), nullptr, nullptr, c.data(),
                     bfSums.data(), OTCRT_GEMM_SUMS_B, OTC_BF16, 1),
            0);
  EXPECT_EQ(bfSums, old);

  // M = 0, the sums of B = | 1 2 |: (4, 6); A and C NULL.
  //                        | 3 4 |
  const std::vector<float> square = {1, 2, 3, 4};
  std::vector<float> two(2, kNaN);
  ASSERT_EQ(gemmSums(plain(0, 0, 0, 2, 2, 0.0f), nullptr, square.data(),
                     nullptr, two.data(), OTCRT_GEMM_SUMS_B, OTC_F32, 0),
            0);
  EXPECT_EQ(two, (std::vector<float>{4, 6}));
  // N = 0, the sums of A stored as the same matrix: (4, 6); B and C NULL.
  two.assign(2, kNaN);
  ASSERT_EQ(gemmSums(plain(1, 0, 2, 0, 2, 0.0f), square.data(), nullptr,
                     nullptr, two.data(), OTCRT_GEMM_SUMS_A, OTC_F32, 0),
            0);
  EXPECT_EQ(two, (std::vector<float>{4, 6}));
  // M = 0 and the sums of A: nothing to sum, lda 1, sums NULL.
  EXPECT_EQ(gemmSums(plain(1, 0, 0, 2, 2, 0.0f), nullptr, square.data(),
                     nullptr, nullptr, OTCRT_GEMM_SUMS_A, OTC_F32, 0),
            0);
}

// Calls that break the rules: non-zero, one line on stderr naming the call,
// nothing written.
TEST(GemmSumsCpu, RefusesBadCalls) {
  const std::vector<float> a(9, 1.0f), b(9, 1.0f);
  std::vector<float> c(9, 7.0f), sums(3, 7.0f);
  const OtcrtGemm good = plain(1, 0, 2, 2, 2, 1.0f);
  struct Bad {
    const char *why;
    OtcrtGemm g;
    int32_t sumsOf = OTCRT_GEMM_SUMS_A, sumsType = OTC_F32, accumulate = 0;
    bool noSums = false, noA = false;
  };
  std::vector<Bad> bad;
  auto add = [&](const char *why, auto change) {
    Bad x{why, good};
    change(x);
    bad.push_back(x);
  };
  add("an epilogue", [](Bad &x) { x.g.epilogue = OTCRT_GEMM_BIAS; });
  add("batch 2", [](Bad &x) {
    x.g.batch = 2;
    x.g.stride_a = x.g.stride_b = 4;
    x.g.stride_c = 4;
  });
  add("batch 0", [](Bad &x) { x.g.batch = 0; });
  add("alpha 2", [](Bad &x) { x.g.alpha = 2.0f; });
  add("alpha -1", [](Bad &x) { x.g.alpha = -1.0f; });
  add("no sums", [](Bad &x) { x.noSums = true; });
  add("no A", [](Bad &x) { x.noA = true; });
  add("sums_of 2", [](Bad &x) { x.sumsOf = 2; });
  add("sums_of -1", [](Bad &x) { x.sumsOf = -1; });
  add("i64 sums", [](Bad &x) { x.sumsType = OTC_I64; });
  add("accumulate 2", [](Bad &x) { x.accumulate = 2; });
  add("sums of A stored M x K", [](Bad &x) {
    x.g.trans_a = 0;
    x.g.lda = 2;
  });
  add("sums of A, lda 3", [](Bad &x) { x.g.lda = 3; });
  add("sums of B stored N x K", [](Bad &x) {
    x.sumsOf = OTCRT_GEMM_SUMS_B;
    x.g.trans_b = 1;
  });
  add("sums of B, ldb 3", [](Bad &x) {
    x.sumsOf = OTCRT_GEMM_SUMS_B;
    x.g.ldb = 3;
  });
  add("negative K", [](Bad &x) { x.g.k = -1; });
  for (const Bad &x : bad) {
    testing::internal::CaptureStderr();
    int status = gemmSums(x.g, x.noA ? nullptr : a.data(), b.data(), c.data(),
                          x.noSums ? nullptr : sums.data(), x.sumsOf,
                          x.sumsType, x.accumulate);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(status, 0) << x.why;
    EXPECT_EQ(err.rfind("otcrt: gemm_sums: error: ", 0), 0u)
        << x.why << ": " << err;
    EXPECT_NE(err.find("K=" + std::to_string(x.g.k)), std::string::npos)
        << x.why << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << x.why;
  }
  testing::internal::CaptureStderr();
  EXPECT_NE(otcrt_gemm_sums(nullptr, a.data(), b.data(), c.data(), sums.data(),
                            OTCRT_GEMM_SUMS_A, OTC_F32, 0, nullptr),
            0);
  testing::internal::GetCapturedStderr();
  for (float x : c)
    ASSERT_EQ(x, 7.0f);
  for (float x : sums)
    ASSERT_EQ(x, 7.0f);
  // The good call itself runs: C = 7 + (1 + 1) = 9, the sums of A's two
  // columns 1 + 1 = 2 (the third element is not one of them).
  ASSERT_EQ(gemmSums(good, a.data(), b.data(), c.data(), sums.data(),
                     OTCRT_GEMM_SUMS_A, OTC_F32, 0),
            0);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c[i], 9.0f);
  EXPECT_EQ(sums, (std::vector<float>{2, 2, 7}));
}
