// Unit tests of the host layer norm and RMS norm kernels of otcrt/kernels.h
// against references written here in double straight from the definitions
// in ir/OtcFusedOps.td: the forward, and an analytic gradient that is itself
// checked by central finite differences of sum(y * R) for a fixed random R.
// Covers gamma/beta present and absent, rows spanning several column blocks
// of the parameter-gradient sums, and the bfloat16 entry points (inputs
// representable in bfloat16, results within bfloat16 rounding of the f32
// kernel). The parameter gradients and column sums added into gradient
// slots (accumulate) must be each slot's value plus the sum the overwriting
// call stores, in float and rounded once. Also checks the runtime's float to
// bfloat16 rounding, and the gradient factor of the optimizer step
// (otcrt_grad_factor) on hand-derived values.
#include "kernels_test_util.h"

#include "cpu/common.h"

#include <cstring>
#include <limits>

namespace {

using Vec = std::vector<double>;

/// Forward results of the double references.
struct NormRef {
  Vec y, mean, rstd;
};

/// Layer norm (rms = false) or RMS norm (rms = true) of rows x cols, gamma
/// and beta empty when absent.
NormRef refNorm(bool rms, int64_t rows, int64_t cols, double eps, const Vec &x,
                const Vec &gamma, const Vec &beta) {
  NormRef r{Vec(x.size()), Vec(rows), Vec(rows)};
  for (int64_t i = 0; i < rows; ++i) {
    double mu = 0, var = 0;
    if (!rms) {
      for (int64_t c = 0; c < cols; ++c)
        mu += x[i * cols + c];
      mu /= cols;
    }
    for (int64_t c = 0; c < cols; ++c)
      var += (x[i * cols + c] - mu) * (x[i * cols + c] - mu);
    var /= cols;
    double rs = 1 / std::sqrt(var + eps);
    r.mean[i] = mu;
    r.rstd[i] = rs;
    for (int64_t c = 0; c < cols; ++c)
      r.y[i * cols + c] =
          (x[i * cols + c] - mu) * rs * (gamma.empty() ? 1.0 : gamma[c]) +
          (beta.empty() ? 0.0 : beta[c]);
  }
  return r;
}

/// Analytic gradients of the references for the output gradient dy.
struct NormGradRef {
  Vec dx, dgamma, dbeta;
};

NormGradRef refNormGrad(bool rms, int64_t rows, int64_t cols, double eps,
                        const Vec &x, const Vec &gamma, const Vec &dy) {
  NormRef f = refNorm(rms, rows, cols, eps, x, gamma, {});
  NormGradRef g{Vec(x.size()), Vec(cols, 0.0), Vec(cols, 0.0)};
  for (int64_t i = 0; i < rows; ++i) {
    double sumG = 0, sumGX = 0;
    for (int64_t c = 0; c < cols; ++c) {
      int64_t e = i * cols + c;
      double xhat = (x[e] - f.mean[i]) * f.rstd[i];
      double gg = dy[e] * (gamma.empty() ? 1.0 : gamma[c]);
      sumG += gg;
      sumGX += gg * xhat;
      g.dgamma[c] += dy[e] * xhat;
      g.dbeta[c] += dy[e];
    }
    for (int64_t c = 0; c < cols; ++c) {
      int64_t e = i * cols + c;
      double xhat = (x[e] - f.mean[i]) * f.rstd[i];
      double gg = dy[e] * (gamma.empty() ? 1.0 : gamma[c]);
      g.dx[e] =
          f.rstd[i] * (gg - (rms ? 0.0 : sumG / cols) - xhat * sumGX / cols);
    }
  }
  return g;
}

/// Checks the analytic reference gradient by finite differences of
/// sum(y * R) in double, with respect to x, gamma and beta.
void checkRefGradient(bool rms, int64_t rows, int64_t cols, double eps,
                      const Vec &x, const Vec &gamma, const Vec &beta,
                      const Vec &R) {
  NormGradRef g = refNormGrad(rms, rows, cols, eps, x, gamma, R);
  auto lossX = [&](const Vec &xx) {
    return kt::dot(refNorm(rms, rows, cols, eps, xx, gamma, beta).y, R);
  };
  kt::expectNear(g.dx, kt::numericGradient(lossX, x), 1e-6, 1e-7, "ref dx");
  if (!gamma.empty()) {
    auto lossG = [&](const Vec &gg) {
      return kt::dot(refNorm(rms, rows, cols, eps, x, gg, beta).y, R);
    };
    kt::expectNear(g.dgamma, kt::numericGradient(lossG, gamma), 1e-6, 1e-7,
                   "ref dgamma");
  }
  if (!beta.empty()) {
    auto lossB = [&](const Vec &bb) {
      return kt::dot(refNorm(rms, rows, cols, eps, x, gamma, bb).y, R);
    };
    kt::expectNear(g.dbeta, kt::numericGradient(lossB, beta), 1e-6, 1e-7,
                   "ref dbeta");
  }
}

struct NormCase {
  int64_t rows, cols;
  bool gamma, beta;
};

void runLayerNorm(const NormCase &tc, std::mt19937 &rng) {
  const float eps = 1e-5f;
  const int64_t n = tc.rows * tc.cols;
  std::vector<float> x = kt::random(n, rng, -2, 2, true);
  std::vector<float> gamma = tc.gamma
                                 ? kt::random(tc.cols, rng, 0.5f, 1.5f, true)
                                 : std::vector<float>();
  std::vector<float> beta =
      tc.beta ? kt::random(tc.cols, rng, -1, 1, true) : std::vector<float>();
  std::vector<float> dy = kt::random(n, rng, -1, 1, true);
  Vec xd = kt::toDouble(x), gd = kt::toDouble(gamma), bd = kt::toDouble(beta);
  const float *gp = tc.gamma ? gamma.data() : nullptr;
  const float *bp = tc.beta ? beta.data() : nullptr;

  NormRef ref = refNorm(false, tc.rows, tc.cols, eps, xd, gd, bd);
  std::vector<float> y(n), mean(tc.rows), rstd(tc.rows);
  ASSERT_EQ(otcrt_layer_norm_fwd_f32(tc.rows, tc.cols, eps, x.data(), gp, bp,
                                     y.data(), mean.data(), rstd.data(),
                                     nullptr),
            0);
  kt::expectNear(y, ref.y, 1e-5, 1e-5, "y");
  kt::expectNear(mean, ref.mean, 1e-6, 1e-6, "mean");
  kt::expectNear(rstd, ref.rstd, 1e-5, 0, "rstd");

  checkRefGradient(false, tc.rows, tc.cols, eps, xd, gd, bd, kt::toDouble(dy));
  NormGradRef gref =
      refNormGrad(false, tc.rows, tc.cols, eps, xd, gd, kt::toDouble(dy));
  std::vector<float> dx(n), dgamma(tc.cols, NAN), dbeta(tc.cols, NAN);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                     mean.data(), rstd.data(), nullptr, 0,
                                     dx.data(), dgamma.data(), dbeta.data(),
                                     nullptr),
            0);
  kt::expectNear(dx, gref.dx, 1e-4, 1e-4, "dx");
  kt::expectNear(dgamma, gref.dgamma, 1e-5, 1e-4, "dgamma");
  kt::expectNear(dbeta, gref.dbeta, 1e-5, 1e-4, "dbeta");

  // NULL dgamma/dbeta: dx alone, unchanged.
  std::vector<float> dx2(n);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                     mean.data(), rstd.data(), nullptr, 0,
                                     dx2.data(), nullptr, nullptr, nullptr),
            0);
  EXPECT_EQ(dx2, dx);

  // bfloat16 storage: within bfloat16 rounding of the f32 results.
  std::vector<otcrt_bf16> xb = kt::toBf16(x), gb = kt::toBf16(gamma),
                          bb = kt::toBf16(beta), dyb = kt::toBf16(dy);
  std::vector<otcrt_bf16> yb(n), dxb(n), dgb(tc.cols), dbb(tc.cols);
  std::vector<float> meanb(tc.rows), rstdb(tc.rows);
  ASSERT_EQ(otcrt_layer_norm_fwd_bf16(tc.rows, tc.cols, eps, xb.data(),
                                      tc.gamma ? gb.data() : nullptr,
                                      tc.beta ? bb.data() : nullptr, yb.data(),
                                      meanb.data(), rstdb.data(), nullptr),
            0);
  kt::expectBf16Of(yb, y, "y bf16");
  EXPECT_EQ(meanb, mean);
  EXPECT_EQ(rstdb, rstd);
  ASSERT_EQ(otcrt_layer_norm_bwd_bf16(
                tc.rows, tc.cols, dyb.data(), xb.data(),
                tc.gamma ? gb.data() : nullptr, mean.data(), rstd.data(),
                nullptr, 0, dxb.data(), dgb.data(), dbb.data(), nullptr),
            0);
  kt::expectBf16Of(dxb, dx, "dx bf16");
  kt::expectBf16Of(dgb, dgamma, "dgamma bf16");
  kt::expectBf16Of(dbb, dbeta, "dbeta bf16");

  // A residual gradient: dx + residual formed in float, rounded once; the
  // parameter gradients do not change. Also written over the residual.
  std::vector<float> res = kt::random(n, rng, -1, 1, true);
  std::vector<float> dxr(n), dgr(tc.cols), dbr(tc.cols);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                     mean.data(), rstd.data(), res.data(), 0,
                                     dxr.data(), dgr.data(), dbr.data(),
                                     nullptr),
            0);
  std::vector<float> sum(n);
  for (int64_t e = 0; e < n; ++e)
    sum[e] = dx[e] + res[e];
  EXPECT_EQ(dxr, sum);
  EXPECT_EQ(dgr, dgamma);
  EXPECT_EQ(dbr, dbeta);
  std::vector<float> over = res;
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                     mean.data(), rstd.data(), over.data(), 0,
                                     over.data(), nullptr, nullptr, nullptr),
            0);
  EXPECT_EQ(over, sum);

  // bfloat16: the float dx of the bf16 inputs (exactly the f32 kernel's,
  // the inputs being representable) plus the residual, one rounding.
  std::vector<otcrt_bf16> resb = kt::toBf16(res), dxbr(n), dgbr(tc.cols),
                          dbbr(tc.cols), sumb(n);
  ASSERT_EQ(otcrt_layer_norm_bwd_bf16(
                tc.rows, tc.cols, dyb.data(), xb.data(),
                tc.gamma ? gb.data() : nullptr, mean.data(), rstd.data(),
                resb.data(), 0, dxbr.data(), dgbr.data(), dbbr.data(), nullptr),
            0);
  for (int64_t e = 0; e < n; ++e)
    sumb[e] = otcrt::cpu::floatToBf16(dx[e] + res[e]);
  EXPECT_EQ(dxbr, sumb);
  EXPECT_EQ(dgbr, dgb);
  EXPECT_EQ(dbbr, dbb);
}

