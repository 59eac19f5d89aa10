// Device expert products of libotcrt_cuda (otc.expert_matmul and its weight
// gradient): a mixture of experts' rows, each multiplied with the matrix of
// the expert its index names, without a [rows, depth, width] tensor of
// gathered matrices. Per batch of rows (all of them unless the sort's
// scratch cannot hold them):
//  1. keysKernel and CUB's stable radix sort (sort_keys.cuh) group the
//     rows by expert, each group in row order, the rows with an index
//     outside the experts last;
//  2. boundsKernel (one block) finds where each expert's rows begin in the
//     sorted order and numbers the tiles of kTile rows each expert's group
//     is cut into (the outside rows form one more group);
//  3. forward: productKernel, one block per (tile, kTile columns): its
//     rows gathered through the sorted order, the expert's matrix read in
//     steps of kStep along the depth through shared memory, 4 x 4 results a
//     thread accumulated in float, and scattered back to their rows (zeros
//     for the outside group). The grid is sized for the worst case (every
//     row of one expert, or rows spread over all of them: at most
//     rows / kTile + experts + 1 tiles), blocks past the last tile exit,
//     so nothing depends on the routing on the host and a CUDA graph can
//     capture the call;
//  4. weight gradient: weightKernel, one block per (expert, kTile x kTile
//     tile of its matrix), walking the expert's rows in sorted order kStep
//     at a time; an expert without rows gets zeros, later batches add to
//     the result.
// Every sum has an order fixed by the indices alone: results repeat bit for
// bit, with no atomics. The products run on the CUDA cores in FP32 (no
// tensor cores yet); their sums follow another order than the host GEMM's,
// so the two agree to float rounding, not bit for bit.
#include "common.cuh"
#include "scratch.h"
#include "sort_keys.cuh"

#include "otcrt/workspace.h"

