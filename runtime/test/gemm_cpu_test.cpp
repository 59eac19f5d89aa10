// Unit tests of the host otcrt_gemm against a naive double-precision
// reference written directly from the ABI definition: every transpose
// combination, padded leading dimensions, batches with distinct and
// broadcast (stride 0) operands, alpha/beta, and beta == 0 ignoring NaNs;
// BF16 operands and results, the epilogues (bias, addend, GELU and its
// gradient); and descriptors that break the ABI's rules, which must be
// refused before anything is written.
#include "otcrt/abi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

/// The descriptor of one call, in the order of the old positional
/// arguments: sizes, alpha, A's and B's row and batch strides, beta, C's,
/// the batch, the types and the epilogue.
OtcrtGemm desc(int transA, int transB, int64_t M, int64_t N, int64_t K,
               float alpha, int64_t lda, int64_t strideA, int64_t ldb,
               int64_t strideB, float beta, int64_t ldc, int64_t strideC,
               int64_t batch, int32_t abType = OTC_F32, int32_t cType = OTC_F32,
               int32_t epilogue = OTCRT_GEMM_NONE) {
  OtcrtGemm g;
  g.trans_a = transA;
  g.trans_b = transB;
  g.m = M;
  g.n = N;
  g.k = K;
  g.batch = batch;
  g.alpha = alpha;
  g.beta = beta;
  g.ab_type = abType;
  g.c_type = cType;
  g.epilogue_type = cType;
  g.epilogue = epilogue;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.stride_a = strideA;
  g.stride_b = strideB;
  g.stride_c = strideC;
  return g;
}

/// otcrt_gemm on host pointers.
int gemm(const OtcrtGemm &g, const void *a, const void *b, void *c,
         const void *bias = nullptr, const void *addend = nullptr,
         void *aux = nullptr) {
  return otcrt_gemm(&g, a, b, c, bias, addend, aux, nullptr);
}

struct Case {
  int transA, transB;
  int64_t M, N, K, batch;
  bool broadcastA, broadcastB;
  float alpha, beta;
  /// Entries and rows without padding between them (else a few elements).
  bool packed = false;
};

/// Element (r, c) of op(X_b) where X is stored row-major with row stride ld.
double opAt(const std::vector<float> &X, int64_t base, int trans, int64_t ld,
            int64_t r, int64_t c) {
  return trans ? X[base + c * ld + r] : X[base + r * ld + c];
}

void runCase(const Case &tc, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t aRows = tc.transA ? tc.K : tc.M, aCols = tc.transA ? tc.M : tc.K;
  const int64_t bRows = tc.transB ? tc.N : tc.K, bCols = tc.transB ? tc.K : tc.N;
  const int64_t pad = tc.packed ? 0 : 1;
  const int64_t lda = aCols + 3 * pad, ldb = bCols + pad, ldc = tc.N + 2 * pad;
  const int64_t sA = tc.broadcastA ? 0 : aRows * lda + 5 * pad;
  const int64_t sB = tc.broadcastB ? 0 : bRows * ldb + 7 * pad;
  const int64_t sC = tc.M * ldc + pad;
  std::vector<float> A(std::max<int64_t>(sA, aRows * lda) * tc.batch + 8);
  std::vector<float> B(std::max<int64_t>(sB, bRows * ldb) * tc.batch + 8);
  std::vector<float> C(sC * tc.batch + 8);
  for (auto &v : A) v = dist(rng);
  for (auto &v : B) v = dist(rng);
  for (auto &v : C) v = tc.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
  std::vector<float> C0 = C;

  ASSERT_EQ(gemm(desc(tc.transA, tc.transB, tc.M, tc.N, tc.K, tc.alpha, lda,
                      sA, ldb, sB, tc.beta, ldc, sC, tc.batch),
                 A.data(), B.data(), C.data()),
            0);

  std::vector<bool> touched(C.size(), false);
  for (int64_t b = 0; b < tc.batch; ++b)
    for (int64_t i = 0; i < tc.M; ++i)
      for (int64_t j = 0; j < tc.N; ++j) {
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < tc.K; ++k) {
          double p = opAt(A, b * sA, tc.transA, lda, i, k) *
                     opAt(B, b * sB, tc.transB, ldb, k, j);
          acc += p;
          mag += std::fabs(p);
        }
        int64_t idx = b * sC + i * ldc + j;
        double want = tc.alpha * acc + (tc.beta == 0 ? 0.0 : tc.beta * double(C0[idx]));
        double tol = 1e-5 * (std::fabs(tc.alpha) * mag + std::fabs(tc.beta) + 1);
        ASSERT_NEAR(C[idx], want, tol)
            << "b=" << b << " i=" << i << " j=" << j << " M=" << tc.M
            << " N=" << tc.N << " K=" << tc.K << " tA=" << tc.transA
            << " tB=" << tc.transB;
        touched[idx] = true;
      }
  // Padding between rows and batch entries must be left alone.
  for (size_t idx = 0; idx < C.size(); ++idx)
    if (!touched[idx]) {
      if (std::isnan(C0[idx]))
        ASSERT_TRUE(std::isnan(C[idx])) << "padding written at " << idx;
      else
        ASSERT_EQ(C[idx], C0[idx]) << "padding written at " << idx;
    }
}

} // namespace