void runRmsNorm(const NormCase &tc, std::mt19937 &rng) {
  const float eps = 1e-6f;
  const int64_t n = tc.rows * tc.cols;
  std::vector<float> x = kt::random(n, rng, -2, 2, true);
  std::vector<float> gamma = tc.gamma
                                 ? kt::random(tc.cols, rng, 0.5f, 1.5f, true)
                                 : std::vector<float>();
  std::vector<float> dy = kt::random(n, rng, -1, 1, true);
  Vec xd = kt::toDouble(x), gd = kt::toDouble(gamma);
  const float *gp = tc.gamma ? gamma.data() : nullptr;

  NormRef ref = refNorm(true, tc.rows, tc.cols, eps, xd, gd, {});
  std::vector<float> y(n), rstd(tc.rows);
  ASSERT_EQ(otcrt_rms_norm_fwd_f32(tc.rows, tc.cols, eps, x.data(), gp,
                                   y.data(), rstd.data(), nullptr),
            0);
  kt::expectNear(y, ref.y, 1e-5, 1e-5, "y");
  kt::expectNear(rstd, ref.rstd, 1e-5, 0, "rstd");

  checkRefGradient(true, tc.rows, tc.cols, eps, xd, gd, {}, kt::toDouble(dy));
  NormGradRef gref =
      refNormGrad(true, tc.rows, tc.cols, eps, xd, gd, kt::toDouble(dy));
  std::vector<float> dx(n), dgamma(tc.cols, NAN);
  ASSERT_EQ(otcrt_rms_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                   rstd.data(), nullptr, 0, dx.data(),
                                   dgamma.data(), nullptr),
            0);
  kt::expectNear(dx, gref.dx, 1e-4, 1e-4, "dx");
  kt::expectNear(dgamma, gref.dgamma, 1e-5, 1e-4, "dgamma");

  std::vector<otcrt_bf16> xb = kt::toBf16(x), gb = kt::toBf16(gamma),
                          dyb = kt::toBf16(dy);
  std::vector<otcrt_bf16> yb(n), dxb(n), dgb(tc.cols);
  std::vector<float> rstdb(tc.rows);
  ASSERT_EQ(otcrt_rms_norm_fwd_bf16(tc.rows, tc.cols, eps, xb.data(),
                                    tc.gamma ? gb.data() : nullptr, yb.data(),
                                    rstdb.data(), nullptr),
            0);
  kt::expectBf16Of(yb, y, "y bf16");
  EXPECT_EQ(rstdb, rstd);
  ASSERT_EQ(otcrt_rms_norm_bwd_bf16(tc.rows, tc.cols, dyb.data(), xb.data(),
                                    tc.gamma ? gb.data() : nullptr, rstd.data(),
                                    nullptr, 0, dxb.data(), dgb.data(),
                                    nullptr),
            0);
  kt::expectBf16Of(dxb, dx, "dx bf16");
  kt::expectBf16Of(dgb, dgamma, "dgamma bf16");

  // A residual gradient, as for layer norm: dx + residual formed in float,
  // rounded once, dgamma unchanged; also written over the residual.
  std::vector<float> res = kt::random(n, rng, -1, 1, true);
  std::vector<float> dxr(n), dgr(tc.cols), sum(n);
  ASSERT_EQ(otcrt_rms_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                   rstd.data(), res.data(), 0, dxr.data(),
                                   dgr.data(), nullptr),
            0);
  for (int64_t e = 0; e < n; ++e)
    sum[e] = dx[e] + res[e];
  EXPECT_EQ(dxr, sum);
  EXPECT_EQ(dgr, dgamma);
  std::vector<float> over = res;
  ASSERT_EQ(otcrt_rms_norm_bwd_f32(tc.rows, tc.cols, dy.data(), x.data(), gp,
                                   rstd.data(), over.data(), 0, over.data(),
                                   nullptr, nullptr),
            0);
  EXPECT_EQ(over, sum);
  std::vector<otcrt_bf16> resb = kt::toBf16(res), dxbr(n), dgbr(tc.cols),
                          sumb(n);
  ASSERT_EQ(otcrt_rms_norm_bwd_bf16(tc.rows, tc.cols, dyb.data(), xb.data(),
                                    tc.gamma ? gb.data() : nullptr, rstd.data(),
                                    resb.data(), 0, dxbr.data(), dgbr.data(),
                                    nullptr),
            0);
  for (int64_t e = 0; e < n; ++e)
    sumb[e] = otcrt::cpu::floatToBf16(dx[e] + res[e]);
  EXPECT_EQ(dxbr, sumb);
  EXPECT_EQ(dgbr, dgb);
}

} // namespace

