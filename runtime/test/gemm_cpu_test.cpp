// Unit tests of the host otcrt_gemm_f32 against a naive double-precision
// reference written directly from the ABI definition: every transpose
// combination, padded leading dimensions, batches with distinct and
// broadcast (stride 0) operands, alpha/beta, and beta == 0 ignoring NaNs.
#include "otcrt/abi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

struct Case {
  int transA, transB;
  int64_t M, N, K, batch;
  bool broadcastA, broadcastB;
  float alpha, beta;
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
  const int64_t lda = aCols + 3, ldb = bCols + 1, ldc = tc.N + 2;
  const int64_t sA = tc.broadcastA ? 0 : aRows * lda + 5;
  const int64_t sB = tc.broadcastB ? 0 : bRows * ldb + 7;
  const int64_t sC = tc.M * ldc + 1;
  std::vector<float> A(std::max<int64_t>(sA, aRows * lda) * tc.batch + 8);
  std::vector<float> B(std::max<int64_t>(sB, bRows * ldb) * tc.batch + 8);
  std::vector<float> C(sC * tc.batch + 8);
  for (auto &v : A) v = dist(rng);
  for (auto &v : B) v = dist(rng);
  for (auto &v : C) v = tc.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
  std::vector<float> C0 = C;

  otcrt_gemm_f32(tc.transA, tc.transB, tc.M, tc.N, tc.K, tc.alpha, A.data(),
                 lda, sA, B.data(), ldb, sB, tc.beta, C.data(), ldc, sC,
                 tc.batch);

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
  otcrt_gemm_f32(0, 0, 1, 1, 1, 1.0f, A, 1, 1, B, 1, 0, 1.0f, C, 1, 0, 2);
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
      otcrt_gemm_bf16(ta, tb, M, N, K, 0.5f, a.data(), lda, M * K, b.data(),
                      ldb, 0, 2.0f, c.data(), N, M * N, batch);
      otcrt_gemm_f32(ta, tb, M, N, K, 0.5f, af.data(), lda, M * K, bf.data(),
                     ldb, 0, 2.0f, cf.data(), N, M * N, batch);
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

/// A BF16 C: the FP32 result of otcrt_gemm_bf16 rounded to nearest even,
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
  otcrt_gemm_bf16(0, 1, M, N, K, 1.0f, a.data(), K, 0, b.data(), K, 0, 0.0f,
                  f.data(), N, 0, 1);
  otcrt_gemm_bf16_bf16(0, 1, M, N, K, 1.0f, a.data(), K, 0, b.data(), K, 0,
                       0.0f, c.data(), N, 0, 1);
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
  otcrt_gemm_bias_f32(0, 1, M, N, K, 1.0f, a.data(), K, M * K, b.data(), K, 0,
                      0.0f, c.data(), N, M * N, batch, bias.data());
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
  otcrt_gemm_bf16(0, 1, M, N, K, 1.0f, ah.data(), K, 0, bh.data(), K, 0, 0.0f,
                  f.data(), N, 0, 1);
  otcrt_gemm_bias_bf16_bf16(0, 1, M, N, K, 1.0f, ah.data(), K, 0, bh.data(), K,
                            0, 0.0f, ch.data(), N, 0, 1, biash.data());
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
    otcrt_gemm_gelu_f32(0, 1, M, N, K, 1.0f, a.data(), K, M * K, b.data(), K,
                        0, 0.0f, c.data(), N, M * N, batch,
                        withBias ? bias.data() : nullptr, aux.data());
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
  otcrt_gemm_dgelu_f32(0, 1, M, N, K, 1.0f, a.data(), K, M * K, b.data(), K, 0,
                       0.0f, dx.data(), N, M * N, batch, g.data());
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
  otcrt_gemm_gelu_bf16_bf16(0, 1, M, N, K, 1.0f, ah.data(), K, M * K,
                            bh.data(), K, 0, 0.0f, ch.data(), N, M * N, batch,
                            biash.data(), auxh.data());
  otcrt_gemm_dgelu_bf16_bf16(0, 1, M, N, K, 1.0f, ah.data(), K, M * K,
                             bh.data(), K, 0, 0.0f, dxh.data(), N, M * N,
                             batch, gh.data());
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
    otcrt_gemm_add_f32(1, 0, M, N, K, 2.0f, a.data(), M, K * M, b.data(), N, 0,
                       0.5f, c.data(), N, M * N, batch,
                       withBias ? bias.data() : nullptr, r.data());
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
  otcrt_gemm_add_bf16_bf16(1, 0, M, N, K, 2.0f, ah.data(), M, K * M,
                           bh.data(), N, 0, 0.5f, ch.data(), N, M * N, batch,
                           biash.data(), rh.data());
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double w = want(e, i, j, true);
        EXPECT_NEAR(widen(ch[e * M * N + i * N + j]), w, std::abs(w) / 256 + 1e-6)
            << "entry " << e << " (" << i << ", " << j << ")";
      }
}
