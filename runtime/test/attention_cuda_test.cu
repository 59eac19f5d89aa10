// GPU check of the attention of libotcrt_cuda against the host kernels of
// libotcrt_cpu: f32 and bf16 problems (causal, grouped-query, masked,
// dropout, sliding windows (causal and bidirectional), soft-capped scores,
// the scores' gradient dS, attention sinks and their gradient, key paddings
// that leave rows seeing no key, odd lengths, the 48 KiB shared-memory edge)
// through the fallback kernels, and the bf16 attention through both device
// implementations, cuDNN's SDPA via the entry points and the fallback
// kernels directly, at several shapes and layouts (q, k and v packed in one
// fused projection output among them, also through the float fallback),
// again replayed from a CUDA graph, a repeated call allocating nothing. Part
// of otcrt-cuda-kernel-tests (kernels_cuda_test.cu runs it).
#include "cuda/attention.h"
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudatest {
namespace {

/// Compares bfloat16 results of a fused attention (whose probabilities are
/// rounded to bfloat16 inside): 2e-2 relative, plus 1e-2 of the tensor's
/// largest magnitude (at least 1e-3) absolute.
bool nearAttention(const Bf16s &got, const Bf16s &want, const char *what,
                   double &worst) {
  Floats g = toFloat(got), w = toFloat(want);
  double scale = 0;
  for (float x : w)
    if (std::isfinite(x))
      scale = std::max(scale, std::fabs(static_cast<double>(x)));
  return near(g, w, 2e-2, std::max(1e-3, 1e-2 * scale), what, worst);
}

/// Float results of the fallback kernels, as testAttention compares them.
bool nearAttention(const Floats &got, const Floats &want, const char *what,
                   double &worst) {
  return near(got, want, 2e-4, 2e-5, what, worst);
}

inline float value(float x) { return x; }
inline float value(otcrt_bf16 x) { return bf16ToFloat(x); }

/// Compares the sinks' gradients (float [h]): 1e-3 relative, plus 1e-4
/// absolute of the largest sum over a head's rows of |exp(sinks[hi] - lse)
/// dO . O|, the gradient's terms, from the host's dO, out (dense in `a`'s
/// layout) and lse, which both sides' backward read: they differ only in
/// the order of their sums.
template <typename T>
bool nearSinkGrad(const Floats &got, const Floats &want,
                  const OtcrtAttention &a, const std::vector<T> &dO,
                  const std::vector<T> &out, const Floats &lse,
                  const float *sinks, double &worst) {
  std::vector<double> sums(a.h, 0.0);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t hi = 0; hi < a.h; ++hi)
      for (int64_t i = 0; i < a.t; ++i) {
        const int64_t row = (b * a.h + hi) * a.t + i;
        const int64_t at =
            (a.layout == OTCRT_LAYOUT_BTHD ? (b * a.t + i) * a.h + hi : row) *
            a.d;
        double D = 0;
        for (int64_t c = 0; c < a.d; ++c)
          D += static_cast<double>(value(dO[at + c])) * value(out[at + c]);
        sums[hi] += std::fabs(std::exp(double(sinks[hi]) - lse[row]) * D);
      }
  const double scale = *std::max_element(sums.begin(), sums.end());
  return near(got, want, 1e-3, std::max(1e-7, 1e-4 * scale), "dsinks", worst);
}

/// a.h sinks: `level` plus a spread of +-1 over the heads (level 10: above
/// every score of inputs in [-1, 1], most of each row's mass on the sink).
Floats sinksOf(const OtcrtAttention &a, float level) {
  Floats sinks(a.h);
  for (int64_t hi = 0; hi < a.h; ++hi)
    sinks[hi] = level + (a.h > 1 ? 2.0f * hi / (a.h - 1) - 1.0f : 0.0f);
  return sinks;
}

/// Where q, k and v lie in one buffer, and dq, dk and dv in another of the
/// same shape: `rows` rows `row` elements apart, each holding its part of q,
/// k and v at 0, kOff and vOff (qWidth, kvWidth elements), then padding.
/// Separate operands are one row [q | k | v]; with row_stride set, the b·t
/// rows of a fused projection's output [b, t, h + 2hk, d].
struct QkvStorage {
  int64_t rows, row, kOff, vOff, qWidth, kvWidth;

  explicit QkvStorage(const OtcrtAttention &a) {
    if (a.row_stride != 0) {
      rows = a.b * a.t, row = a.row_stride;
      qWidth = a.h * a.d, kvWidth = a.hk * a.d;
    } else {
      rows = 1;
      qWidth = a.b * a.h * a.t * a.d, kvWidth = a.b * a.hk * a.s * a.d;
      row = qWidth + 2 * kvWidth;
    }
    kOff = qWidth, vOff = qWidth + kvWidth;
  }
  size_t size() const { return static_cast<size_t>(rows * row); }
  /// The buffer of dense q, k and v, its padding `fill`.
  template <typename T>
  std::vector<T> pack(const std::vector<T> &q, const std::vector<T> &k,
                      const std::vector<T> &v, T fill) const {
    std::vector<T> buf(size(), fill);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(q.begin() + r * qWidth, qWidth, buf.begin() + r * row);
      std::copy_n(k.begin() + r * kvWidth, kvWidth,
                  buf.begin() + r * row + kOff);
      std::copy_n(v.begin() + r * kvWidth, kvWidth,
                  buf.begin() + r * row + vOff);
    }
    return buf;
  }
  /// Elements [off, off + width) of every row of `buf`, dense.
  template <typename T>
  std::vector<T> part(const std::vector<T> &buf, int64_t off,
                      int64_t width) const {
    std::vector<T> out(static_cast<size_t>(rows * width));
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(buf.begin() + r * row + off, width,
                  out.begin() + r * width);
    return out;
  }
  /// The padding after v of every row of `buf`.
  template <typename T> std::vector<T> padding(const std::vector<T> &buf) const {
    return part(buf, vOff + kvWidth, row - vOff - kvWidth);
  }
};

