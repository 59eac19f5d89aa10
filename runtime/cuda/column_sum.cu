// Device column sums of libotcrt_cuda (otc.column_sum, a bias's gradient):
// the two-stage reduction of column_reduce.cuh. A stage-1 block sums
// kTileCols adjacent columns over one chunk of rows; W, the elements a
// thread reads at once, is 8 bfloat16 or 4 floats (one 16-byte packet,
// common.cuh) when cols is a multiple of that and x is 16-byte aligned, else
// 1, and a warp reads four rows of 128 bytes (W > 1) per load. No atomics,
// no synchronization with the host, no allocation after the first call
// (capturable in a CUDA graph); the same sums bit for bit on every run, for
// bf16 and f32 storage of the same values alike. The _into_ entry points
// add the sums into a slot of x's storage (a bias's gradient slot).
#include "column_reduce.cuh"

namespace otcrt {
namespace cuda {
namespace {

/// Block (kTileLanes, kTilePhases) per (tile blockIdx.x, chunk blockIdx.y):
/// the chunk's sums of the tile's columns, into partial[chunk] or, for a
/// single chunk, into out (added to it when `add`).
template <typename T, int W, typename TOut>
__global__ void columnSumKernel(int64_t rows, int64_t cols, int64_t chunkRows,
                                const T *x, float *partial, TOut *out,
                                bool add) {
  __shared__ float part[kTilePhases][kTileCols + 1];
  const int lane = static_cast<int>(threadIdx.x),
            phase = static_cast<int>(threadIdx.y);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunkRows;
  const int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  float acc[kTileSums] = {};
  for (int64_t r = begin + phase; r < end; r += kTilePhases) {
#pragma unroll
    for (int j = 0; j < kTileSums; j += W) {
      const int64_t c = first + tileColumn<W>(lane, j);
      if (c < cols) {
        float v[W];
        loadPacket(x + r * cols + c, v);
#pragma unroll
        for (int i = 0; i < W; ++i)
          acc[j + i] += v[i];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kTileSums; ++j)
    part[phase][tileColumn<W>(lane, j)] = acc[j];
  const int t = phase * kTileLanes + lane;
  float sum;
  if (!addPhases(part, t, &sum) || first + t >= cols)
    return;
  if (partial)
    partial[static_cast<int64_t>(blockIdx.y) * cols + first + t] = sum;
  else
    putSum(out + first + t, sum, add);
}

/// The column sums of x into out, or added into out (a gradient slot of
/// x's storage) when `add`.
template <typename T, typename TOut>
int columnSum(int64_t rows, int64_t cols, const T *x, TOut *out, bool add,
              void *streamArg) {
  if (rows < 0 || cols < 0)
    return 1;
  if (cols == 0)
    return 0;
  cudaStream_t stream = asStream(streamArg);
  ColumnPlan plan;
  if (!planColumns(rows, cols, 1, stream, plan))
    return 1;
  const dim3 grid(static_cast<unsigned>(plan.tiles),
                  static_cast<unsigned>(plan.chunks)),
      block(kTileLanes, kTilePhases);
  if (packable<T>(cols, {x}))
    columnSumKernel<T, kPack<T>, TOut><<<grid, block, 0, stream>>>(
        rows, cols, plan.chunkRows, x, plan.partial, out, add);
  else
    columnSumKernel<T, 1, TOut><<<grid, block, 0, stream>>>(
        rows, cols, plan.chunkRows, x, plan.partial, out, add);
  addPartials<TOut>(plan, cols, 1, out, nullptr, stream, add ? 1 : 0);
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

extern "C" {

int otcrt_column_sum_f32(int64_t rows, int64_t cols, const float *x, float *out,
                         void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, out, false, stream);
}
int otcrt_column_sum_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                          float *out, void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, out, false, stream);
}
int otcrt_column_sum_into_f32(int64_t rows, int64_t cols, const float *x,
                              float *acc, void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, acc, true, stream);
}
int otcrt_column_sum_into_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                               otcrt_bf16 *acc, void *stream) {
  return otcrt::cuda::columnSum(rows, cols, x, acc, true, stream);
}

} // extern "C"
