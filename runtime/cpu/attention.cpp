// Host scaled dot-product attention of libotcrt_cpu (otc.attention and
// otc.attention_grad), with causal hiding (and a sliding window), an
// additive broadcast mask,
// grouped-query heads and dropout. The forward forms each query row's scores
// in a per-thread scratch vector, subtracts their maximum before the
// exponentials (sums in double) and saves the row's log-sum-exp. The
// backward rebuilds the probabilities from the scores and that lse in two
// passes that never share an output element between threads: one per query
// row for dq (which also saves D_i = dO_i . O_i), one per key row for dk and
// dv (summed over the query heads of the key's group). The bfloat16 entry
// points widen their operands to float, run the float kernel and round the
// results.
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

/// sum_k a[k] b[k] in float.
inline float dot(const float *a, const float *b, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k)
    acc += a[k] * b[k];
  return acc;
}

/// acc += alpha x.
inline void axpy(float *acc, float alpha, const float *x, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    acc[k] += alpha * x[k];
}

/// Index arithmetic and the per-element terms of one attention problem.
struct Problem {
  const OtcrtAttention &a;
  const float *mask;
  int64_t group; ///< query heads per key/value head
  float keepScale;

  Problem(const OtcrtAttention &a, const float *mask)
      : a(a), mask(mask), group(a.h / a.hk),
        keepScale(a.dropout > 0.0f ? 1.0f / (1.0f - a.dropout) : 1.0f) {}

  /// End of the keys visible from query i (the causal prefix).
  int64_t visibleKeys(int64_t i) const {
    return a.causal ? std::min(a.s, i + 1) : a.s;
  }
  /// First key visible from query i (a sliding window's start).
  int64_t firstKey(int64_t i) const {
    return a.causal && a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
  }
  /// First query that sees key j.
  int64_t firstQuery(int64_t j) const { return a.causal ? j : 0; }
  /// End of the queries that see key j (a sliding window's end).
  int64_t endQuery(int64_t j) const {
    return a.causal && a.window > 0 ? std::min(a.t, j + a.window) : a.t;
  }

  /// Row (b, hi, i) of the [b, h, t] query rows.
  int64_t queryRow(int64_t b, int64_t hi, int64_t i) const {
    return (b * a.h + hi) * a.t + i;
  }
  /// First element of key/value row (b, kh, j).
  int64_t kvOffset(int64_t b, int64_t kh, int64_t j) const {
    return ((b * a.hk + kh) * a.s + j) * a.d;
  }