/// One attention problem on both sides, f32 then bf16; with `scores`, the
/// backward also returns dS ([b, h, t, s], a.dscores), compared too; with
/// `sinks` (a.h of them), attention sinks, their gradient compared too. The
/// device's outputs start as NaN (each element must be written); its
/// backward reads the host's forward results.
void testAttention(const char *name, OtcrtAttention a, const int64_t *maskDims,
                   std::mt19937 &rng, bool scores = false,
                   const Floats &sinks = {}) {
  const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  const size_t rows = a.b * a.h * a.t, sn = rows * a.s;
  const size_t hn = sinks.empty() ? 0 : a.h;
  a.sinks = hn ? sinks.data() : nullptr;
  Floats q = random(qn, rng), k = random(kvn, rng), v = random(kvn, rng),
         dO = random(qn, rng), mask;
  if (maskDims) {
    mask = random(maskDims[0] * maskDims[1] * maskDims[2] * maskDims[3], rng);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      a.mask_strides[i] = maskDims[i] == 1 ? 0 : stride;
      stride *= maskDims[i];
    }
    mask[1] = -INFINITY;
  }
  // The device kernels read the key from device memory.
  OtcrtAttention ad = a;
  ad.key = device(std::vector<int64_t>{*a.key});
  ad.sinks = hn ? device(sinks) : nullptr;
  const float *mh = maskDims ? mask.data() : nullptr;
  const float *md = maskDims ? device(mask) : nullptr;
  Floats out(qn), lse(rows), dq(qn), dk(kvn), dv(kvn), ds(scores ? sn : 0),
      dsinks(hn);
  {
    Check c(std::string("attention_f32 ") + name);
    a.dscores = scores ? ds.data() : nullptr;
    a.dsinks = hn ? dsinks.data() : nullptr;
    otcrt::cpu::attentionFwd(a, q.data(), k.data(), v.data(), mh, out.data(),
                             lse.data());
    otcrt::cpu::attentionBwd(a, dO.data(), q.data(), k.data(), v.data(), mh,
                             out.data(), lse.data(), dq.data(), dk.data(),
                             dv.data());
    float *dOut = device(Floats(qn, NAN)), *dLse = device(Floats(rows, NAN)),
          *dQ = device(Floats(qn, NAN)), *dK = device(Floats(kvn, NAN)),
          *dV = device(Floats(kvn, NAN));
    float *dDs = scores ? device(Floats(sn, NAN)) : nullptr;
    float *dDsinks = hn ? device(Floats(hn, NAN)) : nullptr;
    ad.dscores = nullptr; // the forward's struct never asks for dS
    ad.dsinks = nullptr;
    c.rc(otcrt_attention_fwd_f32(&ad, device(q), device(k), device(v), md, dOut,
                                 dLse, nullptr),
         "fwd");
    ad.dscores = dDs;
    ad.dsinks = dDsinks;
    c.f32(host(dOut, qn), out, "out");
    c.f32(host(dLse, rows), lse, "lse");
    // The backward reads the host's forward results, so it is compared alone.
    c.rc(otcrt_attention_bwd_f32(&ad, device(dO), device(q), device(k),
                                 device(v), md, device(out), device(lse), dQ,
                                 dK, dV, nullptr),
         "bwd");
    c.f32(host(dQ, qn), dq, "dq", 2e-4);
    c.f32(host(dK, kvn), dk, "dk", 2e-4);
    c.f32(host(dV, kvn), dv, "dv", 2e-4);
    if (scores)
      c.f32(host(dDs, sn), ds, "dS", 2e-4);
    if (hn)
      c.ok = nearSinkGrad(host(dDsinks, hn), dsinks, a, dO, out, lse,
                          sinks.data(), c.worst) &&
             c.ok;
  }
  {
    Check c(std::string("attention_bf16 ") + name);
    Bf16s qb = toBf16(q), kb = toBf16(k), vb = toBf16(v), dOb = toBf16(dO),
          mb = toBf16(mask), outb(qn), dqb(qn), dkb(kvn), dvb(kvn),
          dsb(scores ? sn : 0);
    const otcrt_bf16 *mbd = maskDims ? device(mb) : nullptr;
    a.dscores = scores ? dsb.data() : nullptr;
    Floats dsinksb(hn);
    a.dsinks = hn ? dsinksb.data() : nullptr;
    otcrt_bf16 *dDs = scores ? device(toBf16(Floats(sn, NAN))) : nullptr;
    float *dDsinks = hn ? device(Floats(hn, NAN)) : nullptr;
    otcrt::cpu::attentionFwd(a, qb.data(), kb.data(), vb.data(),
                             maskDims ? mb.data() : nullptr, outb.data(),
                             lse.data());
    otcrt::cpu::attentionBwd(a, dOb.data(), qb.data(), kb.data(), vb.data(),
                             maskDims ? mb.data() : nullptr, outb.data(),
                             lse.data(), dqb.data(), dkb.data(), dvb.data());
    const Bf16s nanQ = toBf16(Floats(qn, NAN)),
                nanKv = toBf16(Floats(kvn, NAN));
    otcrt_bf16 *dOut = device(nanQ), *dQ = device(nanQ), *dK = device(nanKv),
               *dV = device(nanKv);
    float *dLse = device(Floats(rows, NAN));
    // The forward as the program calls it (no dS: cuDNN may take it), the
    // backward with dS where asked (then the fallback kernels).
    ad.dscores = nullptr;
    ad.dsinks = nullptr;
    c.rc(otcrt_attention_fwd_bf16(&ad, device(qb), device(kb), device(vb), mbd,
                                  dOut, dLse, nullptr),
         "fwd");
    ad.dscores = dDs;
    ad.dsinks = dDsinks;
    // The entry points may run cuDNN, whose probabilities are bfloat16.
    c.ok = nearAttention(host(dOut, qn), outb, "out", c.worst) && c.ok;
    if (hn) // with sinks, cuDNN's Stats too
      c.ok = near(host(dLse, rows), lse, 2e-3, 2e-4, "lse", c.worst) && c.ok;
    c.rc(otcrt_attention_bwd_bf16(&ad, device(dOb), device(qb), device(kb),
                                  device(vb), mbd, device(outb), device(lse),
                                  dQ, dK, dV, nullptr),
         "bwd");
    c.ok = nearAttention(host(dQ, qn), dqb, "dq", c.worst) && c.ok;
    c.ok = nearAttention(host(dK, kvn), dkb, "dk", c.worst) && c.ok;
    c.ok = nearAttention(host(dV, kvn), dvb, "dv", c.worst) && c.ok;
    if (scores)
      c.ok = nearAttention(host(dDs, sn), dsb, "dS", c.worst) && c.ok;
    if (hn)
      c.ok = nearSinkGrad(host(dDsinks, hn), dsinksb, a, dOb, outb, lse,
                          sinks.data(), c.worst) &&
             c.ok;
  }
}

