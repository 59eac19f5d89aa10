// Unit tests of the host attention kernels of otcrt/kernels.h against a
// reference written here in double from the definition of otc.attention
// (ir/OtcFusedOps.td): every score of a row, its log-sum-exp, the dropout
// factors drawn with the test's own splitmix64, and an analytic gradient that
// is itself checked by central finite differences of sum(out * R). Covers
// plain, causal, sliding-window, broadcast-masked (zero strides, -inf entries), grouped-query
// (hk < h) and dropout problems, the kept pattern of a dropped row, the
// bfloat16 entry points (within bfloat16 rounding of the f32 kernel), and q,
// k, v and their gradients packed in one [b, t, h + 2hk, d] tensor
// (row_stride).
#include "kernels_test_util.h"

#include <limits>

namespace {

using Vec = std::vector<double>;

/// An attention problem: sizes and options, plus the mask's values and the
/// extents it broadcasts from (1 along broadcast dimensions).
struct Problem {
  OtcrtAttention a{};
  std::vector<float> mask; ///< empty: no mask
};

/// A problem with the given sizes; mask dims {b or 1, h or 1, t or 1, s or
/// 1} with `hidden` of its elements set to -inf (never a row's first key).
Problem makeProblem(int64_t b, int64_t h, int64_t hk, int64_t t, int64_t s,
                    int64_t d, bool causal, float dropout,
                    const int64_t *maskDims, int hidden, std::mt19937 &rng,
                    bool bf16) {
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
double maskAt(const Problem &p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p.mask.empty())
    return 0;
  const int64_t *ms = p.a.mask_strides;
  return p.mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]];
}

/// The dropout factor of probability (b, h, i, j).
double dropFactor(const Problem &p, int64_t b, int64_t h, int64_t i,
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
};