  /// scale q_i . k_j plus the mask element (b, hi, i, j).
  float score(const float *qi, const float *kj, int64_t b, int64_t hi,
              int64_t i, int64_t j) const {
    float sc = a.scale * dot(qi, kj, a.d);
    if (mask)
      sc += mask[b * a.mask_strides[0] + hi * a.mask_strides[1] +
                 i * a.mask_strides[2] + j * a.mask_strides[3]];
    return sc;
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

/// True when the query heads do not split into groups of the key heads, or
/// the window is negative.
bool invalid(const OtcrtAttention &a) {
  return (a.hk <= 0 ? a.h > 0 : a.h % a.hk != 0) || a.window < 0;
}

/// True when there is no query row to compute.
bool degenerate(const OtcrtAttention &a) {
  return a.b <= 0 || a.h <= 0 || a.t <= 0 || a.d <= 0;
}

int forward(const OtcrtAttention &a, const float *q, const float *k,
            const float *v, const float *mask, float *out, float *lse) {
  if (invalid(a))
    return 1;
  if (degenerate(a))
    return 0;
  Problem p(a, mask);
  const int64_t rows = a.b * a.h * a.t;
#pragma omp parallel
  {
    std::vector<float> s(static_cast<size_t>(std::max<int64_t>(a.s, 1)));
    std::vector<float> acc(static_cast<size_t>(a.d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t i = row % a.t, bh = row / a.t;
      int64_t hi = bh % a.h, b = bh / a.h, kh = hi / p.group;
      const float *qi = q + row * a.d;
      const float *kb = k + p.kvOffset(b, kh, 0);
      const float *vb = v + p.kvOffset(b, kh, 0);
      int64_t first = p.firstKey(i), end = p.visibleKeys(i);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = first; j < end; ++j) {
        s[j] = p.score(qi, kb + j * a.d, b, hi, i, j);
        max = std::max(max, s[j]);
      }
      double sum = 0.0;
      for (int64_t j = first; j < end; ++j)
        sum += std::exp(s[j] - max);
      float rowLse = max + static_cast<float>(std::log(sum));
      lse[row] = rowLse;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = first; j < end; ++j) {
        float prob = std::exp(s[j] - rowLse) * p.dropFactor(row, j);
        if (prob != 0.0f)
          axpy(acc.data(), prob, vb + j * a.d, a.d);
      }
      std::copy(acc.begin(), acc.end(), out + row * a.d);
    }
  }
  return 0;
}

int backward(const OtcrtAttention &a, const float *dout, const float *q,
             const float *k, const float *v, const float *mask,
             const float *out, const float *lse, float *dq, float *dk,
             float *dv) {
  if (invalid(a))
    return 1;
  if (a.b > 0 && a.hk > 0 && a.s > 0 && a.d > 0 && a.t <= 0) {
    std::fill(dk, dk + a.b * a.hk * a.s * a.d, 0.0f);
    std::fill(dv, dv + a.b * a.hk * a.s * a.d, 0.0f);
  }
  if (degenerate(a))
    return 0;
  Problem p(a, mask);
  const int64_t rows = a.b * a.h * a.t;
  std::vector<float> rowD(static_cast<size_t>(rows));

  // Pass 1, per query row: D_i and dq_i = scale sum_j dS_ij k_j.
#pragma omp parallel
  {
    std::vector<float> acc(static_cast<size_t>(a.d));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t i = row % a.t, bh = row / a.t;
      int64_t hi = bh % a.h, b = bh / a.h, kh = hi / p.group;
      const float *qi = q + row * a.d, *dOi = dout + row * a.d;
      const float *oi = out + row * a.d;
      double d = 0.0;
      for (int64_t c = 0; c < a.d; ++c)
        d += static_cast<double>(dOi[c]) * oi[c];
      float di = static_cast<float>(d);
      rowD[row] = di;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = p.firstKey(i), end = p.visibleKeys(i); j < end; ++j) {
        const float *kj = k + p.kvOffset(b, kh, j);
        const float *vj = v + p.kvOffset(b, kh, j);
        float prob = std::exp(p.score(qi, kj, b, hi, i, j) - lse[row]);
        float dP = p.dropFactor(row, j) * dot(dOi, vj, a.d);
        float dS = prob * (dP - di);
        axpy(acc.data(), a.scale * dS, kj, a.d);
      }
      std::copy(acc.begin(), acc.end(), dq + row * a.d);
    }
  }

  // Pass 2, per key row: dv_j = sum P_ij m_ij dO_i, dk_j = scale sum dS_ij
  // q_i over the visible queries of every query head of the group.
  const int64_t keyRows = a.b * a.hk * a.s;
#pragma omp parallel
  {
    std::vector<float> accK(static_cast<size_t>(a.d));
    std::vector<float> accV(static_cast<size_t>(a.d));
#pragma omp for schedule(static)
    for (int64_t kr = 0; kr < keyRows; ++kr) {
      int64_t j = kr % a.s, bk = kr / a.s;
      int64_t kh = bk % a.hk, b = bk / a.hk;
      const float *kj = k + kr * a.d, *vj = v + kr * a.d;
      std::fill(accK.begin(), accK.end(), 0.0f);
      std::fill(accV.begin(), accV.end(), 0.0f);
      for (int64_t g = 0; g < p.group; ++g) {
        int64_t hi = kh * p.group + g;
        for (int64_t i = p.firstQuery(j), end = p.endQuery(j); i < end; ++i) {
          int64_t row = p.queryRow(b, hi, i);
          const float *qi = q + row * a.d, *dOi = dout + row * a.d;
          float prob = std::exp(p.score(qi, kj, b, hi, i, j) - lse[row]);
          float m = p.dropFactor(row, j);
          float dP = m * dot(dOi, vj, a.d);
          float dS = prob * (dP - rowD[row]);
          axpy(accV.data(), prob * m, dOi, a.d);
          axpy(accK.data(), a.scale * dS, qi, a.d);
        }
      }
      std::copy(accK.begin(), accK.end(), dk + kr * a.d);
      std::copy(accV.begin(), accV.end(), dv + kr * a.d);
    }
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
  int rc = backward(a, dOf.data(), qf.data(), kf.data(), vf.data(),
                    mask ? mf.data() : nullptr, of.data(), lse, dqf.data(),
                    dkf.data(), dvf.data());
  if (rc == 0) {
    narrow(dqf, dq);
    narrow(dkf, dk);
    narrow(dvf, dv);
  }
  return rc;
}

