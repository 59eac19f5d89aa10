// Host rotary position embedding of libotcrt_cpu (otc.rope and its
// gradient, the same call with `transposed`), for float and bfloat16
// storage with float cos and sin tables. Rows of `dim` elements are
// independent and spread over OpenMP threads; each element is formed in
// float from its row's x and the tables' row and rounded once.
#include "common.h"
#include "kernels_cpu.h"

namespace otcrt {
namespace cpu {
namespace {

template <typename T>
int ropeImpl(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
             int64_t c1, int64_t c2, const T *x, const float *cos,
             const float *sin, int32_t transposed, T *y) {
  if (n0 < 0 || n1 < 0 || n2 < 0 || dim < 0 || dim % 2 != 0)
    return 1;
  const int64_t rows = n0 * n1 * n2, h = dim / 2;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i2 = r % n2, i1 = (r / n2) % n1, i0 = r / (n2 * n1);
    const int64_t t = i0 * c0 + i1 * c1 + i2 * c2;
    const float *cr = cos + t, *sr = sin + t;
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    for (int64_t j = 0; j < h; ++j) {
      float lo = load(xr[j]), hi = load(xr[j + h]);
      // rope: y_lo = lo c - hi s, y_hi = hi c + lo s (s of the own index);
      // transposed: y_lo = lo c + hi s_hi, y_hi = hi c - lo s_lo.
      float ylo =
          transposed ? lo * cr[j] + hi * sr[j + h] : lo * cr[j] - hi * sr[j];
      float yhi = transposed ? hi * cr[j + h] - lo * sr[j]
                             : hi * cr[j + h] + lo * sr[j + h];
      store(yr + j, ylo);
      store(yr + j + h, yhi);
    }
  }
  return 0;
}

} // namespace

int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
         int64_t c1, int64_t c2, const float *x, const float *cos,
         const float *sin, int32_t transposed, float *y) {
  return ropeImpl(n0, n1, n2, dim, c0, c1, c2, x, cos, sin, transposed, y);
}

int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t c0,
         int64_t c1, int64_t c2, const otcrt_bf16 *x, const float *cos,
         const float *sin, int32_t transposed, otcrt_bf16 *y) {
  return ropeImpl(n0, n1, n2, dim, c0, c1, c2, x, cos, sin, transposed, y);
}

} // namespace cpu
} // namespace otcrt