TEST(KernelsNorm, LayerNormGammaBeta) {
  std::mt19937 rng(11);
  runLayerNorm({7, 37, true, true}, rng);
}

TEST(KernelsNorm, LayerNormNoAffine) {
  std::mt19937 rng(12);
  runLayerNorm({5, 16, false, false}, rng);
}

TEST(KernelsNorm, LayerNormGammaOnly) {
  std::mt19937 rng(13);
  runLayerNorm({4, 9, true, false}, rng);
}

TEST(KernelsNorm, LayerNormManyColumnBlocks) {
  std::mt19937 rng(14);
  runLayerNorm({3, 600, true, true}, rng);
}

TEST(KernelsNorm, RmsNormGamma) {
  std::mt19937 rng(21);
  runRmsNorm({6, 33, true, false}, rng);
}

TEST(KernelsNorm, RmsNormNoGamma) {
  std::mt19937 rng(22);
  runRmsNorm({5, 8, false, false}, rng);
}

TEST(KernelsNorm, RmsNormManyColumnBlocks) {
  std::mt19937 rng(23);
  runRmsNorm({2, 530, true, false}, rng);
}

TEST(KernelsNorm, LayerNormBackwardInPlace) {
  std::mt19937 rng(31);
  const int64_t rows = 4, cols = 20;
  std::vector<float> x = kt::random(rows * cols, rng, -2, 2);
  std::vector<float> gamma = kt::random(cols, rng, 0.5f, 1.5f);
  std::vector<float> dy = kt::random(rows * cols, rng);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows);
  ASSERT_EQ(otcrt_layer_norm_fwd_f32(rows, cols, 1e-5f, x.data(), gamma.data(),
                                     nullptr, y.data(), mean.data(),
                                     rstd.data(), nullptr),
            0);
  std::vector<float> dx(rows * cols), dg(cols), db(cols), dg2(cols), db2(cols);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                     gamma.data(), mean.data(), rstd.data(),
                                     nullptr, 0, dx.data(), dg.data(),
                                     db.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                     gamma.data(), mean.data(), rstd.data(),
                                     nullptr, 0, dy.data(), dg2.data(),
                                     db2.data(), nullptr),
            0);
  EXPECT_EQ(dy, dx);
  EXPECT_EQ(dg2, dg);
  EXPECT_EQ(db2, db);
}

