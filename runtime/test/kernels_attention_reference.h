// The double reference of the host attention kernels' unit tests
// (kernels_attention_test.cpp, kernels_attention_layout_test.cpp), written
// from the definition of otc.attention (ir/OtcFusedOps.td): every score of a
// row, its log-sum-exp, the dropout factors drawn with the test's own
// splitmix64, and an analytic gradient that is itself checked by central
// finite differences of sum(out * R); `run` checks the f32 and bf16 kernels
// of one problem against it.
#ifndef OTCRT_TEST_KERNELS_ATTENTION_REFERENCE_H
#define OTCRT_TEST_KERNELS_ATTENTION_REFERENCE_H

#include "kernels_test_util.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace attention_ref {

using Vec = std::vector<double>;

/// An attention problem: sizes and options, plus the mask's values and the
/// extents it broadcasts from (1 along broadcast dimensions).
struct Problem {
  OtcrtAttention a{};
  std::vector<float> mask; ///< empty: no mask
  std::vector<float> sinks; ///< [h] attention sinks; empty: none
};

/// A problem with the given sizes; mask dims {b or 1, h or 1, t or 1, s or
/// 1} with `hidden` of its elements set to -inf (never a row's first key).
inline Problem makeProblem(int64_t b, int64_t h, int64_t hk, int64_t t,
                           int64_t s, int64_t d, bool causal, float dropout,
                           const int64_t *maskDims, int hidden,
                           std::mt19937 &rng, bool bf16) {
  Problem p;
  p.a.b = b, p.a.h = h, p.a.hk = hk, p.a.t = t, p.a.s = s, p.a.d = d;
  p.a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  p.a.causal = causal;
  p.a.dropout = dropout;
  static const int64_t key = 0x1234abcd;
  p.a.key = &key;
  p.a.dropout_stream = 5;
  if (maskDims) {
    int64_t n = maskDims[0] * maskDims[1] * maskDims[2] * maskDims[3];
    p.mask = kt::random(n, rng, -1, 1, bf16);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      p.a.mask_strides[i] = maskDims[i] == 1 ? 0 : stride;
      stride *= maskDims[i];
    }
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    for (int i = 0; i < hidden; ++i) {
      int64_t e = pick(rng);
      if (e % maskDims[3] != 0)
        p.mask[e] = -std::numeric_limits<float>::infinity();
    }
  }
  return p;
}

/// The mask element added to score (b, h, i, j), 0 without a mask.
inline double maskAt(const Problem &p, int64_t b, int64_t h, int64_t i,
                     int64_t j) {
  if (p.mask.empty())
    return 0;
  const int64_t *ms = p.a.mask_strides;
  return p.mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
}

/// The dropout factor of probability (b, h, i, j).
inline double dropFactor(const Problem &p, int64_t b, int64_t h, int64_t i,
                         int64_t j) {
  const OtcrtAttention &a = p.a;
  if (a.dropout <= 0)
    return 1;
  uint64_t index = static_cast<uint64_t>(((b * a.h + h) * a.t + i) * a.s + j);
  return kt::dropoutDraw(*a.key, a.dropout_stream, index) >= a.dropout
             ? 1.0 / (1.0 - static_cast<double>(a.dropout))
             : 0.0;
}

struct Ref {
  Vec out, lse, dq, dk, dv;
  Vec dsinks; ///< [h], with sinks
};

/// scale q_i . k_j of (b, h, i, j).
inline double scaledDot(const Problem &p, const Vec &q, const Vec &k, int64_t b,
                        int64_t h, int64_t i, int64_t j) {
  const OtcrtAttention &a = p.a;
  int64_t kh = h / (a.h / a.hk);
  double dot = 0;
  for (int64_t c = 0; c < a.d; ++c)
    dot += q[((b * a.h + h) * a.t + i) * a.d + c] *
           k[((b * a.hk + kh) * a.s + j) * a.d + c];
  return static_cast<double>(a.scale) * dot;
}

/// The soft cap's slope at (b, h, i, j): 1 - tanh^2(s / c), 1 without one.
inline double capSlope(const Problem &p, const Vec &q, const Vec &k, int64_t b,
                       int64_t h, int64_t i, int64_t j) {
  double c = p.a.softcap;
  if (c <= 0)
    return 1;
  double t = std::tanh(scaledDot(p, q, k, b, h, i, j) / c);
  return 1 - t * t;
}