TEST(GemmCpu, AllTransposeCombinations) {
  std::mt19937 rng(1);
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      runCase({tA, tB, 7, 5, 3, 1, false, false, 1.0f, 0.0f}, rng);
}

TEST(GemmCpu, RandomShapes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> dim(1, 40);
  const float alphas[] = {1.0f, -0.5f, 2.0f};
  const float betas[] = {0.0f, 1.0f, 0.25f};
  for (int iter = 0; iter < 60; ++iter) {
    Case tc{int(rng() % 2), int(rng() % 2), dim(rng), dim(rng), dim(rng),
            1 + int(rng() % 3), rng() % 3 == 0, rng() % 3 == 0,
            alphas[rng() % 3], betas[rng() % 3]};
    runCase(tc, rng);
  }
}

TEST(GemmCpu, LargeBlockedShapes) {
  std::mt19937 rng(3);
  // Crosses the row, column and depth block sizes.
  runCase({0, 0, 37, 600, 300, 1, false, false, 1.0f, 0.0f}, rng);
  runCase({1, 1, 40, 530, 140, 2, false, true, 0.5f, 1.0f}, rng);
  runCase({0, 1, 65, 70, 260, 3, true, false, 1.0f, 0.5f}, rng);
}

TEST(GemmCpu, StackedEntriesSharingB) {
  // [batch, M, K] activations against one weight (B broadcast), entries
  // packed: with OpenBLAS one product of batch x M rows; the same values
  // as entry by entry.
  std::mt19937 rng(11);
  for (int tB = 0; tB < 2; ++tB)
    for (float beta : {0.0f, 0.5f})
      runCase({0, tB, 33, 20, 17, 3, false, true, 1.0f, beta, true}, rng);
}

TEST(GemmCpu, SingleRow) {
  // One row (a decode step's projection; with OpenBLAS a cblas_sgemv):
  // every transpose, alpha and beta (beta 0 never reads C's NaNs), padded
  // leading dimensions, against the double-precision sums.
  std::mt19937 rng(13);
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      for (float beta : {0.0f, 1.0f, 0.25f}) {
        runCase({tA, tB, 1, 300, 70, 1, false, false, -0.5f, beta}, rng);
        runCase({tA, tB, 1, 9, 513, 1, false, false, 1.0f, beta, true}, rng);
      }
}

TEST(GemmCpu, EmptyDepthScalesC) {
  std::mt19937 rng(5);
  runCase({0, 0, 4, 6, 0, 2, false, false, 1.0f, 0.5f}, rng);
  runCase({1, 1, 3, 2, 0, 1, false, false, 1.0f, 0.0f}, rng);
}

