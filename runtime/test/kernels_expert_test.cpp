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
// bad sizes, and repeated calls (the same bits).
#include "kernels_test_util.h"

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
                                    p.ids.data(), w.data(), y.data(), nullptr),
            0);
  expectNear(y, referenceForward(p, x, w), "forward");
  ASSERT_EQ(otcrt_expert_matmul_wgrad_f32(n, p.experts, p.depth, p.width, t,
                                          dy.data(), x.data(), p.ids.data(),
                                          dw.data(), nullptr),
            0);
  expectNear(dw, referenceWgrad(p, dy, x), "weight gradient");

  // bf16 storage of the same values: widened exactly, the same products.
  std::vector<float> yb(y.size(), 7.0f), dwb(dw.size(), 7.0f);
  auto xb = kt::toBf16(x), wb = kt::toBf16(w), dyb = kt::toBf16(dy);
  ASSERT_EQ(otcrt_expert_matmul_bf16(n, p.experts, p.depth, p.width, t,
                                     xb.data(), p.ids.data(), wb.data(),
                                     yb.data(), nullptr),
            0);
  ASSERT_EQ(otcrt_expert_matmul_wgrad_bf16(n, p.experts, p.depth, p.width, t,
                                           dyb.data(), xb.data(), p.ids.data(),
                                           dwb.data(), nullptr),
            0);
  EXPECT_EQ(0, std::memcmp(y.data(), yb.data(), y.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(dw.data(), dwb.data(), dw.size() * sizeof(float)));

  // Repeated: the same bits.
  std::vector<float> again(y.size());
  ASSERT_EQ(otcrt_expert_matmul_f32(n, p.experts, p.depth, p.width, t, x.data(),
                                    p.ids.data(), w.data(), again.data(),
                                    nullptr),
            0);
  EXPECT_EQ(0, std::memcmp(y.data(), again.data(), y.size() * sizeof(float)));
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
                                          x.data(), p.ids.data(), dw.data(),
                                          nullptr),
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
                                    w.data(), y.data(), nullptr),
            0);
  for (int64_t row : {2, 4})
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(y[row * 5 + j], 0.0f) << "row " << row;
}

TEST(ExpertMatmulCpu, NoRows) {
  std::vector<float> dw(2 * 3 * 4, 7.0f);
  EXPECT_EQ(otcrt_expert_matmul_f32(0, 2, 3, 4, 0, nullptr, nullptr, nullptr,
                                    nullptr, nullptr),
            0);
  EXPECT_EQ(otcrt_expert_matmul_wgrad_f32(0, 2, 3, 4, 0, nullptr, nullptr,
                                          nullptr, dw.data(), nullptr),
            0);
  for (float v : dw)
    EXPECT_EQ(v, 0.0f);
}

TEST(ExpertMatmulCpu, BadSizes) {
  float buf[16] = {};
  int64_t ids[2] = {0, 0};
  EXPECT_NE(otcrt_expert_matmul_f32(2, 0, 2, 2, 0, buf, ids, buf, buf, nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_f32(2, 1, 2, 2, 2, buf, ids, buf, buf, nullptr),
            0);
  EXPECT_NE(otcrt_expert_matmul_wgrad_f32(-1, 1, 2, 2, 0, buf, buf, ids, buf,
                                          nullptr),
            0);
}

} // namespace
