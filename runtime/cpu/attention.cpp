// Host scaled dot-product attention of libotcrt_cpu (otc.attention and
// otc.attention_grad), with causal hiding (and a sliding window, or a
// bidirectional one), scores soft-capped as c tanh(s / c) (Gemma 2; the
// backward times dS by the slope 1 - tanh^2), an additive broadcast mask or a
// key padding that hides keys (a row that sees no key: zeros, lse +inf),
// grouped-query heads and dropout, attention sinks (a logit per head in each
// row's normalizer), in tiles of 64 query rows whose products are GEMMs of this
// library (OpenBLAS where installed): the forward forms a tile's scores
// over the keys its rows see (one GEMM), subtracts each row's maximum
// before the exponentials (expFast in vector loops, summed in double),
// saves the row's log-sum-exp and multiplies the probabilities by V (a
// second GEMM). The backward takes one key head of one batch entry per
// thread (so that its dk and dv rows have one writer) and, for each tile
// of its query heads, rebuilds the probabilities from the scores and that
// lse, and forms dq, dk and dv by GEMMs. The bfloat16 entry points widen
// their operands to float, run the float kernel and round the results.
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace otcrt {
namespace cpu {

/// C = alpha op(A) op(B) + beta C, row-major float, through this library's
/// GEMM (OpenBLAS where installed: cpu/gemm.cpp). Called inside the
/// attention's parallel loops, it runs on the calling thread.
void matmul(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
            float alpha, const float *A, int64_t lda, const float *B,
            int64_t ldb, float beta, float *C, int64_t ldc) {
  OtcrtGemm g{};
  g.trans_a = transA;
  g.trans_b = transB;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = 1;
  g.alpha = alpha;
  g.beta = beta;
  g.ab_type = g.c_type = g.epilogue_type = OTC_F32;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  gemm(g, A, B, C, nullptr, nullptr, nullptr);
}

namespace {

/// Index arithmetic and the per-element terms of one attention problem.
struct Problem {
  const OtcrtAttention &a;
  const float *mask;
  int64_t group; ///< query heads per key/value head
  float keepScale;

  Problem(const OtcrtAttention &a, const float *mask)
      : a(a), mask(mask), group(a.h / a.hk),
        keepScale(a.dropout > 0.0f ? 1.0f / (1.0f - a.dropout) : 1.0f) {}

  /// End of the keys visible from query i (the causal prefix, or a
  /// bidirectional window's end).
  int64_t visibleKeys(int64_t i) const {
    if (a.causal)
      return std::min(a.s, i + 1);
    return a.window > 0 ? std::min(a.s, i + a.window) : a.s;
  }
  /// First key visible from query i (a sliding window's start).
  int64_t firstKey(int64_t i) const {
    return a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
  }

  /// Row (b, hi, i) of the [b, h, t] query rows.
  int64_t queryRow(int64_t b, int64_t hi, int64_t i) const {
    return (b * a.h + hi) * a.t + i;
  }
  /// First element of key/value row (b, kh, j).
  int64_t kvOffset(int64_t b, int64_t kh, int64_t j) const {
    return ((b * a.hk + kh) * a.s + j) * a.d;
  }

  /// The dropout factor of probability (row, j): 0 or 1 / (1 - dropout).
  float dropFactor(int64_t row, int64_t j) const {
    if (a.dropout <= 0.0f)
      return 1.0f;
    uint64_t index = static_cast<uint64_t>(row * a.s + j);
    return dropoutKeep(static_cast<uint64_t>(*a.key), a.dropout_stream, index,
                       a.dropout)
               ? keepScale
               : 0.0f;
  }
};

/// True when the query heads do not split into groups of the key heads, the
/// window or soft cap is negative, or a row stride is set without the
/// [b, t, h, d] layout or is shorter than the rows of q or of k and v.
bool invalid(const OtcrtAttention &a) {
  return (a.hk <= 0 ? a.h > 0 : a.h % a.hk != 0) || a.window < 0 ||
         !(a.softcap >= 0.0f) ||
         (a.row_stride != 0 &&
          (a.layout != OTCRT_LAYOUT_BTHD || a.row_stride < a.h * a.d ||
           a.row_stride < a.hk * a.d));
}

/// True when there is no query row to compute.
bool degenerate(const OtcrtAttention &a) {
  return a.b <= 0 || a.h <= 0 || a.t <= 0 || a.d <= 0;
}

/// A key padding's value at or below this hides its key.
constexpr float kPaddingHides = OTCRT_KEY_PADDING_HIDES;

/// Query rows per tile: a tile's scores are one [kQueryTile, keys] GEMM.
constexpr int64_t kQueryTile = 64;

/// The scores of the query rows [i0, i1) of head (b, hi) against the keys
/// [j0, j1) of its key head, scaled, masked and with the keys a row does not
/// see (causal prefix, window) at -inf: s [i1 - i0, j1 - j0].
void tileScores(const Problem &p, const float *q, const float *kb, int64_t b,
                int64_t hi, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                float *s, float *tanhs = nullptr) {
  const OtcrtAttention &a = p.a;
  const int64_t n = j1 - j0;
  matmul(false, true, i1 - i0, n, a.d, a.scale, q + p.queryRow(b, hi, i0) * a.d,
         a.d, kb + j0 * a.d, a.d, 0.0f, s, n);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = i0; i < i1; ++i) {
    float *row = s + (i - i0) * n;
    // Keys [j0, lo) and [hi, j1) are hidden from this row; the mask is
    // added to those between, contiguous keys a vector loop apart.
    int64_t lo = std::clamp(p.firstKey(i), j0, j1);
    int64_t end = std::clamp(p.visibleKeys(i), lo, j1);
    std::fill(row, row + (lo - j0), -inf);
    std::fill(row + (end - j0), row + n, -inf);
    if (a.softcap > 0.0f) {
      // Soft-capped: c tanh(s / c), the tanh kept for the backward's slope.
      float *t = tanhs ? tanhs + (i - i0) * n : nullptr;
      if (t) {
        std::fill(t, t + (lo - j0), 0.0f);
        std::fill(t + (end - j0), t + n, 0.0f);
      }
      for (int64_t j = lo; j < end; ++j) {
        float th = std::tanh(row[j - j0] / a.softcap);
        row[j - j0] = a.softcap * th;
        if (t)
          t[j - j0] = th;
      }
    }
    if (!p.mask)
      continue;
    const float *m = p.mask + b * a.mask_strides[0] + hi * a.mask_strides[1] +
                     i * a.mask_strides[2];
    const int64_t ms = a.mask_strides[3];
    if (a.key_padding) {
      // A key padding hides its keys as the band does.
      for (int64_t j = lo; j < end; ++j)
        row[j - j0] =
            m[j * ms] <= kPaddingHides ? -inf : row[j - j0] + m[j * ms];
    } else if (ms == 1) {
      for (int64_t j = lo; j < end; ++j)
        row[j - j0] += m[j];
    } else {
      for (int64_t j = lo; j < end; ++j)
        row[j - j0] += m[j * ms];
    }
  }
}

/// A mask value that hides its key: its probability is exactly 0 beside
/// any key a row sees (the float or BF16 minimum of the exports, -inf).
constexpr float kHidden = -1e30f;

/// The keys any of the query rows [i0, i1) of head (b, hi) sees: [first,
/// end), without the trailing keys the mask hides from every row (a padded
/// batch's, a decode step's keys after its position), unless it hides all.
std::pair<int64_t, int64_t> tileKeys(const Problem &p, int64_t b, int64_t hi,
                                     int64_t i0, int64_t i1) {
  const OtcrtAttention &a = p.a;
  int64_t first = p.firstKey(i0), end = p.visibleKeys(i1 - 1);
  if (!p.mask)
    return {first, end};
  for (int64_t j = end - 1; j >= first; --j)
    for (int64_t i = i0; i < i1; ++i)
      if (j >= p.firstKey(i) && j < p.visibleKeys(i) &&
          p.mask[b * a.mask_strides[0] + hi * a.mask_strides[1] +
                 i * a.mask_strides[2] + j * a.mask_strides[3]] >
              (a.key_padding ? kPaddingHides : kHidden))
        return {first, j + 1};
  return {first, end};
}

/// Lanes of the row reductions below: each lane's partial maximum or sum
/// runs over the keys j with j % kLanes equal to it (a fixed order, so the
/// result does not depend on the thread count), in vector registers.
constexpr int64_t kLanes = 16;

/// A row of scores [n] into its probabilities in place: each e^(s - max) by
/// expFast, summed in double (with e^(sink - max) where a sink joins the
/// row), over the sum. Returns the row's log-sum-exp; a row that sees no
/// key (every score -inf, no sink) gets zeros and +inf.
float softmaxRow(float *s, int64_t n, const float *sink) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] = s[j + l] > lanes[l] ? s[j + l] : lanes[l];
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t l = 0; l < kLanes; ++l)
    max = std::max(max, lanes[l]);
  for (; j < n; ++j)
    max = std::max(max, s[j]);
  if (sink)
    max = std::max(max, *sink);
  if (max == -std::numeric_limits<float>::infinity()) {
    std::fill(s, s + n, 0.0f);
    return std::numeric_limits<float>::infinity();
  }
  for (j = 0; j < n; ++j)
    s[j] = expFast(s[j] - max);
  double sums[kLanes] = {};
  for (j = 0; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      sums[l] += s[j + l];
  double sum = 0.0;
  for (int64_t l = 0; l < kLanes; ++l)
    sum += sums[l];
  for (; j < n; ++j)
    sum += s[j];
  if (sink)
    sum += std::exp(static_cast<double>(*sink) - max);
  const float inv = static_cast<float>(1.0 / sum);
  for (j = 0; j < n; ++j)
    s[j] *= inv;
  return max + static_cast<float>(std::log(sum));
}

