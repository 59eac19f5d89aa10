// Device column sums of libotcrt_cuda (otc.column_sum, a bias's gradient).
// One block per 32 adjacent columns: its 32 x 32 threads are a column lane
// (x, so a warp reads 32 consecutive elements of a row) and one of 32 row
// phases (y, rows y, y + 32, ...); the 32 partial sums of a column are then
// added in phase order from shared memory. The order is fixed, so results
// repeat bit for bit; no scratch memory, no atomics, no synchronization with
// the host (capturable in a CUDA graph).
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

constexpr int kColumns = 32;
constexpr int kPhases = 32;

template <typename T>
__global__ void columnSumKernel(int64_t rows, int64_t cols, const T *x,
                                float *out) {
  __shared__ float partial[kPhases][kColumns + 1];
  const int lane = threadIdx.x, phase = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumns + lane;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = phase; r < rows; r += kPhases)
      acc += load(x[r * cols + c]);
  partial[phase][lane] = acc;
  __syncthreads();
  if (phase == 0 && c < cols) {
    float sum = 0.0f;
    for (int p = 0; p < kPhases; ++p)
      sum += partial[p][lane];
    out[c] = sum;
  }
}

template <typename T>
int columnSum(int64_t rows, int64_t cols, const T *x, float *out,
              void *stream) {
  if (rows < 0 || cols < 0)
    return 1;
  if (cols == 0)
    return 0;
  const int64_t blocks = (cols + kColumns - 1) / kColumns;
  columnSumKernel<T><<<static_cast<unsigned>(blocks), dim3(kColumns, kPhases),
                       0, asStream(stream)>>>(rows, cols, x, out);
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

extern "C" {

int otcrt_column_sum_f32(int64_t rows, int64_t cols, const float *x,
                         float *out, void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, out, stream);
}
int otcrt_column_sum_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                          float *out, void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, out, stream);
}

} // extern "C"
