// Unit tests of the host attention kernels' other storage layouts and the
// scores' gradient, against the double reference of
// kernels_attention_reference.h: q, k, v and their gradients sequence-major
// ([b, t, h, d]: bit for bit the [b, h, t, d] call's), packed in one
// [b, t, h + 2hk, d] tensor (row_stride), and dS for a mask with a gradient
// (T5's relative position bias) against central differences.
#include "kernels_attention_reference.h"

using namespace attention_ref;

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