// The forward, one tile of query rows of one head at a time: the tile's
// scores as one GEMM over the keys its rows see, each row's maximum and
// log-sum-exp (the exponentials summed in double), the probabilities (with
// dropout's factors) in place, and the output as one more GEMM.
int forward(const OtcrtAttention &a, const float *q, const float *k,
            const float *v, const float *mask, float *out, float *lse) {
  if (invalid(a))
    return 1;
  if (degenerate(a))
    return 0;
  Problem p(a, mask);
  const int64_t tiles = (a.t + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = a.b * a.h * tiles;
#pragma omp parallel
  {
    std::vector<float> s(static_cast<size_t>(kQueryTile * std::max<int64_t>(a.s, 1)));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      int64_t tile = task % tiles, bh = task / tiles;
      int64_t hi = bh % a.h, b = bh / a.h, kh = hi / p.group;
      int64_t i0 = tile * kQueryTile, i1 = std::min(a.t, i0 + kQueryTile);
      auto [j0, j1] = tileKeys(p, b, hi, i0, i1);
      const int64_t n = std::max<int64_t>(j1 - j0, 0);
      const float *sink = a.sinks ? a.sinks + hi : nullptr;
      if (n == 0) {
        // No key seen: zeros, and the sink's logit alone in the lse (+inf
        // without one: no probability anywhere).
        for (int64_t i = i0; i < i1; ++i) {
          int64_t row = p.queryRow(b, hi, i);
          lse[row] = sink ? *sink : std::numeric_limits<float>::infinity();
          std::fill(out + row * a.d, out + (row + 1) * a.d, 0.0f);
        }
        continue;
      }
      tileScores(p, q, k + p.kvOffset(b, kh, 0), b, hi, i0, i1, j0, j1,
                 s.data());
      for (int64_t i = i0; i < i1; ++i) {
        int64_t row = p.queryRow(b, hi, i);
        float *sr = s.data() + (i - i0) * n;
        float rowLse = softmaxRow(sr, n, sink);
        lse[row] = rowLse;
        if (a.dropout > 0.0f)
          for (int64_t j = 0; j < n; ++j)
            sr[j] *= p.dropFactor(row, j0 + j);
      }
      matmul(false, false, i1 - i0, a.d, n, 1.0f, s.data(), n,
             v + p.kvOffset(b, kh, j0), a.d, 0.0f,
             out + p.queryRow(b, hi, i0) * a.d, a.d);
    }
  }
  return 0;
}