OtcrtAttention attention(int64_t b, int64_t h, int64_t hk, int64_t t, int64_t s,
                         int64_t d, bool causal, float dropout) {
  OtcrtAttention a{};
  a.b = b, a.h = h, a.hk = hk, a.t = t, a.s = s, a.d = d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.causal = causal;
  a.dropout = dropout;
  static const int64_t key = 42;
  a.key = &key; // host memory: the host kernels' struct
  a.dropout_stream = 3;
  return a;
}

/// One bfloat16 attention problem for testAttentionPaths: the sizes, the
/// mask's dimensions (NULL: none) and whether the entry points must run it
/// on cuDNN when the runtime has it.
struct AttentionCase {
  const char *name;
  OtcrtAttention a;
  const int64_t *maskDims;
  bool cudnnExpected;
  /// Every fifth key (never the first) hidden by BF16's lowest finite value,
  /// as an exported padding mask rounded to BF16 hides keys.
  bool hiddenKeys = false;
  /// Attention sinks: a.h logits (NULL: none), their gradient compared too.
  const float *sinks = nullptr;
  /// The mask's first row all -inf: a query that sees no key (with sinks:
  /// output 0, lse the sink).
  bool hiddenRow = false;
  /// A key padding (a.key_padding, maskDims {b, 1, 1, s}): batch row bi
  /// sees its first keyLens[bi] keys, the others hidden by -1e4 (-9984 in
  /// BF16); a.b lengths, NULL: none. The hidden keys' dK and dV and the
  /// rows that see no key are checked exactly (keyPaddingExact).
  const int64_t *keyLens = nullptr;
};

/// The keys [first, end) query i sees of a's band (causal, sliding window,
/// a bidirectional window without causal).
std::pair<int64_t, int64_t> band(const OtcrtAttention &a, int64_t i) {
  const int64_t first =
      a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
  const int64_t end = a.causal ? i + 1 : a.window > 0 ? i + a.window : a.s;
  return {first, std::min(a.s, end)};
}

/// Whether query i of batch row bi sees a key of a key padding that leaves
/// each row its first keyLens[bi] keys.
bool seesKey(const OtcrtAttention &a, const int64_t *keyLens, int64_t bi,
             int64_t i) {
  auto [first, end] = band(a, i);
  return std::min(end, keyLens[bi]) > first;
}

/// The values a key padding fixes, exactly, in the device's results (dense
/// in a's layout; `lse` [b, h, t]): dK and dV 0 for every hidden key, and
/// each query row that sees no key output 0, dQ 0 and lse sinks[hi] (or
/// +inf without sinks). The first difference is printed.
template <typename T>
bool keyPaddingExact(const OtcrtAttention &a, const int64_t *keyLens,
                     const float *sinks, const std::vector<T> &out,
                     const Floats &lse, const std::vector<T> &dq,
                     const std::vector<T> &dk, const std::vector<T> &dv,
                     const std::string &when) {
  const bool bthd = a.layout == OTCRT_LAYOUT_BTHD;
  auto zero = [&](const std::vector<T> &x, int64_t at, const char *what) {
    for (int64_t c = 0; c < a.d; ++c)
      if (!(value(x[at + c]) == 0.0f)) {
        std::printf("  %s%s[%lld]: %.8g, hidden: 0 expected\n", when.c_str(),
                    what, static_cast<long long>(at + c), value(x[at + c]));
        return false;
      }
    return true;
  };
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t kh = 0; kh < a.hk; ++kh)
      for (int64_t j = keyLens[b]; j < a.s; ++j) {
        const int64_t at =
            (bthd ? (b * a.s + j) * a.hk + kh : (b * a.hk + kh) * a.s + j) *
            a.d;
        if (!zero(dk, at, "dk") || !zero(dv, at, "dv"))
          return false;
      }
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t hi = 0; hi < a.h; ++hi)
      for (int64_t i = 0; i < a.t; ++i) {
        if (seesKey(a, keyLens, b, i))
          continue;
        const int64_t row = (b * a.h + hi) * a.t + i;
        const int64_t at = (bthd ? (b * a.t + i) * a.h + hi : row) * a.d;
        if (!zero(out, at, "out") || !zero(dq, at, "dq"))
          return false;
        const float want = sinks ? sinks[hi] : INFINITY;
        if (!(lse[row] == want)) {
          std::printf("  %slse[%lld]: %.8g, a row that sees no key: %.8g "
                      "expected\n",
                      when.c_str(), static_cast<long long>(row), lse[row],
                      want);
          return false;
        }
      }
  return true;
}

template <typename T>
using AttnFwdOf = int (*)(const OtcrtAttention *, const T *, const T *,
                          const T *, const T *, T *, float *, void *);
template <typename T>
using AttnBwdOf = int (*)(const OtcrtAttention *, const T *, const T *,
                          const T *, const T *, const T *, const T *,
                          const float *, T *, T *, T *, void *);
using AttnFwd = AttnFwdOf<otcrt_bf16>;
using AttnBwd = AttnBwdOf<otcrt_bf16>;