TEST(GemmCpu, BroadcastCAccumulatesInOrder) {
  // strideC == 0: each batch entry applies C = alpha*A_b*B_b + beta*C in turn.
  float A[2] = {2.0f, 3.0f}; // batch of two 1x1 matrices
  float B[1] = {10.0f};      // broadcast
  float C[1] = {1.0f};
  ASSERT_EQ(gemm(desc(0, 0, 1, 1, 1, 1.0f, 1, 1, 1, 0, 1.0f, 1, 0, 2), A, B, C),
            0);
  EXPECT_FLOAT_EQ(C[0], 1.0f + 20.0f + 30.0f);
}

/// BF16 operands: the product of the widened values, bit for bit (the same
/// FP32 accumulation), with transposes, a broadcast B and a batch.
TEST(GemmCpu, Bf16OperandsEqualWidenedProduct) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2, 2);
  const int64_t M = 5, N = 7, K = 9, batch = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<uint16_t> a(batch * M * K), b(K * N);
      std::vector<float> af(a.size()), bf(b.size());
      auto fill = [&](std::vector<uint16_t> &h, std::vector<float> &f) {
        for (size_t i = 0; i < h.size(); ++i) {
          float x = dist(rng);
          uint32_t bits;
          std::memcpy(&bits, &x, sizeof(bits));
          h[i] = static_cast<uint16_t>(bits >> 16);
          bits = static_cast<uint32_t>(h[i]) << 16;
          std::memcpy(&f[i], &bits, sizeof(float));
        }
      };
      fill(a, af);
      fill(b, bf);
      std::vector<float> c(batch * M * N, 1.0f), cf(c);
      int64_t lda = ta ? M : K, ldb = tb ? K : N;
      ASSERT_EQ(gemm(desc(ta, tb, M, N, K, 0.5f, lda, M * K, ldb, 0, 2.0f, N,
                          M * N, batch, OTC_BF16),
                     a.data(), b.data(), c.data()),
                0);
      ASSERT_EQ(gemm(desc(ta, tb, M, N, K, 0.5f, lda, M * K, ldb, 0, 2.0f, N,
                          M * N, batch),
                     af.data(), bf.data(), cf.data()),
                0);
      EXPECT_EQ(c, cf) << "transA " << ta << " transB " << tb;
      // And against a plain double product of the widened values.
      for (int64_t e = 0; e < batch; ++e)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double ref = 2.0;
            for (int64_t k = 0; k < K; ++k) {
              double x = af[e * M * K + (ta ? k * M + i : i * K + k)];
              double y = bf[tb ? j * K + k : k * N + j];
              ref += 0.5 * x * y;
            }
            EXPECT_NEAR(c[(e * M + i) * N + j], ref, 1e-4);
          }
    }
}

/// A BF16 C: the FP32 result of the BF16 product rounded to nearest even,
/// once, element by element.
TEST(GemmCpu, Bf16ResultIsTheRoundedFp32Result) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-3, 3);
  const int64_t M = 6, N = 5, K = 33;
  std::vector<uint16_t> a(M * K), b(N * K);
  for (auto *v : {&a, &b})
    for (uint16_t &h : *v) {
      float x = dist(rng);
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof(bits));
      h = static_cast<uint16_t>(bits >> 16);
    }
  std::vector<float> f(M * N);
  std::vector<uint16_t> c(M * N, 0);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, 0, K, 0, 0.0f, N, 0, 1, OTC_BF16),
                 a.data(), b.data(), f.data()),
            0);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, 0, K, 0, 0.0f, N, 0, 1, OTC_BF16,
                      OTC_BF16),
                 a.data(), b.data(), c.data()),
            0);
  for (int64_t i = 0; i < M * N; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f[i], sizeof(bits));
    // Round to nearest even by hand: add half an ulp of BF16 and the tie bit.
    uint32_t lsb = (bits >> 16) & 1u;
    uint16_t want = static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
    EXPECT_EQ(c[i], want) << "element " << i << " of " << f[i];
  }
}

