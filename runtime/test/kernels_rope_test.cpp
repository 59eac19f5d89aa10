// Unit tests of the host rotary embedding of otcrt/kernels.h (otcrt_rope_*,
// otc.rope) against a reference written here in double from the exported
// definitions: x_rot * cos + rotate(x_rot) * sin concatenated with x_pass,
// x_rot = x[..., :R] and x_pass = x[..., R:] (R = D unless partial), rotate
// GPT-NeoX's concat(-x[..., h:], x[..., :h]) or GPT-J's
// flatten(stack(-x[..., 1::2], x[..., ::2])), the tables numpy-broadcast to
// x_rot: tables over positions only ([T, D] against [B, H, T, D]), over
// positions with the heads between ([1, T, 1, D] against [B, T, H, D], the
// layout the fusion moves a rope to), per batch, halves that differ (not
// HF's repeated halves), D = 2, partial widths and the interleaved pairs,
// with HF's tables of either form. The transposed
// call (the gradient) must match central finite differences of
// sum(R * rope(x)) for a fixed random R. The bfloat16 entry points must
// give the f32 results within bfloat16 rounding.
#include "kernels_test_util.h"

#include <array>

namespace {

using Vec = std::vector<double>;
using Shape = std::array<int64_t, 4>;

/// Row-major element count.
int64_t count(const Shape &s) { return s[0] * s[1] * s[2] * s[3]; }

/// The element of a table of shape `t` that numpy broadcasting gives
/// element (i0, i1, i2, j) of x.
int64_t tableIndex(const Shape &t, int64_t i0, int64_t i1, int64_t i2,
                   int64_t j) {
  int64_t idx[4] = {t[0] == 1 ? 0 : i0, t[1] == 1 ? 0 : i1, t[2] == 1 ? 0 : i2,
                    j};
  return ((idx[0] * t[1] + idx[1]) * t[2] + idx[2]) * t[3] + idx[3];
}

/// concat(x_rot * cos + rotate(x_rot) * sin, x_pass) in double, x_rot the
/// first R = ts[3] features, rotate built as the exporters write it:
/// rotate_half's concatenation, or rotate_every_two's stack and flatten.
Vec refRope(const Shape &xs, const Shape &ts, const Vec &x, const Vec &cos,
            const Vec &sin, bool interleaved) {
  const int64_t d = xs[3], rot = ts[3], h = rot / 2, rows = count(xs) / d;
  Vec y(x.size()), rotated(rot);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i2 = r % xs[2], i1 = (r / xs[2]) % xs[1],
                  i0 = r / (xs[2] * xs[1]);
    const double *xr = x.data() + r * d;
    for (int64_t j = 0; j < h; ++j) {
      if (interleaved) {
        rotated[2 * j] = -xr[2 * j + 1]; // -x[..., 1::2]
        rotated[2 * j + 1] = xr[2 * j];  // x[..., ::2]
      } else {
        rotated[j] = -xr[h + j]; // -x[..., h:R]
        rotated[h + j] = xr[j];  // x[..., :h]
      }
    }
    for (int64_t j = 0; j < rot; ++j) {
      int64_t t = tableIndex(ts, i0, i1, i2, j);
      y[r * d + j] = xr[j] * cos[t] + rotated[j] * sin[t];
    }
    for (int64_t j = rot; j < d; ++j)
      y[r * d + j] = xr[j]; // x_pass
  }
  return y;
}

/// The element strides of the kernel's n0, n1, n2 for a table of shape t.
std::array<int64_t, 3> tableStrides(const Shape &t) {
  return {t[0] == 1 ? 0 : t[1] * t[2] * t[3], t[1] == 1 ? 0 : t[2] * t[3],
          t[2] == 1 ? 0 : t[3]};
}

/// Calls otcrt_rope_f32 or _bf16 on x of shape xs with tables of shape ts.
template <typename T>
std::vector<T> callRope(const Shape &xs, const Shape &ts,
                        const std::vector<T> &x, const std::vector<float> &cos,
                        const std::vector<float> &sin, bool transposed,
                        bool interleaved) {
  std::array<int64_t, 3> c = tableStrides(ts);
  std::vector<T> y(x.size());
  int rc;
  if constexpr (std::is_same_v<T, float>)
    rc = otcrt_rope_f32(xs[0], xs[1], xs[2], xs[3], ts[3], c[0], c[1], c[2],
                        x.data(), cos.data(), sin.data(), transposed,
                        interleaved, y.data(), nullptr);
  else
    rc = otcrt_rope_bf16(xs[0], xs[1], xs[2], xs[3], ts[3], c[0], c[1], c[2],
                         x.data(), cos.data(), sin.data(), transposed,
                         interleaved, y.data(), nullptr);
  EXPECT_EQ(rc, 0);
  return y;
}