/// The attention of `tc` in T storage through one device implementation
/// (the entry points when `dispatched`, else the fallback kernels), against
/// the host: forward, backward (fed the host's forward results), a repeated
/// call that must allocate nothing, and the forward and backward replayed
/// from a CUDA graph. The device reads q, k and v from one buffer and writes
/// dq, dk and dv into another (QkvStorage), whose padding must keep its
/// contents; the host runs the dense call on the same values.
template <typename T>
void testAttentionPath(const AttentionCase &tc, bool dispatched,
                       AttnFwdOf<T> fwd, AttnBwdOf<T> bwd, std::mt19937 &rng) {
  using Ts = std::vector<T>;
  OtcrtAttention a = tc.a;
  const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  const size_t rows = a.b * a.h * a.t;
  Floats mask;
  if (tc.maskDims && tc.keyLens) {
    a.key_padding = 1;
    mask.assign(a.b * a.s, 0.0f);
    for (int64_t b = 0; b < a.b; ++b)
      std::fill(mask.begin() + b * a.s + tc.keyLens[b],
                mask.begin() + (b + 1) * a.s, -1e4f);
    a.mask_strides[0] = a.s; // [b, 1, 1, s]
    a.mask_strides[3] = 1;
  } else if (tc.maskDims) {
    const int64_t *m = tc.maskDims;
    mask = random(m[0] * m[1] * m[2] * m[3], rng);
    if (tc.hiddenKeys)
      for (size_t e = 0; e < mask.size(); ++e)
        if (e % m[3] % 5 == 4)
          mask[e] = -3.3895313892515355e38f;
    if (tc.hiddenRow)
      std::fill_n(mask.begin(), m[3], -INFINITY);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      a.mask_strides[i] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
  }
  Ts q = stored<T>(random(qn, rng)), k = stored<T>(random(kvn, rng)),
     v = stored<T>(random(kvn, rng)), dO = stored<T>(random(qn, rng)),
     mb = stored<T>(mask), out(qn), dq(qn), dk(kvn), dv(kvn);
  Floats lse(rows);
  const size_t hn = tc.sinks ? a.h : 0;
  Floats dsinks(hn);
  const T *mh = tc.maskDims ? mb.data() : nullptr;
  OtcrtAttention ah = a;
  ah.row_stride = 0;
  ah.sinks = tc.sinks;
  ah.dsinks = hn ? dsinks.data() : nullptr;
  otcrt::cpu::attentionFwd(ah, q.data(), k.data(), v.data(), mh, out.data(),
                           lse.data());
  otcrt::cpu::attentionBwd(ah, dO.data(), q.data(), k.data(), v.data(), mh,
                           out.data(), lse.data(), dq.data(), dk.data(),
                           dv.data());

  OtcrtAttention ad = a;
  ad.key = device(std::vector<int64_t>{*a.key});
  ad.sinks = hn ? device(Floats(tc.sinks, tc.sinks + hn)) : nullptr;
  float *gDsinks = hn ? device(Floats(hn, NAN)) : nullptr;
  ad.dsinks = gDsinks; // read by the backward only
  const QkvStorage st(a);
  const T fill = stored<T>(Floats(1, 768.0f))[0];
  const Ts cleared(st.size(), fill);
  const T *dQkv = device(st.pack(q, k, v, fill));
  const T *dQ = dQkv, *dK = dQkv + st.kOff, *dV = dQkv + st.vOff,
          *dDO = device(dO), *dMask = tc.maskDims ? device(mb) : nullptr,
          *dHostOut = device(out);
  const float *dHostLse = device(lse);
  T *gOut = device(Ts(qn)), *gGrads = device(cleared), *gDq = gGrads,
    *gDk = gGrads + st.kOff, *gDv = gGrads + st.vOff;
  float *gLse = device(Floats(rows));

  Check c(std::string(std::is_same_v<T, float> ? "attention_f32 "
                                               : "attention_bf16 ") +
          tc.name);
  auto compare = [&](const char *when) {
    std::string w(when);
    c.ok = nearAttention(host(gOut, qn), out, (w + "out").c_str(), c.worst) &&
           c.ok;
    c.ok = near(host(gLse, rows), lse, 2e-3, 2e-4, w + "lse", c.worst) && c.ok;
    Ts grads = host(gGrads, st.size());
    c.ok = nearAttention(st.part(grads, 0, st.qWidth), dq, (w + "dq").c_str(),
                         c.worst) &&
           c.ok;
    c.ok = nearAttention(st.part(grads, st.kOff, st.kvWidth), dk,
                         (w + "dk").c_str(), c.worst) &&
           c.ok;
    c.ok = nearAttention(st.part(grads, st.vOff, st.kvWidth), dv,
                         (w + "dv").c_str(), c.worst) &&
           c.ok;
    if (st.padding(grads) != st.padding(cleared)) {
      std::printf("  %swritten past dq, dk and dv in their rows\n",
                  w.c_str());
      c.ok = false;
    }
    if (hn)
      c.ok = nearSinkGrad(host(gDsinks, hn), dsinks, ah, dO, out, lse, tc.sinks,
                          c.worst) &&
             c.ok;
    if (tc.keyLens)
      c.ok = keyPaddingExact(a, tc.keyLens, tc.sinks, host(gOut, qn),
                             host(gLse, rows), st.part(grads, 0, st.qWidth),
                             st.part(grads, st.kOff, st.kvWidth),
                             st.part(grads, st.vOff, st.kvWidth), w) &&
             c.ok;
  };
  auto call = [&](cudaStream_t stream) {
    c.rc(fwd(&ad, dQ, dK, dV, dMask, gOut, gLse, stream), "fwd");
    const char *fwdWhy = otcrt::cuda::lastAttentionFallbackReason();
    c.rc(bwd(&ad, dDO, dQ, dK, dV, dMask, dHostOut, dHostLse, gDq, gDk, gDv,
             stream),
         "bwd");
    const char *bwdWhy = otcrt::cuda::lastAttentionFallbackReason();
    return std::make_pair(fwdWhy, bwdWhy);
  };

  auto [fwdWhy, bwdWhy] = call(nullptr);
  compare("");
  if (!dispatched) {
    c.name += " [fallback kernels]";
  } else {
    auto label = [](const char *why) {
      return why ? std::string("fallback (") + why + ")" : std::string("cuDNN");
    };
    c.name +=
        " [entry points: fwd " + label(fwdWhy) + ", bwd " + label(bwdWhy) + "]";
    const char *forced = std::getenv("OTCRT_ATTENTION");
    bool required = tc.cudnnExpected && otcrt::cuda::cudnnAttentionBuilt() &&
                    !(forced && std::strcmp(forced, "fallback") == 0);
    // A cuDNN older than 9.13 has no sink token: the forward falls back.
    bool noSinkToken =
        fwdWhy && std::strstr(fwdWhy, "sink token needs cuDNN 9.13");
    if (required && ((fwdWhy && !noSinkToken) || bwdWhy)) {
      std::printf("  cuDNN expected but not used\n");
      c.ok = false;
    }
    if (a.dropout > 0 && (!fwdWhy || !bwdWhy)) {
      std::printf("  dropout must run on the fallback kernels\n");
      c.ok = false;
    }
  }

  // A repeated call of the same shape allocates no device memory.
  allocatesNothing(c.ok, [&] { call(nullptr); });

  // Outputs cleared, then forward and backward captured in a CUDA graph and
  // replayed (the capture itself runs nothing).
  cudaMemset(gOut, 0, qn * sizeof(T));
  cudaMemset(gLse, 0, rows * sizeof(float));
  if (hn)
    cudaMemset(gDsinks, 0, hn * sizeof(float));
  cudaMemcpy(gGrads, cleared.data(), st.size() * sizeof(T),
             cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  cudaStream_t stream = nullptr;
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err == cudaSuccess)
    err = captureAndReplay(stream, [&] { call(stream); }, 1);
  if (err != cudaSuccess) {
    std::printf("  capture or replay in a CUDA graph failed: %s\n",
                cudaGetErrorString(err));
    c.ok = false;
  } else {
    compare("graph replay: ");
  }
  if (stream)
    cudaStreamDestroy(stream);
}