TEST(KernelsBf16, RoundsToNearestEven) {
  using otcrt::cpu::floatToBf16;
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return floatToBf16(f);
  };
  EXPECT_EQ(bits(0x3f800000u), 0x3f80); // 1.0 exact
  EXPECT_EQ(bits(0x3f808000u), 0x3f80); // tie, even stays
  EXPECT_EQ(bits(0x3f818000u), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(bits(0x3f808001u), 0x3f81); // above the tie
  EXPECT_EQ(bits(0x3f807fffu), 0x3f80); // below the tie
  EXPECT_EQ(bits(0x7f7fffffu), 0x7f80); // FLT_MAX rounds to +inf
  EXPECT_EQ(bits(0xff800000u), 0xff80); // -inf
  otcrt_bf16 nan = bits(0x7f800001u);   // signalling NaN, low payload
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(otcrt::cpu::bf16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(otcrt::cpu::bf16ToFloat(
      floatToBf16(-std::numeric_limits<float>::quiet_NaN()))));
}

// Column sums (otc.column_sum): against sums in double of the same values,
// within float accumulation error (rows * 2^-24 of the sum of magnitudes);
// the bfloat16 entry point reads the same (representable) values exactly, so
// it must equal the f32 one bit for bit; a zero-row matrix sums to zeros.
TEST(KernelsReduce, ColumnSum) {
  std::mt19937 rng(7);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 5}, {37, 3}, {300, 70}}) {
    std::vector<float> x = kt::random(rows * cols, rng, -2.0f, 2.0f, true);
    std::vector<float> got(cols, -1.0f), gotBf16(cols, -1.0f);
    ASSERT_EQ(otcrt_column_sum_f32(rows, cols, x.data(), got.data(), nullptr), 0);
    std::vector<otcrt_bf16> xb = kt::toBf16(x);
    ASSERT_EQ(otcrt_column_sum_bf16(rows, cols, xb.data(), gotBf16.data(), nullptr), 0);
    for (int64_t c = 0; c < cols; ++c) {
      double sum = 0, mag = 0;
      for (int64_t r = 0; r < rows; ++r) {
        sum += x[r * cols + c];
        mag += std::fabs(x[r * cols + c]);
      }
      EXPECT_NEAR(got[c], sum, rows * mag * std::ldexp(1.0, -24) + 1e-12)
          << rows << "x" << cols << " column " << c;
      EXPECT_EQ(got[c], gotBf16[c]) << "column " << c;
    }
  }
  std::vector<float> zero(4, -1.0f);
  ASSERT_EQ(otcrt_column_sum_f32(0, 4, nullptr, zero.data(), nullptr), 0);
  for (float v : zero)
    EXPECT_EQ(v, 0.0f);
}

