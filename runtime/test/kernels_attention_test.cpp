// Unit tests of the host attention kernels of otcrt/kernels.h against the
// double reference of kernels_attention_reference.h: plain, causal,
// sliding-window, soft-capped, broadcast-masked (zero strides, -inf
// entries), grouped-query (hk < h), dropout and attention-sink problems,
// the kept pattern of a dropped row, and the bfloat16 entry points (within
// bfloat16 rounding of the f32 kernel). The other layouts and dS:
// kernels_attention_layout_test.cpp.
#include "kernels_attention_reference.h"

using namespace attention_ref;

TEST(KernelsAttention, Plain) {
  std::mt19937 rng(101);
  run(makeProblem(2, 2, 2, 3, 5, 4, false, 0, nullptr, 0, rng, true), rng);
}

TEST(KernelsAttention, Causal) {
  std::mt19937 rng(102);
  run(makeProblem(2, 3, 3, 6, 6, 4, true, 0, nullptr, 0, rng, true), rng);
}

TEST(KernelsAttention, SlidingWindow) {
  // Causal: key j is hidden from query i when j > i or i - j >= window;
  // not causal (ModernBERT's local layers), when |i - j| >= window. Windows
  // of 1 (the diagonal), 2 and 4 with grouped heads; with a key padding and
  // dropout; over two query tiles (70 rows, window 9) with sinks.
  std::mt19937 rng(31);
  for (bool causal : {true, false}) {
    for (int32_t window : {1, 2, 4}) {
      Problem p =
          makeProblem(2, 4, 2, 7, 7, 4, causal, 0, nullptr, 0, rng, true);
      p.a.window = window;
      run(p, rng);
    }
    const int64_t dims[4] = {2, 1, 1, 6};
    Problem p =
        makeProblem(2, 2, 1, 6, 6, 3, causal, 0.25f, dims, 2, rng, true);
    p.a.window = 3;
    run(p, rng);
    Problem tiles =
        makeProblem(1, 2, 1, 70, 70, 2, causal, 0, nullptr, 0, rng, true);
    tiles.a.window = 9;
    tiles.sinks = {0.25f, -0.5f};
    run(tiles, rng);
  }
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

TEST(KernelsAttention, Sinks) {
  // GPT-OSS's attention sinks: a logit per query head in each row's
  // normalizer, its gradient against finite differences of the reference;
  // causal with grouped heads, a sliding window with dropout, more rows
  // than one tile of 64 (the sinks' gradient summed over tiles and batch
  // entries), and sinks above every score (most of each row's mass).
  std::mt19937 rng(109);
  auto withSinks = [&](Problem p, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (int64_t h = 0; h < p.a.h; ++h)
      p.sinks.push_back(u(rng));
    return p;
  };
  run(withSinks(makeProblem(2, 4, 2, 5, 5, 3, true, 0, nullptr, 0, rng, true),
                -1, 1),
      rng);
  Problem window =
      makeProblem(2, 2, 1, 6, 6, 3, true, 0.25f, nullptr, 0, rng, true);
  window.a.window = 3;
  run(withSinks(window, -1, 1), rng);
  run(withSinks(makeProblem(2, 2, 1, 70, 70, 2, true, 0, nullptr, 0, rng, true),
                -0.5f, 0.5f),
      rng);
  run(withSinks(makeProblem(1, 2, 2, 4, 4, 3, false, 0, nullptr, 0, rng, true),
                4, 6),
      rng);
}

TEST(KernelsAttention, SinksRowSeeingNoKey) {
  // A mask that hides every key of row 1: with a sink the row's output is
  // 0 and its lse the sink's logit (without one it would be NaN).
  std::mt19937 rng(110);
  const int64_t dims[4] = {1, 1, 3, 4};
  Problem p = makeProblem(2, 2, 1, 3, 4, 3, false, 0, dims, 0, rng, true);
  for (int64_t j = 0; j < 4; ++j)
    p.mask[4 + j] = -std::numeric_limits<float>::infinity();
  p.sinks = {0.25f, -0.5f};
  run(p, rng);
}

TEST(KernelsAttention, KeyPaddingHidesUnderWindow) {
  // A key padding hides its keys as the band does: under a sliding window
  // of 3, batch entry 1 sees keys [0, 4) (its queries 6 and on see no key:
  // zeros, lse +inf, no gradient), entry 2 none (the fill -1e4, -9984 in
  // BF16), entry 0 all; with and without sinks, and over two query tiles
  // (70 rows, window 5, keys from 30 on hidden in entry 1).
  std::mt19937 rng(111);
  auto padded = [&](int64_t t, int64_t window, int64_t seen1) {
    const int64_t dims[4] = {3, 1, 1, t};
    Problem p = makeProblem(3, 2, 1, t, t, 3, true, 0, dims, 0, rng, true);
    p.a.window = static_cast<int32_t>(window);
    p.a.key_padding = 1;
    for (int64_t j = 0; j < t; ++j) {
      p.mask[j] = 0.0f;
      p.mask[t + j] = j < seen1 ? 0.0f : -3.38953139e38f;
      p.mask[2 * t + j] = -9984.0f; // -1e4 rounded to BF16
    }
    return p;
  };
  run(padded(10, 3, 4), rng);
  Problem sinks = padded(10, 3, 4);
  sinks.sinks = {0.5f, -0.25f};
  run(sinks, rng);
  run(padded(70, 5, 30), rng);
  // Without a window: a sequence hiding every key (entry 2).
  Problem causal = padded(10, 0, 4);
  run(causal, rng);
  // A bidirectional window of 3 (not causal): entry 1's queries 6 and on
  // see no key, its queries 2 and 3 see keys ahead of them too.
  Problem both = padded(10, 3, 4);
  both.a.causal = 0;
  run(both, rng);
  both.sinks = {0.5f, -0.25f};
  run(both, rng);
  Problem tiles = padded(70, 5, 30);
  tiles.a.causal = 0;
  run(tiles, rng);
}

TEST(KernelsAttention, KeyPaddingHiddenExactlyZero) {
  // With sinks, a row that sees no key gives exactly 0 and lse the sink's
  // logit, and the keys a padding hides get exactly 0 gradients: batch
  // entry 1 sees keys [0, 4) under a window of 3 (its queries 6 and on see
  // none), batch entry 0 all of them.
  std::mt19937 rng(112);
  const int64_t t = 10, d = 3, dims[4] = {2, 1, 1, t};
  Problem p = makeProblem(2, 2, 1, t, t, d, true, 0, dims, 0, rng, true);
  p.a.window = 3;
  p.a.key_padding = 1;
  for (int64_t j = 0; j < t; ++j) {
    p.mask[j] = 0.0f;
    p.mask[t + j] = j < 4 ? 0.0f : -3.38953139e38f;
  }
  std::vector<float> sinks = {0.5f, -0.25f}, dsinks(2);
  OtcrtAttention a = p.a;
  a.sinks = sinks.data();
  a.dsinks = dsinks.data();
  const int64_t qn = 2 * 2 * t * d, kvn = 2 * t * d;
  std::vector<float> q = kt::random(qn, rng, -1, 1, true),
                     k = kt::random(kvn, rng, -1, 1, true),
                     v = kt::random(kvn, rng, -1, 1, true),
                     dO = kt::random(qn, rng, -1, 1, true);
  std::vector<float> out(qn), lse(2 * 2 * t), dq(qn), dk(kvn), dv(kvn);
  ASSERT_EQ(otcrt_attention_fwd_f32(&a, q.data(), k.data(), v.data(),
                                    p.mask.data(), out.data(), lse.data(),
                                    nullptr),
            0);
  ASSERT_EQ(otcrt_attention_bwd_f32(&a, dO.data(), q.data(), k.data(), v.data(),
                                    p.mask.data(), out.data(), lse.data(),
                                    dq.data(), dk.data(), dv.data(), nullptr),
            0);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 6; i < t; ++i) {
      const int64_t row = (2 + h) * t + i;
      EXPECT_EQ(lse[row], sinks[h]) << "row " << row;
      for (int64_t c = 0; c < d; ++c) {
        EXPECT_EQ(out[row * d + c], 0.0f) << "out row " << row;
        EXPECT_EQ(dq[row * d + c], 0.0f) << "dq row " << row;
      }
    }
  for (int64_t j = 4; j < t; ++j)
    for (int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(dk[(t + j) * d + c], 0.0f) << "dk key " << j;
      EXPECT_EQ(dv[(t + j) * d + c], 0.0f) << "dv key " << j;
    }
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