/// Rows of probabilities P[j] (0 where hidden) of query (b, h, i).
/// With sinks, sinks[h] joins the normalizer as a key with no value. A key
/// padding (key_padding) hides the keys whose mask value is at most -9984
/// (a fill of -1e4 or less, rounded to BF16 or not); a row that then sees no
/// key has lse +inf (sinks[h] with sinks) and probabilities 0.
inline Vec probabilities(const Problem &p, const Vec &q, const Vec &k,
                         int64_t b, int64_t h, int64_t i, double *lseOut,
                         const Vec &sinks = {}) {
  const OtcrtAttention &a = p.a;
  int64_t kh = h / (a.h / a.hk);
  Vec s(a.s, -std::numeric_limits<double>::infinity());
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < a.s; ++j) {
    if (a.causal && j > i)
      continue;
    if (a.window > 0 && std::abs(i - j) >= a.window)
      continue; // a sliding window: causal, or bidirectional without
    if (a.key_padding && maskAt(p, b, h, i, j) <= -9984.0)
      continue;
    double raw = scaledDot(p, q, k, b, h, i, j);
    if (a.softcap > 0)
      raw = a.softcap * std::tanh(raw / a.softcap);
    s[j] = raw + maskAt(p, b, h, i, j);
    max = std::max(max, s[j]);
  }
  if (!sinks.empty())
    max = std::max(max, sinks[h]);
  double sum = sinks.empty() ? 0.0 : std::exp(sinks[h] - max);
  for (int64_t j = 0; j < a.s; ++j)
    sum += std::exp(s[j] - max);
  double lse =
      sum > 0.0 ? max + std::log(sum) : std::numeric_limits<double>::infinity();
  if (lseOut)
    *lseOut = lse;
  Vec prob(a.s);
  for (int64_t j = 0; j < a.s; ++j)
    prob[j] = std::exp(s[j] - lse);
  return prob;
}

/// Forward (and, with dO, the analytic gradient) in double; `sinks` [h]
/// (empty: none), whose gradient is -sum_rows exp(sink - lse) D: a sink
/// moves each probability P_j of its row by -P_j exp(sink - lse).
inline Ref reference(const Problem &p, const Vec &q, const Vec &k, const Vec &v,
                     const Vec *dO, const Vec &sinks = {}) {
  const OtcrtAttention &a = p.a;
  Ref r{Vec(q.size(), 0.0), Vec(a.b * a.h * a.t), Vec(q.size(), 0.0),
        Vec(k.size(), 0.0), Vec(v.size(), 0.0),   Vec(sinks.size(), 0.0)};
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t kh = h / (a.h / a.hk);
      for (int64_t i = 0; i < a.t; ++i) {
        int64_t row = (b * a.h + h) * a.t + i;
        Vec prob = probabilities(p, q, k, b, h, i, &r.lse[row], sinks);
        auto kv = [&](int64_t j, int64_t c) {
          return ((b * a.hk + kh) * a.s + j) * a.d + c;
        };
        for (int64_t j = 0; j < a.s; ++j)
          for (int64_t c = 0; c < a.d; ++c)
            r.out[row * a.d + c] +=
                prob[j] * dropFactor(p, b, h, i, j) * v[kv(j, c)];
        if (!dO)
          continue;
        // dP_j = m_j dO . v_j, dS_j = P_j (dP_j - sum_l P_l dP_l).
        Vec dP(a.s);
        double D = 0;
        for (int64_t j = 0; j < a.s; ++j) {
          double m = dropFactor(p, b, h, i, j), dov = 0;
          for (int64_t c = 0; c < a.d; ++c) {
            dov += (*dO)[row * a.d + c] * v[kv(j, c)];
            r.dv[kv(j, c)] += prob[j] * m * (*dO)[row * a.d + c];
          }
          dP[j] = m * dov;
          D += prob[j] * dP[j];
        }
        if (!sinks.empty())
          r.dsinks[h] -= std::exp(sinks[h] - r.lse[row]) * D;
        for (int64_t j = 0; j < a.s; ++j) {
          double dS = prob[j] * (dP[j] - D) * static_cast<double>(a.scale) *
                      capSlope(p, q, k, b, h, i, j);
          for (int64_t c = 0; c < a.d; ++c) {
            r.dq[row * a.d + c] += dS * k[kv(j, c)];
            r.dk[kv(j, c)] += dS * q[row * a.d + c];
          }
        }
      }
    }
  return r;
}

/// Checks the reference gradient against finite differences of
/// sum(out * R) with respect to q, k and v (and the sinks).
inline void checkReferenceGradient(const Problem &p, const Vec &q, const Vec &k,
                                   const Vec &v, const Vec &R,
                                   const Vec &sinks = {}) {
  Ref r = reference(p, q, k, v, &R, sinks);
  auto lq = [&](const Vec &x) {
    return kt::dot(reference(p, x, k, v, nullptr, sinks).out, R);
  };
  auto lk = [&](const Vec &x) {
    return kt::dot(reference(p, q, x, v, nullptr, sinks).out, R);
  };
  auto lv = [&](const Vec &x) {
    return kt::dot(reference(p, q, k, x, nullptr, sinks).out, R);
  };
  kt::expectNear(r.dq, kt::numericGradient(lq, q), 1e-6, 1e-7, "ref dq");
  kt::expectNear(r.dk, kt::numericGradient(lk, k), 1e-6, 1e-7, "ref dk");
  kt::expectNear(r.dv, kt::numericGradient(lv, v), 1e-6, 1e-7, "ref dv");
  if (!sinks.empty()) {
    auto ls = [&](const Vec &x) {
      return kt::dot(reference(p, q, k, v, nullptr, x).out, R);
    };
    kt::expectNear(r.dsinks, kt::numericGradient(ls, sinks), 1e-6, 1e-7,
                   "ref dsinks");
  }
}

