// Unit tests of the host expert products of otcrt/kernels.h
// (otcrt_expert_matmul_*, otcrt_expert_matmul_wgrad_*) against products
// written here in double from the definition of otc.expert_matmul
// (ir/OtcOps.td): each row times the matrix of the expert its index names,
// and each expert's weight gradient the sum of its rows' outer products.
// Covers both layouts of the experts ([E, K, O] and [E, O, K]), uniform
// routing, every row routed to one expert (the skew a router can produce:
// the other experts get zero gradients), negative indices, indices outside
// the experts (zero rows, no gradient), no rows, bf16 storage (widened
// exactly, so its results must equal the f32 kernel's on the same values),
// bad sizes, and repeated calls (the same bits). The results' storage:
// bf16 outputs (the float sums rounded once: the bits of the f32 output
// rounded to nearest even here, by arithmetic of this file's own) and the
// weight gradient added into a slot of f32 or bf16 (slot + the float sum,
// rounded once; an expert without rows keeps its slot's bits).
#include "kernels_test_util.h"

#include "otcrt/abi.h"

#include <cmath>
#include <cstring>

namespace {

struct Problem {
  int64_t experts, depth, width;
  bool transposed;
  std::vector<int64_t> ids;
  int64_t rows() const { return static_cast<int64_t>(ids.size()); }
};

/// The expert of row n, or -1 outside the experts.
int64_t expertOf(const Problem &p, int64_t n) {
  int64_t e = p.ids[n] < 0 ? p.ids[n] + p.experts : p.ids[n];
  return e >= 0 && e < p.experts ? e : -1;
}

/// W_e[l, j] in the problem's layout.
double weight(const Problem &p, const std::vector<float> &w, int64_t e,
              int64_t l, int64_t j) {
  return p.transposed ? w[(e * p.width + j) * p.depth + l]
                      : w[(e * p.depth + l) * p.width + j];
}

std::vector<double> referenceForward(const Problem &p,
                                     const std::vector<float> &x,
                                     const std::vector<float> &w) {
  std::vector<double> out(p.rows() * p.width, 0.0);
  for (int64_t n = 0; n < p.rows(); ++n) {
    int64_t e = expertOf(p, n);
    if (e < 0)
      continue;
    for (int64_t j = 0; j < p.width; ++j)
      for (int64_t l = 0; l < p.depth; ++l)
        out[n * p.width + j] += double(x[n * p.depth + l]) * weight(p, w, e, l, j);
  }
  return out;
}

std::vector<double> referenceWgrad(const Problem &p,
                                   const std::vector<float> &dy,
                                   const std::vector<float> &x) {
  std::vector<double> dw(p.experts * p.depth * p.width, 0.0);
  for (int64_t n = 0; n < p.rows(); ++n) {
    int64_t e = expertOf(p, n);
    if (e < 0)
      continue;
    for (int64_t l = 0; l < p.depth; ++l)
      for (int64_t j = 0; j < p.width; ++j) {
        int64_t at = p.transposed ? (e * p.width + j) * p.depth + l
                                  : (e * p.depth + l) * p.width + j;
        dw[at] += double(x[n * p.depth + l]) * double(dy[n * p.width + j]);
      }
  }
  return dw;
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                const char *what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::abs(want[i])))
        << what << " element " << i;
}

/// `v` rounded to the nearest bfloat16, ties to even, as a float: its
/// significand scaled to 8 bits and rounded by nearbyint (the default
/// rounding mode, to nearest even), not by the runtime's bit manipulation.
/// The values here are finite and far from bfloat16's range limits.
float roundBf16(float v) {
  if (v == 0.0f)
    return v;
  int exponent;
  double m = std::frexp(double(v), &exponent); // |m| in [0.5, 1)
  return float(std::ldexp(std::nearbyint(std::ldexp(m, 8)), exponent - 8));
}

/// bf16 storage as floats, and floats (bfloat16 values) as bf16 storage.
std::vector<float> widen(const std::vector<otcrt_bf16> &v) {
  return kt::fromBf16(v);
}

