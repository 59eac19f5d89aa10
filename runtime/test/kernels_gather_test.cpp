// Unit tests of the host gather gradient of otcrt/kernels.h
// (otcrt_gather_grad_*) against a scatter-add written here from the
// definition of otc.gather_grad (ir/OtcOps.td): every gradient row added,
// in float and in position order, to the row its index picks. The kernel
// adds each row's positions in that order too, so f32 results must match
// bit for bit, and bf16 ones must be the float sums rounded once. Covers a
// uniform and a heavily skewed index distribution (one token at 60% of the
// positions, a Zipf tail), negative indices, indices outside the axis
// (which add nothing), a gather along a middle axis (outer > 1), a result
// that is overwritten, one that is added into (a gradient slot: picked rows
// get their float value plus the sum, rounded once; every other row keeps
// its bits, NaN and -0 included), no positions, bad sizes, and repeated
// calls (which must give the same bits, also when OpenMP splits the rows).
#include "kernels_test_util.h"

#include <algorithm>
#include <cstring>

namespace {

/// One gather gradient problem: the result [outer, axisLen, inner], the
/// indices [positions] and the gradient [outer, positions, inner].
struct Problem {
  int64_t outer, axisLen, inner;
  std::vector<int64_t> indices;
  int64_t positions() const { return static_cast<int64_t>(indices.size()); }
};

/// The scatter-add in float, in position order.
std::vector<float> reference(const Problem &pr, const std::vector<float> &g) {
  const int64_t P = pr.positions();
  std::vector<float> out(pr.outer * pr.axisLen * pr.inner, 0.0f);
  for (int64_t o = 0; o < pr.outer; ++o)
    for (int64_t p = 0; p < P; ++p) {
      int64_t a = pr.indices[p];
      if (a < 0)
        a += pr.axisLen;
      if (a < 0 || a >= pr.axisLen)
        continue;
      for (int64_t n = 0; n < pr.inner; ++n)
        out[(o * pr.axisLen + a) * pr.inner + n] +=
            g[(o * P + p) * pr.inner + n];
    }
  return out;
}

/// A quiet NaN with a payload that bfloat16 keeps (0x7fc5 in its top half).
float payloadNan() {
  const uint32_t bits = 0x7fc50000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Whether some position picks row a of the axis.
std::vector<bool> pickedRows(const Problem &pr) {
  std::vector<bool> picked(pr.axisLen, false);
  for (int64_t a : pr.indices) {
    if (a < 0)
      a += pr.axisLen;
    if (a >= 0 && a < pr.axisLen)
      picked[a] = true;
  }
  return picked;
}

/// Float bits rounded to the nearest even bfloat16 (finite values).
otcrt_bf16 roundBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<otcrt_bf16>(bits >> 16);
}

/// `n` indices in [0, axisLen): `share` of them `hot`, the rest Zipf-like
/// (rank r drawn with weight 1 / (r + 1)).
std::vector<int64_t> skewed(int64_t n, int64_t axisLen, int64_t hot,
                            double share, std::mt19937 &rng) {
  std::vector<double> weights(axisLen);
  for (int64_t r = 0; r < axisLen; ++r)
    weights[r] = 1.0 / static_cast<double>(r + 1);
  std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
  std::uniform_real_distribution<double> coin(0, 1);
  std::vector<int64_t> out(n);
  for (int64_t &v : out)
    v = coin(rng) < share ? hot : zipf(rng);
  return out;
}

/// Runs both entry points on a random gradient (bf16-representable values)
/// and checks them against the reference, and a repeated call bit for bit.
void check(const Problem &pr, std::mt19937 &rng, const char *what) {
  SCOPED_TRACE(what);
  const int64_t P = pr.positions();
  std::vector<float> g = kt::random(pr.outer * P * pr.inner, rng, -1, 1, true);
  std::vector<float> want = reference(pr, g);
  const size_t n = want.size();
  std::vector<float> got(n, std::nanf("")), again(n, -1.0f);
  ASSERT_EQ(otcrt_gather_grad_f32(pr.outer, pr.axisLen, pr.inner, P, g.data(),
                                  pr.indices.data(), 0, got.data(), nullptr),
            0);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0)
      << "f32 differs from the scatter-add in position order";
  ASSERT_EQ(otcrt_gather_grad_f32(pr.outer, pr.axisLen, pr.inner, P, g.data(),
                                  pr.indices.data(), 0, again.data(), nullptr),
            0);
  ASSERT_EQ(std::memcmp(got.data(), again.data(), n * sizeof(float)), 0)
      << "a repeated call gave other bits";
  std::vector<otcrt_bf16> gb = kt::toBf16(g), outB(n, 0x7fc0);
  ASSERT_EQ(otcrt_gather_grad_bf16(pr.outer, pr.axisLen, pr.inner, P, gb.data(),
                                   pr.indices.data(), 0, outB.data(), nullptr),
            0);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(outB[i], roundBf16(want[i]))
        << "bf16 element " << i << " is not the float sum rounded once";