/// The float bits rounded to the nearest even bfloat16 (finite values).
otcrt_bf16 nearestBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<otcrt_bf16>(bits >> 16);
}

/// slot + sum (float), or that rounded to bfloat16, element by element.
std::vector<float> plus(const std::vector<float> &slot,
                        const std::vector<float> &sum) {
  std::vector<float> out(slot.size());
  for (size_t i = 0; i < slot.size(); ++i)
    out[i] = slot[i] + sum[i];
  return out;
}
std::vector<otcrt_bf16> plusBf16(const std::vector<otcrt_bf16> &slot,
                                 const std::vector<float> &sum) {
  std::vector<otcrt_bf16> out(slot.size());
  for (size_t i = 0; i < slot.size(); ++i)
    out[i] = nearestBf16(otcrt::cpu::bf16ToFloat(slot[i]) + sum[i]);
  return out;
}

// dgamma and dbeta added into slots (bits 1 and 2 of accumulate, each alone
// and both), for layer norm and RMS norm, f32 and bf16: each is the slot
// plus the float sum the overwriting call stores (the f32 call's, the same
// sums of the same values for bf16), rounded once; what is not accumulated
// is overwritten; dx is unchanged; a bad accumulate writes nothing.
TEST(KernelsNorm, ParameterGradientsIntoSlots) {
  std::mt19937 rng(21);
  const int64_t rows = 300, cols = 70;
  std::vector<float> x = kt::random(rows * cols, rng, -2, 2, true),
                     dy = kt::random(rows * cols, rng, -1, 1, true),
                     gamma = kt::random(cols, rng, 0.5f, 1.5f, true);
  std::vector<float> mean(rows), rstd(rows), y(rows * cols);
  ASSERT_EQ(otcrt_layer_norm_fwd_f32(rows, cols, 1e-5f, x.data(), gamma.data(),
                                     nullptr, y.data(), mean.data(),
                                     rstd.data(), nullptr),
            0);
  std::vector<float> dx(rows * cols), dg(cols), db(cols);
  ASSERT_EQ(otcrt_layer_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                     gamma.data(), mean.data(), rstd.data(),
                                     nullptr, 0, dx.data(), dg.data(),
                                     db.data(), nullptr),
            0);
  const std::vector<float> sg = kt::random(cols, rng, -3, 3, true),
                           sb = kt::random(cols, rng, -3, 3, true);
  for (int32_t bits : {1, 2, 3}) {
    SCOPED_TRACE("accumulate " + std::to_string(bits));
    std::vector<float> dx2(rows * cols), g2 = sg, b2 = sb;
    ASSERT_EQ(otcrt_layer_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                       gamma.data(), mean.data(), rstd.data(),
                                       nullptr, bits, dx2.data(), g2.data(),
                                       b2.data(), nullptr),
              0);
    EXPECT_EQ(dx2, dx);
    EXPECT_EQ(g2, bits & 1 ? plus(sg, dg) : dg);
    EXPECT_EQ(b2, bits & 2 ? plus(sb, db) : db);
    std::vector<otcrt_bf16> xb = kt::toBf16(x), dyb = kt::toBf16(dy),
                            gb = kt::toBf16(gamma), dxb(rows * cols),
                            sgb = kt::toBf16(sg), sbb = kt::toBf16(sb);
    std::vector<otcrt_bf16> g2b = sgb, b2b = sbb;
    ASSERT_EQ(otcrt_layer_norm_bwd_bf16(rows, cols, dyb.data(), xb.data(),
                                        gb.data(), mean.data(), rstd.data(),
                                        nullptr, bits, dxb.data(), g2b.data(),
                                        b2b.data(), nullptr),
              0);
    std::vector<otcrt_bf16> dgRounded(cols), dbRounded(cols);
    for (int64_t c = 0; c < cols; ++c) {
      dgRounded[c] = nearestBf16(dg[c]);
      dbRounded[c] = nearestBf16(db[c]);
    }
    EXPECT_EQ(g2b, bits & 1 ? plusBf16(sgb, dg) : dgRounded);
    EXPECT_EQ(b2b, bits & 2 ? plusBf16(sbb, db) : dbRounded);
  }
  // RMS norm: bit 1 only.
  std::vector<float> rdx(rows * cols), rdg(cols), r2 = sg;
  ASSERT_EQ(otcrt_rms_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                   gamma.data(), rstd.data(), nullptr, 0,
                                   rdx.data(), rdg.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_rms_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                   gamma.data(), rstd.data(), nullptr, 1,
                                   rdx.data(), r2.data(), nullptr),
            0);
  EXPECT_EQ(r2, plus(sg, rdg));
  std::vector<otcrt_bf16> xb = kt::toBf16(x), dyb = kt::toBf16(dy),
                          gb = kt::toBf16(gamma), dxb(rows * cols),
                          r2b = kt::toBf16(sg);
  ASSERT_EQ(otcrt_rms_norm_bwd_bf16(rows, cols, dyb.data(), xb.data(),
                                    gb.data(), rstd.data(), nullptr, 1,
                                    dxb.data(), r2b.data(), nullptr),
            0);
  EXPECT_EQ(r2b, plusBf16(kt::toBf16(sg), rdg));
  // Refused: nothing written.
  std::vector<float> keep = sg;
  EXPECT_EQ(otcrt_layer_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                     gamma.data(), mean.data(), rstd.data(),
                                     nullptr, 4, dx.data(), keep.data(),
                                     nullptr, nullptr),
            1);
  EXPECT_EQ(otcrt_rms_norm_bwd_f32(rows, cols, dy.data(), x.data(),
                                   gamma.data(), rstd.data(), nullptr, 2,
                                   dx.data(), keep.data(), nullptr),
            1);
  EXPECT_EQ(keep, sg);
}