/// Whether two float vectors hold the same bits.
bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The bf16 forward storing bf16: each element the f32 output `y` (the
/// same kernel's sums) rounded once, bit for bit, so within half a
/// bfloat16 unit of the double reference's (plus the f32 sums' error).
void checkBf16Output(const Problem &p, const std::vector<otcrt_bf16> &xb,
                     const std::vector<otcrt_bf16> &wb,
                     const std::vector<float> &y) {
  std::vector<otcrt_bf16> out(y.size(), 0x7fc0);
  ASSERT_EQ(otcrt_expert_matmul_bf16(p.rows(), p.experts, p.depth, p.width,
                                     p.transposed ? 1 : 0, xb.data(),
                                     p.ids.data(), wb.data(), OTC_BF16,
                                     out.data(), nullptr),
            0);
  std::vector<float> rounded(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    rounded[i] = roundBf16(y[i]);
  std::vector<float> got = widen(out);
  EXPECT_TRUE(sameBits(got, rounded)) << "bf16 out: not y rounded";
  std::vector<double> want = referenceForward(p, widen(xb), widen(wb));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], std::ldexp(std::abs(want[i]), -8) + 1e-5)
        << "bf16 out element " << i;
}

/// The weight gradient added into slots: f32 (slot + the sum dw, one float
/// addition) and bf16 (that float rounded once), each near slot + the
/// double reference; an expert without rows keeps its slot's bits.
void checkSlots(const Problem &p, const std::vector<float> &dy,
                const std::vector<float> &x, const std::vector<float> &dw,
                std::mt19937 &rng) {
  const int64_t n = p.rows();
  const int32_t t = p.transposed ? 1 : 0;
  std::vector<float> slot = kt::random(dw.size(), rng, -1.0f, 1.0f, true);
  slot[0] = -0.0f; // the sign of a zero kept where nothing is added
  std::vector<float> want32(dw.size()), wantBf16(dw.size());
  for (size_t i = 0; i < dw.size(); ++i) {
    want32[i] = slot[i] + dw[i];
    wantBf16[i] = roundBf16(want32[i]);
  }
  std::vector<double> ref = referenceWgrad(p, dy, x);
  for (size_t i = 0; i < ref.size(); ++i)
    ref[i] += slot[i];
  const int64_t size = p.depth * p.width;
  for (int64_t e = 0; e < p.experts; ++e) {
    bool picked = false;
    for (int64_t r = 0; r < n; ++r)
      picked |= expertOf(p, r) == e;
    if (!picked)
      for (int64_t i = e * size; i < (e + 1) * size; ++i)
        want32[i] = wantBf16[i] = slot[i];
  }
  std::vector<float> acc32 = slot;
  ASSERT_EQ(otcrt_expert_matmul_wgrad_f32(n, p.experts, p.depth, p.width, t,
                                          dy.data(), x.data(), p.ids.data(),
                                          OTC_F32, 1, acc32.data(), nullptr),
            0);
  EXPECT_TRUE(sameBits(acc32, want32)) << "f32 slot: not slot + dw";
  expectNear(acc32, ref, "f32 slot");
  std::vector<otcrt_bf16> accBf16 = kt::toBf16(slot);
  auto dyb = kt::toBf16(dy), xb = kt::toBf16(x);
  ASSERT_EQ(otcrt_expert_matmul_wgrad_bf16(
                n, p.experts, p.depth, p.width, t, dyb.data(), xb.data(),
                p.ids.data(), OTC_BF16, 1, accBf16.data(), nullptr),
            0);
  std::vector<float> got = widen(accBf16);
  EXPECT_TRUE(sameBits(got, wantBf16))
      << "bf16 slot: not slot + dw rounded once";
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(got[i], ref[i], std::ldexp(std::abs(ref[i]), -8) + 1e-5)
        << "bf16 slot element " << i;
  // Overwritten in bf16: the sums rounded once.
  std::vector<otcrt_bf16> over(dw.size(), 0x7fc0);
  ASSERT_EQ(otcrt_expert_matmul_wgrad_bf16(n, p.experts, p.depth, p.width, t,
                                           dyb.data(), xb.data(), p.ids.data(),
                                           OTC_BF16, 0, over.data(), nullptr),
            0);
  std::vector<float> dwRounded(dw.size());
  for (size_t i = 0; i < dw.size(); ++i)
    dwRounded[i] = roundBf16(dw[i]);
  EXPECT_TRUE(sameBits(widen(over), dwRounded)) << "bf16 dw: not dw rounded";
}

