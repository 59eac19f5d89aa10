// The two-stage column reductions of libotcrt_cuda: sums over the rows of a
// row-major [rows, cols] matrix (column_sum.cu) and of the norms' parameter
// gradients (layer_norm.cu), spread over a grid sized for the device rather
// than for the columns. The rows are cut into chunks of chunkRows rows and
// the columns into tiles of kTileCols; stage 1 runs one block per (tile,
// chunk): thread (x, y) of its kTileLanes x kTilePhases threads adds rows
// y, y + kTilePhases, ... of the chunk for the tile's columns it owns (x
// takes packets x, x + kTileLanes, ... of the tile), and the block's
// kTilePhases partial sums of a column are added in phase order. Stage 2
// (addPartialsKernel) adds a column's chunk sums: group g of kAddGroups
// takes chunks g, g + kAddGroups, ..., and the groups are added in order.
// Every order is a function of (rows, cols) and the device's SM count
// alone, not of the storage type, the packet width or the scheduling, so
// results repeat bit for bit on one kind of GPU (in a CUDA graph too) and
// bf16 sums equal f32 sums of the same values; there are no atomics. With a
// single chunk stage 1 writes the results itself.
//
// Cost: chunks are chosen so that the stage-1 grid has about
// otcrt_column_target_blocks(SMs) blocks, two waves at full occupancy (on
// an H100: 132 SMs, 8 blocks of 256 threads each, 2112 blocks); the kernels'
// registers allow 6 (bf16 column sums), 5 (f32) and 4 (norm gradients) resident
// blocks per SM, so 2.7 to 4 waves. A chunk has at least kTilePhases rows. Rows
// 8192 x cols 768: 12 tiles x 175 chunks of 47 rows; cols 3072: 48 tiles x 44
// chunks of 187 rows; 2100 and 2112 blocks. The partials are chunks x cols
// floats per result (525 KiB and 528 KiB there, written once and read once: a
// twelfth of the bytes of a bf16 input of 768 columns, a forty-eighth at 3072)
// in the library's reduction scratch (scratch.h); where they would not fit,
// chunks get longer. Stage 2 is ceil(cols / 32) blocks of 256 threads per
// result, each thread adding chunks / 8 partials.
#ifndef OTCRT_CUDA_COLUMN_REDUCE_CUH
#define OTCRT_CUDA_COLUMN_REDUCE_CUH

#include "common.cuh"
#include "scratch.h"

#include "otcrt/launch_config.h"
#include "otcrt/workspace.h"

namespace otcrt {
namespace cuda {

/// Columns of a stage-1 block, and its threads: kTileLanes along the
/// columns by kTilePhases along the rows (256). A thread holds kTileCols /
/// kTileLanes = 8 column sums per result whatever the packet width W (one
/// packet of 8 bf16, two of 4 floats or eight single elements). The sizes
/// and the cut are launch_config.h's, which the step-time prediction reads.
constexpr int kTileCols = OTCRT_CUDA_COLUMN_TILE;
constexpr int kTileLanes = OTCRT_CUDA_COLUMN_TILE_LANES;
constexpr int kTilePhases = OTCRT_CUDA_COLUMN_TILE_PHASES;
constexpr int kTileSums = kTileCols / kTileLanes;

/// Threads of a stage-2 block: 32 columns by kAddGroups chunk groups.
constexpr int kAddGroups = OTCRT_CUDA_COLUMN_ADD_GROUPS;

/// How a reduction of `rows` x `cols` into `planes` results is cut.
struct ColumnPlan {
  int64_t tiles = 0;        ///< column tiles (grid x of stage 1)
  int64_t chunkRows = 0;    ///< rows of a chunk
  int64_t chunks = 1;       ///< chunks (grid y of stage 1)
  float *partial = nullptr; ///< [planes][chunks][cols] when chunks > 1
};

/// The plan for rows >= 0, cols > 0: false when the scratch it needs cannot
/// be had (while `stream` is captured before a first eager call).
inline bool planColumns(int64_t rows, int64_t cols, int planes,
                        cudaStream_t stream, ColumnPlan &plan) {
  otcrt_column_plan(
      rows, cols, planes,
      static_cast<int64_t>(OTCRT_CUDA_REDUCTION_SCRATCH_BYTES / sizeof(float)),
      otcrt_column_target_blocks(deviceSms()), &plan.tiles, &plan.chunkRows,
      &plan.chunks);
  plan.partial = nullptr;
  if (plan.chunks > 1) {
    plan.partial = reductionScratch(stream);
    if (!plan.partial)
      return false;
  }
  return true;
}

/// Column offset within the tile of sum j (0 <= j < kTileSums) of lane x,
/// for packets of W elements: packet x + kTileLanes (j / W), element j % W.
template <int W> __device__ __forceinline__ int tileColumn(int x, int j) {
  return (x + kTileLanes * (j / W)) * W + j % W;
}

/// Stage 1's end: the kTilePhases sums of each tile column in `part`
/// (written by every thread, [phase][column]) added in phase order by the
/// block's first kTileCols threads; returns whether this thread holds
/// column `t` (then in *sum). Synchronizes the block.
__device__ __forceinline__ bool
addPhases(float (&part)[kTilePhases][kTileCols + 1], int t, float *sum) {
  __syncthreads();
  if (t >= kTileCols)
    return false;
  float s = part[0][t];
  for (int p = 1; p < kTilePhases; ++p)
    s += part[p][t];
  *sum = s;
  return true;
}

/// Stores a column's sum at p, or adds it to what p holds (its value plus
/// the sum, rounded once to the storage) when `add`.
template <typename TOut>
__device__ __forceinline__ void putSum(TOut *p, float sum, bool add) {
  store(p, add ? load(*p) + sum : sum);
}

/// Stage 2: out_p[c] = the sum of partial[p][k][c] over the chunks k,
/// for plane p = blockIdx.y (out1 for plane 1; NULL outputs are skipped),
/// added to out_p where `accumulate` has bit p + 1. Block (32,
/// kAddGroups), one per 32 columns.
template <typename TOut>
__global__ void addPartialsKernel(int64_t chunks, int64_t cols,
                                  const float *partial, TOut *out0, TOut *out1,
                                  int accumulate) {
  __shared__ float group[kAddGroups][33];
  const int x = static_cast<int>(threadIdx.x),
            g = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + x;
  const float *plane =
      partial + static_cast<int64_t>(blockIdx.y) * chunks * cols;
  float s = 0.0f;
  if (c < cols)
    for (int64_t k = g; k < chunks; k += kAddGroups)
      s += plane[k * cols + c];
  group[g][x] = s;
  __syncthreads();
  TOut *out = blockIdx.y == 0 ? out0 : out1;
  if (g != 0 || c >= cols || !out)
    return;
  float sum = group[0][x];
  for (int i = 1; i < kAddGroups; ++i)
    sum += group[i][x];
  putSum(out + c, sum, (accumulate >> blockIdx.y) & 1);
}

/// Launches stage 2 for `planes` results (when the plan has chunks),
/// adding into out0 and out1 where `accumulate` has bit 1 and 2.
template <typename TOut>
void addPartials(const ColumnPlan &plan, int64_t cols, int planes, TOut *out0,
                 TOut *out1, cudaStream_t stream, int accumulate = 0) {
  if (plan.chunks <= 1)
    return;
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32),
                  static_cast<unsigned>(planes));
  addPartialsKernel<TOut><<<grid, dim3(32, kAddGroups), 0, stream>>>(
      plan.chunks, cols, plan.partial, out0, out1, accumulate);
}

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_COLUMN_REDUCE_CUH