// The backward, one key head of one batch entry per task (so that its dk
// and dv rows have one writer), its query heads' tiles in turn: the tile's
// probabilities rebuilt from its scores and the saved lse, D_i = dO_i . O_i
// (in double), dP = dO Vᵀ (with dropout's factors), dS = P (dP - D), and
// four GEMMs: dq = scale dS K, dk += scale dSᵀ Q, dv += (P m)ᵀ dO. With
// sinks, each (batch entry, head) sums -e^(sink - lse_i) D_i over its rows
// (one writer each), and the heads' sums over the batch come after, in
// batch order.
int backward(const OtcrtAttention &a, const float *dout, const float *q,
             const float *k, const float *v, const float *mask,
             const float *out, const float *lse, float *dq, float *dk,
             float *dv) {
  if (invalid(a))
    return 1;
  if (a.b > 0 && a.hk > 0 && a.s > 0 && a.d > 0) {
    std::fill(dk, dk + a.b * a.hk * a.s * a.d, 0.0f);
    std::fill(dv, dv + a.b * a.hk * a.s * a.d, 0.0f);
  }
  if (a.sinks && a.dsinks && a.h > 0)
    std::fill(a.dsinks, a.dsinks + a.h, 0.0f);
  if (degenerate(a))
    return 0;
  Problem p(a, mask);
  const int64_t tiles = (a.t + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = a.b * a.hk;
  // dS wanted (a mask with a gradient): every row's, 0 where hidden.
  float *ds = static_cast<float *>(a.dscores);
  if (ds && a.s > 0)
    std::fill(ds, ds + a.b * a.h * a.t * a.s, 0.0f);
  // The sinks' gradient of each (batch entry, head), in double.
  std::vector<double> dsinkRows(a.sinks && a.dsinks ? a.b * a.h : 0, 0.0);
#pragma omp parallel
  {
    const size_t tileElems =
        static_cast<size_t>(kQueryTile * std::max<int64_t>(a.s, 1));
    std::vector<float> s(tileElems), dp(tileElems), rowD(kQueryTile);
    std::vector<float> tanhs(a.softcap > 0.0f ? tileElems : 0);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      int64_t kh = task % a.hk, b = task / a.hk;
      const float *kb = k + p.kvOffset(b, kh, 0), *vb = v + p.kvOffset(b, kh, 0);
      float *dkb = dk + p.kvOffset(b, kh, 0), *dvb = dv + p.kvOffset(b, kh, 0);
      for (int64_t g = 0; g < p.group; ++g) {
        int64_t hi = kh * p.group + g;
        for (int64_t tile = 0; tile < tiles; ++tile) {
          int64_t i0 = tile * kQueryTile, i1 = std::min(a.t, i0 + kQueryTile);
          int64_t r = i1 - i0, row0 = p.queryRow(b, hi, i0);
          auto [j0, j1] = tileKeys(p, b, hi, i0, i1);
          const int64_t n = std::max<int64_t>(j1 - j0, 0);
          if (n == 0) {
            // The rows' outputs are zeros: no sink gradient either.
            std::fill(dq + row0 * a.d, dq + (row0 + r) * a.d, 0.0f);
            continue;
          }
          const float *qt = q + row0 * a.d, *dOt = dout + row0 * a.d;
          tileScores(p, q, kb, b, hi, i0, i1, j0, j1, s.data(),
                     tanhs.empty() ? nullptr : tanhs.data());
          matmul(false, true, r, n, a.d, 1.0f, dOt, a.d, vb + j0 * a.d, a.d,
                 0.0f, dp.data(), n);
          for (int64_t i = 0; i < r; ++i) {
            int64_t row = row0 + i;
            const float *dOi = dOt + i * a.d, *oi = out + row * a.d;
            const int64_t scoreRow = (b * a.h + hi) * a.t + i0 + i;
            double d = 0.0;
            for (int64_t c = 0; c < a.d; ++c)
              d += static_cast<double>(dOi[c]) * oi[c];
            float di = static_cast<float>(d);
            float *sr = s.data() + i * n, *dpr = dp.data() + i * n;
            const float rowLse = lse[row];
            if (rowLse == std::numeric_limits<float>::infinity()) {
              // A row that sees no key: no probability, no gradient.
              std::fill(sr, sr + n, 0.0f);
              std::fill(dpr, dpr + n, 0.0f);
              if (ds)
                std::fill(ds + scoreRow * a.s + j0, ds + scoreRow * a.s + j1,
                          0.0f);
              continue;
            }
            if (!dsinkRows.empty())
              dsinkRows[b * a.h + hi] -=
                  std::exp(static_cast<double>(a.sinks[hi]) - rowLse) * d;
            // dp becomes dS; s becomes the kept probabilities P m.
            if (a.dropout > 0.0f) {
              for (int64_t j = 0; j < n; ++j) {
                float prob = expFast(sr[j] - rowLse);
                float m = p.dropFactor(row, j0 + j);
                dpr[j] = prob * (m * dpr[j] - di);
                sr[j] = prob * m;
              }
            } else {
              for (int64_t j = 0; j < n; ++j) {
                float prob = expFast(sr[j] - rowLse);
                dpr[j] = prob * (dpr[j] - di);
                sr[j] = prob;
              }
            }
            if (ds)
              std::copy(dpr, dpr + n, ds + scoreRow * a.s + j0);
            // Through the soft cap: dS (1 - tanh^2) (hidden keys: dS 0).
            if (!tanhs.empty()) {
              const float *t = tanhs.data() + i * n;
              for (int64_t j = 0; j < n; ++j)
                dpr[j] *= 1.0f - t[j] * t[j];
            }
          }
          matmul(false, false, r, a.d, n, a.scale, dp.data(), n,
                 kb + j0 * a.d, a.d, 0.0f, dq + row0 * a.d, a.d);
          matmul(true, false, n, a.d, r, a.scale, dp.data(), n, qt, a.d, 1.0f,
                 dkb + j0 * a.d, a.d);
          matmul(true, false, n, a.d, r, 1.0f, s.data(), n, dOt, a.d, 1.0f,
                 dvb + j0 * a.d, a.d);
        }
      }
    }
  }
  if (!dsinkRows.empty())
    for (int64_t hi = 0; hi < a.h; ++hi) {
      double sum = 0.0;
      for (int64_t b = 0; b < a.b; ++b)
        sum += dsinkRows[b * a.h + hi];
      a.dsinks[hi] = static_cast<float>(sum);
    }
  return 0;
}

