// Device column sums of libotcrt_cuda (otc.column_sum, a bias's gradient).
// One block per 32 adjacent columns: its threads are a column lane (x, W
// adjacent columns each, so a warp reads consecutive elements of a row) and
// one of 32 row phases (y, rows y, y + 32, ...); the 32 partial sums of a
// column are then added in phase order from shared memory. W is 8 bfloat16
// or 4 floats (one 16-byte packet, common.cuh) when cols is a multiple of
// that and x is 16-byte aligned, else 1. The order depends on neither W nor
// the storage type, so results repeat bit for bit (and bf16 sums equal f32
// sums of the same values); no scratch memory, no atomics, no
// synchronization with the host (capturable in a CUDA graph).
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

constexpr int kColumns = OTCRT_CUDA_COLUMNS_PER_BLOCK;
constexpr int kPhases = OTCRT_CUDA_COLUMN_SUM_PHASES;
constexpr int kUnroll = OTCRT_CUDA_COLUMN_SUM_UNROLL;

/// Block (kColumns / W, kPhases): thread (x, y) sums the W columns from
/// kColumns blockIdx.x + W x (W = 8: lanes 0..3 take the block's columns
/// 0-7, ..., 24-31; W divides cols and the block's first column, so a
/// packet lies within the row); the first kColumns threads of the block
/// then add one column each.
template <typename T, int W>
__global__ void columnSumKernel(int64_t rows, int64_t cols, const T *x,
                                float *out) {
  __shared__ float partial[kPhases][kColumns + 1];
  const int lane = static_cast<int>(threadIdx.x) * W,
            phase = static_cast<int>(threadIdx.y);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int64_t c = first + lane;
  float acc[W] = {};
  // kUnroll rows' loads at a time (ir/OtcLibraryCalls.cpp prices the loop
  // so).
  if (c < cols)
#pragma unroll kUnroll
    for (int64_t r = phase; r < rows; r += kPhases) {
      float v[W];
      loadPacket(x + r * cols + c, v);
#pragma unroll
      for (int i = 0; i < W; ++i)
        acc[i] += v[i];
    }
#pragma unroll
  for (int i = 0; i < W; ++i)
    partial[phase][lane + i] = acc[i];
  __syncthreads();
  const int t = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  if (t < kColumns && first + t < cols) {
    float sum = 0.0f;
    for (int p = 0; p < kPhases; ++p)
      sum += partial[p][t];
    out[first + t] = sum;
  }
}

template <typename T>
int columnSum(int64_t rows, int64_t cols, const T *x, float *out,
              void *stream) {
  if (rows < 0 || cols < 0)
    return 1;
  if (cols == 0)
    return 0;
  // ir/OtcLibraryCalls.cpp describes this launch for the step-time
  // prediction: keep the two in step.
  const unsigned blocks =
      static_cast<unsigned>((cols + kColumns - 1) / kColumns);
  if (packable<T>(cols, {x}))
    columnSumKernel<T, kPack<T>>
        <<<blocks, dim3(kColumns / kPack<T>, kPhases), 0, asStream(stream)>>>(
            rows, cols, x, out);
  else
    columnSumKernel<T, 1>
        <<<blocks, dim3(kColumns, kPhases), 0, asStream(stream)>>>(
            rows, cols, x, out);
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
