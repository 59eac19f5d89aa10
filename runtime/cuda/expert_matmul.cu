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
//     rows gathered through the sorted order, the expert's matrix read
//     through shared memory in steps along the depth, and the results
//     scattered back to their rows (zeros for the outside group). The grid
//     is sized for the worst case (every row of one expert, or rows spread
//     over all of them: at most rows / kTile + experts + 1 tiles), blocks
//     past the last tile exit, so nothing depends on the routing on the
//     host and a CUDA graph can capture the call;
//  4. weight gradient: weightKernel, one block per (expert, kTile x kTile
//     tile of its matrix), walking the expert's rows in sorted order a step
//     at a time; an expert without rows gets zeros, later batches add to
//     the result (and so does the first when the call accumulates into a
//     gradient slot, where an expert without rows leaves it as it is).
// Each result is stored in the epilogue of its tile, by one thread: as a
// float, or rounded once to bfloat16, or added into the value there (its
// value plus the float sum, rounded once to the output's type).
// The products: for bfloat16 storage on the tensor cores (sm_80 and
// later; WMMA's 16 x 16 x 16 BF16 products with FP32 accumulators, each of
// a block's 8 warps holding a 16 x 32 part of the tile, kTcStep = 32 terms
// a shared-memory step, the bfloat16 bits copied unchanged, in 16-byte
// packets where the rows allow them, and zeros padding every tail); for
// float storage (and bfloat16 built for older GPUs) on the CUDA cores in
// FP32 (kStep = 16 terms a step, 4 x 4 results a thread). Every sum has an
// order fixed by the indices alone: results repeat bit for bit, with no
// atomics. The sums follow another order than the host GEMM's (and the
// tensor cores' FP32 accumulation rounds its own way), so the two agree to
// float rounding, not bit for bit; with bfloat16 operands every product is
// exact either way.
#include "common.cuh"
#include "scratch.h"
#include "sort_keys.cuh"

#include "otcrt/abi.h"
#include "otcrt/workspace.h"

#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

namespace otcrt {
namespace cuda {
namespace {

/// Rows (and columns) of a block's tile, and its steps along the depth.
constexpr int kTile = 64;
constexpr int kStep = 16;
/// 16 x 16 threads, each computing 4 x 4 results.
constexpr int kThreads = 256;
constexpr int kPer = 4;

/// Where a kernel stores its float results: float or bfloat16 elements,
/// overwritten or, with `add`, each its value plus the result; rounded once
/// (to nearest even) either way.
struct Output {
  void *base;
  bool bf16;
  bool add;

