// Host column sums of libotcrt_cpu (otc.column_sum, a bias's gradient): each
// column accumulated in float over the rows in order, so the result is the
// one a sequential sum gives; blocks of columns in parallel, each reading the
// rows' slices of its columns contiguously. The sums go to a float result or
// are added into a slot of the input's storage (one rounding each).
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>

namespace otcrt {
namespace cpu {
namespace {

/// Columns per task: each task keeps their sums and walks the rows in
/// order, reading each row's slice of them contiguously (the rows in the
/// inner loop would read one element per cache line).
constexpr int64_t kColumnBlock = 256;

template <typename T, typename TOut>
int columnSumImpl(int64_t rows, int64_t cols, const T *x, TOut *out, bool add) {
  if (rows < 0 || cols < 0)
    return 1;
  const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= 65536)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock;
    const int64_t n = std::min(kColumnBlock, cols - c0);
    float acc[kColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T *row = x + r * cols + c0;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c)
        acc[c] += load(row[c]);
    }
    for (int64_t c = 0; c < n; ++c)
      store(out + c0 + c, add ? load(out[c0 + c]) + acc[c] : acc[c]);
  }
  return 0;
}

} // namespace

int columnSum(int64_t rows, int64_t cols, const float *x, float *out) {
  return columnSumImpl(rows, cols, x, out, false);
}
int columnSum(int64_t rows, int64_t cols, const otcrt_bf16 *x, float *out) {
  return columnSumImpl(rows, cols, x, out, false);
}
int columnSumInto(int64_t rows, int64_t cols, const float *x, float *acc) {
  return columnSumImpl(rows, cols, x, acc, true);
}
int columnSumInto(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                  otcrt_bf16 *acc) {
  return columnSumImpl(rows, cols, x, acc, true);
}

} // namespace cpu
} // namespace otcrt