/// The bfloat16 attention through cuDNN (via the entry points) and through
/// the fallback kernels, each against the host.
void testAttentionPaths(const AttentionCase &tc, std::mt19937 &rng) {
  AttnFwd fallbackFwd = otcrt::cuda::attentionFwdFallback;
  AttnBwd fallbackBwd = otcrt::cuda::attentionBwdFallback;
  testAttentionPath<otcrt_bf16>(tc, true, otcrt_attention_fwd_bf16,
                                otcrt_attention_bwd_bf16, rng);
  testAttentionPath<otcrt_bf16>(tc, false, fallbackFwd, fallbackBwd, rng);
}


} // namespace

/// Every attention check.
/// Gemma 2's soft-capped scores (a cap of 1.5 against scores of about +-2,
/// so that tanh bends them) and T5's mask with a gradient (dS returned), in
/// the float and bfloat16 entry points (bfloat16: the fallback kernels for
/// what cuDNN does not compute), against the host kernels. Each case runs
/// plain first, so that cuDNN has built and cached a graph of the same
/// shape that a capped call or one asking for dS must still not take.
void testCapsAndScores(std::mt19937 &rng) {
  const int64_t full[4] = {1, 4, 33, 50};
  const int64_t bias[4] = {1, 4, 40, 40};
  struct Case {
    const char *name;
    OtcrtAttention a;
    const int64_t *mask;
    float cap;
    bool scores;
  };
  OtcrtAttention gqa = attention(2, 4, 2, 40, 40, 32, true, 0);
  gqa.scale = 0.5f;
  OtcrtAttention window = gqa;
  window.window = 7;
  OtcrtAttention windowBthd = window;
  windowBthd.layout = OTCRT_LAYOUT_BTHD;
  OtcrtAttention plain = attention(1, 4, 4, 40, 40, 32, true, 0);
  plain.scale = 0.5f;
  const Case cases[] = {
      {"softcap causal gqa", gqa, nullptr, 1.5f, false},
      {"softcap window mask", window, bias, 1.5f, false},
      {"dS full mask", attention(1, 4, 4, 33, 50, 40, false, 0), full, 0, true},
      {"dS causal dropout", attention(2, 4, 4, 40, 40, 32, true, 0.1f), bias, 0,
       true},
      {"dS softcap", plain, bias, 1.5f, true},
      {"dS gqa window", window, bias, 0, true},
      {"dS gqa window bthd", windowBthd, bias, 0, true},
  };
  for (const Case &c : cases) {
    testAttention((std::string(c.name) + " (plain first)").c_str(), c.a, c.mask,
                  rng);
    OtcrtAttention a = c.a;
    a.softcap = c.cap;
    testAttention(c.name, a, c.mask, rng, c.scores);
  }
}

/// A key padding (key_padding: [b, 1, 1, s], 0 or a hidden fill) in the
/// bfloat16 entry points, which give cuDNN per-sequence lengths where it
/// runs, against the host kernels reading the mask: right-padded rows (one
/// hides its keys from 40 on, one none), dK and dV of the hidden keys
/// exactly 0 (their device buffers start as NaN); then a left-padded row,
/// which cuDNN cannot take as lengths: OTCRT_ERROR_PADDING for that row.
/// Causal and not, both layouts, s = 64 and 70, the fill BF16's lowest
/// value and -1e4 (-9984 in BF16).
void testKeyPadding(std::mt19937 &rng) {
  struct Case {
    bool bthd, causal;
    int64_t s;
    float fill;
  };
  const Case cases[] = {{false, true, 64, -3.38953139e38f},
                        {true, true, 64, -3.38953139e38f},
                        {true, false, 70, -1e4f},
                        {false, false, 64, -1e4f}};
  for (const Case &kc : cases) {
    Check c(std::string("attention key padding as lengths") +
            (kc.bthd ? " bthd" : "") + (kc.causal ? " causal" : "") + " s=" +
            std::to_string(kc.s) + (kc.fill == -1e4f ? " fill -1e4" : ""));
    OtcrtAttention a = attention(2, 4, 2, kc.s, kc.s, 64, kc.causal, 0);
    a.layout = kc.bthd ? OTCRT_LAYOUT_BTHD : OTCRT_LAYOUT_BHTD;
    a.key_padding = 1;
    a.mask_strides[0] = a.s; // [b, 1, 1, s]
    a.mask_strides[3] = 1;
    const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
    const size_t rows = a.b * a.h * a.t;
    const float lowest = kc.fill;
    Floats mask(a.b * a.s, 0.0f);
    for (int64_t j = 40; j < a.s; ++j)
      mask[j] = lowest; // row 0: 40 keys seen; row 1: all 64
    Bf16s q = toBf16(random(qn, rng)), k = toBf16(random(kvn, rng)),
          v = toBf16(random(kvn, rng)), dO = toBf16(random(qn, rng)),
          mb = toBf16(mask), out(qn), dq(qn), dk(kvn), dv(kvn);
    Floats lse(rows);
    otcrt::cpu::attentionFwd(a, q.data(), k.data(), v.data(), mb.data(),
                             out.data(), lse.data());
    otcrt::cpu::attentionBwd(a, dO.data(), q.data(), k.data(), v.data(),
                             mb.data(), out.data(), lse.data(), dq.data(),
                             dk.data(), dv.data());
    const Bf16s nanQ = toBf16(Floats(qn, NAN)),
                nanKv = toBf16(Floats(kvn, NAN));
    otcrt_bf16 *dOut = device(nanQ), *dQ = device(nanQ), *dK = device(nanKv),
               *dV = device(nanKv);
    float *dLse = device(Floats(rows, NAN));
    const otcrt_bf16 *md = device(mb);
    c.rc(otcrt_attention_fwd_bf16(&a, device(q), device(k), device(v), md, dOut,
                                  dLse, nullptr),
         "fwd");
    c.ok = nearAttention(host(dOut, qn), out, "out", c.worst) && c.ok;
    c.rc(otcrt_attention_bwd_bf16(&a, device(dO), device(q), device(k),
                                  device(v), md, device(out), device(lse), dQ,
                                  dK, dV, nullptr),
         "bwd");
    if (otcrt::cuda::cudnnAttentionBuilt() && kc.s % 8 == 0 &&
        otcrt::cuda::lastAttentionFallbackReason())
      c.rc(1, (std::string("not on cuDNN: ") +
               otcrt::cuda::lastAttentionFallbackReason())
                  .c_str());
    c.ok = nearAttention(host(dQ, qn), dq, "dq", c.worst) && c.ok;
    c.ok = nearAttention(host(dK, kvn), dk, "dk", c.worst) && c.ok;
    c.ok = nearAttention(host(dV, kvn), dv, "dv", c.worst) && c.ok;
    OtcrtKernelError e{};
    if (otcrt_kernel_error(&e, nullptr) != OTCRT_ERROR_NONE)
      c.rc(1, ("a right-padded mask recorded error " + std::to_string(e.code))
                  .c_str());
    if (!otcrt::cuda::cudnnAttentionBuilt() ||
        otcrt::cuda::lastAttentionFallbackReason())
      continue; // the fallback kernels read any padding exactly
    // Row 1 left-padded: its first 5 keys hidden, the rest seen.
    for (int64_t j = 0; j < 5; ++j)
      mask[a.s + j] = lowest;
    otcrt_attention_fwd_bf16(&a, device(q), device(k), device(v),
                             device(toBf16(mask)), dOut, dLse, nullptr);
    if (otcrt_kernel_error(&e, nullptr) != OTCRT_ERROR_PADDING || e.index != 1)
      c.rc(1, ("a left-padded row 1 recorded code " + std::to_string(e.code) +
               " at row " + std::to_string(e.index) +
               " (expected OTCRT_ERROR_PADDING at row 1)")
                  .c_str());
  }
}