/// A float copy of n bfloat16 elements (empty for NULL).
std::vector<float> widen(const otcrt_bf16 *x, int64_t n) {
  std::vector<float> out;
  if (!x || n <= 0)
    return out;
  out.resize(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t e = 0; e < n; ++e)
    out[e] = bf16ToFloat(x[e]);
  return out;
}

/// Rounds n floats into bfloat16 storage.
void narrow(const std::vector<float> &x, otcrt_bf16 *out) {
  int64_t n = static_cast<int64_t>(x.size());
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t e = 0; e < n; ++e)
    out[e] = floatToBf16(x[e]);
}

/// Elements spanned by the strided mask: 1 + the largest offset.
int64_t maskExtent(const OtcrtAttention &a) {
  const int64_t dims[4] = {a.b, a.h, a.t, a.s};
  int64_t extent = 1;
  for (int i = 0; i < 4; ++i)
    extent += (dims[i] - 1) * a.mask_strides[i];
  return extent;
}

/// The element count b * heads * rows * d, 0 when any size is not positive.
int64_t count(const OtcrtAttention &a, int64_t heads, int64_t rows) {
  if (a.b <= 0 || heads <= 0 || rows <= 0 || a.d <= 0)
    return 0;
  return a.b * heads * rows * a.d;
}

} // namespace