/// Runs the f32 and bf16 kernels of one problem against the reference.
inline void run(const Problem &p, std::mt19937 &rng) {
  const OtcrtAttention &a = p.a;
  const int64_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  std::vector<float> q = kt::random(qn, rng, -1, 1, true);
  std::vector<float> k = kt::random(kvn, rng, -1, 1, true);
  std::vector<float> v = kt::random(kvn, rng, -1, 1, true);
  std::vector<float> dO = kt::random(qn, rng, -1, 1, true);
  Vec qd = kt::toDouble(q), kd = kt::toDouble(k), vd = kt::toDouble(v);
  Vec dOd = kt::toDouble(dO);
  const float *mask = p.mask.empty() ? nullptr : p.mask.data();
  Vec sinksd = kt::toDouble(p.sinks);

  checkReferenceGradient(p, qd, kd, vd, dOd, sinksd);
  Ref ref = reference(p, qd, kd, vd, &dOd, sinksd);
  // The kernels read the sinks and write their gradient where given.
  OtcrtAttention withSinks = a;
  std::vector<float> dsinks(p.sinks.size(), NAN);
  if (!p.sinks.empty()) {
    withSinks.sinks = p.sinks.data();
    withSinks.dsinks = dsinks.data();
  }
  const OtcrtAttention &call = withSinks;

  std::vector<float> out(qn), lse(a.b * a.h * a.t);
  ASSERT_EQ(otcrt_attention_fwd_f32(&call, q.data(), k.data(), v.data(), mask,
                                    out.data(), lse.data(), nullptr),
            0);
  kt::expectNear(out, ref.out, 1e-5, 2e-5, "out");
  kt::expectNear(lse, ref.lse, 1e-5, 1e-5, "lse");

  std::vector<float> dq(qn, NAN), dk(kvn, NAN), dv(kvn, NAN);
  ASSERT_EQ(otcrt_attention_bwd_f32(&call, dO.data(), q.data(), k.data(),
                                    v.data(), mask, out.data(), lse.data(),
                                    dq.data(), dk.data(), dv.data(), nullptr),
            0);
  kt::expectNear(dq, ref.dq, 1e-4, 1e-4, "dq");
  kt::expectNear(dk, ref.dk, 1e-4, 1e-4, "dk");
  kt::expectNear(dv, ref.dv, 1e-4, 1e-4, "dv");
  if (!p.sinks.empty())
    kt::expectNear(dsinks, ref.dsinks, 1e-4, 1e-4, "dsinks");

  // bfloat16: same (representable) inputs; the backward of both kernels
  // reads the bfloat16 forward output.
  std::vector<otcrt_bf16> qb = kt::toBf16(q), kb = kt::toBf16(k),
                          vb = kt::toBf16(v), dOb = kt::toBf16(dO);
  std::vector<otcrt_bf16> mb = kt::toBf16(p.mask);
  const otcrt_bf16 *maskb = p.mask.empty() ? nullptr : mb.data();
  std::vector<otcrt_bf16> outb(qn);
  std::vector<float> lseb(lse.size());
  ASSERT_EQ(otcrt_attention_fwd_bf16(&call, qb.data(), kb.data(), vb.data(),
                                     maskb, outb.data(), lseb.data(), nullptr),
            0);
  kt::expectBf16Of(outb, out, "out bf16");
  EXPECT_EQ(lseb, lse);
  std::vector<float> outRounded = kt::fromBf16(outb);
  ASSERT_EQ(otcrt_attention_bwd_f32(&call, dO.data(), q.data(), k.data(),
                                    v.data(), mask, outRounded.data(),
                                    lse.data(), dq.data(), dk.data(), dv.data(),
                                    nullptr),
            0);
  // The sinks' gradient of the rounded output (D = dO . O), which the bf16
  // kernel reads too.
  const std::vector<float> dsinksRounded = dsinks;
  std::fill(dsinks.begin(), dsinks.end(), NAN);
  std::vector<otcrt_bf16> dqb(qn), dkb(kvn), dvb(kvn);
  ASSERT_EQ(otcrt_attention_bwd_bf16(&call, dOb.data(), qb.data(), kb.data(),
                                     vb.data(), maskb, outb.data(), lseb.data(),
                                     dqb.data(), dkb.data(), dvb.data(),
                                     nullptr),
            0);
  kt::expectBf16Of(dqb, dq, "dq bf16");
  kt::expectBf16Of(dkb, dk, "dk bf16");
  kt::expectBf16Of(dvb, dv, "dv bf16");
  if (!p.sinks.empty())
    kt::expectNear(dsinks, dsinksRounded, 1e-5, 1e-5, "dsinks bf16");
}

} // namespace attention_ref

#endif // OTCRT_TEST_KERNELS_ATTENTION_REFERENCE_H