/// scale q_i . k_j of (b, h, i, j).
double scaledDot(const Problem &p, const Vec &q, const Vec &k, int64_t b,
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
double capSlope(const Problem &p, const Vec &q, const Vec &k, int64_t b,
                int64_t h, int64_t i, int64_t j) {
  double c = p.a.softcap;
  if (c <= 0)
    return 1;
  double t = std::tanh(scaledDot(p, q, k, b, h, i, j) / c);
  return 1 - t * t;
}

/// Rows of probabilities P[j] (0 where hidden) of query (b, h, i).
Vec probabilities(const Problem &p, const Vec &q, const Vec &k, int64_t b,
                  int64_t h, int64_t i, double *lseOut) {
  const OtcrtAttention &a = p.a;
  int64_t kh = h / (a.h / a.hk);
  Vec s(a.s, -std::numeric_limits<double>::infinity());
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < a.s; ++j) {
    if (a.causal && (j > i || (a.window > 0 && i - j >= a.window)))
      continue;
    double raw = scaledDot(p, q, k, b, h, i, j);
    if (a.softcap > 0)
      raw = a.softcap * std::tanh(raw / a.softcap);
    s[j] = raw + maskAt(p, b, h, i, j);
    max = std::max(max, s[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < a.s; ++j)
    sum += std::exp(s[j] - max);
  double lse = max + std::log(sum);
  if (lseOut)
    *lseOut = lse;
  Vec prob(a.s);
  for (int64_t j = 0; j < a.s; ++j)
    prob[j] = std::exp(s[j] - lse);
  return prob;
}

/// Forward (and, with dO, the analytic gradient) in double.
Ref reference(const Problem &p, const Vec &q, const Vec &k, const Vec &v,
              const Vec *dO) {
  const OtcrtAttention &a = p.a;
  Ref r{Vec(q.size(), 0.0), Vec(a.b * a.h * a.t), Vec(q.size(), 0.0),
        Vec(k.size(), 0.0), Vec(v.size(), 0.0)};
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t kh = h / (a.h / a.hk);
      for (int64_t i = 0; i < a.t; ++i) {
        int64_t row = (b * a.h + h) * a.t + i;
        Vec prob = probabilities(p, q, k, b, h, i, &r.lse[row]);
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
/// sum(out * R) with respect to q, k and v.
void checkReferenceGradient(const Problem &p, const Vec &q, const Vec &k,
                            const Vec &v, const Vec &R) {
  Ref r = reference(p, q, k, v, &R);
  auto lq = [&](const Vec &x) {
    return kt::dot(reference(p, x, k, v, nullptr).out, R);
  };
  auto lk = [&](const Vec &x) {
    return kt::dot(reference(p, q, x, v, nullptr).out, R);
  };
  auto lv = [&](const Vec &x) {
    return kt::dot(reference(p, q, k, x, nullptr).out, R);
  };
  kt::expectNear(r.dq, kt::numericGradient(lq, q), 1e-6, 1e-7, "ref dq");
  kt::expectNear(r.dk, kt::numericGradient(lk, k), 1e-6, 1e-7, "ref dk");
  kt::expectNear(r.dv, kt::numericGradient(lv, v), 1e-6, 1e-7, "ref dv");
}

/// Runs the f32 and bf16 kernels of one problem against the reference.
void run(const Problem &p, std::mt19937 &rng) {
  const OtcrtAttention &a = p.a;
  const int64_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  std::vector<float> q = kt::random(qn, rng, -1, 1, true);
  std::vector<float> k = kt::random(kvn, rng, -1, 1, true);
  std::vector<float> v = kt::random(kvn, rng, -1, 1, true);
  std::vector<float> dO = kt::random(qn, rng, -1, 1, true);
  Vec qd = kt::toDouble(q), kd = kt::toDouble(k), vd = kt::toDouble(v);
  Vec dOd = kt::toDouble(dO);
  const float *mask = p.mask.empty() ? nullptr : p.mask.data();

  checkReferenceGradient(p, qd, kd, vd, dOd);
  Ref ref = reference(p, qd, kd, vd, &dOd);

  std::vector<float> out(qn), lse(a.b * a.h * a.t);
  ASSERT_EQ(otcrt_attention_fwd_f32(&a, q.data(), k.data(), v.data(), mask,
                                    out.data(), lse.data(), nullptr),
            0);
  kt::expectNear(out, ref.out, 1e-5, 2e-5, "out");
  kt::expectNear(lse, ref.lse, 1e-5, 1e-5, "lse");

  std::vector<float> dq(qn), dk(kvn, NAN), dv(kvn, NAN);
  ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), q.data(), k.data(), v.data(),
                                    mask, out.data(), lse.data(), dq.data(),
                                    dk.data(), dv.data(), nullptr),
            0);
  kt::expectNear(dq, ref.dq, 1e-4, 1e-4, "dq");
  kt::expectNear(dk, ref.dk, 1e-4, 1e-4, "dk");
  kt::expectNear(dv, ref.dv, 1e-4, 1e-4, "dv");

  // bfloat16: same (representable) inputs; the backward of both kernels
  // reads the bfloat16 forward output.
  std::vector<otcrt_bf16> qb = kt::toBf16(q), kb = kt::toBf16(k),
                          vb = kt::toBf16(v), dOb = kt::toBf16(dO);
  std::vector<otcrt_bf16> mb = kt::toBf16(p.mask);
  const otcrt_bf16 *maskb = p.mask.empty() ? nullptr : mb.data();
  std::vector<otcrt_bf16> outb(qn);
  std::vector<float> lseb(lse.size());
  ASSERT_EQ(otcrt_attention_fwd_bf16(&a, qb.data(), kb.data(), vb.data(), maskb,
                                     outb.data(), lseb.data(), nullptr),
            0);
  kt::expectBf16Of(outb, out, "out bf16");
  EXPECT_EQ(lseb, lse);
  std::vector<float> outRounded = kt::fromBf16(outb);
  ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), q.data(), k.data(), v.data(),
                                    mask, outRounded.data(), lse.data(),
                                    dq.data(), dk.data(), dv.data(), nullptr),
            0);
  std::vector<otcrt_bf16> dqb(qn), dkb(kvn), dvb(kvn);
  ASSERT_EQ(otcrt_attention_bwd_bf16(&a, dOb.data(), qb.data(), kb.data(),
                                     vb.data(), maskb, outb.data(), lseb.data(),
                                     dqb.data(), dkb.data(), dvb.data(),
                                     nullptr),
            0);
  kt::expectBf16Of(dqb, dq, "dq bf16");
  kt::expectBf16Of(dkb, dk, "dk bf16");
  kt::expectBf16Of(dvb, dv, "dv bf16");
}

} // namespace

TEST(KernelsAttention, Plain) {
  std::mt19937 rng(101);
  run(makeProblem(2, 2, 2, 3, 5, 4, false, 0, nullptr, 0, rng, true), rng);
}

TEST(KernelsAttention, Causal) {
  std::mt19937 rng(102);
  run(makeProblem(2, 3, 3, 6, 6, 4, true, 0, nullptr, 0, rng, true), rng);
}

TEST(KernelsAttention, SlidingWindow) {
  std::mt19937 rng(31);
  for (int32_t window : {1, 2, 4}) {
    Problem p = makeProblem(2, 4, 2, 7, 7, 4, true, 0, nullptr, 0, rng, true);
    p.a.window = window;
    run(p, rng);
  }
  // With a key-padding mask and dropout too.
  const int64_t dims[4] = {2, 1, 1, 6};
  Problem p = makeProblem(2, 2, 1, 6, 6, 3, true, 0.25f, dims, 2, rng, true);
  p.a.window = 3;
  run(p, rng);
}

