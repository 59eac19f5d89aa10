// Host rotary position embedding of libotcrt_cpu (otc.rope and its
// gradient, the same call with `transposed`), for float and bfloat16
// storage with float cos and sin tables. Rows of `dim` elements are
// independent and spread over OpenMP threads; the first `rot` features of a
// row rotate in pairs (p, p + rot / 2), or (2p, 2p + 1) when interleaved,
// and the others are copied. Each element is formed in float from its
// row's x and the tables' row and rounded once.
#include "common.h"
#include "kernels_cpu.h"

namespace otcrt {
namespace cpu {
namespace {

template <typename T>
int ropeImpl(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
             int64_t c0, int64_t c1, int64_t c2, const T *x, const float *cos,
             const float *sin, int32_t transposed, int32_t interleaved, T *y) {
  if (n0 < 0 || n1 < 0 || n2 < 0 || rot < 0 || rot % 2 != 0 || dim < rot)
    return 1;
  const int64_t rows = n0 * n1 * n2, h = rot / 2;
  // Pair p is (a, b) = (p * step, p * step + offset).
  const int64_t step = interleaved ? 2 : 1, offset = interleaved ? 1 : h;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i2 = r % n2, i1 = (r / n2) % n1, i0 = r / (n2 * n1);
    const int64_t t = i0 * c0 + i1 * c1 + i2 * c2;
    const float *cr = cos + t, *sr = sin + t;
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    for (int64_t p = 0; p < h; ++p) {
      const int64_t a = p * step, b = a + offset;
      float xa = load(xr[a]), xb = load(xr[b]);
      // rope: y_a = xa c_a - xb s_a, y_b = xb c_b + xa s_b;
      // transposed: y_a = xa c_a + xb s_b, y_b = xb c_b - xa s_a.
      float ya = transposed ? xa * cr[a] + xb * sr[b] : xa * cr[a] - xb * sr[a];
      float yb = transposed ? xb * cr[b] - xa * sr[a] : xb * cr[b] + xa * sr[b];
      store(yr + a, ya);
      store(yr + b, yb);
    }
    for (int64_t j = rot; j < dim; ++j)
      yr[j] = xr[j];
  }
  return 0;
}

} // namespace

int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
         int64_t c0, int64_t c1, int64_t c2, const float *x, const float *cos,
         const float *sin, int32_t transposed, int32_t interleaved, float *y) {
  return ropeImpl(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
                  interleaved, y);
}

int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
         int64_t c0, int64_t c1, int64_t c2, const otcrt_bf16 *x,
         const float *cos, const float *sin, int32_t transposed,
         int32_t interleaved, otcrt_bf16 *y) {
  return ropeImpl(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
                  interleaved, y);
}

} // namespace cpu
} // namespace otcrt