  __device__ __forceinline__ void put(int64_t at, float v) const {
    if (bf16) {
      otcrt_bf16 *p = static_cast<otcrt_bf16 *>(base) + at;
      store(p, add ? load(*p) + v : v);
    } else {
      float *p = static_cast<float *>(base) + at;
      *p = add ? *p + v : v;
    }
  }
};

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

/// A forward block's group e and first column c0.
struct ProductTile {
  int64_t e, c0;
};

/// Where this block's tile of the forward product lies: its group and
/// first column in `tile`, its rows in rowOf (-1 past the group's end;
/// read after a __syncthreads); false for a block past the last tile.
__device__ __forceinline__ bool
productTile(const Grouping &g, int64_t (&rowOf)[kTile], ProductTile &tile) {
  const int64_t t = blockIdx.x;
  const int64_t groups = g.experts + 1;
  if (t >= g.tiles[groups])
    return false;
  const int64_t e = groupOf(g.tiles, groups, t);
  const int64_t start = g.begin[e] + (t - g.tiles[e]) * kTile;
  const int64_t left = g.begin[e + 1] - start;
  const int64_t rowsHere = left < kTile ? left : kTile;
  if (threadIdx.x < kTile)
    rowOf[threadIdx.x] =
        threadIdx.x < rowsHere ? g.first + g.rows[start + threadIdx.x] : -1;
  tile.e = e;
  tile.c0 = static_cast<int64_t>(blockIdx.y) * kTile;
  return true;
}

/// The forward product on the CUDA cores in float: 4 x 4 results a thread.
template <typename T>
__device__ __forceinline__ void
productSimt(const Grouping &g, int64_t depth, int64_t width, bool transposed,
            const T *x, const T *w, Output out) {
  __shared__ int64_t rowOf[kTile];
  __shared__ float xs[kStep][kTile + 1];
  __shared__ float ws[kStep][kTile + 1];
  ProductTile tile;
  if (!productTile(g, rowOf, tile))
    return;
  const int64_t e = tile.e, c0 = tile.c0;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  __syncthreads();
  float acc[kPer][kPer] = {};
  if (e < g.experts) {
    const T *we = w + e * depth * width;
    for (int64_t k0 = 0; k0 < depth; k0 += kStep) {
      for (int i = threadIdx.x; i < kStep * kTile; i += kThreads) {
        // x: consecutive threads along a row's depth.
        int r = i / kStep, k = i % kStep;
        int64_t row = rowOf[r];
        xs[k][r] =
            row >= 0 && k0 + k < depth ? load(x[row * depth + k0 + k]) : 0.0f;
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
        out.put(row * width + col, acc[i][j]);
    }
  }
}

/// The weight gradient's tile on the CUDA cores in float.
template <typename T>
__device__ __forceinline__ void weightSimt(const Grouping &g, int64_t depth,
                                           int64_t width, bool transposed,
                                           const T *dy, const T *x, Output dw) {
  const int64_t e = blockIdx.y;
  const int64_t colTiles = (width + kTile - 1) / kTile;
  const int64_t k0 = (blockIdx.x / colTiles) * kTile;
  const int64_t c0 = (blockIdx.x % colTiles) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  __shared__ float xs[kStep][kTile + 1];
  __shared__ float ds[kStep][kTile + 1];
  float acc[kPer][kPer] = {};
  const int64_t begin = g.begin[e], end = g.begin[e + 1];
  if (begin == end && dw.add) // nothing to add (the whole block)
    return;
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
  const int64_t dwe = e * depth * width;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    int64_t k = k0 + ty * kPer + i;
    if (k >= depth)
      continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int64_t c = c0 + tx * kPer + j;
      if (c < width)
        dw.put(dwe + (transposed ? c * depth + k : k * width + c), acc[i][j]);
    }
  }
}

// The tensor-core tiles (bfloat16 storage, sm_80 and later): the same
// kTile x kTile tile a block, each of its 8 warps holding two 16 x 16 FP32
// accumulators (warp w: rows 16 (w / 2), columns 32 (w % 2) and 16 more),
// fed from shared memory in steps of kTcStep terms (WMMA's 16 x 16 x 16
// BF16 products, two an accumulator a step, in term order). Shared-memory
// rows are padded (kLdStep, kLdTile: multiples of 8 bfloat16, 16 bytes, as
// load_matrix_sync requires, and 8 rows fall on distinct banks; kLdOut
// floats: a multiple of 4, as store_matrix_sync requires), and every
// fragment starts a multiple of 32 bytes into a 32-byte aligned buffer
// (its rows and columns multiples of 16 from the buffer's start). Elements
// past a group's rows, the depth or the width are zeros there, so tails
// need no other case. bfloat16 elements are copied as bits (no rounding,
// no widening): in 16-byte packets when the host found the rows allow them
// (packable), one element a thread otherwise. The accumulators go back
// through shared memory (over the inputs, after the last step's barrier)
// so that the results leave with consecutive threads along a row.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define OTCRT_EXPERT_TENSOR_CORES 1
#endif

/// Terms a shared-memory step adds: depth (forward) or rows (weight
/// gradient); WMMA's fragment side; padded row lengths in elements.
constexpr int kTcStep = 32;
constexpr int kFrag = 16;
constexpr int kLdStep = kTcStep + 8;
constexpr int kLdTile = kTile + 8;
constexpr int kLdOut = kTile + 4;
constexpr int kBf16Pack = kPack<otcrt_bf16>;
using Bf16Packet = Packet<otcrt_bf16, kBf16Pack>;
/// A bfloat16 zero (its bits).
constexpr otcrt_bf16 kZero = 0;
static_assert(kThreads == 8 * 32 && kTile == 4 * kFrag && kTcStep % kFrag == 0,
              "8 warps, each 16 rows x 32 columns of the tile");
static_assert(kLdStep % 8 == 0 && kLdTile % 8 == 0 && kLdOut % 4 == 0,
              "WMMA: ldm a multiple of 16 bytes");
static_assert(kTile * kTcStep == kThreads * kBf16Pack,
              "one 16-byte packet a thread fills a step's tile");

/// Forward: the gathered rows' depth step [kTile][kLdStep] and the
/// expert's [kTcStep][kLdTile] (stored rows along the width) or
/// [kTile][kLdStep] (transposed: along the depth); then the tile's results.
union alignas(32) ProductShared {
  struct {
    otcrt_bf16 x[kTile][kLdStep];
    otcrt_bf16 w[kTile * kLdStep];
  } in;
  float out[kTile][kLdOut];
};
static_assert(kTcStep * kLdTile <= kTile * kLdStep &&
                  sizeof(otcrt_bf16) * kTile * kLdStep % 32 == 0,
              "w holds either layout and starts 32-byte aligned");

/// Weight gradient: a step of the expert's rows of x and dy
/// ([kTcStep][kLdTile] each, along the depth and the width); then the
/// tile's results ([depth][width], or [width][depth] when transposed).
union alignas(32) WeightShared {
  struct {
    otcrt_bf16 x[kTcStep][kLdTile];
    otcrt_bf16 dy[kTcStep][kLdTile];
  } in;
  float out[kTile][kLdOut];
};
static_assert(sizeof(otcrt_bf16) * kTcStep * kLdTile % 32 == 0,
              "dy starts 32-byte aligned");

#ifdef OTCRT_EXPERT_TENSOR_CORES
namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16,
                             wmma::row_major>;
using FragAt = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag,
                              __nv_bfloat16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16,
                             wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag,
                              __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

/// A shared bfloat16 (bits) as WMMA's element type.
__device__ __forceinline__ const __nv_bfloat16 *bf16(const otcrt_bf16 *p) {
  return reinterpret_cast<const __nv_bfloat16 *>(p);
}

/// dst[0, kBf16Pack) = src[0, kBf16Pack) where `valid`, zeros otherwise
/// (src is not read); both 16-byte aligned.
__device__ __forceinline__ void copyPacket(otcrt_bf16 *dst,
                                           const otcrt_bf16 *src, bool valid) {
  Bf16Packet v = {};
  if (valid)
    v = *reinterpret_cast<const Bf16Packet *>(src);
  *reinterpret_cast<Bf16Packet *>(dst) = v;
}

/// The forward product on the tensor cores.
__device__ __forceinline__ void productTc(const Grouping &g, int64_t depth,
                                          int64_t width, bool transposed,
                                          bool packX, bool packW,
                                          const otcrt_bf16 *x,
                                          const otcrt_bf16 *w, Output out) {
  __shared__ int64_t rowOf[kTile];
  __shared__ ProductShared s;
  ProductTile tile;
  if (!productTile(g, rowOf, tile))
    return;
  const int64_t e = tile.e, c0 = tile.c0;
  const int warp = threadIdx.x / 32;
  const int wr = (warp / 2) * kFrag, wc = (warp % 2) * 2 * kFrag;
  __syncthreads();
  FragC acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  if (e < g.experts) { // the same for the whole block
    const otcrt_bf16 *we = w + e * depth * width;
    for (int64_t k0 = 0; k0 < depth; k0 += kTcStep) {
      // x's rows: consecutive threads along a row's depth.
      if (packX) {
        const int r = threadIdx.x / (kTcStep / kBf16Pack);
        const int k = threadIdx.x % (kTcStep / kBf16Pack) * kBf16Pack;
        const int64_t row = rowOf[r];
        const bool valid = row >= 0 && k0 + k < depth;
        copyPacket(&s.in.x[r][k], x + (valid ? row * depth + k0 + k : 0),
                   valid);
      } else {
#pragma unroll 2 // fewer registers: 3 blocks an SM, not 2
        for (int i = threadIdx.x; i < kTile * kTcStep; i += kThreads) {
          const int r = i / kTcStep, k = i % kTcStep;
          const int64_t row = rowOf[r];
          s.in.x[r][k] =
              row >= 0 && k0 + k < depth ? x[row * depth + k0 + k] : kZero;
        }
      }
      // W_e: consecutive threads along its stored rows, kept as stored:
      // [k][c] (ldm kLdTile) or, transposed, [c][k] (ldm kLdStep).
      if (transposed) {
        if (packW) {
          const int c = threadIdx.x / (kTcStep / kBf16Pack);
          const int k = threadIdx.x % (kTcStep / kBf16Pack) * kBf16Pack;
          const int64_t col = c0 + c;
          const bool valid = col < width && k0 + k < depth;
          copyPacket(&s.in.w[c * kLdStep + k],
                     we + (valid ? col * depth + k0 + k : 0), valid);
        } else {
#pragma unroll 2
          for (int i = threadIdx.x; i < kTile * kTcStep; i += kThreads) {
            const int c = i / kTcStep, k = i % kTcStep;
            const int64_t col = c0 + c;
            s.in.w[c * kLdStep + k] = col < width && k0 + k < depth
                                          ? we[col * depth + k0 + k]
                                          : kZero;
          }
        }
      } else {
        if (packW) {
          const int k = threadIdx.x / (kTile / kBf16Pack);
          const int c = threadIdx.x % (kTile / kBf16Pack) * kBf16Pack;
          const bool valid = k0 + k < depth && c0 + c < width;
          copyPacket(&s.in.w[k * kLdTile + c],
                     we + (valid ? (k0 + k) * width + c0 + c : 0), valid);
        } else {
#pragma unroll 2
          for (int i = threadIdx.x; i < kTcStep * kTile; i += kThreads) {
            const int k = i / kTile, c = i % kTile;
            s.in.w[k * kLdTile + c] = k0 + k < depth && c0 + c < width
                                          ? we[(k0 + k) * width + c0 + c]
                                          : kZero;
          }
        }
      }
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTcStep; kk += kFrag) {
        FragA a;
        wmma::load_matrix_sync(a, bf16(&s.in.x[wr][kk]), kLdStep);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = wc + j * kFrag;
          if (transposed) {
            FragBt b;
            wmma::load_matrix_sync(b, bf16(&s.in.w[c * kLdStep + kk]), kLdStep);
            wmma::mma_sync(acc[j], a, b, acc[j]);
          } else {
            FragB b;
            wmma::load_matrix_sync(b, bf16(&s.in.w[kk * kLdTile + c]), kLdTile);
            wmma::mma_sync(acc[j], a, b, acc[j]);
          }
        }
      }
      __syncthreads();
    }
  }
  // The results through shared memory (over the inputs: every warp is past
  // its last read of them), then to their rows, consecutive threads along
  // a row.
#pragma unroll
  for (int j = 0; j < 2; ++j)
    wmma::store_matrix_sync(&s.out[wr][wc + j * kFrag], acc[j], kLdOut,
                            wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile;
    const int64_t row = rowOf[r], col = c0 + c;
    if (row >= 0 && col < width)
      out.put(row * width + col, s.out[r][c]);
  }
}