TEST(KernelsAttention, SoftCap) {
  // Gemma 2's c tanh(s / c) before the mask: causal with grouped heads,
  // a sliding window, and a key-padding mask; scores large enough that
  // the cap bends them (scale 2).
  std::mt19937 rng(33);
  for (float cap : {0.5f, 3.0f}) {
    Problem p = makeProblem(2, 4, 2, 7, 7, 4, true, 0, nullptr, 0, rng, true);
    p.a.softcap = cap;
    p.a.scale = 2.0f;
    run(p, rng);
    p.a.window = 3;
    run(p, rng);
  }
  const int64_t dims[4] = {2, 1, 1, 9};
  Problem p = makeProblem(2, 2, 1, 9, 9, 8, true, 0, dims, 2, rng, true);
  p.a.softcap = 1.0f;
  run(p, rng);
}

TEST(KernelsAttention, RejectsNegativeSoftCap) {
  std::mt19937 rng(34);
  Problem p = makeProblem(1, 1, 1, 3, 3, 2, true, 0, nullptr, 0, rng, false);
  p.a.softcap = -1.0f;
  std::vector<float> q(6), k(6), v(6), out(6), lse(3);
  EXPECT_NE(otcrt_attention_fwd_f32(&p.a, q.data(), k.data(), v.data(), nullptr,
                                    out.data(), lse.data(), nullptr),
            0);
}

TEST(KernelsAttention, RejectsNegativeWindow) {
  std::mt19937 rng(32);
  Problem p = makeProblem(1, 1, 1, 3, 3, 2, true, 0, nullptr, 0, rng, false);
  p.a.window = -1;
  std::vector<float> q(6), k(6), v(6), out(6), lse(3);
  EXPECT_NE(otcrt_attention_fwd_f32(&p.a, q.data(), k.data(), v.data(), nullptr,
                                    out.data(), lse.data(), nullptr),
            0);
}

TEST(KernelsAttention, BroadcastMaskOverBatchAndHeads) {
  std::mt19937 rng(103);
  const int64_t dims[4] = {1, 1, 4, 5};
  run(makeProblem(2, 2, 2, 4, 5, 3, false, 0, dims, 3, rng, true), rng);
}

TEST(KernelsAttention, KeyPaddingMaskCausal) {
  std::mt19937 rng(104);
  const int64_t dims[4] = {2, 1, 1, 5};
  run(makeProblem(2, 2, 1, 5, 5, 3, true, 0, dims, 2, rng, true), rng);
}

TEST(KernelsAttention, FullMask) {
  std::mt19937 rng(105);
  const int64_t dims[4] = {1, 2, 3, 4};
  run(makeProblem(1, 2, 2, 3, 4, 5, false, 0, dims, 2, rng, true), rng);
}

TEST(KernelsAttention, GroupedQueryHeads) {
  std::mt19937 rng(106);
  run(makeProblem(2, 4, 2, 4, 4, 3, true, 0, nullptr, 0, rng, true), rng);
  run(makeProblem(1, 3, 1, 3, 5, 2, false, 0, nullptr, 0, rng, true), rng);
}

TEST(KernelsAttention, Dropout) {
  std::mt19937 rng(107);
  run(makeProblem(2, 2, 1, 5, 5, 3, true, 0.3f, nullptr, 0, rng, true), rng);
  const int64_t dims[4] = {1, 1, 4, 6};
  run(makeProblem(1, 2, 2, 4, 6, 4, false, 0.5f, dims, 2, rng, true), rng);
}

/// With one-hot value rows (d = s, v_j = e_j) the output row of query i is
/// its probability row times the dropout factors, so the kept pattern reads
/// straight off the output: zero exactly where the formula drops.
TEST(KernelsAttention, DropoutKeptPattern) {
  std::mt19937 rng(108);
  const int64_t s = 64;
  Problem p =
      makeProblem(2, 2, 2, 3, s, s, false, 0.25f, nullptr, 0, rng, false);
  p.a.scale = 0.1f;
  const OtcrtAttention &a = p.a;
  std::vector<float> q = kt::random(a.b * a.h * a.t * a.d, rng);
  std::vector<float> k = kt::random(a.b * a.hk * a.s * a.d, rng);
  std::vector<float> v(a.b * a.hk * a.s * a.d, 0.0f);
  for (int64_t r = 0; r < a.b * a.hk * a.s; ++r)
    v[r * a.d + r % a.s] = 1.0f;
  std::vector<float> out(q.size()), lse(a.b * a.h * a.t);
  ASSERT_EQ(otcrt_attention_fwd_f32(&a, q.data(), k.data(), v.data(), nullptr,
                                    out.data(), lse.data(), nullptr),
            0);
  Ref ref =
      reference(p, kt::toDouble(q), kt::toDouble(k), kt::toDouble(v), nullptr);
  int64_t kept = 0, total = 0;
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.t; ++i)
        for (int64_t j = 0; j < a.s; ++j) {
          int64_t e = ((b * a.h + h) * a.t + i) * a.s + j;
          bool keep =
              kt::dropoutDraw(*a.key, a.dropout_stream,
                              static_cast<uint64_t>(e)) >= a.dropout;
          ASSERT_EQ(out[e] != 0.0f, keep) << "element " << e;
          ASSERT_NEAR(out[e], ref.out[e], 1e-6);
          kept += keep;
          ++total;
        }
  // About 3/4 kept (768 draws: far more than 5 sigma from 0.5 or 1).
  EXPECT_GT(kept, total * 6 / 10);
  EXPECT_LT(kept, total * 9 / 10);
}