// Column sums added into a slot of the input's storage: the slot plus the
// float sum otcrt_column_sum_* gives, rounded once.
TEST(KernelsReduce, ColumnSumIntoSlot) {
  std::mt19937 rng(8);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 5}, {300, 70}}) {
    std::vector<float> x = kt::random(rows * cols, rng, -2.0f, 2.0f, true);
    std::vector<float> sum(cols), slot = kt::random(cols, rng, -4, 4, true);
    ASSERT_EQ(otcrt_column_sum_f32(rows, cols, x.data(), sum.data(), nullptr),
              0);
    std::vector<float> into = slot;
    ASSERT_EQ(
        otcrt_column_sum_into_f32(rows, cols, x.data(), into.data(), nullptr),
        0);
    EXPECT_EQ(into, plus(slot, sum)) << rows << "x" << cols;
    std::vector<otcrt_bf16> xb = kt::toBf16(x), slotB = kt::toBf16(slot),
                            intoB = slotB;
    ASSERT_EQ(otcrt_column_sum_into_bf16(rows, cols, xb.data(), intoB.data(),
                                         nullptr),
              0);
    EXPECT_EQ(intoB, plusBf16(slotB, sum)) << rows << "x" << cols;
  }
}

// otcrt_grad_factor on hand-derived values: a float range holding 3 and 4
// and a bfloat16 range holding 12 (squares 9 + 16 + 144 = 169, root 13),
// and the checks that veto the update.
TEST(GradFactor, ClipsScalesAndRefusesNonFinite) {
  // A data error an earlier test left in the error record would veto.
  otcrt_kernel_error(nullptr, nullptr);
  std::vector<char> arena(64, 0);
  const float f[2] = {3.0f, 4.0f};
  std::memcpy(arena.data(), f, sizeof f);
  const otcrt_bf16 twelve = 0x4140; // 12.0
  std::memcpy(arena.data() + 16, &twelve, 2);
  const OtcrtRange ranges[] = {{0, 2, 0, 0}, {16, 1, 1, 0}};
  float *factor = reinterpret_cast<float *>(arena.data() + 32);
  double norm = 0;
  auto call = [&](float scale, float clip, const float *checks,
                  int32_t numChecks, float *out) {
    return otcrt_grad_factor(arena.data(), 2, ranges, scale, clip, checks,
                             numChecks, out, &norm, nullptr);
  };
  // No clipping: the factor is the scale, the norm the scaled one.
  ASSERT_EQ(call(2.0f, 0.0f, nullptr, 0, factor), 0);
  EXPECT_EQ(norm, 26.0);
  EXPECT_EQ(*factor, 2.0f);
  // Clipping at 6.5: 2 * 6.5 / 26 = 0.5.
  ASSERT_EQ(call(2.0f, 6.5f, nullptr, 0, factor), 0);
  EXPECT_EQ(*factor, 0.5f);
  // A clip above the norm leaves the scale.
  ASSERT_EQ(call(1.0f, 20.0f, nullptr, 0, factor), 0);
  EXPECT_EQ(norm, 13.0);
  EXPECT_EQ(*factor, 1.0f);
  // Checks (the step's losses): finite ones leave the factor; one NaN or
  // infinite one makes it NaN while the norm stays the gradients'.
  float checks[3] = {2.5f, -1.0f, 0.0f};
  ASSERT_EQ(call(1.0f, 6.5f, checks, 3, factor), 0);
  EXPECT_EQ(*factor, 0.5f);
  for (float bad : {NAN, -std::numeric_limits<float>::infinity()}) {
    checks[2] = bad;
    ASSERT_EQ(call(1.0f, 6.5f, checks, 3, factor), 0);
    EXPECT_EQ(norm, 13.0);
    EXPECT_TRUE(std::isnan(*factor));
    // Only the first num_checks are read.
    ASSERT_EQ(call(1.0f, 6.5f, checks, 2, factor), 0);
    EXPECT_EQ(*factor, 0.5f);
  }
  EXPECT_NE(call(1.0f, 1.0f, nullptr, 1, factor), 0);
  EXPECT_NE(call(1.0f, 1.0f, checks, -1, factor), 0);
  // An infinite gradient: the norm is infinite and the factor NaN (skip).
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(arena.data() + 4, &inf, 4);
  ASSERT_EQ(call(1.0f, 1.0f, nullptr, 0, factor), 0);
  EXPECT_TRUE(std::isinf(norm));
  EXPECT_TRUE(std::isnan(*factor));
  EXPECT_NE(call(1.0f, 1.0f, nullptr, 0, nullptr), 0);
}