/// A float's upper 16 bits (BF16 by truncation) and a BF16 widened exactly.
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}
float widen(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// The bias forms: against a naive double product plus bias (f32, batched
// with transposed B), and in BF16 against the FP32 product plus the widened
// bias rounded once by hand (each output rounds once, after the bias).
TEST(GemmCpu, BiasEpilogue) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t M = 3, N = 5, K = 4, batch = 2;
  std::vector<float> a(batch * M * K), b(N * K), bias(N), c(batch * M * N);
  for (auto *v : {&a, &b, &bias})
    for (float &x : *v)
      x = dist(rng);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N, M * N,
                      batch, OTC_F32, OTC_F32, OTCRT_GEMM_BIAS),
                 a.data(), b.data(), c.data(), bias.data()),
            0);
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = bias[j];
        for (int64_t k = 0; k < K; ++k)
          want += double(a[e * M * K + i * K + k]) * b[j * K + k];
        EXPECT_NEAR(c[e * M * N + i * N + j], want, 1e-5)
            << "entry " << e << " (" << i << ", " << j << ")";
      }

  std::vector<uint16_t> ah(M * K), bh(N * K), biash(N), ch(M * N, 0);
  for (int64_t i = 0; i < M * K; ++i)
    ah[i] = toBf16(a[i]);
  for (int64_t i = 0; i < N * K; ++i)
    bh[i] = toBf16(b[i]);
  for (int64_t j = 0; j < N; ++j)
    biash[j] = toBf16(bias[j]);
  std::vector<float> f(M * N);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, 0, K, 0, 0.0f, N, 0, 1, OTC_BF16),
                 ah.data(), bh.data(), f.data()),
            0);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, 0, K, 0, 0.0f, N, 0, 1, OTC_BF16,
                      OTC_BF16, OTCRT_GEMM_BIAS),
                 ah.data(), bh.data(), ch.data(), biash.data()),
            0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float sum = f[i * N + j] + widen(biash[j]);
      uint32_t bits;
      std::memcpy(&bits, &sum, sizeof(bits));
      uint16_t want = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
      EXPECT_EQ(ch[i * N + j], want) << "(" << i << ", " << j << ")";
    }
}

// GELU's tanh form in double, and its derivative by central differences:
// the oracle of the GELU epilogues, written from the formula, not from the
// library's code.
double geluRef(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double geluSlopeRef(double x) {
  const double h = 1e-4;
  return (geluRef(x + h) - geluRef(x - h)) / (2 * h);
}

// The GELU epilogues in FP32, batched with a transposed B: forward with and
// without a bias (C = gelu(v), aux = v) and backward (C = v gelu'(aux)),
// against the double product, and in BF16 within one rounding of it.
TEST(GemmCpu, GeluEpilogues) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
  const int64_t M = 3, N = 16, K = 5, batch = 2;
  std::vector<float> a(batch * M * K), b(N * K), bias(N), g(batch * M * N);
  for (auto *v : {&a, &b, &bias, &g})
    for (float &x : *v)
      x = dist(rng);
  auto product = [&](int64_t e, int64_t i, int64_t j) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k)
      sum += double(a[e * M * K + i * K + k]) * b[j * K + k];
    return sum;
  };
  for (bool withBias : {true, false}) {
    std::vector<float> c(batch * M * N, NAN), aux(batch * M * N, NAN);
    ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N, M * N,
                        batch, OTC_F32, OTC_F32, OTCRT_GEMM_GELU),
                   a.data(), b.data(), c.data(),
                   withBias ? bias.data() : nullptr, nullptr, aux.data()),
              0);
    for (int64_t e = 0; e < batch; ++e)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int64_t at = e * M * N + i * N + j;
          double v = product(e, i, j) + (withBias ? bias[j] : 0.0);
          EXPECT_NEAR(aux[at], v, 1e-5) << "aux " << at;
          EXPECT_NEAR(c[at], geluRef(v), 1e-5) << "gelu " << at;
        }
  }
  std::vector<float> dx(batch * M * N, NAN);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N, M * N,
                      batch, OTC_F32, OTC_F32, OTCRT_GEMM_DGELU),
                 a.data(), b.data(), dx.data(), nullptr, nullptr, g.data()),
            0);
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = e * M * N + i * N + j;
        EXPECT_NEAR(dx[at], product(e, i, j) * geluSlopeRef(g[at]), 1e-5)
            << "dgelu " << at;
      }

  // BF16: the operands are exact in BF16 after truncation; every output is
  // within one BF16 rounding (2^-8 relative) of the double result.
  std::vector<uint16_t> ah(a.size()), bh(b.size()), biash(N), gh(g.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = widen(ah[i] = toBf16(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = widen(bh[i] = toBf16(b[i]));
  for (int64_t j = 0; j < N; ++j)
    bias[j] = widen(biash[j] = toBf16(bias[j]));
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = widen(gh[i] = toBf16(g[i]));
  std::vector<uint16_t> ch(g.size()), auxh(g.size()), dxh(g.size());
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N, M * N,
                      batch, OTC_BF16, OTC_BF16, OTCRT_GEMM_GELU),
                 ah.data(), bh.data(), ch.data(), biash.data(), nullptr,
                 auxh.data()),
            0);
  ASSERT_EQ(gemm(desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N, M * N,
                      batch, OTC_BF16, OTC_BF16, OTCRT_GEMM_DGELU),
                 ah.data(), bh.data(), dxh.data(), nullptr, nullptr,
                 gh.data()),
            0);
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = e * M * N + i * N + j;
        double v = product(e, i, j) + bias[j];
        double slope = product(e, i, j) * geluSlopeRef(g[at]);
        EXPECT_NEAR(widen(auxh[at]), v, std::abs(v) / 256 + 1e-6) << at;
        EXPECT_NEAR(widen(ch[at]), geluRef(v),
                    std::abs(geluRef(v)) / 256 + 1e-6)
            << at;
        EXPECT_NEAR(widen(dxh[at]), slope, std::abs(slope) / 256 + 1e-6)
            << at;
      }
}

