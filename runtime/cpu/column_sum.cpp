// Host column sums of libotcrt_cpu (otc.column_sum, a bias's gradient): each
// column accumulated in float over the rows in order, so the result is the
// one a sequential sum gives.
#include "common.h"
#include "kernels_cpu.h"

namespace otcrt {
namespace cpu {
namespace {

template <typename T>
int columnSumImpl(int64_t rows, int64_t cols, const T *x, float *out) {
  if (rows < 0 || cols < 0)
    return 1;
#pragma omp parallel for if (rows * cols >= 65536)
  for (int64_t c = 0; c < cols; ++c) {
    float acc = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      acc += load(x[r * cols + c]);
    out[c] = acc;
  }
  return 0;
}

} // namespace

int columnSum(int64_t rows, int64_t cols, const float *x, float *out) {
  return columnSumImpl(rows, cols, x, out);
}
int columnSum(int64_t rows, int64_t cols, const otcrt_bf16 *x, float *out) {
  return columnSumImpl(rows, cols, x, out);
}

} // namespace cpu
} // namespace otcrt