/// The weight gradient's tile on the tensor cores: x^T (a column-major A
/// over the shared rows) times dy.
__device__ __forceinline__ void weightTc(const Grouping &g, int64_t depth,
                                         int64_t width, bool transposed,
                                         bool packX, bool packDy,
                                         const otcrt_bf16 *dy,
                                         const otcrt_bf16 *x, Output dw) {
  __shared__ WeightShared s;
  const int64_t e = blockIdx.y;
  const int64_t colTiles = (width + kTile - 1) / kTile;
  const int64_t k0 = (blockIdx.x / colTiles) * kTile;
  const int64_t c0 = (blockIdx.x % colTiles) * kTile;
  const int warp = threadIdx.x / 32;
  const int wr = (warp / 2) * kFrag, wc = (warp % 2) * 2 * kFrag;
  FragC acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  const int64_t begin = g.begin[e], end = g.begin[e + 1];
  if (begin == end && dw.add) // nothing to add (the whole block)
    return;
  for (int64_t p0 = begin; p0 < end; p0 += kTcStep) {
    if (packX && packDy) {
      // Both: consecutive threads along a row, one packet of each a thread.
      const int p = threadIdx.x / (kTile / kBf16Pack);
      const int c = threadIdx.x % (kTile / kBf16Pack) * kBf16Pack;
      const bool here = p0 + p < end;
      const int64_t row = here ? g.first + g.rows[p0 + p] : 0;
      const bool inX = here && k0 + c < depth, inDy = here && c0 + c < width;
      copyPacket(&s.in.x[p][c], x + (inX ? row * depth + k0 + c : 0), inX);
      copyPacket(&s.in.dy[p][c], dy + (inDy ? row * width + c0 + c : 0), inDy);
    } else {
      for (int i = threadIdx.x; i < kTcStep * kTile; i += kThreads) {
        const int p = i / kTile, c = i % kTile;
        const bool here = p0 + p < end;
        const int64_t row = here ? g.first + g.rows[p0 + p] : 0;
        s.in.x[p][c] = here && k0 + c < depth ? x[row * depth + k0 + c] : kZero;
        s.in.dy[p][c] =
            here && c0 + c < width ? dy[row * width + c0 + c] : kZero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTcStep; kk += kFrag) {
      FragAt a; // x^T: element (k, p) at x[p][k]
      wmma::load_matrix_sync(a, bf16(&s.in.x[kk][wr]), kLdTile);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        FragB b;
        wmma::load_matrix_sync(b, bf16(&s.in.dy[kk][wc + j * kFrag]), kLdTile);
        wmma::mma_sync(acc[j], a, b, acc[j]);
      }
    }
    __syncthreads();
  }
  // The results through shared memory, as dw stores them ([k][c], or [c][k]
  // transposed), then out with consecutive threads along dw's rows.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (transposed)
      wmma::store_matrix_sync(&s.out[wc + j * kFrag][wr], acc[j], kLdOut,
                              wmma::mem_col_major);
    else
      wmma::store_matrix_sync(&s.out[wr][wc + j * kFrag], acc[j], kLdOut,
                              wmma::mem_row_major);
  }
  __syncthreads();
  const int64_t dwe = e * depth * width;
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int a = i / kTile, b = i % kTile;
    const int64_t k = k0 + (transposed ? b : a), c = c0 + (transposed ? a : b);
    if (k < depth && c < width)
      dw.put(dwe + (transposed ? c * depth + k : k * width + c), s.out[a][b]);
  }
}
#endif // OTCRT_EXPERT_TENSOR_CORES