// The addend form: C = alpha op(A) op(B) + beta addend + bias against the
// double product (FP32, batched, transposed A, with and without a bias),
// and in BF16 within one rounding of it; the addend is left as it was.
// Tests the epilogues of a float product of one entry of 300 rows (a
// product and epilogue split by rows must still cover them all), A stored
// both ways: GELU with a bias (C and aux), its gradient, and an addend with
// a bias, each element against the double reference.
TEST(GemmCpu, EpiloguesOfManyRows) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t M = 300, N = 24, K = 9;
  std::vector<float> a(M * K), b(K * N), bias(N), r(M * N), x(M * N);
  for (auto *v : {&a, &b, &bias, &r, &x})
    for (float &e : *v)
      e = dist(rng);
  for (int ta = 0; ta < 2; ++ta) {
    auto product = [&](int64_t i, int64_t j) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += double(ta ? a[k * M + i] : a[i * K + k]) * b[k * N + j];
      return sum;
    };
    const int64_t lda = ta ? M : K;
    std::vector<float> c(M * N, NAN), aux(M * N, NAN);
    ASSERT_EQ(gemm(desc(ta, 0, M, N, K, 1.0f, lda, 0, N, 0, 0.0f, N, 0, 1,
                        OTC_F32, OTC_F32, OTCRT_GEMM_GELU),
                   a.data(), b.data(), c.data(), bias.data(), nullptr,
                   aux.data()),
              0);
    std::vector<float> dgelu(M * N, NAN), added(M * N, NAN);
    ASSERT_EQ(gemm(desc(ta, 0, M, N, K, 1.0f, lda, 0, N, 0, 0.0f, N, 0, 1,
                        OTC_F32, OTC_F32, OTCRT_GEMM_DGELU),
                   a.data(), b.data(), dgelu.data(), nullptr, nullptr,
                   x.data()),
              0);
    ASSERT_EQ(gemm(desc(ta, 0, M, N, K, 1.0f, lda, 0, N, 0, 0.5f, N, 0, 1,
                        OTC_F32, OTC_F32, OTCRT_GEMM_ADD),
                   a.data(), b.data(), added.data(), bias.data(), r.data()),
              0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = i * N + j;
        double v = product(i, j);
        ASSERT_NEAR(aux[at], v + bias[j], 1e-5) << "aux " << at << " ta " << ta;
        ASSERT_NEAR(c[at], geluRef(v + bias[j]), 1e-5) << "gelu " << at;
        ASSERT_NEAR(dgelu[at], v * geluSlopeRef(x[at]), 1e-5) << "dgelu " << at;
        ASSERT_NEAR(added[at], v + 0.5 * r[at] + bias[j], 1e-5) << "add " << at;
      }
  }
}

