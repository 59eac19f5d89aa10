// Helpers shared by the unit tests of the host kernels (kernels_*_test.cpp):
// random inputs (optionally exactly representable in bfloat16), conversions
// to and from bfloat16 storage for such values, element-wise comparisons
// against double references and against the f32 kernel's results rounded to
// bfloat16, and a central finite-difference gradient in double used to
// validate the tests' own analytic reference gradients.
#ifndef OTCRT_TEST_KERNELS_TEST_UTIL_H
#define OTCRT_TEST_KERNELS_TEST_UTIL_H

#include "otcrt/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

namespace kt {

/// `f` with its lower 16 bits cleared: exactly representable in bfloat16.
inline float bf16Representable(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits &= 0xffff0000u;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// n uniform values in [lo, hi), made bfloat16-representable when asked.
inline std::vector<float> random(size_t n, std::mt19937 &rng, float lo = -1.0f,
                                 float hi = 1.0f, bool bf16 = false) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float &v : out)
    v = bf16 ? bf16Representable(dist(rng)) : dist(rng);
  return out;
}

/// The bfloat16 storage of bfloat16-representable floats (exact).
inline std::vector<otcrt_bf16> toBf16(const std::vector<float> &x) {
  std::vector<otcrt_bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    EXPECT_EQ(bits & 0xffffu, 0u) << "not representable: " << x[i];
    out[i] = static_cast<otcrt_bf16>(bits >> 16);
  }
  return out;
}

/// The floats of bfloat16 storage.
inline std::vector<float> fromBf16(const std::vector<otcrt_bf16> &x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof bits);
  }
  return out;
}

/// Widens floats to doubles.
inline std::vector<double> toDouble(const std::vector<float> &x) {
  return std::vector<double>(x.begin(), x.end());
}

/// Every got[i] within atol + rtol |want[i]| of want[i].
template <typename G, typename W>
void expectNear(const std::vector<G> &got, const std::vector<W> &want,
                double rtol, double atol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if (std::isinf(w) && g == w)
      continue;
    ASSERT_NEAR(g, w, atol + rtol * std::fabs(w)) << what << " [" << i << "]";
  }
}

/// Every bfloat16 result within bfloat16 rounding (one unit in the last
/// place, 2^-7 relative) of the matching f32 kernel result.
inline void expectBf16Of(const std::vector<otcrt_bf16> &got,
                         const std::vector<float> &f32, const char *what) {
  std::vector<float> g = fromBf16(got);
  ASSERT_EQ(g.size(), f32.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], f32[i], std::ldexp(std::fabs(f32[i]), -8) + 1e-30)
        << what << " [" << i << "]";
}

/// The central finite-difference gradient of f at x (double), step h.
inline std::vector<double>
numericGradient(const std::function<double(const std::vector<double> &)> &f,
                std::vector<double> x, double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + h;
    double up = f(x);
    x[i] = keep - h;
    double down = f(x);
    x[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

/// sum_i a[i] b[i].
inline double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// The test's own dropout draw: splitmix64's finalizer on the bits of
/// OTCRT_DROPOUT_BITS, top 53 bits as a double in [0, 1).
inline double dropoutDraw(uint64_t key, uint64_t stream, uint64_t index) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull ^ (stream << 32) ^ index;
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<double>(z >> 11) / 9007199254740992.0;
}

} // namespace kt

#endif // OTCRT_TEST_KERNELS_TEST_UTIL_H