/// A [b, n, m, d] tensor as [b, m, n, d] (the two middle dimensions
/// swapped); empty when any size is not positive.
template <typename T>
std::vector<T> swapMiddle(const T *x, int64_t b, int64_t n, int64_t m,
                          int64_t d) {
  if (b <= 0 || n <= 0 || m <= 0 || d <= 0)
    return {};
  std::vector<T> y(static_cast<size_t>(b * n * m * d));
  for (int64_t e = 0; e < b; ++e)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        std::copy(x + ((e * n + i) * m + j) * d,
                  x + ((e * n + i) * m + j + 1) * d,
                  y.begin() + ((e * m + j) * n + i) * d);
  return y;
}

/// Copies `y` ([b, n, m, d]) into `out` as [b, m, n, d].
template <typename T>
void storeSwapped(const std::vector<T> &y, T *out, int64_t b, int64_t n,
                  int64_t m, int64_t d) {
  std::vector<T> z = swapMiddle(y.data(), b, n, m, d);
  std::copy(z.begin(), z.end(), out);
}

/// The [b, t, h, d] layout through transposed copies: this host library is
/// the plain reference the device kernels are checked against.
template <typename T>
int forwardAnyLayout(const OtcrtAttention &a, const T *q, const T *k,
                     const T *v, const T *mask, T *out, float *lse) {
  if (a.layout == OTCRT_LAYOUT_BHTD)
    return attentionFwdBhtd(a, q, k, v, mask, out, lse);
  if (a.layout != OTCRT_LAYOUT_BTHD || invalid(a))
    return 1;
  OtcrtAttention c = a;
  c.layout = OTCRT_LAYOUT_BHTD;
  std::vector<T> qc = swapMiddle(q, a.b, a.t, a.h, a.d),
                 kc = swapMiddle(k, a.b, a.s, a.hk, a.d),
                 vc = swapMiddle(v, a.b, a.s, a.hk, a.d);
  std::vector<T> oc(static_cast<size_t>(count(a, a.h, a.t)));
  int rc = attentionFwdBhtd(c, qc.data(), kc.data(), vc.data(), mask,
                            oc.data(), lse);
  if (rc == 0)
    storeSwapped(oc, out, a.b, a.h, a.t, a.d);
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
  std::vector<T> dOc = swapMiddle(dout, a.b, a.t, a.h, a.d),
                 qc = swapMiddle(q, a.b, a.t, a.h, a.d),
                 oc = swapMiddle(out, a.b, a.t, a.h, a.d),
                 kc = swapMiddle(k, a.b, a.s, a.hk, a.d),
                 vc = swapMiddle(v, a.b, a.s, a.hk, a.d);
  std::vector<T> dqc(qc.size()), dkc(kc.size()), dvc(vc.size());
  int rc = attentionBwdBhtd(c, dOc.data(), qc.data(), kc.data(), vc.data(),
                            mask, oc.data(), lse, dqc.data(), dkc.data(),
                            dvc.data());
  if (rc == 0) {
    storeSwapped(dqc, dq, a.b, a.h, a.t, a.d);
    storeSwapped(dkc, dk, a.b, a.hk, a.s, a.d);
    storeSwapped(dvc, dv, a.b, a.hk, a.s, a.d);
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