/// out[row, :] = x[row, :] W_e for the rows of one tile of one expert
/// (zeros for the group of rows outside the experts), as float or rounded
/// to bfloat16: on the tensor cores for bfloat16 storage (sm_80 and
/// later), on the CUDA cores otherwise. packX, packW: whether x's rows and
/// W_e's stored rows can be read in 16-byte packets (bfloat16 only).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    productKernel(Grouping g, int64_t depth, int64_t width, bool transposed,
                  bool packX, bool packW, const T *x, const T *w, Output out) {
#ifdef OTCRT_EXPERT_TENSOR_CORES
  if constexpr (std::is_same_v<T, otcrt_bf16>)
    productTc(g, depth, width, transposed, packX, packW, x, w, out);
  else
#endif
    productSimt(g, depth, width, transposed, x, w, out);
}

/// dw[e] (the experts' layout) = the sum over expert e's rows of
/// x[row]^T dy[row], one kTile x kTile tile of it a block, added to dw
/// when dw.add; on the tensor cores as productKernel.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    weightKernel(Grouping g, int64_t depth, int64_t width, bool transposed,
                 bool packX, bool packDy, const T *dy, const T *x, Output dw) {
#ifdef OTCRT_EXPERT_TENSOR_CORES
  if constexpr (std::is_same_v<T, otcrt_bf16>)
    weightTc(g, depth, width, transposed, packX, packDy, dy, x, dw);
  else
#endif
    weightSimt(g, depth, width, transposed, dy, x, dw);
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

/// Whether the kernels of storage T store results of OtcDType `type`.
template <typename T> bool validType(int32_t type) {
  return type == OTC_F32 || (type == OTC_BF16 && std::is_same_v<T, otcrt_bf16>);
}

template <typename T>
int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const T *x, const int64_t *ids, const T *w,
                 int32_t outType, void *out, void *streamArg) {
  if (!validSizes(rows, experts, depth, width, transposeW) ||
      !validType<T>(outType))
    return 1;
  if (rows == 0)
    return 0;
  cudaStream_t stream = asStream(streamArg);
  const unsigned colTiles = static_cast<unsigned>((width + kTile - 1) / kTile);
  if (colTiles > 65535)
    return 1;
  // 16-byte packets of bfloat16 along x's rows and W's stored rows.
  const bool packX = packable<T>(depth, {x}),
             packW = packable<T>(transposeW ? depth : width, {w});
  int rc = forEachBatch(rows, experts, ids, stream, [&](const Grouping &g) {
    const int64_t maxTiles = (g.count + kTile - 1) / kTile + experts + 1;
    productKernel<T>
        <<<dim3(static_cast<unsigned>(maxTiles), colTiles), kThreads, 0,
           stream>>>(g, depth, width, transposeW != 0, packX, packW, x, w,
                     Output{out, outType == OTC_BF16, false});
  });
  return rc ? rc : launchStatus();
}