  // Added into a slot: a random start (bf16-representable), with one row
  // that no position picks holding NaN and -0 (they must keep their bits).
  std::vector<bool> picked = pickedRows(pr);
  std::vector<float> slot = kt::random(n, rng, -2, 2, true);
  int64_t quiet = -1;
  for (int64_t a = 0; a < pr.axisLen && quiet < 0; ++a)
    if (!picked[a])
      quiet = a;
  if (quiet >= 0)
    for (int64_t o = 0; o < pr.outer; ++o)
      for (int64_t k = 0; k < pr.inner; ++k)
        slot[(o * pr.axisLen + quiet) * pr.inner + k] =
            k % 2 ? -0.0f : payloadNan();
  auto rowOf = [&](size_t i) { return (i / pr.inner) % pr.axisLen; };
  std::vector<float> added = slot;
  ASSERT_EQ(otcrt_gather_grad_f32(pr.outer, pr.axisLen, pr.inner, P, g.data(),
                                  pr.indices.data(), 1, added.data(), nullptr),
            0);
  for (size_t i = 0; i < n; ++i) {
    float expect = picked[rowOf(i)] ? slot[i] + want[i] : slot[i];
    ASSERT_EQ(std::memcmp(&added[i], &expect, sizeof(float)), 0)
        << "f32 element " << i << " (row " << rowOf(i) << ", "
        << (picked[rowOf(i)] ? "picked" : "not picked") << "): " << added[i]
        << " against " << expect;
  }
  std::vector<otcrt_bf16> slotB = kt::toBf16(slot), addedB = slotB;
  ASSERT_EQ(otcrt_gather_grad_bf16(pr.outer, pr.axisLen, pr.inner, P, gb.data(),
                                   pr.indices.data(), 1, addedB.data(),
                                   nullptr),
            0);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(addedB[i],
              picked[rowOf(i)] ? roundBf16(slot[i] + want[i]) : slotB[i])
        << "bf16 element " << i << " is not the slot plus the float sum, "
        << "rounded once (or the slot where no position picks the row)";
}

TEST(KernelsGather, Uniform) {
  std::mt19937 rng(11);
  Problem pr{1, 50, 16, {}};
  std::uniform_int_distribution<int64_t> d(0, 49);
  for (int i = 0; i < 1000; ++i)
    pr.indices.push_back(d(rng));
  check(pr, rng, "uniform");
}

TEST(KernelsGather, HeavilySkewed) {
  std::mt19937 rng(12);
  // 60% of 8192 positions on one token of a 1000-row table, large enough
  // (rows x inner) for OpenMP to split the rows.
  check({1, 1000, 96, skewed(8192, 1000, 7, 0.6, rng)}, rng, "skewed");
  // Every position the same row.
  check({1, 97, 12, std::vector<int64_t>(2000, 42)}, rng, "one row");
}

TEST(KernelsGather, NegativeAndOutOfRange) {
  std::mt19937 rng(13);
  // -1 is row 10, -11 row 0; 11, -12 and 100 are outside and add nothing.
  check({1, 11, 8, {3, 1, 3, -1, 0, 3, 10, -11, 11, -12, 100, -1}}, rng,
        "negative and outside");
  std::vector<int64_t> neg = skewed(3000, 84, 5, 0.5, rng);
  for (size_t i = 0; i < neg.size(); i += 3)
    neg[i] -= 84;
  check({1, 84, 8, neg}, rng, "skewed, a third negative");
}

TEST(KernelsGather, MiddleAxisAndOddRows) {
  std::mt19937 rng(14);
  // Gather along axis 1 of [3, 6, 5]: outer 3, inner 5.
  std::uniform_int_distribution<int64_t> d(-6, 5);
  Problem pr{3, 6, 5, {}};
  for (int i = 0; i < 200; ++i)
    pr.indices.push_back(d(rng));
  check(pr, rng, "outer 3, inner 5");
  check({2, 4, 1, {0, 3, 3, -4}}, rng, "inner 1");
}

TEST(KernelsGather, EmptyAndBadSizes) {
  std::vector<float> out(20, 3.0f);
  ASSERT_EQ(otcrt_gather_grad_f32(1, 5, 4, 0, nullptr, nullptr, 1, out.data(),
                                  nullptr),
            0);
  for (float v : out)
    EXPECT_EQ(v, 3.0f) << "no positions, added into: every row as it was";
  ASSERT_EQ(otcrt_gather_grad_f32(1, 5, 4, 0, nullptr, nullptr, 0, out.data(),
                                  nullptr),
            0);
  for (float v : out)
    EXPECT_EQ(v, 0.0f) << "no positions: every row is zero";
  EXPECT_EQ(
      otcrt_gather_grad_f32(0, 5, 4, 3, nullptr, nullptr, 0, nullptr, nullptr),
      0);
  EXPECT_EQ(
      otcrt_gather_grad_f32(-1, 5, 4, 3, nullptr, nullptr, 0, nullptr, nullptr),
      1);
  EXPECT_EQ(
      otcrt_gather_grad_f32(1, 5, 4, -3, nullptr, nullptr, 0, nullptr, nullptr),
      1);
  std::vector<int64_t> idx = {1};
  std::vector<float> g(4, 1.0f);
  out.assign(20, 3.0f);
  EXPECT_EQ(otcrt_gather_grad_f32(1, 5, 4, 1, g.data(), idx.data(), 2,
                                  out.data(), nullptr),
            1)
      << "accumulate is 0 or 1";
  for (float v : out)
    EXPECT_EQ(v, 3.0f) << "a refused call writes nothing";
}

} // namespace