namespace {

int attentionFwdBhtd(const OtcrtAttention &a, const float *q, const float *k,
                     const float *v, const float *mask, float *out,
                     float *lse) {
  return forward(a, q, k, v, mask, out, lse);
}

int attentionFwdBhtd(const OtcrtAttention &a, const otcrt_bf16 *q,
                     const otcrt_bf16 *k, const otcrt_bf16 *v,
                     const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse) {
  if (invalid(a))
    return 1;
  int64_t qn = count(a, a.h, a.t), kvn = count(a, a.hk, a.s);
  std::vector<float> qf = widen(q, qn), kf = widen(k, kvn), vf = widen(v, kvn);
  std::vector<float> mf = widen(mask, mask && qn > 0 ? maskExtent(a) : 0);
  std::vector<float> of(static_cast<size_t>(qn));
  int rc = forward(a, qf.data(), kf.data(), vf.data(),
                   mask ? mf.data() : nullptr, of.data(), lse);
  if (rc == 0)
    narrow(of, out);
  return rc;
}

int attentionBwdBhtd(const OtcrtAttention &a, const float *dout,
                     const float *q, const float *k, const float *v,
                     const float *mask, const float *out, const float *lse,
                     float *dq, float *dk, float *dv) {
  return backward(a, dout, q, k, v, mask, out, lse, dq, dk, dv);
}

int attentionBwdBhtd(const OtcrtAttention &a, const otcrt_bf16 *dout,
                     const otcrt_bf16 *q, const otcrt_bf16 *k,
                     const otcrt_bf16 *v, const otcrt_bf16 *mask,
                     const otcrt_bf16 *out, const float *lse, otcrt_bf16 *dq,
                     otcrt_bf16 *dk, otcrt_bf16 *dv) {
  if (invalid(a))
    return 1;
  int64_t qn = count(a, a.h, a.t), kvn = count(a, a.hk, a.s);
  std::vector<float> qf = widen(q, qn), kf = widen(k, kvn), vf = widen(v, kvn);
  std::vector<float> dOf = widen(dout, qn), of = widen(out, qn);
  std::vector<float> mf = widen(mask, mask && qn > 0 ? maskExtent(a) : 0);
  std::vector<float> dqf(static_cast<size_t>(qn));
  std::vector<float> dkf(static_cast<size_t>(kvn)), dvf(dkf.size());
  // dS in float, rounded into the bfloat16 result after.
  OtcrtAttention c = a;
  std::vector<float> dsf;
  if (a.dscores && qn > 0 && a.s > 0) {
    dsf.resize(static_cast<size_t>(a.b * a.h * a.t * a.s));
    c.dscores = dsf.data();
  }
  int rc = backward(c, dOf.data(), qf.data(), kf.data(), vf.data(),
                    mask ? mf.data() : nullptr, of.data(), lse, dqf.data(),
                    dkf.data(), dvf.data());
  if (rc == 0) {
    narrow(dqf, dq);
    narrow(dkf, dk);
    narrow(dvf, dv);
    if (!dsf.empty())
      narrow(dsf, static_cast<otcrt_bf16 *>(a.dscores));
  }
  return rc;
}

/// A [b, n, m, d] tensor, its (b, n) rows `rowStride` elements apart, as a
/// packed [b, m, n, d] (the two middle dimensions swapped); empty when any
/// size is not positive.
template <typename T>
std::vector<T> swapMiddle(const T *x, int64_t b, int64_t n, int64_t m,
                          int64_t d, int64_t rowStride) {
  if (b <= 0 || n <= 0 || m <= 0 || d <= 0)
    return {};
  std::vector<T> y(static_cast<size_t>(b * n * m * d));
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        std::copy(x + (e * n + i) * rowStride + j * d,
                  x + (e * n + i) * rowStride + (j + 1) * d,
                  y.begin() + ((e * m + j) * n + i) * d);
  return y;
}

/// Copies `y` (a packed [b, n, m, d]) into `out` as [b, m, n, d], its (b, m)
/// rows `rowStride` elements apart; the elements between rows are left as
/// they are.
template <typename T>
void storeSwapped(const std::vector<T> &y, T *out, int64_t b, int64_t n,
                  int64_t m, int64_t d, int64_t rowStride) {
  if (y.empty())
    return;
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        std::copy(y.begin() + ((e * n + i) * m + j) * d,
                  y.begin() + ((e * n + i) * m + j + 1) * d,
                  out + (e * m + j) * rowStride + i * d);
}

/// The elements from one (b, t) row of a [b, t, heads, d] operand to the
/// next: row_stride, or heads·d when it is 0.
int64_t rowStride(const OtcrtAttention &a, int64_t heads) {
  return a.row_stride != 0 ? a.row_stride : heads * a.d;
}

/// The [b, t, h, d] layout through transposed copies (q, k, v, dq, dk and
/// dv rows row_stride apart): this host library is the plain reference the
/// device kernels are checked against.
template <typename T>
int forwardAnyLayout(const OtcrtAttention &a, const T *q, const T *k,
                     const T *v, const T *mask, T *out, float *lse) {
  if (a.layout == OTCRT_LAYOUT_BHTD)
    return attentionFwdBhtd(a, q, k, v, mask, out, lse);
  if (a.layout != OTCRT_LAYOUT_BTHD || invalid(a))
    return 1;
  OtcrtAttention c = a;
  c.layout = OTCRT_LAYOUT_BHTD;
  c.row_stride = 0;
  const int64_t rq = rowStride(a, a.h), rkv = rowStride(a, a.hk);
  std::vector<T> qc = swapMiddle(q, a.b, a.t, a.h, a.d, rq),
                 kc = swapMiddle(k, a.b, a.s, a.hk, a.d, rkv),
                 vc = swapMiddle(v, a.b, a.s, a.hk, a.d, rkv);
  std::vector<T> oc(static_cast<size_t>(count(a, a.h, a.t)));
  int rc = attentionFwdBhtd(c, qc.data(), kc.data(), vc.data(), mask,
                            oc.data(), lse);
  if (rc == 0)
    storeSwapped(oc, out, a.b, a.h, a.t, a.d, a.h * a.d);
  return rc;
}

template <typename T>
int backwardAnyLayout(const OtcrtAttention &a, const T *dout, const T *q,
                      const T *k, const T *v, const T *mask, const T *out,
                      const float *lse, T *dq, T *dk, T *dv) {
  if (a.layout == OTCRT_LAYOUT_BHTD)
    return attentionBwdBhtd(a, dout, q, k, v, mask, out, lse, dq, dk, dv);
  if (a.layout != OTCRT_LAYOUT_BTHD || invalid(a))
    return 1;
  OtcrtAttention c = a;
  c.layout = OTCRT_LAYOUT_BHTD;
  c.row_stride = 0;
  const int64_t rq = rowStride(a, a.h), rkv = rowStride(a, a.hk);
  std::vector<T> dOc = swapMiddle(dout, a.b, a.t, a.h, a.d, a.h * a.d),
                 qc = swapMiddle(q, a.b, a.t, a.h, a.d, rq),
                 oc = swapMiddle(out, a.b, a.t, a.h, a.d, a.h * a.d),
                 kc = swapMiddle(k, a.b, a.s, a.hk, a.d, rkv),
                 vc = swapMiddle(v, a.b, a.s, a.hk, a.d, rkv);
  std::vector<T> dqc(qc.size()), dkc(kc.size()), dvc(vc.size());
  int rc = attentionBwdBhtd(c, dOc.data(), qc.data(), kc.data(), vc.data(),
                            mask, oc.data(), lse, dqc.data(), dkc.data(),
                            dvc.data());
  if (rc == 0) {
    storeSwapped(dqc, dq, a.b, a.h, a.t, a.d, rq);
    storeSwapped(dkc, dk, a.b, a.hk, a.s, a.d, rkv);
    storeSwapped(dvc, dv, a.b, a.hk, a.s, a.d, rkv);
  }
  return rc;
}

} // namespace

