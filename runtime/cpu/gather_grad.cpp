// Host gather gradient of libotcrt_cpu (otc.gather_grad): the positions are
// bucketed by the row they pick (a stable counting sort, so each bucket
// keeps position order), then every row of the result adds its bucket's
// gradient rows in that order in float, one row per OpenMP work item: a row
// is written by one thread only, and the sums are those of a sequential
// scatter-add, whatever the thread count. Accumulating into a gradient slot,
// a row adds its sum to what it holds (one rounding), and rows no position
// picks (most of a vocabulary-sized table) are not touched at all.
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

template <typename T>
int gatherGradImpl(int64_t outer, int64_t axisLen, int64_t inner,
                   int64_t positions, const T *grad, const int64_t *indices,
                   int32_t accumulate, T *out) {
  if (outer < 0 || axisLen < 0 || inner < 0 || positions < 0 ||
      (accumulate != 0 && accumulate != 1))
    return 1;
  if (outer == 0 || axisLen == 0 || inner == 0)
    return 0;
  // The row of position p, or -1 for an index outside [-axisLen, axisLen).
  auto rowOf = [&](int64_t p) {
    int64_t a = indices[p];
    if (a < 0)
      a += axisLen;
    return a >= 0 && a < axisLen ? a : int64_t{-1};
  };
  // Bucket a holds order[start[a], start[a + 1]).
  std::vector<int64_t> start(static_cast<size_t>(axisLen) + 1, 0);
  for (int64_t p = 0; p < positions; ++p)
    if (int64_t a = rowOf(p); a >= 0)
      ++start[a + 1];
  for (int64_t a = 0; a < axisLen; ++a)
    start[a + 1] += start[a];
  std::vector<int64_t> order(static_cast<size_t>(start[axisLen]));
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < positions; ++p)
      if (int64_t a = rowOf(p); a >= 0)
        order[next[a]++] = p;
  }
  const int64_t rows = outer * axisLen;
#pragma omp parallel if (rows * inner >= 65536)
  {
    std::vector<float> acc(static_cast<size_t>(inner));
#pragma omp for schedule(dynamic, 64)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t o = row / axisLen, a = row % axisLen;
      if (accumulate && start[a] == start[a + 1])
        continue;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = start[a]; k < start[a + 1]; ++k) {
        const T *g = grad + (o * positions + order[k]) * inner;
        for (int64_t n = 0; n < inner; ++n)
          acc[n] += load(g[n]);
      }
      T *dst = out + row * inner;
      if (accumulate)
        for (int64_t n = 0; n < inner; ++n)
          store(dst + n, load(dst[n]) + acc[n]);
      else
        for (int64_t n = 0; n < inner; ++n)
          store(dst + n, acc[n]);
    }
  }
  return 0;
}

} // namespace

int gatherGrad(int64_t outer, int64_t axisLen, int64_t inner, int64_t positions,
               const float *grad, const int64_t *indices, int32_t accumulate,
               float *out) {
  return gatherGradImpl(outer, axisLen, inner, positions, grad, indices,
                        accumulate, out);
}
int gatherGrad(int64_t outer, int64_t axisLen, int64_t inner, int64_t positions,
               const otcrt_bf16 *grad, const int64_t *indices,
               int32_t accumulate, otcrt_bf16 *out) {
  return gatherGradImpl(outer, axisLen, inner, positions, grad, indices,
                        accumulate, out);
}

} // namespace cpu
} // namespace otcrt