TEST(GemmCpu, AddendEpilogue) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t M = 3, N = 6, K = 4, batch = 2;
  std::vector<float> a(batch * K * M), b(K * N), bias(N), r(batch * M * N);
  for (auto *v : {&a, &b, &bias, &r})
    for (float &x : *v)
      x = widen(toBf16(dist(rng))); // exact in BF16 too
  auto want = [&](int64_t e, int64_t i, int64_t j, bool withBias) {
    double sum = 0.5 * r[e * M * N + i * N + j] + (withBias ? bias[j] : 0.0);
    for (int64_t k = 0; k < K; ++k)
      sum += 2.0 * a[e * K * M + k * M + i] * b[k * N + j];
    return sum;
  };
  const std::vector<float> before = r;
  for (bool withBias : {true, false}) {
    std::vector<float> c(batch * M * N, NAN);
    ASSERT_EQ(gemm(desc(1, 0, M, N, K, 2.0f, M, K * M, N, 0, 0.5f, N, M * N,
                        batch, OTC_F32, OTC_F32, OTCRT_GEMM_ADD),
                   a.data(), b.data(), c.data(),
                   withBias ? bias.data() : nullptr, r.data()),
              0);
    for (int64_t e = 0; e < batch; ++e)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          EXPECT_NEAR(c[e * M * N + i * N + j], want(e, i, j, withBias), 1e-5)
              << "entry " << e << " (" << i << ", " << j << ")";
  }
  EXPECT_EQ(r, before);

  std::vector<uint16_t> ah(a.size()), bh(b.size()), biash(N), rh(r.size()),
      ch(r.size());
  for (size_t i = 0; i < a.size(); ++i)
    ah[i] = toBf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    bh[i] = toBf16(b[i]);
  for (int64_t j = 0; j < N; ++j)
    biash[j] = toBf16(bias[j]);
  for (size_t i = 0; i < r.size(); ++i)
    rh[i] = toBf16(r[i]);
  ASSERT_EQ(gemm(desc(1, 0, M, N, K, 2.0f, M, K * M, N, 0, 0.5f, N, M * N,
                      batch, OTC_BF16, OTC_BF16, OTCRT_GEMM_ADD),
                 ah.data(), bh.data(), ch.data(), biash.data(), rh.data()),
            0);
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double w = want(e, i, j, true);
        EXPECT_NEAR(widen(ch[e * M * N + i * N + j]), w, std::abs(w) / 256 + 1e-6)
            << "entry " << e << " (" << i << ", " << j << ")";
      }
}