template <typename T>
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const T *dy,
                      const T *x, const int64_t *ids, int32_t dwType,
                      int32_t accumulate, void *dw, void *streamArg) {
  if (!validSizes(rows, experts, depth, width, transposeW) ||
      !validType<T>(dwType) || experts > 65535)
    return 1;
  cudaStream_t stream = asStream(streamArg);
  if (rows == 0) {
    if (accumulate)
      return 0;
    if (cudaMemsetAsync(dw, 0,
                        static_cast<size_t>(experts * depth * width) *
                            (dwType == OTC_BF16 ? 2 : 4),
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
  // 16-byte packets of bfloat16 along x's and dy's rows.
  const bool packX = packable<T>(depth, {x}), packDy = packable<T>(width, {dy});
  // The first batch adds into dw when the call accumulates, later ones
  // always.
  Output out{dw, dwType == OTC_BF16, accumulate != 0};
  int rc = forEachBatch(rows, experts, ids, stream, [&](const Grouping &g) {
    weightKernel<T>
        <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(experts)),
           kThreads, 0, stream>>>(g, depth, width, transposeW != 0, packX,
                                  packDy, dy, x, out);
    out.add = true;
  });
  return rc ? rc : launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

extern "C" {

int otcrt_expert_matmul_f32(int64_t rows, int64_t experts, int64_t depth,
                            int64_t width, int32_t transpose_w, const float *x,
                            const int64_t *ids, const float *w,
                            int32_t out_type, void *out, void *stream) {
  return otcrt::cuda::expertMatmul(rows, experts, depth, width, transpose_w, x,
                                   ids, w, out_type, out, stream);
}
int otcrt_expert_matmul_bf16(int64_t rows, int64_t experts, int64_t depth,
                             int64_t width, int32_t transpose_w,
                             const otcrt_bf16 *x, const int64_t *ids,
                             const otcrt_bf16 *w, int32_t out_type, void *out,
                             void *stream) {
  return otcrt::cuda::expertMatmul(rows, experts, depth, width, transpose_w, x,
                                   ids, w, out_type, out, stream);
}
int otcrt_expert_matmul_wgrad_f32(int64_t rows, int64_t experts, int64_t depth,
                                  int64_t width, int32_t transpose_w,
                                  const float *dy, const float *x,
                                  const int64_t *ids, int32_t dw_type,
                                  int32_t accumulate, void *dw, void *stream) {
  return otcrt::cuda::expertMatmulWgrad(rows, experts, depth, width,
                                        transpose_w, dy, x, ids, dw_type,
                                        accumulate, dw, stream);
}
int otcrt_expert_matmul_wgrad_bf16(int64_t rows, int64_t experts, int64_t depth,
                                   int64_t width, int32_t transpose_w,
                                   const otcrt_bf16 *dy, const otcrt_bf16 *x,
                                   const int64_t *ids, int32_t dw_type,
                                   int32_t accumulate, void *dw, void *stream) {
  return otcrt::cuda::expertMatmulWgrad(rows, experts, depth, width,
                                        transpose_w, dy, x, ids, dw_type,
                                        accumulate, dw, stream);
}

} // extern "C"