/// A key padding (key_padding) that leaves query rows seeing no key: under a
/// causal sliding window of 8, a sequence of 20 keys (its queries from 27
/// on see none) beside a full one and one hiding every key (length 0:
/// every query sees none; cuDNN is given length 1), and without a window
/// sequences of 37 and 0 keys, causal and not. Through the bfloat16 entry
/// points (cuDNN with the padding as lengths, the rows that see no key set
/// after it), the bfloat16 fallback kernels and the float ones, with and
/// without sinks, against the host kernels; the rows that see no key
/// (output and dQ 0, lse +inf or the sink) and the hidden keys' dK and dV
/// (0) exactly, no NaN anywhere, no padding error recorded.
void testKeyPaddingNoKey(std::mt19937 &rng) {
  static const int64_t lens64[3] = {20, 64, 0};
  static const int64_t lens70[3] = {20, 70, 0};
  static const int64_t lensPair[2] = {37, 0};
  static const float small[4] = {0.5f, -1.0f, 1.5f, 0.0f};
  const int64_t pad64[4] = {3, 1, 1, 64};
  const int64_t pad70[4] = {3, 1, 1, 70};
  const int64_t padPair[4] = {2, 1, 1, 64};
  auto windowed = [](OtcrtAttention a, int32_t w) {
    a.window = w;
    return a;
  };
  OtcrtAttention packed = windowed(attention(3, 4, 2, 70, 70, 64, true, 0), 8);
  packed.layout = OTCRT_LAYOUT_BTHD;
  packed.row_stride = (packed.h + 2 * packed.hk) * packed.d + 64;
  OtcrtAttention windowBthd = packed;
  windowBthd.row_stride = 0;
  AttentionCase cases[] = {
      {"t=s=64 causal window 8 key padding 20, 64, 0 gqa d=64",
       windowed(attention(3, 4, 2, 64, 64, 64, true, 0), 8), pad64, true},
      {"t=s=64 causal window 8 key padding 20, 64, 0 gqa d=64 sinks",
       windowed(attention(3, 4, 2, 64, 64, 64, true, 0), 8), pad64, true},
      {"t=s=70 causal window 8 key padding 20, 70, 0 gqa d=64 bthd sinks",
       windowBthd, pad70, false},
      {"t=s=70 causal window 8 key padding 20, 70, 0 packed qkv padded", packed,
       pad70, false},
      {"t=s=64 key padding 37, 0 d=64",
       attention(2, 4, 4, 64, 64, 64, false, 0), padPair, true},
      {"t=s=64 causal key padding 37, 0 d=64 sinks",
       attention(2, 4, 4, 64, 64, 64, true, 0), padPair, true},
      // ModernBERT's local layers: a bidirectional window (|i - j| < 8),
      // queries from 27 on see no key in the sequence of 20.
      {"t=s=64 bidirectional window 8 key padding 20, 64, 0 gqa d=64",
       windowed(attention(3, 4, 2, 64, 64, 64, false, 0), 8), pad64, true},
      {"t=s=70 bidirectional window 8 key padding 20, 70, 0 gqa d=64 bthd",
       [&] {
         OtcrtAttention a = windowBthd;
         a.causal = 0;
         return a;
       }(),
       pad70, false},
  };
  cases[0].keyLens = cases[1].keyLens = cases[6].keyLens = lens64;
  cases[2].keyLens = cases[3].keyLens = cases[7].keyLens = lens70;
  cases[4].keyLens = cases[5].keyLens = lensPair;
  cases[1].sinks = cases[2].sinks = cases[5].sinks = small;
  AttnFwdOf<float> fallbackFwdF32 = otcrt::cuda::attentionFwdFallback;
  AttnBwdOf<float> fallbackBwdF32 = otcrt::cuda::attentionBwdFallback;
  for (const AttentionCase &tc : cases) {
    testAttentionPaths(tc, rng);
    testAttentionPath<float>(tc, false, fallbackFwdF32, fallbackBwdF32, rng);
    OtcrtKernelError e{};
    if (otcrt_kernel_error(&e, nullptr) != OTCRT_ERROR_NONE) {
      Check c(std::string("attention key padding error record ") + tc.name);
      c.rc(1, ("right-padded rows recorded error " + std::to_string(e.code))
                  .c_str());
    }
  }
}