int attentionFwd(const OtcrtAttention &a, const float *q, const float *k,
                 const float *v, const float *mask, float *out, float *lse) {
  return forwardAnyLayout(a, q, k, v, mask, out, lse);
}
int attentionFwd(const OtcrtAttention &a, const otcrt_bf16 *q,
                 const otcrt_bf16 *k, const otcrt_bf16 *v,
                 const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse) {
  return forwardAnyLayout(a, q, k, v, mask, out, lse);
}
int attentionBwd(const OtcrtAttention &a, const float *dout, const float *q,
                 const float *k, const float *v, const float *mask,
                 const float *out, const float *lse, float *dq, float *dk,
                 float *dv) {
  return backwardAnyLayout(a, dout, q, k, v, mask, out, lse, dq, dk, dv);
}
int attentionBwd(const OtcrtAttention &a, const otcrt_bf16 *dout,
                 const otcrt_bf16 *q, const otcrt_bf16 *k, const otcrt_bf16 *v,
                 const otcrt_bf16 *mask, const otcrt_bf16 *out,
                 const float *lse, otcrt_bf16 *dq, otcrt_bf16 *dk,
                 otcrt_bf16 *dv) {
  return backwardAnyLayout(a, dout, q, k, v, mask, out, lse, dq, dk, dv);
}

} // namespace cpu
} // namespace otcrt