TEST(KernelsAttention, RejectsUngroupedHeads) {
  OtcrtAttention a{};
  a.b = 1, a.h = 3, a.hk = 2, a.t = 1, a.s = 1, a.d = 1, a.scale = 1;
  float x[3] = {}, lse[3];
  EXPECT_NE(otcrt_attention_fwd_f32(&a, x, x, x, nullptr, x, lse, nullptr), 0);
}

// Layout [B, T, H, D] (OTCRT_LAYOUT_BTHD): the results equal, bit for bit,
// those of the [B, H, T, D] call on the same values transposed by the test
// (t = 5 and h = 4 differ, so a swapped index shows), forward and backward,
// grouped-query and causal with dropout, in float and bfloat16.
TEST(KernelsAttention, SequenceMajorLayout) {
  std::mt19937 rng(7);
  OtcrtAttention a{};
  a.b = 2, a.h = 4, a.hk = 2, a.t = 5, a.s = 5, a.d = 3;
  a.scale = 0.6f, a.causal = 1, a.dropout = 0.25f;
  static const int64_t key = 9;
  a.key = &key;
  a.dropout_stream = 4;
  const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  // [b, n, m, d] -> [b, m, n, d].
  auto swap = [&](const std::vector<float> &x, int64_t n, int64_t m) {
    std::vector<float> y(x.size());
    for (int64_t e = 0; e < a.b; ++e)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j)
          for (int64_t c = 0; c < a.d; ++c)
            y[((e * m + j) * n + i) * a.d + c] = x[((e * n + i) * m + j) * a.d + c];
    return y;
  };
  // Stored [b, t, h, d] (representable in bfloat16 for the second half).
  std::vector<float> q = kt::random(qn, rng, -1, 1, true),
                     k = kt::random(kvn, rng, -1, 1, true),
                     v = kt::random(kvn, rng, -1, 1, true),
                     dO = kt::random(qn, rng, -1, 1, true);
  std::vector<float> qh = swap(q, a.t, a.h), kh = swap(k, a.s, a.hk),
                     vh = swap(v, a.s, a.hk), dOh = swap(dO, a.t, a.h);
  std::vector<float> oh(qn), lseh(a.b * a.h * a.t), dqh(qn), dkh(kvn), dvh(kvn);
  ASSERT_EQ(otcrt_attention_fwd_f32(&a, qh.data(), kh.data(), vh.data(),
                                    nullptr, oh.data(), lseh.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_attention_bwd_f32(&a, dOh.data(), qh.data(), kh.data(),
                                    vh.data(), nullptr, oh.data(), lseh.data(),
                                    dqh.data(), dkh.data(), dvh.data(), nullptr),
            0);
  OtcrtAttention s = a;
  s.layout = OTCRT_LAYOUT_BTHD;
  std::vector<float> o(qn), lse(lseh.size()), dq(qn), dk(kvn), dv(kvn);
  ASSERT_EQ(otcrt_attention_fwd_f32(&s, q.data(), k.data(), v.data(), nullptr,
                                    o.data(), lse.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_attention_bwd_f32(&s, dO.data(), q.data(), k.data(),
                                    v.data(), nullptr, o.data(), lse.data(),
                                    dq.data(), dk.data(), dv.data(), nullptr),
            0);
  EXPECT_EQ(o, swap(oh, a.h, a.t));
  EXPECT_EQ(lse, lseh);
  EXPECT_EQ(dq, swap(dqh, a.h, a.t));
  EXPECT_EQ(dk, swap(dkh, a.hk, a.s));
  EXPECT_EQ(dv, swap(dvh, a.hk, a.s));

  // bfloat16 storage: the same equality on the bf16 entry points.
  std::vector<otcrt_bf16> qb = kt::toBf16(q), kb = kt::toBf16(k),
                          vb = kt::toBf16(v), ob(qn), ohb(qn);
  std::vector<otcrt_bf16> qhb = kt::toBf16(qh), khb = kt::toBf16(kh),
                          vhb = kt::toBf16(vh);
  std::vector<float> lb(lseh.size()), lhb(lseh.size());
  ASSERT_EQ(otcrt_attention_fwd_bf16(&a, qhb.data(), khb.data(), vhb.data(),
                                     nullptr, ohb.data(), lhb.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_attention_fwd_bf16(&s, qb.data(), kb.data(), vb.data(),
                                     nullptr, ob.data(), lb.data(), nullptr),
            0);
  EXPECT_EQ(kt::fromBf16(ob), swap(kt::fromBf16(ohb), a.h, a.t));
  EXPECT_EQ(lb, lhb);
}

namespace {

/// [b, n, m, d] -> [b, m, n, d].
template <typename T>
std::vector<T> swapMiddle(const std::vector<T> &x, int64_t b, int64_t n,
                          int64_t m, int64_t d) {
  std::vector<T> y(x.size());
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t c = 0; c < d; ++c)
          y[((e * m + j) * n + i) * d + c] = x[((e * n + i) * m + j) * d + c];
  return y;
}

/// Elements [off, off + width) of each of the `rows` rows of `x`, `row`
/// elements apart: a dense [rows, width].
template <typename T>
std::vector<T> gatherRows(const std::vector<T> &x, int64_t rows, int64_t row,
                          int64_t off, int64_t width) {
  std::vector<T> y(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x.begin() + r * row + off, x.begin() + r * row + off + width,
              y.begin() + r * width);
  return y;
}

/// The last `pad` elements of each row of `x` (the rest of each row is
/// q, k and v).
template <typename T>
std::vector<T> rowPadding(const std::vector<T> &x, int64_t rows, int64_t row,
                          int64_t pad) {
  return gatherRows(x, rows, row, row - pad, pad);
}

/// A [b, t, h, d] problem (t == s) whose q, k and v are heads 0, h and
/// h + hk of one [b, t, h + 2hk, d] tensor with `pad` more elements at the
/// end of each row (row_stride (h + 2hk)·d + pad), random everywhere, and
/// whose gradients are written into one such tensor filled with a sentinel:
/// forward and backward against the double reference, bit for bit equal to
/// the dense [b, t, h, d] call on the gathered q, k and v, the padding of
/// the gradients untouched; then the same in bfloat16.
void runPacked(Problem p, int64_t pad, std::mt19937 &rng) {
  OtcrtAttention &a = p.a;
  ASSERT_EQ(a.t, a.s);
  const int64_t hd = a.h * a.d, kd = a.hk * a.d, rows = a.b * a.t;
  const int64_t row = hd + 2 * kd + pad, kOff = hd, vOff = hd + kd;
  const int64_t qn = rows * hd, kvn = rows * kd;
  const float sentinel = 768.0f; // exact in bfloat16, far from any result
  a.layout = OTCRT_LAYOUT_BTHD;
  a.row_stride = row;
  OtcrtAttention dense = a;
  dense.row_stride = 0;

  std::vector<float> qkv = kt::random(rows * row, rng, -1, 1, true);
  std::vector<float> dO = kt::random(qn, rng, -1, 1, true);
  std::vector<float> q = gatherRows(qkv, rows, row, 0, hd),
                     k = gatherRows(qkv, rows, row, kOff, kd),
                     v = gatherRows(qkv, rows, row, vOff, kd);
  Vec dOh = kt::toDouble(swapMiddle(dO, a.b, a.t, a.h, a.d));
  Ref ref = reference(p, kt::toDouble(swapMiddle(q, a.b, a.t, a.h, a.d)),
                      kt::toDouble(swapMiddle(k, a.b, a.s, a.hk, a.d)),
                      kt::toDouble(swapMiddle(v, a.b, a.s, a.hk, a.d)), &dOh);
  const float *mask = p.mask.empty() ? nullptr : p.mask.data();

  std::vector<float> out(qn), lse(a.b * a.h * a.t);
  ASSERT_EQ(otcrt_attention_fwd_f32(&a, qkv.data(), qkv.data() + kOff,
                                    qkv.data() + vOff, mask, out.data(),
                                    lse.data(), nullptr),
            0);
  kt::expectNear(swapMiddle(out, a.b, a.t, a.h, a.d), ref.out, 1e-5, 2e-5,
                 "packed out");
  kt::expectNear(lse, ref.lse, 1e-5, 1e-5, "packed lse");
  std::vector<float> outD(qn), lseD(lse.size());
  ASSERT_EQ(otcrt_attention_fwd_f32(&dense, q.data(), k.data(), v.data(), mask,
                                    outD.data(), lseD.data(), nullptr),
            0);
  EXPECT_EQ(out, outD);
  EXPECT_EQ(lse, lseD);

  std::vector<float> dqkv(rows * row, sentinel);
  ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), qkv.data(),
                                    qkv.data() + kOff, qkv.data() + vOff, mask,
                                    out.data(), lse.data(), dqkv.data(),
                                    dqkv.data() + kOff, dqkv.data() + vOff,
                                    nullptr),
            0);
  std::vector<float> dq = gatherRows(dqkv, rows, row, 0, hd),
                     dk = gatherRows(dqkv, rows, row, kOff, kd),
                     dv = gatherRows(dqkv, rows, row, vOff, kd);
  kt::expectNear(swapMiddle(dq, a.b, a.t, a.h, a.d), ref.dq, 1e-4, 1e-4,
                 "packed dq");
  kt::expectNear(swapMiddle(dk, a.b, a.s, a.hk, a.d), ref.dk, 1e-4, 1e-4,
                 "packed dk");
  kt::expectNear(swapMiddle(dv, a.b, a.s, a.hk, a.d), ref.dv, 1e-4, 1e-4,
                 "packed dv");
  EXPECT_EQ(rowPadding(dqkv, rows, row, pad),
            std::vector<float>(rows * pad, sentinel));
  std::vector<float> dqD(qn), dkD(kvn), dvD(kvn);
  ASSERT_EQ(otcrt_attention_bwd_f32(&dense, dO.data(), q.data(), k.data(),
                                    v.data(), mask, out.data(), lse.data(),
                                    dqD.data(), dkD.data(), dvD.data(), nullptr),
            0);
  EXPECT_EQ(dq, dqD);
  EXPECT_EQ(dk, dkD);
  EXPECT_EQ(dv, dvD);

  // bfloat16: the packed call equals the dense one bit for bit and the f32
  // results within bfloat16 rounding (the backward reading the bfloat16
  // forward output on both sides).
  std::vector<otcrt_bf16> qkvb = kt::toBf16(qkv), dOb = kt::toBf16(dO);
  std::vector<otcrt_bf16> qb = kt::toBf16(q), kb = kt::toBf16(k),
                          vb = kt::toBf16(v), mb = kt::toBf16(p.mask);
  const otcrt_bf16 *maskb = p.mask.empty() ? nullptr : mb.data();
  std::vector<otcrt_bf16> outb(qn), outbD(qn);
  std::vector<float> lseb(lse.size()), lsebD(lse.size());
  ASSERT_EQ(otcrt_attention_fwd_bf16(&a, qkvb.data(), qkvb.data() + kOff,
                                     qkvb.data() + vOff, maskb, outb.data(),
                                     lseb.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_attention_fwd_bf16(&dense, qb.data(), kb.data(), vb.data(),
                                     maskb, outbD.data(), lsebD.data(),
                                     nullptr),
            0);
  kt::expectBf16Of(outb, out, "packed out bf16");
  EXPECT_EQ(lseb, lse);
  EXPECT_EQ(outb, outbD);
  EXPECT_EQ(lseb, lsebD);
  std::vector<float> outRounded = kt::fromBf16(outb);
  ASSERT_EQ(otcrt_attention_bwd_f32(&dense, dO.data(), q.data(), k.data(),
                                    v.data(), mask, outRounded.data(),
                                    lse.data(), dqD.data(), dkD.data(),
                                    dvD.data(), nullptr),
            0);
  std::vector<otcrt_bf16> dqkvb = kt::toBf16(std::vector<float>(rows * row, sentinel));
  ASSERT_EQ(otcrt_attention_bwd_bf16(&a, dOb.data(), qkvb.data(),
                                     qkvb.data() + kOff, qkvb.data() + vOff,
                                     maskb, outb.data(), lseb.data(),
                                     dqkvb.data(), dqkvb.data() + kOff,
                                     dqkvb.data() + vOff, nullptr),
            0);
  std::vector<otcrt_bf16> dqb = gatherRows(dqkvb, rows, row, 0, hd),
                          dkb = gatherRows(dqkvb, rows, row, kOff, kd),
                          dvb = gatherRows(dqkvb, rows, row, vOff, kd);
  kt::expectBf16Of(dqb, dqD, "packed dq bf16");
  kt::expectBf16Of(dkb, dkD, "packed dk bf16");
  kt::expectBf16Of(dvb, dvD, "packed dv bf16");
  EXPECT_EQ(kt::fromBf16(rowPadding(dqkvb, rows, row, pad)),
            std::vector<float>(rows * pad, sentinel));
  std::vector<otcrt_bf16> dqbD(qn), dkbD(kvn), dvbD(kvn);
  ASSERT_EQ(otcrt_attention_bwd_bf16(&dense, dOb.data(), qb.data(), kb.data(),
                                     vb.data(), maskb, outb.data(), lseb.data(),
                                     dqbD.data(), dkbD.data(), dvbD.data(),
                                     nullptr),
            0);
  EXPECT_EQ(dqb, dqbD);
  EXPECT_EQ(dkb, dkbD);
  EXPECT_EQ(dvb, dvbD);
}

} // namespace

