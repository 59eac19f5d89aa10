// Host sum of squares over arena ranges (otcrt_sum_squares in
// otcrt/kernels.h): each range is cut into chunks of kChunk elements, each
// chunk summed in double in element order (in parallel over chunks), and
// the chunk sums added in order, so the result does not depend on the
// number of threads. And the in-place scaling of the same ranges
// (otcrt_scale_ranges), and the factor AdamW applies to them
// (otcrt_grad_factor): clipping and the batch ramp without a pass of its
// own.
#include "common.h"
#include "kernels_cpu.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;

double square(float v) { return static_cast<double>(v) * v; }
double square(otcrt_bf16 v) {
  double f = bf16ToFloat(v);
  return f * f;
}

template <typename T> double sumSquares(const T *x, int64_t n) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t end = c * kChunk + kChunk < n ? c * kChunk + kChunk : n;
    double acc = 0;
    for (int64_t i = c * kChunk; i < end; ++i)
      acc += square(x[i]);
    partial[static_cast<size_t>(c)] = acc;
  }
  double sum = 0;
  for (double p : partial)
    sum += p;
  return sum;
}

} // namespace

int sumSquares(const char *arena, int32_t numRanges, const OtcrtRange *ranges,
               double *sum) {
  if (!sum || numRanges < 0 || (numRanges > 0 && (!arena || !ranges)))
    return 1;
  double total = 0;
  for (int32_t r = 0; r < numRanges; ++r) {
    const OtcrtRange &range = ranges[r];
    if (range.offset < 0 || range.count < 0)
      return 1;
    const char *p = arena + range.offset;
    total += range.bf16
                 ? sumSquares(reinterpret_cast<const otcrt_bf16 *>(p), range.count)
                 : sumSquares(reinterpret_cast<const float *>(p), range.count);
  }
  *sum = total;
  return 0;
}

int gradFactor(const char *arena, int32_t numRanges, const OtcrtRange *ranges,
               float scale, float clip, const float *checks, int32_t numChecks,
               float *factor, double *norm) {
  double sum = 0;
  if (!factor || !norm || numChecks < 0 || (numChecks > 0 && !checks) ||
      sumSquares(arena, numRanges, ranges, &sum) != 0)
    return 1;
  double n = static_cast<double>(scale) * std::sqrt(sum);
  double f = scale;
  if (clip > 0 && n > clip)
    f *= clip / n;
  // A data error a kernel recorded (a gather's index outside its axis)
  // vetoes the update as a loss that is not finite does.
  bool finite = std::isfinite(n) && !errorRecorded();
  for (int32_t i = 0; i < numChecks; ++i)
    finite = finite && std::isfinite(checks[i]);
  *factor = finite ? static_cast<float>(f) : NAN;
  *norm = n;
  return 0;
}

int scaleRanges(char *arena, int32_t numRanges, const OtcrtRange *ranges,
                float factor) {
  if (numRanges < 0 || (numRanges > 0 && (!arena || !ranges)))
    return 1;
  for (int32_t r = 0; r < numRanges; ++r)
    if (ranges[r].offset < 0 || ranges[r].count < 0)
      return 1;
  for (int32_t r = 0; r < numRanges; ++r) {
    const OtcrtRange &range = ranges[r];
    char *p = arena + range.offset;
    if (range.bf16) {
      auto *x = reinterpret_cast<otcrt_bf16 *>(p);
#pragma omp parallel for schedule(static) if (range.count > 65536)
      for (int64_t i = 0; i < range.count; ++i)
        x[i] = floatToBf16(bf16ToFloat(x[i]) * factor);
    } else {
      auto *x = reinterpret_cast<float *>(p);
#pragma omp parallel for schedule(static) if (range.count > 65536)
      for (int64_t i = 0; i < range.count; ++i)
        x[i] *= factor;
    }
  }
  return 0;
}

} // namespace cpu
} // namespace otcrt