/// HF's tables when `hf` (angles t theta^(-2i/R) of frequency i, each half
/// repeated, or each frequency twice in a row when interleaved, as GPT-J's
/// repeat_interleave), else random values, of shape ts.
void makeTables(const Shape &ts, bool hf, bool interleaved, std::mt19937 &rng,
                std::vector<float> &cos, std::vector<float> &sin) {
  cos = kt::random(count(ts), rng);
  sin = kt::random(count(ts), rng);
  if (!hf)
    return;
  const int64_t d = ts[3], h = d / 2;
  for (int64_t e = 0; e < count(ts); ++e) {
    int64_t j = e % d, pos = (e / d) % std::max<int64_t>(1, ts[2] * ts[1]);
    int64_t i = interleaved ? j / 2 : j % h;
    double angle = pos * std::pow(10000.0, -2.0 * i / d);
    cos[e] = static_cast<float>(std::cos(angle));
    sin[e] = static_cast<float>(std::sin(angle));
  }
}

void checkRope(const Shape &xs, const Shape &ts, bool hf,
               bool interleaved = false) {
  std::mt19937 rng(static_cast<uint32_t>(count(xs) * 31 + count(ts)));
  std::vector<float> cos, sin;
  makeTables(ts, hf, interleaved, rng, cos, sin);
  std::vector<float> x = kt::random(count(xs), rng, -1, 1, /*bf16=*/true);
  const Vec cd = kt::toDouble(cos), sd = kt::toDouble(sin);
  const bool il = interleaved;

  std::vector<float> y = callRope(xs, ts, x, cos, sin, false, il);
  kt::expectNear(y, refRope(xs, ts, kt::toDouble(x), cd, sd, il), 1e-6, 1e-6,
                 "rope");

  // The gradient of sum(R * rope(x)) with respect to x.
  std::vector<float> r = kt::random(count(xs), rng, -1, 1, /*bf16=*/true);
  const Vec rd = kt::toDouble(r);
  Vec fd = kt::numericGradient(
      [&](const Vec &xv) {
        return kt::dot(rd, refRope(xs, ts, xv, cd, sd, il));
      },
      kt::toDouble(x), 1e-3);
  std::vector<float> dx = callRope(xs, ts, r, cos, sin, true, il);
  kt::expectNear(dx, fd, 1e-5, 1e-5, "rope transposed vs finite differences");

  kt::expectBf16Of(callRope(xs, ts, kt::toBf16(x), cos, sin, false, il), y,
                   "rope bf16");
  kt::expectBf16Of(callRope(xs, ts, kt::toBf16(r), cos, sin, true, il), dx,
                   "rope transposed bf16");
}

TEST(RopeKernel, TablesOverPositions) {
  // [B, H, T, D] against HF's [T, D] tables (repeated halves).
  checkRope({2, 3, 5, 8}, {1, 1, 5, 8}, /*hf=*/true);
}

TEST(RopeKernel, SequenceMajorLayout) {
  // [B, T, H, D] against [1, T, 1, D]: the layout the fusion moves to.
  checkRope({2, 5, 3, 8}, {1, 5, 1, 8}, /*hf=*/true);
}

TEST(RopeKernel, GeneralTables) {
  // Halves that differ, per batch and position; odd sizes.
  checkRope({3, 2, 7, 6}, {3, 1, 7, 6}, /*hf=*/false);
  checkRope({1, 1, 4, 2}, {1, 1, 4, 2}, /*hf=*/false);
  checkRope({2, 3, 4, 10}, {1, 1, 1, 10}, /*hf=*/false);
}

TEST(RopeKernel, PartialRotary) {
  // GPT-NeoX's 25%: 2 of 8 features rotate; Phi's 4 of 10 over [T, R]
  // tables; general tables with 4 of 6 (the rest copied, forward and back).
  checkRope({2, 3, 5, 8}, {1, 1, 5, 2}, /*hf=*/true);
  checkRope({2, 4, 3, 10}, {1, 4, 1, 4}, /*hf=*/true);
  checkRope({3, 2, 7, 6}, {3, 1, 7, 4}, /*hf=*/false);
}

TEST(RopeKernel, Interleaved) {
  // GPT-J's pairs (2i, 2i + 1): full width, partial (4 of 8, the layout
  // [B, T, H, D] against [1, T, 1, R]), and general tables.
  checkRope({2, 3, 5, 8}, {1, 1, 5, 8}, /*hf=*/true, /*interleaved=*/true);
  checkRope({2, 5, 3, 8}, {1, 5, 1, 4}, /*hf=*/true, /*interleaved=*/true);
  checkRope({3, 2, 7, 6}, {3, 1, 7, 6}, /*hf=*/false, /*interleaved=*/true);
  checkRope({1, 2, 3, 12}, {1, 1, 3, 2}, /*hf=*/false, /*interleaved=*/true);
}

TEST(RopeKernel, BadWidthsFail) {
  std::vector<float> x(6), t(4), y(6);
  // An odd rotary width; a rotary width past the row.
  EXPECT_NE(otcrt_rope_f32(1, 1, 2, 3, 3, 0, 0, 3, x.data(), t.data(), t.data(),
                           0, 0, y.data(), nullptr),
            0);
  EXPECT_NE(otcrt_rope_f32(1, 1, 2, 3, 4, 0, 0, 4, x.data(), t.data(), t.data(),
                           0, 1, y.data(), nullptr),
            0);
}

} // namespace