// q, k and v read from one fused projection output [b, t, h + 2hk, d] in
// place (row_stride), and their gradients written into one such tensor:
// rows exactly as long as the three (no gaps), and rows with d more
// elements at the end that must keep their sentinel.
TEST(KernelsAttention, PackedQkvRowStride) {
  std::mt19937 rng(109);
  for (int64_t pad : {0, 3}) {
    // Causal, grouped-query heads.
    runPacked(makeProblem(2, 4, 2, 5, 5, 3, true, 0, nullptr, 0, rng, true),
              pad, rng);
    // Plain, one key head per query head.
    runPacked(makeProblem(2, 3, 3, 4, 4, 3, false, 0, nullptr, 0, rng, true),
              pad, rng);
    // One key head, causal with a key-padding mask and dropout.
    const int64_t dims[4] = {2, 1, 1, 6};
    runPacked(makeProblem(2, 2, 1, 6, 6, 3, true, 0.25f, dims, 2, rng, true),
              pad, rng);
  }
  // Sliding window.
  Problem p = makeProblem(1, 4, 2, 7, 7, 4, true, 0, nullptr, 0, rng, true);
  p.a.window = 3;
  runPacked(p, 4, rng);
}

// A row stride with the [b, h, t, d] layout, or shorter than the rows of q,
// is an error, and nothing is written.
TEST(KernelsAttention, RejectsBadRowStride) {
  OtcrtAttention a{};
  a.b = 1, a.h = 2, a.hk = 1, a.t = 2, a.s = 2, a.d = 2, a.scale = 1;
  const float sentinel = 768.0f;
  std::vector<float> x(16, 0.5f), lse(4, sentinel);
  std::vector<otcrt_bf16> xb(16, 0x3f00), ob(8, 0x4440);
  for (int bad = 0; bad < 2; ++bad) {
    OtcrtAttention c = a;
    if (bad == 0) {
      c.layout = OTCRT_LAYOUT_BHTD;
      c.row_stride = 8;
    } else {
      c.layout = OTCRT_LAYOUT_BTHD;
      c.row_stride = a.h * a.d - 1;
    }
    std::vector<float> out(8, sentinel), dq(8, sentinel), dk(4, sentinel),
        dv(4, sentinel);
    EXPECT_NE(otcrt_attention_fwd_f32(&c, x.data(), x.data(), x.data(),
                                      nullptr, out.data(), lse.data(), nullptr),
              0);
    EXPECT_NE(otcrt_attention_bwd_f32(&c, x.data(), x.data(), x.data(),
                                      x.data(), nullptr, x.data(), x.data(),
                                      dq.data(), dk.data(), dv.data(), nullptr),
              0);
    EXPECT_NE(otcrt_attention_fwd_bf16(&c, xb.data(), xb.data(), xb.data(),
                                       nullptr, ob.data(), lse.data(), nullptr),
              0);
    std::vector<otcrt_bf16> dqb(8, 0x4440), dkb(4, 0x4440), dvb(4, 0x4440);
    EXPECT_NE(otcrt_attention_bwd_bf16(&c, xb.data(), xb.data(), xb.data(),
                                       xb.data(), nullptr, xb.data(),
                                       x.data(), dqb.data(), dkb.data(),
                                       dvb.data(), nullptr),
              0);
    EXPECT_EQ(out, std::vector<float>(8, sentinel));
    EXPECT_EQ(lse, std::vector<float>(4, sentinel));
    EXPECT_EQ(dq, std::vector<float>(8, sentinel));
    EXPECT_EQ(dk, std::vector<float>(4, sentinel));
    EXPECT_EQ(dv, std::vector<float>(4, sentinel));
    EXPECT_EQ(ob, std::vector<otcrt_bf16>(8, 0x4440));
    EXPECT_EQ(dqb, std::vector<otcrt_bf16>(8, 0x4440));
    EXPECT_EQ(dkb, std::vector<otcrt_bf16>(4, 0x4440));
    EXPECT_EQ(dvb, std::vector<otcrt_bf16>(4, 0x4440));
  }
}