/// Attention sinks (GPT-OSS), a.h logits joining every row's softmax, and
/// their gradient: in the float and bfloat16 entry points (cuDNN's sink
/// token where it runs), then through both bfloat16 implementations and the
/// float fallback at shapes and layouts cuDNN takes: causal grouped-query
/// heads, a non-causal additive mask (one of whose rows hides every key),
/// sinks above every score (most of each row's mass on the sink), a mask
/// written out along the queries, q, k and v packed in one projection
/// output, and one query (which cuDNN's sink token refuses).
void testSinks(std::mt19937 &rng) {
  const int64_t full[4] = {1, 4, 33, 50};
  const int64_t keyPadding[4] = {2, 1, 1, 70};
  OtcrtAttention gqa = attention(2, 4, 2, 70, 70, 64, true, 0);
  OtcrtAttention masked = attention(1, 4, 4, 33, 50, 40, false, 0);
  OtcrtAttention dropout = attention(2, 4, 1, 70, 70, 32, true, 0.1f);
  OtcrtAttention windowBthd = attention(2, 4, 2, 40, 40, 32, true, 0);
  windowBthd.window = 7;
  windowBthd.layout = OTCRT_LAYOUT_BTHD;
  testAttention("sinks causal gqa", gqa, nullptr, rng, false, sinksOf(gqa, 0));
  testAttention("sinks full mask", masked, full, rng, false,
                sinksOf(masked, 0.5f));
  testAttention("sinks above every score causal gqa", gqa, nullptr, rng, false,
                sinksOf(gqa, 10));
  testAttention("sinks causal mask dropout", dropout, keyPadding, rng, false,
                sinksOf(dropout, 0));
  testAttention("sinks causal window bthd", windowBthd, nullptr, rng, false,
                sinksOf(windowBthd, 0));

  // Every case below has h = 4.
  static const float small[4] = {0.5f, -1.0f, 1.5f, 0.0f};
  static const float large[4] = {10.0f, 12.0f, 9.0f, 11.0f};
  const int64_t fullMask64[4] = {1, 4, 64, 64};
  const int64_t padding128[4] = {2, 1, 1, 128};
  auto bthd = [](OtcrtAttention a) {
    a.layout = OTCRT_LAYOUT_BTHD;
    return a;
  };
  AttentionCase cases[] = {
      {"t=s=64 causal gqa h=4 hk=2 d=64 sinks",
       attention(2, 4, 2, 64, 64, 64, true, 0), nullptr, true},
      {"t=s=64 full mask gqa d=64 sinks, a row hiding every key",
       attention(1, 4, 2, 64, 64, 64, false, 0), fullMask64, false},
      {"t=s=128 causal gqa d=64 sinks above every score bthd",
       bthd(attention(2, 4, 2, 128, 128, 64, true, 0)), nullptr, true},
      {"t=s=128 causal key padding hidden keys d=64 bthd sinks",
       bthd(attention(2, 4, 2, 128, 128, 64, true, 0)), padding128, true, true},
      {"t=1 s=64 d=64 sinks (one query)",
       attention(2, 4, 2, 1, 64, 64, false, 0), nullptr, false},
  };
  cases[0].sinks = small;
  cases[1].sinks = small;
  cases[1].hiddenRow = true;
  cases[2].sinks = large;
  cases[3].sinks = small;
  cases[4].sinks = small;
  AttnFwdOf<float> fallbackFwdF32 = otcrt::cuda::attentionFwdFallback;
  AttnBwdOf<float> fallbackBwdF32 = otcrt::cuda::attentionBwdFallback;
  for (const AttentionCase &tc : cases) {
    testAttentionPaths(tc, rng);
    testAttentionPath<float>(tc, false, fallbackFwdF32, fallbackBwdF32, rng);
  }
  // q, k and v heads of one fused projection output, rows padded.
  AttentionCase packed = {"t=s=70 causal gqa h=4 hk=2 d=64 packed qkv padded "
                          "sinks",
                          attention(2, 4, 2, 70, 70, 64, true, 0), nullptr,
                          true};
  packed.a.layout = OTCRT_LAYOUT_BTHD;
  packed.a.row_stride = (packed.a.h + 2 * packed.a.hk) * packed.a.d + 64;
  packed.sinks = small;
  testAttentionPaths(packed, rng);
  testAttentionPath<float>(packed, false, fallbackFwdF32, fallbackBwdF32, rng);
}