// Tests that a descriptor breaking a rule of otcrt/abi.h is refused with a
// non-zero status before anything is written, with one line on stderr that
// names the shape; and that an empty product is a success that writes
// nothing.
TEST(GemmCpu, RefusesBadDescriptors) {
  const int64_t M = 3, N = 16, K = 5, batch = 2;
  std::vector<float> a(batch * M * K, 1.0f), b(N * K, 1.0f), bias(N, 1.0f),
      addend(batch * M * N, 1.0f);
  const OtcrtGemm good = desc(0, 1, M, N, K, 1.0f, K, M * K, K, 0, 0.0f, N,
                              M * N, batch, OTC_F32, OTC_F32, OTCRT_GEMM_GELU);
  {
    std::vector<float> c(batch * M * N), aux(c.size());
    ASSERT_EQ(gemm(good, a.data(), b.data(), c.data(), bias.data(), nullptr,
                   aux.data()),
              0);
  }
  struct Bad {
    const char *what;
    void (*change)(OtcrtGemm &);
  };
  const Bad bad[] = {
      {"negative M", [](OtcrtGemm &g) { g.m = -1; }},
      {"negative K", [](OtcrtGemm &g) { g.k = -2; }},
      {"negative batch", [](OtcrtGemm &g) { g.batch = -1; }},
      {"batch above INT32_MAX", [](OtcrtGemm &g) { g.batch = 1ll << 31; }},
      {"transpose flag 2", [](OtcrtGemm &g) { g.trans_a = 2; }},
      {"lda below K", [](OtcrtGemm &g) { g.lda = g.k - 1; }},
      {"ldb below K", [](OtcrtGemm &g) { g.ldb = g.k - 1; }},
      {"ldc below N", [](OtcrtGemm &g) { g.ldc = g.n - 1; }},
      {"negative stride", [](OtcrtGemm &g) { g.stride_a = -1; }},
      {"overlapping C entries", [](OtcrtGemm &g) { g.stride_c = g.n; }},
      {"integer operands", [](OtcrtGemm &g) { g.ab_type = OTC_I64; }},
      {"bf16 C of f32 operands",
       [](OtcrtGemm &g) { g.c_type = g.epilogue_type = OTC_BF16; }},
      {"bias type not C's", [](OtcrtGemm &g) { g.epilogue_type = OTC_BF16; }},
      {"epilogue of a bf16 product into f32",
       [](OtcrtGemm &g) { g.ab_type = OTC_BF16; }},
      {"unknown epilogue", [](OtcrtGemm &g) { g.epilogue = 7; }},
      {"GELU with beta 1", [](OtcrtGemm &g) { g.beta = 1.0f; }},
      {"epilogue into one shared C", [](OtcrtGemm &g) { g.stride_c = 0; }},
  };
  for (const Bad &t : bad) {
    OtcrtGemm g = good;
    t.change(g);
    std::vector<float> c(batch * M * N, 7.0f), aux(c.size(), 7.0f);
    testing::internal::CaptureStderr();
    int status =
        gemm(g, a.data(), b.data(), c.data(), bias.data(), nullptr, aux.data());
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(status, 0) << t.what;
    EXPECT_NE(err.find("otcrt: gemm: error: "), std::string::npos) << err;
    EXPECT_NE(err.find("batch="), std::string::npos) << err;
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_TRUE(c[i] == 7.0f && aux[i] == 7.0f)
          << t.what << ": element " << i << " written";
  }

  // Pointers an epilogue needs, or does not take.
  std::vector<float> c(batch * M * N, 7.0f), aux(c.size(), 7.0f);
  OtcrtGemm plain = good;
  plain.epilogue = OTCRT_GEMM_NONE;
  OtcrtGemm withBias = good;
  withBias.epilogue = OTCRT_GEMM_BIAS;
  OtcrtGemm add = good;
  add.epilogue = OTCRT_GEMM_ADD;
  OtcrtGemm dgelu = good;
  dgelu.epilogue = OTCRT_GEMM_DGELU;
  testing::internal::CaptureStderr();
  EXPECT_NE(
      gemm(good, a.data(), b.data(), nullptr, bias.data(), nullptr, aux.data()),
      0)
      << "no C";
  EXPECT_NE(
      gemm(good, nullptr, b.data(), c.data(), bias.data(), nullptr, aux.data()),
      0)
      << "no A";
  EXPECT_NE(gemm(good, a.data(), b.data(), c.data(), bias.data()), 0)
      << "GELU without aux";
  EXPECT_NE(
      gemm(good, a.data(), b.data(), c.data(), bias.data(), nullptr, c.data()),
      0)
      << "GELU's aux is C";
  EXPECT_NE(gemm(plain, a.data(), b.data(), c.data(), bias.data()), 0)
      << "a bias without an epilogue";
  EXPECT_NE(
      gemm(plain, a.data(), b.data(), c.data(), nullptr, nullptr, aux.data()),
      0)
      << "aux without an epilogue";
  EXPECT_NE(gemm(withBias, a.data(), b.data(), c.data()), 0)
      << "bias epilogue without a bias";
  EXPECT_NE(gemm(add, a.data(), b.data(), c.data(), bias.data()), 0)
      << "add without an addend";
  EXPECT_NE(gemm(plain, a.data(), b.data(), c.data(), nullptr, addend.data()),
            0)
      << "an addend without add";
  EXPECT_NE(gemm(dgelu, a.data(), b.data(), c.data(), bias.data(), nullptr,
                 aux.data()),
            0)
      << "dgelu with a bias";
  EXPECT_NE(otcrt_gemm(nullptr, a.data(), b.data(), c.data(), nullptr, nullptr,
                       nullptr, nullptr),
            0)
      << "no descriptor";
  testing::internal::GetCapturedStderr();
  for (size_t i = 0; i < c.size(); ++i)
    ASSERT_TRUE(c[i] == 7.0f && aux[i] == 7.0f) << "element " << i;

  // Empty products: nothing to do, nothing written, NULL pointers allowed.
  OtcrtGemm empty = plain;
  empty.m = 0;
  EXPECT_EQ(gemm(empty, nullptr, nullptr, nullptr), 0);
  empty = plain;
  empty.batch = 0;
  EXPECT_EQ(gemm(empty, a.data(), b.data(), c.data()), 0);
  for (float x : c)
    ASSERT_EQ(x, 7.0f);
}