/// dS of a mask with a gradient (a relative position bias: T5): the kernels'
/// dscores against the gradient of sum(out * R) with respect to a full
/// [b, h, t, s] mask by central differences of the double reference, plain,
/// causal with a soft cap and grouped heads, and in the [b, t, h, d] layout;
/// bf16 within a bfloat16 rounding of the f32 kernel's.
TEST(KernelsAttention, ScoresGradientForAMaskWithAGradient) {
  std::mt19937 rng(35);
  for (int variant = 0; variant < 3; ++variant) {
    const int64_t b = 2, h = 2, hk = variant == 1 ? 1 : 2, t = 5, s = 5, d = 4;
    const int64_t dims[4] = {b, h, t, s};
    Problem p =
        makeProblem(b, h, hk, t, s, d, variant == 1, 0, dims, 0, rng, true);
    if (variant == 1) {
      p.a.softcap = 1.0f;
      p.a.scale = 2.0f;
    }
    const int64_t qn = b * h * t * d, kvn = b * hk * s * d, sn = b * h * t * s;
    std::vector<float> q = kt::random(qn, rng, -1, 1, true);
    std::vector<float> k = kt::random(kvn, rng, -1, 1, true);
    std::vector<float> v = kt::random(kvn, rng, -1, 1, true);
    std::vector<float> dO = kt::random(qn, rng, -1, 1, true);
    Vec qd = kt::toDouble(q), kd = kt::toDouble(k), vd = kt::toDouble(v),
        dOd = kt::toDouble(dO);
    // The oracle: d sum(out * dO) / d mask by central differences of the
    // double reference, with a step of 2^-10, exact in the float mask
    // (whose values are bfloat16's).
    const float step = 1.0f / 1024;
    Vec want(sn);
    for (int64_t e = 0; e < sn; ++e) {
      Problem up = p, down = p;
      up.mask[e] += step;
      down.mask[e] -= step;
      want[e] = (kt::dot(reference(up, qd, kd, vd, nullptr).out, dOd) -
                 kt::dot(reference(down, qd, kd, vd, nullptr).out, dOd)) /
                (2.0 * step);
    }

    std::vector<float> out(qn), lse(b * h * t);
    ASSERT_EQ(otcrt_attention_fwd_f32(&p.a, q.data(), k.data(), v.data(),
                                      p.mask.data(), out.data(), lse.data(),
                                      nullptr),
              0);
    std::vector<float> dq(qn), dk(kvn), dv(kvn), ds(sn, NAN);
    OtcrtAttention a = p.a;
    a.dscores = ds.data();
    ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), q.data(), k.data(),
                                      v.data(), p.mask.data(), out.data(),
                                      lse.data(), dq.data(), dk.data(),
                                      dv.data(), nullptr),
              0);
    // Hidden keys (causal) have dS 0, as their differences do.
    kt::expectNear(ds, want, 1e-4, 1e-4, "dscores");
    // The other gradients are unchanged by asking for dS.
    std::vector<float> dq0(qn), dk0(kvn), dv0(kvn);
    ASSERT_EQ(otcrt_attention_bwd_f32(&p.a, dO.data(), q.data(), k.data(),
                                      v.data(), p.mask.data(), out.data(),
                                      lse.data(), dq0.data(), dk0.data(),
                                      dv0.data(), nullptr),
              0);
    EXPECT_EQ(dq, dq0);
    EXPECT_EQ(dk, dk0);
    EXPECT_EQ(dv, dv0);

    // bfloat16: the f32 kernel's dS from the bf16 forward's output, rounded.
    std::vector<otcrt_bf16> qb = kt::toBf16(q), kb = kt::toBf16(k),
                            vb = kt::toBf16(v), dOb = kt::toBf16(dO),
                            mb = kt::toBf16(p.mask), outb(qn);
    std::vector<float> lseb(lse.size());
    ASSERT_EQ(otcrt_attention_fwd_bf16(&p.a, qb.data(), kb.data(), vb.data(),
                                       mb.data(), outb.data(), lseb.data(),
                                       nullptr),
              0);
    std::vector<float> outRounded = kt::fromBf16(outb), dsr(sn);
    a.dscores = dsr.data();
    ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), q.data(), k.data(),
                                      v.data(), p.mask.data(),
                                      outRounded.data(), lseb.data(), dq.data(),
                                      dk.data(), dv.data(), nullptr),
              0);
    std::vector<otcrt_bf16> dqb(qn), dkb(kvn), dvb(kvn), dsb(sn);
    a.dscores = dsb.data();
    ASSERT_EQ(otcrt_attention_bwd_bf16(&a, dOb.data(), qb.data(), kb.data(),
                                       vb.data(), mb.data(), outb.data(),
                                       lseb.data(), dqb.data(), dkb.data(),
                                       dvb.data(), nullptr),
              0);
    kt::expectBf16Of(dsb, dsr, "dscores bf16");
    if (variant != 2)
      continue;
    // Sequence-major q, k, v (and their gradients): dS stays [b, h, t, s].
    OtcrtAttention c = p.a;
    c.layout = OTCRT_LAYOUT_BTHD;
    std::vector<float> qs = swapMiddle(q, b, h, t, d),
                       ks = swapMiddle(k, b, hk, s, d),
                       vs = swapMiddle(v, b, hk, s, d),
                       dOs = swapMiddle(dO, b, h, t, d),
                       outs = swapMiddle(out, b, h, t, d);
    std::vector<float> dss(sn, NAN);
    c.dscores = dss.data();
    ASSERT_EQ(otcrt_attention_bwd_f32(&c, dOs.data(), qs.data(), ks.data(),
                                      vs.data(), p.mask.data(), outs.data(),
                                      lse.data(), dq.data(), dk.data(),
                                      dv.data(), nullptr),
              0);
    EXPECT_EQ(dss, ds);
  }
}