void testAttentions(std::mt19937 &rng) {
  testCapsAndScores(rng);
  testKeyPadding(rng);
  testKeyPaddingNoKey(rng);
  const int64_t keyPadding[4] = {2, 1, 1, 70};
  const int64_t full[4] = {1, 4, 33, 50};
  testAttention("causal gqa", attention(2, 4, 2, 70, 70, 64, true, 0), nullptr,
                rng);
  testAttention("causal mask dropout",
                attention(2, 4, 1, 70, 70, 32, true, 0.1f), keyPadding, rng);
  testAttention("full mask", attention(1, 4, 4, 33, 50, 40, false, 0), full,
                rng);
  testSinks(rng);
  // Both device implementations of the bfloat16 attention; cuDNN must run
  // the causal and plain cases with t == s (mask layouts, t != s and head
  // sizes it may decline are reported, not required).
  const int64_t fullMask64[4] = {1, 4, 64, 64};
  const int64_t padding128[4] = {2, 1, 1, 128};
  const int64_t headsMask64[4] = {2, 1, 64, 64};
  static const int64_t padding70[4] = {2, 1, 1, 70};
  const int64_t rows70[4] = {2, 1, 70, 70};
  // Stored [B, T, H, D] (OTCRT_LAYOUT_BTHD): cuDNN reads it through
  // strides, the fallback through transposed copies.
  auto bthd = [](OtcrtAttention a) {
    a.layout = OTCRT_LAYOUT_BTHD;
    return a;
  };
  auto windowed = [](OtcrtAttention a, int32_t w) {
    a.window = w;
    return a;
  };
  const AttentionCase cases[] = {
      {"t=s=1024 causal d=64", attention(2, 4, 4, 1024, 1024, 64, true, 0),
       nullptr, true},
      {"t=s=1024 causal d=64 bthd",
       bthd(attention(2, 12, 12, 1024, 1024, 64, true, 0)), nullptr, true},
      {"t=s=37 causal gqa h=4 hk=2 d=64 bthd",
       bthd(attention(2, 4, 2, 37, 37, 64, true, 0)), nullptr, true},
      {"t=s=1024 causal gqa h=8 hk=2 d=128",
       attention(1, 8, 2, 1024, 1024, 128, true, 0), nullptr, true},
      {"t=s=1024 d=64 hk=1", attention(1, 4, 1, 1024, 1024, 64, false, 0),
       nullptr, true},
      {"t=s=37 causal gqa d=64", attention(3, 4, 2, 37, 37, 64, true, 0),
       nullptr, true},
      {"t=s=16 d=128", attention(2, 2, 2, 16, 16, 128, false, 0), nullptr,
       true},
      {"t=17 s=40 d=128", attention(2, 2, 2, 17, 40, 128, false, 0), nullptr,
       false},
      {"t=40 s=24 causal d=64", attention(1, 2, 1, 40, 24, 64, true, 0),
       nullptr, false},
      {"t=s=64 full mask d=64", attention(1, 4, 2, 64, 64, 64, false, 0),
       fullMask64, false},
      // Masks broadcast over the queries (a key padding, written out along
      // them for cuDNN) and over the heads (as cuDNN's bias takes them).
      {"t=s=128 causal key padding d=64",
       attention(2, 4, 4, 128, 128, 64, true, 0), padding128, true},
      {"t=s=128 causal key padding hidden keys d=64 bthd",
       bthd(attention(2, 4, 2, 128, 128, 64, true, 0)), padding128, true, true},
      {"t=s=64 mask over heads d=64", attention(2, 4, 4, 64, 64, 64, false, 0),
       headsMask64, true},
      // Mask rows of 70 elements, not 16-byte aligned: cuDNN declines them.
      {"t=s=70 mask rows of 70 d=64", attention(2, 4, 4, 70, 70, 64, false, 0),
       rows70, false},
      {"t=s=64 causal dropout d=64", attention(1, 2, 2, 64, 64, 64, true, 0.1f),
       nullptr, false},
      {"t=s=33 d=40", attention(1, 2, 2, 33, 33, 40, false, 0), nullptr, false},
      // A causal sliding window: cuDNN's diagonal band with a left bound.
      {"t=s=1024 causal window 256 gqa d=64",
       windowed(attention(1, 8, 2, 1024, 1024, 64, true, 0), 256), nullptr,
       true},
      {"t=s=37 causal window 8 d=64 bthd",
       bthd(windowed(attention(2, 4, 2, 37, 37, 64, true, 0), 8)), nullptr,
       true},
      // A bidirectional window (ModernBERT's local layers, |i - j| <= 64):
      // cuDNN's band with left bound 65 and right bound 64.
      {"t=s=1024 bidirectional window 65 d=64 bthd",
       bthd(windowed(attention(2, 12, 12, 1024, 1024, 64, false, 0), 65)),
       nullptr, true},
      {"t=s=37 bidirectional window 8 gqa d=64",
       windowed(attention(2, 4, 2, 37, 37, 64, false, 0), 8), nullptr, true},
  };
  for (const AttentionCase &tc : cases)
    testAttentionPaths(tc, rng);
  // q, k and v read as heads 0, h and h + hk of one fused projection output
  // [b, t, h + 2hk, d] (row_stride), dq, dk and dv written into one such
  // tensor: rows exactly that long, and rows with d more elements at the
  // end, which must keep their contents. cuDNN reads and writes them
  // through strides, the fallback (bfloat16 and float) through copies.
  auto packedQkv = [](OtcrtAttention a, int64_t pad) {
    a.layout = OTCRT_LAYOUT_BTHD;
    a.row_stride = (a.h + 2 * a.hk) * a.d + pad;
    return a;
  };
  const AttentionCase packedCases[] = {
      {"t=s=1024 causal d=64 packed qkv",
       packedQkv(attention(2, 12, 12, 1024, 1024, 64, true, 0), 0), nullptr,
       true},
      {"t=s=37 causal gqa h=4 hk=2 d=64 packed qkv",
       packedQkv(attention(2, 4, 2, 37, 37, 64, true, 0), 0), nullptr, true},
      {"t=s=70 causal gqa h=4 hk=2 d=64 packed qkv padded",
       packedQkv(attention(2, 4, 2, 70, 70, 64, true, 0), 64), nullptr, true},
      {"t=s=37 causal window 8 hk=1 d=64 packed qkv padded",
       packedQkv(windowed(attention(1, 2, 1, 37, 37, 64, true, 0), 8), 64),
       nullptr, true},
      // Hugging Face's GPT-2 under BF16: packed, causal, a padding mask.
      {"t=s=70 causal gqa d=64 packed qkv key padding hidden keys",
       packedQkv(attention(2, 4, 2, 70, 70, 64, true, 0), 0), padding70, true,
       true},
  };
  AttnFwdOf<float> fallbackFwdF32 = otcrt::cuda::attentionFwdFallback;
  AttnBwdOf<float> fallbackBwdF32 = otcrt::cuda::attentionBwdFallback;
  for (const AttentionCase &tc : packedCases) {
    testAttentionPaths(tc, rng);
    testAttentionPath<float>(tc, false, fallbackFwdF32, fallbackBwdF32, rng);
  }
  testAttention("causal odd length", attention(1, 2, 2, 129, 129, 64, true, 0),
                nullptr, rng);
  // The forward's dynamic shared memory, (d + s) floats, exactly 48 KiB:
  // with the kernel's static scratch over the default limit, so it must opt
  // in (it failed to launch when only dynamic sizes over 48 KiB did).
  testAttention("shared memory at 48 KiB", attention(1, 1, 1, 2, 12224, 64, false, 0),
                nullptr, rng);
  testAttention("causal window 5 key padding",
                windowed(attention(2, 4, 2, 70, 70, 32, true, 0), 5), keyPadding,
                rng);
  testAttention("bidirectional window 5 key padding",
                windowed(attention(2, 4, 2, 70, 70, 32, false, 0), 5),
                keyPadding, rng);
}

} // namespace cudatest