// Tests the epilogues of a product of depth 0 (v = 0): C = beta addend +
// bias, and gelu of the bias with the bias as the pre-activation.
TEST(GemmCpu, DepthZeroEpilogues) {
  const int64_t M = 2, N = 8;
  std::vector<float> bias(N), addend(M * N), c(M * N, NAN), aux(M * N, NAN);
  for (int64_t j = 0; j < N; ++j)
    bias[j] = 0.25f * static_cast<float>(j) - 1.0f;
  for (int64_t i = 0; i < M * N; ++i)
    addend[i] = static_cast<float>(i);
  ASSERT_EQ(gemm(desc(0, 0, M, N, 0, 1.0f, 1, 0, N, 0, 0.5f, N, 0, 1, OTC_F32,
                      OTC_F32, OTCRT_GEMM_ADD),
                 nullptr, nullptr, c.data(), bias.data(), addend.data()),
            0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      EXPECT_EQ(c[i * N + j], 0.5f * addend[i * N + j] + bias[j]);
  ASSERT_EQ(gemm(desc(0, 0, M, N, 0, 1.0f, 1, 0, N, 0, 0.0f, N, 0, 1, OTC_F32,
                      OTC_F32, OTCRT_GEMM_GELU),
                 nullptr, nullptr, c.data(), bias.data(), nullptr, aux.data()),
            0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      EXPECT_EQ(aux[i * N + j], bias[j]);
      EXPECT_NEAR(c[i * N + j], geluRef(bias[j]), 1e-6);
    }
  // BF16 (values exact in BF16): the same, each rounded once.
  std::vector<uint16_t> biash(N), addendh(M * N), ch(M * N), auxh(M * N);
  for (int64_t j = 0; j < N; ++j)
    biash[j] = toBf16(bias[j]);
  for (int64_t i = 0; i < M * N; ++i)
    addendh[i] = toBf16(addend[i]);
  ASSERT_EQ(gemm(desc(0, 0, M, N, 0, 1.0f, 1, 0, N, 0, 0.5f, N, 0, 1, OTC_BF16,
                      OTC_BF16, OTCRT_GEMM_ADD),
                 nullptr, nullptr, ch.data(), biash.data(), addendh.data()),
            0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      EXPECT_EQ(widen(ch[i * N + j]), 0.5f * addend[i * N + j] + bias[j]);
  ASSERT_EQ(gemm(desc(0, 0, M, N, 0, 1.0f, 1, 0, N, 0, 0.0f, N, 0, 1, OTC_BF16,
                      OTC_BF16, OTCRT_GEMM_GELU),
                 nullptr, nullptr, ch.data(), biash.data(), nullptr,
                 auxh.data()),
            0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      EXPECT_EQ(auxh[i * N + j], biash[j]);
      EXPECT_NEAR(widen(ch[i * N + j]), geluRef(bias[j]),
                  std::abs(geluRef(bias[j])) / 256 + 1e-6);
    }
}