/// Runs both kernels in f32 and bf16 on `p` and checks them.
void check(const Problem &p, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = p.rows();
  auto x = kt::random(n * p.depth, rng, -1.0f, 1.0f, true);
  auto w = kt::random(p.experts * p.depth * p.width, rng, -1.0f, 1.0f, true);
  auto dy = kt::random(n * p.width, rng, -1.0f, 1.0f, true);
  std::vector<float> y(n * p.width, 7.0f), dw(w.size(), 7.0f);
  int32_t t = p.transposed ? 1 : 0;
  ASSERT_EQ(otcrt_expert_matmul_f32(n, p.experts, p.depth, p.width, t, x.data(),
                                    p.ids.data(), w.data(), OTC_F32, y.data(),
                                    nullptr),
            0);
  expectNear(y, referenceForward(p, x, w), "forward");
  ASSERT_EQ(otcrt_expert_matmul_wgrad_f32(n, p.experts, p.depth, p.width, t,
                                          dy.data(), x.data(), p.ids.data(),
                                          OTC_F32, 0, dw.data(), nullptr),
            0);
  expectNear(dw, referenceWgrad(p, dy, x), "weight gradient");

  // bf16 storage of the same values: widened exactly, the same products.
  std::vector<float> yb(y.size(), 7.0f), dwb(dw.size(), 7.0f);
  auto xb = kt::toBf16(x), wb = kt::toBf16(w), dyb = kt::toBf16(dy);
  ASSERT_EQ(otcrt_expert_matmul_bf16(n, p.experts, p.depth, p.width, t,
                                     xb.data(), p.ids.data(), wb.data(),
                                     OTC_F32, yb.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_expert_matmul_wgrad_bf16(n, p.experts, p.depth, p.width, t,
                                           dyb.data(), xb.data(), p.ids.data(),
                                           OTC_F32, 0, dwb.data(), nullptr),
            0);
  EXPECT_EQ(0, std::memcmp(y.data(), yb.data(), y.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(dw.data(), dwb.data(), dw.size() * sizeof(float)));

  // Repeated: the same bits.
  std::vector<float> again(y.size());
  ASSERT_EQ(otcrt_expert_matmul_f32(n, p.experts, p.depth, p.width, t, x.data(),
                                    p.ids.data(), w.data(), OTC_F32,
                                    again.data(), nullptr),
            0);
  EXPECT_EQ(0, std::memcmp(y.data(), again.data(), y.size() * sizeof(float)));

  checkBf16Output(p, xb, wb, y);
  checkSlots(p, dy, x, dw, rng);
}

std::vector<int64_t> uniformIds(int64_t rows, int64_t experts, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  std::vector<int64_t> ids(rows);
  for (int64_t &i : ids)
    i = pick(rng);
  return ids;
}

TEST(ExpertMatmulCpu, UniformRoutingBothLayouts) {
  for (bool transposed : {false, true}) {
    check({8, 48, 40, transposed, uniformIds(300, 8, 1)}, 2);
    check({3, 5, 7, transposed, uniformIds(13, 3, 3)}, 4);
  }
}

TEST(ExpertMatmulCpu, EveryRowToOneExpert) {
  Problem p{6, 32, 24, true, std::vector<int64_t>(257, 4)};
  check(p, 5);
  std::mt19937 rng(6);
  auto dy = kt::random(257 * 24, rng), x = kt::random(257 * 32, rng);
  std::vector<float> dw(6 * 32 * 24, 7.0f);
  ASSERT_EQ(otcrt_expert_matmul_wgrad_f32(257, 6, 32, 24, 1, dy.data(),
                                          x.data(), p.ids.data(), OTC_F32, 0,
                                          dw.data(), nullptr),
            0);
  for (int64_t e = 0; e < 6; ++e) {
    if (e == 4)
      continue;
    for (int64_t i = 0; i < 32 * 24; ++i)
      ASSERT_EQ(dw[e * 32 * 24 + i], 0.0f) << "expert " << e;
  }
}

TEST(ExpertMatmulCpu, NegativeAndOutsideIndices) {
  // -1 is the last expert; 4 and -5 are outside 4 experts: zero rows.
  Problem p{4, 6, 5, false, {0, -1, 4, 2, -5, 3, -4, 1}};
  check(p, 7);
  std::mt19937 rng(8);
  auto x = kt::random(8 * 6, rng), w = kt::random(4 * 6 * 5, rng);
  std::vector<float> y(8 * 5, 7.0f);
  ASSERT_EQ(otcrt_expert_matmul_f32(8, 4, 6, 5, 0, x.data(), p.ids.data(),
                                    w.data(), OTC_F32, y.data(), nullptr),
            0);
  for (int64_t row : {2, 4})
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(y[row * 5 + j], 0.0f) << "row " << row;
}

TEST(ExpertMatmulCpu, NoRows) {
  std::vector<float> dw(2 * 3 * 4, 7.0f);
  EXPECT_EQ(otcrt_expert_matmul_f32(0, 2, 3, 4, 0, nullptr, nullptr, nullptr,
                                    OTC_F32, nullptr, nullptr),
            0);
  // Added into: nothing to add, the slot as it was.
  EXPECT_EQ(otcrt_expert_matmul_wgrad_f32(0, 2, 3, 4, 0, nullptr, nullptr,
                                          nullptr, OTC_F32, 1, dw.data(),
                                          nullptr),
            0);
  for (float v : dw)
    EXPECT_EQ(v, 7.0f);
  EXPECT_EQ(otcrt_expert_matmul_wgrad_f32(0, 2, 3, 4, 0, nullptr, nullptr,
                                          nullptr, OTC_F32, 0, dw.data(),
                                          nullptr),
            0);
  for (float v : dw)
    EXPECT_EQ(v, 0.0f);
  std::vector<otcrt_bf16> dwb(2 * 3 * 4, 0x40e0); // 7
  EXPECT_EQ(otcrt_expert_matmul_wgrad_bf16(0, 2, 3, 4, 0, nullptr, nullptr,
                                           nullptr, OTC_BF16, 0, dwb.data(),
                                           nullptr),
            0);
  for (otcrt_bf16 v : dwb)
    EXPECT_EQ(v, 0);
}

TEST(ExpertMatmulCpu, BadSizesAndTypes) {
  float buf[16] = {};
  otcrt_bf16 half[16] = {};
  int64_t ids[2] = {0, 0};
  EXPECT_NE(otcrt_expert_matmul_f32(2, 0, 2, 2, 0, buf, ids, buf, OTC_F32, buf,
                                    nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_f32(2, 1, 2, 2, 2, buf, ids, buf, OTC_F32, buf,
                                    nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_wgrad_f32(-1, 1, 2, 2, 0, buf, buf, ids,
                                          OTC_F32, 0, buf, nullptr),
            0);
  // bf16 results only from bf16 data; no other type.
  EXPECT_NE(otcrt_expert_matmul_f32(2, 1, 2, 2, 0, buf, ids, buf, OTC_BF16, buf,
                                    nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_wgrad_f32(2, 1, 2, 2, 0, buf, buf, ids,
                                          OTC_BF16, 1, buf, nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_bf16(2, 1, 2, 2, 0, half, ids, half, OTC_F64,
                                     buf, nullptr),
            0);
}

} // namespace