namespace otcrt {
namespace cuda {
namespace {

/// Rows (and columns) of a block's tile, and its steps along the depth.
constexpr int kTile = 64;
constexpr int kStep = 16;
/// 16 x 16 threads, each computing 4 x 4 results.
constexpr int kThreads = 256;
constexpr int kPer = 4;

/// The sorted rows of one batch and where each expert's group begins.
struct Grouping {
  const uint32_t *rows;  ///< sorted positions within the batch
  const int64_t *begin;  ///< experts + 2 entries: group e is [begin[e], begin[e+1])
  const int64_t *tiles;  ///< experts + 2 entries: group e's first tile
  int64_t experts, first, count;
};

/// begin[e] for e in [0, experts + 1] and begin[experts + 1] = count; then
/// the tiles of each group, numbered in group order.
__global__ void boundsKernel(const uint32_t *keys, int64_t count,
                             int64_t experts, int64_t *begin, int64_t *tiles) {
  for (int64_t e = threadIdx.x; e <= experts + 1; e += blockDim.x)
    begin[e] = e == experts + 1
                   ? count
                   : lowerBound(keys, 0, count, static_cast<uint32_t>(e));
  __syncthreads();
  if (threadIdx.x == 0) {
    tiles[0] = 0;
    for (int64_t e = 0; e <= experts; ++e)
      tiles[e + 1] = tiles[e] + (begin[e + 1] - begin[e] + kTile - 1) / kTile;
  }
}

/// The group whose tiles hold tile t: the last e with tiles[e] <= t.
__device__ __forceinline__ int64_t groupOf(const int64_t *tiles,
                                           int64_t groups, int64_t t) {
  int64_t lo = 0, hi = groups; // tiles[lo] <= t < tiles[hi]
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (tiles[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// acc[i][j] += sum over the step's kStep terms of a[.][ty kPer + i] *
/// b[.][tx kPer + j], in term order: a thread's 4 x 4 results of a tile.
__device__ __forceinline__ void accumulateStep(const float (&a)[kStep][kTile + 1],
                                               const float (&b)[kStep][kTile + 1],
                                               int ty, int tx,
                                               float (&acc)[kPer][kPer]) {
#pragma unroll
  for (int k = 0; k < kStep; ++k) {
    float av[kPer], bv[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      av[i] = a[k][ty * kPer + i];
      bv[i] = b[k][tx * kPer + i];
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
  }
}

/// out[row, :] = x[row, :] W_e for the rows of one tile of one expert
/// (zeros for the group of rows outside the experts).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    productKernel(Grouping g, int64_t depth, int64_t width, bool transposed,
                  const T *x, const T *w, float *out) {
  const int64_t t = blockIdx.x;
  const int64_t groups = g.experts + 1;
  if (t >= g.tiles[groups])
    return;
  const int64_t e = groupOf(g.tiles, groups, t);
  const int64_t start = g.begin[e] + (t - g.tiles[e]) * kTile;
  const int64_t left = g.begin[e + 1] - start;
  const int64_t rowsHere = left < kTile ? left : kTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  __shared__ int64_t rowOf[kTile];
  __shared__ float xs[kStep][kTile + 1];
  __shared__ float ws[kStep][kTile + 1];
  if (threadIdx.x < kTile)
    rowOf[threadIdx.x] =
        threadIdx.x < rowsHere ? g.first + g.rows[start + threadIdx.x] : -1;
  __syncthreads();
  float acc[kPer][kPer] = {};
  if (e < g.experts) {
    const T *we = w + e * depth * width;
    for (int64_t k0 = 0; k0 < depth; k0 += kStep) {
      for (int i = threadIdx.x; i < kStep * kTile; i += kThreads) {
        // x: consecutive threads along a row's depth.
        int r = i / kStep, k = i % kStep;
        int64_t row = rowOf[r];
        xs[k][r] = row >= 0 && k0 + k < depth ? load(x[row * depth + k0 + k])
                                              : 0.0f;
        // W_e: consecutive threads along its stored rows.
        int c, kk;
        if (transposed) {
          c = i / kStep;
          kk = i % kStep;
        } else {
          kk = i / kTile;
          c = i % kTile;
        }
        int64_t col = c0 + c;
        float v = 0.0f;
        if (col < width && k0 + kk < depth)
          v = load(transposed ? we[col * depth + k0 + kk]
                              : we[(k0 + kk) * width + col]);
        ws[kk][c] = v;
      }
      __syncthreads();
      accumulateStep(xs, ws, ty, tx, acc);
      __syncthreads();
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    int64_t row = rowOf[ty * kPer + i];
    if (row < 0)
      continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int64_t col = c0 + tx * kPer + j;
      if (col < width)
        out[row * width + col] = acc[i][j];
    }
  }
}

/// dw[e] (the experts' layout) = the sum over expert e's rows of
/// x[row]^T dy[row], one kTile x kTile tile of it a block, added to dw
/// when `accumulate`.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    weightKernel(Grouping g, int64_t depth, int64_t width, bool transposed,
                 bool accumulate, const T *dy, const T *x, float *dw) {
  const int64_t e = blockIdx.y;
  const int64_t colTiles = (width + kTile - 1) / kTile;
  const int64_t k0 = (blockIdx.x / colTiles) * kTile;
  const int64_t c0 = (blockIdx.x % colTiles) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  __shared__ float xs[kStep][kTile + 1];
  __shared__ float ds[kStep][kTile + 1];
  float acc[kPer][kPer] = {};
  const int64_t begin = g.begin[e], end = g.begin[e + 1];
  for (int64_t p0 = begin; p0 < end; p0 += kStep) {
    for (int i = threadIdx.x; i < kStep * kTile; i += kThreads) {
      int p = i / kTile, c = i % kTile;
      bool here = p0 + p < end;
      int64_t row = here ? g.first + g.rows[p0 + p] : 0;
      xs[p][c] = here && k0 + c < depth ? load(x[row * depth + k0 + c]) : 0.0f;
      ds[p][c] = here && c0 + c < width ? load(dy[row * width + c0 + c]) : 0.0f;
    }
    __syncthreads();
    accumulateStep(xs, ds, ty, tx, acc);
    __syncthreads();
  }
  float *dwe = dw + e * depth * width;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    int64_t k = k0 + ty * kPer + i;
    if (k >= depth)
      continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int64_t c = c0 + tx * kPer + j;
      if (c >= width)
        continue;
      float *at = transposed ? dwe + c * depth + k : dwe + k * width + c;
      *at = accumulate ? *at + acc[i][j] : acc[i][j];
    }
  }
}

/// Bytes at the start of the sort scratch for the groups' bounds and
/// tiles (2 x (experts + 2) int64, rounded to 256 bytes).
size_t boundsBytes(int64_t experts) {
  return (static_cast<size_t>(2 * (experts + 2)) * sizeof(int64_t) + 255) /
         256 * 256;
}

/// Groups the rows [first, first + count) by expert into `s` and `bounds`;
/// false on a library error.
bool groupBatch(int64_t first, int64_t count, int64_t experts,
                const int64_t *ids, int bits, SortSpace &s, int64_t *bounds,
                Grouping &g, cudaStream_t stream) {
  const int64_t keyBlocks = (count + kBlock - 1) / kBlock;
  keysKernel<<<static_cast<unsigned>(keyBlocks < 4096 ? keyBlocks : 4096),
               kBlock, 0, stream>>>(count, experts, ids + first, s.keys[0],
                                    s.values[0]);
  cub::DoubleBuffer<uint32_t> keys(s.keys[0], s.keys[1]),
      values(s.values[0], s.values[1]);
  size_t tempBytes = s.tempBytes;
  if (cub::DeviceRadixSort::SortPairs(s.temp, tempBytes, keys, values,
                                      static_cast<int>(count), 0, bits,
                                      stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  int64_t *begin = bounds, *tiles = bounds + experts + 2;
  boundsKernel<<<1, kThreads, 0, stream>>>(keys.Current(), count, experts,
                                           begin, tiles);
  g.rows = values.Current();
  g.begin = begin;
  g.tiles = tiles;
  g.experts = experts;
  g.first = first;
  g.count = count;
  return true;
}

/// Runs `body(g)` for each batch of rows the sort scratch takes, grouped;
/// 1 on bad sizes or a library error.
template <typename Body>
int forEachBatch(int64_t rows, int64_t experts, const int64_t *ids,
                 cudaStream_t stream, Body body) {
  if (experts >= int64_t{0x7fffffff})
    return 1;
  char *base = sortScratch(stream);
  const size_t reserved = boundsBytes(experts);
  if (!base || reserved >= OTCRT_CUDA_SORT_SCRATCH_BYTES)
    return 1;
  const size_t capacity = OTCRT_CUDA_SORT_SCRATCH_BYTES - reserved;
  const int bits = keyBits(experts);
  const int64_t batch = batchPositions(rows, bits, stream, capacity);
  if (batch == 0)
    return 1;
  int64_t *bounds = reinterpret_cast<int64_t *>(base);
  for (int64_t first = 0; first < rows; first += batch) {
    const int64_t count = rows - first < batch ? rows - first : batch;
    SortSpace s;
    Grouping g;
    if (!sortSpace(base + reserved, count, bits, stream, s, capacity) ||
        !groupBatch(first, count, experts, ids, bits, s, bounds, g, stream))
      return 1;
    body(g);
  }
  return 0;
}

bool validSizes(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                int32_t transposeW) {
  return rows >= 0 && experts >= 1 && depth >= 1 && width >= 1 &&
         (transposeW == 0 || transposeW == 1) && rows < int64_t{0xffffffff};
}

template <typename T>
int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const T *x, const int64_t *ids,
                 const T *w, float *out, void *streamArg) {
  if (!validSizes(rows, experts, depth, width, transposeW))
    return 1;
  if (rows == 0)
    return 0;
  cudaStream_t stream = asStream(streamArg);
  const unsigned colTiles = static_cast<unsigned>((width + kTile - 1) / kTile);
  if (colTiles > 65535)
    return 1;
  int rc = forEachBatch(rows, experts, ids, stream, [&](const Grouping &g) {
    const int64_t maxTiles = (g.count + kTile - 1) / kTile + experts + 1;
    productKernel<T><<<dim3(static_cast<unsigned>(maxTiles), colTiles),
                       kThreads, 0, stream>>>(g, depth, width, transposeW != 0,
                                              x, w, out);
  });
  return rc ? rc : launchStatus();
}

template <typename T>
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const T *dy,
                      const T *x, const int64_t *ids, float *dw,
                      void *streamArg) {
  if (!validSizes(rows, experts, depth, width, transposeW) || experts > 65535)
    return 1;
  cudaStream_t stream = asStream(streamArg);
  if (rows == 0) {
    if (cudaMemsetAsync(dw, 0,
                        static_cast<size_t>(experts * depth * width) *
                            sizeof(float),
                        stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return 1;
    }
    return launchStatus();
  }
  const int64_t tiles =
      ((depth + kTile - 1) / kTile) * ((width + kTile - 1) / kTile);
  if (tiles > int64_t{0x7fffffff})
    return 1;
  bool later = false;
  int rc = forEachBatch(rows, experts, ids, stream, [&](const Grouping &g) {
    weightKernel<T><<<dim3(static_cast<unsigned>(tiles),
                           static_cast<unsigned>(experts)),
                      kThreads, 0, stream>>>(g, depth, width, transposeW != 0,
                                             later, dy, x, dw);
    later = true;
  });
  return rc ? rc : launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

extern "C" {

int otcrt_expert_matmul_f32(int64_t rows, int64_t experts, int64_t depth,
                            int64_t width, int32_t transpose_w,
                            const float *x, const int64_t *ids,
                            const float *w, float *out, void *stream) {
  return otcrt::cuda::expertMatmul(rows, experts, depth, width, transpose_w, x,
                                   ids, w, out, stream);
}
int otcrt_expert_matmul_bf16(int64_t rows, int64_t experts, int64_t depth,
                             int64_t width, int32_t transpose_w,
                             const otcrt_bf16 *x, const int64_t *ids,
                             const otcrt_bf16 *w, float *out, void *stream) {
  return otcrt::cuda::expertMatmul(rows, experts, depth, width, transpose_w, x,
                                   ids, w, out, stream);
}
int otcrt_expert_matmul_wgrad_f32(int64_t rows, int64_t experts, int64_t depth,
                                  int64_t width, int32_t transpose_w,
                                  const float *dy, const float *x,
                                  const int64_t *ids, float *dw,
                                  void *stream) {
  return otcrt::cuda::expertMatmulWgrad(rows, experts, depth, width,
                                        transpose_w, dy, x, ids, dw, stream);
}
int otcrt_expert_matmul_wgrad_bf16(int64_t rows, int64_t experts,
                                   int64_t depth, int64_t width,
                                   int32_t transpose_w, const otcrt_bf16 *dy,
                                   const otcrt_bf16 *x, const int64_t *ids,
                                   float *dw, void *stream) {
  return otcrt::cuda::expertMatmulWgrad(rows, experts, depth, width,
                                        transpose_w, dy, x, ids, dw, stream);
}

} // extern "C"