// The cpu error record: what a generated gather writes into it (through
// otcrt_kernel_error_record, as the generated code does) vetoes the
// update in otcrt_grad_factor (NaN) until otcrt_kernel_error reads and
// clears it; a bad label in the cross-entropy is recorded (row, value,
// classes) as well as returned.
TEST(KernelErrorRecord, VetoesTheUpdateUntilRead) {
  otcrt_kernel_error(nullptr, nullptr); // what an earlier test left
  std::vector<char> arena(16, 0);
  const float f[2] = {3.0f, 4.0f};
  std::memcpy(arena.data(), f, sizeof f);
  const OtcrtRange range = {0, 2, 0, 0};
  float factor = 0;
  double norm = 0;
  OtcrtKernelError *record = otcrt_kernel_error_record();
  ASSERT_NE(record, nullptr);
  record->index = 17;
  record->value = 64;
  record->bound = 64;
  record->code = OTCRT_ERROR_INDEX;
  ASSERT_EQ(otcrt_grad_factor(arena.data(), 1, &range, 1.0f, 0.0f, nullptr, 0,
                              &factor, &norm, nullptr),
            0);
  EXPECT_EQ(norm, 5.0);
  EXPECT_TRUE(std::isnan(factor));
  OtcrtKernelError e{};
  EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_INDEX);
  EXPECT_EQ(e.code, OTCRT_ERROR_INDEX);
  EXPECT_EQ(e.index, 17);
  EXPECT_EQ(e.value, 64);
  EXPECT_EQ(e.bound, 64);
  ASSERT_EQ(otcrt_grad_factor(arena.data(), 1, &range, 1.0f, 0.0f, nullptr, 0,
                              &factor, &norm, nullptr),
            0);
  EXPECT_EQ(factor, 1.0f);
  EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_NONE);

  // Rows 0 and 2 ignored (-100), row 1's label 3 of 3 classes, row 3's 7:
  // the first counted bad row is recorded, and the call returns the code.
  const float logits[12] = {};
  const int64_t labels[4] = {-100, 3, -100, 7};
  float loss = 0, lse[4];
  EXPECT_EQ(otcrt_cross_entropy_fwd_f32(4, 3, logits, labels, 1, -100,
                                        OTCRT_MEAN, &loss, lse, nullptr),
            OTCRT_ERROR_LABEL);
  EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_LABEL);
  EXPECT_EQ(e.index, 1);
  EXPECT_EQ(e.value, 3);
  EXPECT_EQ(e.bound, 3);
  EXPECT_EQ(otcrt_kernel_error(&e, nullptr), OTCRT_ERROR_NONE);
}
