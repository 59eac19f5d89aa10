// Device gather gradient of libotcrt_cuda (otc.gather_grad, an embedding's
// gradient), deterministic and parallel however skewed the indices. The
// result is cleared (cudaMemsetAsync: most rows of a vocabulary-sized table
// are picked by no position) unless the call adds into it (a gradient slot:
// rows no position picks are then not touched), then, per batch of
// positions:
//  1. keysKernel writes each position's row (the axis length for an index
//     outside the axis) and the position itself;
//  2. CUB's radix sort orders the pairs by row; it is stable, so a row's
//     positions stay in position order, and it sorts only the bits a row
//     needs (16 for a vocabulary of 50257);
//  3. pieceKernel: one block per piece of kPieceMin (or more) consecutive
//     sorted positions and per outer index. A block walks its piece in
//     order, its threads along the row (W elements each: a 16-byte packet,
//     common.cuh, when inner is a multiple of it and the pointers are
//     aligned), adding each row's gradient rows in float. A run of
//     positions (one row) that lies within the piece is written to the
//     result; the run holding the piece's first position, when it began in
//     an earlier piece or goes on past this one, and the run holding its
//     last position, when it goes on past this one, are written to the
//     piece's two partial rows in the library's reduction scratch instead;
//  4. crossingKernel: the piece in which such a run begins adds the
//     partial rows of the pieces it spans, in piece order, into the result.
// Work per block is bounded by the piece (32 positions: 8192 positions of
// 768 floats are 256 blocks of 192 threads, each reading 96 KiB) whatever
// the distribution; only a run spanning many pieces costs its crossing
// block one partial row per piece (256 rows of 3 KiB when every position
// is one token). At GPT-2 124M's shape (8192 positions, a 50257 x 768 f32
// table) a clearing call's 154 MB would dominate the sums' 25 MB of
// gradient, which is why the training step adds into the slot instead.
// Every sum has an order fixed by the indices alone, so results repeat bit
// for bit, in a CUDA graph too; no atomics. A row whose run lies within one
// piece gets exactly the bits of the cpu target (zero plus its rows in
// position order). Scratch: the sort uses OTCRT_CUDA_SORT_SCRATCH_BYTES (16
// bytes a position plus CUB's temporary storage; more positions than fit
// are sorted and added in batches, the later ones adding to the result,
// rounded after each), the partial rows come
// from OTCRT_CUDA_REDUCTION_SCRATCH_BYTES (pieces grow until they fit), both
// allocated by the first call (scratch.h), so no later call allocates or
// synchronizes. Indices outside the axis add nothing; the gather that read
// them records them.
#include "common.cuh"
#include "gather_grad.h"
#include "scratch.h"
#include "sort_keys.cuh"

#include "otcrt/workspace.h"

#include <cub/device/device_radix_sort.cuh>

namespace otcrt {
namespace cuda {
namespace {

/// Sorted positions of a piece, at least.
constexpr int64_t kPieceMin = 32;
/// Gradient rows a thread loads before adding them (in order).
constexpr int kUnroll = 4;

/// One batch of positions and how it is cut into pieces.
struct Batch {
  int64_t axisLen, inner;
  int64_t positions; ///< all positions: grad's stride between outer indices
  int64_t first;     ///< the batch's first position
  int64_t count;     ///< positions in the batch
  int64_t piece;     ///< sorted positions per piece
  int64_t pieces;
  bool accumulate; ///< add to the result (an adding call, or a later batch)
};

/// Stores W sums at p (T: the result, or float: a partial row), added to
/// what p holds when `accumulate`.
template <int W, typename T>
__device__ __forceinline__ void put(T *p, float (&v)[W], bool accumulate) {
  if (accumulate) {
    float old[W];
    loadPacket(p, old);
#pragma unroll
    for (int i = 0; i < W; ++i)
      v[i] = old[i] + v[i];
  }
  storePacket(p, v);
}

/// Block o * pieces + j: piece j of the sorted batch for outer index o
/// (see the file comment). partial holds two rows of inner floats per
/// (o, j): [0] the split run at the piece's start, [1] the one at its end.
template <typename T, int W>
__global__ void pieceKernel(Batch b, const uint32_t *keys,
                            const uint32_t *positions, const T *grad, T *out,
                            float *partial) {
  const int64_t o = blockIdx.x / b.pieces, j = blockIdx.x % b.pieces;
  const int64_t begin = j * b.piece,
                end = begin + b.piece < b.count ? begin + b.piece : b.count;
  const uint32_t sentinel = static_cast<uint32_t>(b.axisLen);
  const uint32_t headKey = keys[begin], tailKey = keys[end - 1];
  // Indices outside the axis sort last: the piece's positions that count.
  const int64_t stop =
      tailKey < sentinel ? end : lowerBound(keys, begin, end, sentinel);
  const bool tailGoesOn = end < b.count && keys[end] == tailKey;
  const bool headSplit = (begin > 0 && keys[begin - 1] == headKey) ||
                         (headKey == tailKey && tailGoesOn);
  const bool tailSplit = tailGoesOn && tailKey != headKey;
  const T *g = grad + (o * b.positions + b.first) * b.inner;
  T *result = out + o * b.axisLen * b.inner;
  float *part = partial + (o * b.pieces + j) * 2 * b.inner;
  const int64_t packets = b.inner / W;
  for (int64_t q = threadIdx.x; q < packets; q += blockDim.x) {
    const int64_t c = q * W;
    float acc[W] = {};
    for (int64_t i = begin; i < stop; i += kUnroll) {
      float v[kUnroll][W];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u < stop)
          loadPacket(g + static_cast<int64_t>(positions[i + u]) * b.inner + c,
                     v[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t at = i + u;
        if (at >= stop)
          break;
#pragma unroll
        for (int e = 0; e < W; ++e)
          acc[e] += v[u][e];
        const uint32_t key = keys[at];
        if (at + 1 < end && keys[at + 1] == key)
          continue;
        // The run of `key` ends at `at`.
        if (key == headKey && headSplit)
          storePacket(part + c, acc);
        else if (key == tailKey && tailSplit)
          storePacket(part + b.inner + c, acc);
        else
          put(result + static_cast<int64_t>(key) * b.inner + c, acc,
              b.accumulate);
#pragma unroll
        for (int e = 0; e < W; ++e)
          acc[e] = 0.0f;
      }
    }
  }
}

/// Block o * pieces + j: when the run holding piece j's last position goes
/// on into the next piece and begins in piece j, its row is the sum of its
/// partial rows (pieceKernel) over the pieces it spans, in order.
template <typename T, int W>
__global__ void crossingKernel(Batch b, const uint32_t *keys,
                               const float *partial, T *out) {
  const int64_t o = blockIdx.x / b.pieces, j = blockIdx.x % b.pieces;
  const int64_t begin = j * b.piece, end = begin + b.piece;
  if (end >= b.count)
    return;
  const uint32_t key = keys[end - 1];
  if (key >= static_cast<uint32_t>(b.axisLen) || keys[end] != key)
    return;
  const int64_t start = lowerBound(keys, 0, end, key);
  if (start < begin)
    return; // begun in an earlier piece, which adds it
  const int64_t stop = lowerBound(keys, end, b.count, key + 1);
  const int64_t last = (stop - 1) / b.piece;
  // In piece j the run is the head run (slot 0) when it starts the piece,
  // else the tail run (slot 1); in every later piece it is the head run.
  const int firstSlot = start == begin ? 0 : 1;
  const float *rows = partial + o * b.pieces * 2 * b.inner;
  T *row = out + (o * b.axisLen + key) * b.inner;
  const int64_t packets = b.inner / W;
  for (int64_t q = threadIdx.x; q < packets; q += blockDim.x) {
    const int64_t c = q * W;
    float acc[W] = {};
    for (int64_t p = j; p <= last; p += kUnroll) {
      float v[kUnroll][W];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p + u <= last)
          loadPacket(
              rows + ((p + u) * 2 + (p + u == j ? firstSlot : 0)) * b.inner + c,
              v[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (p + u <= last)
#pragma unroll
          for (int e = 0; e < W; ++e)
            acc[e] += v[u][e];
    }
    put(row + c, acc, b.accumulate);
  }
}

/// Sorted positions per piece for a batch: kPieceMin, doubled while the
/// partial rows (two of inner floats per piece and outer index) would not
/// fit OTCRT_CUDA_REDUCTION_SCRATCH_BYTES; a single piece needs none.
int64_t pieceLength(int64_t outer, int64_t count, int64_t inner) {
  const int64_t capacity =
      static_cast<int64_t>(OTCRT_CUDA_REDUCTION_SCRATCH_BYTES / sizeof(float));
  int64_t piece = kPieceMin;
  while (piece < count &&
         outer * ((count + piece - 1) / piece) * 2 * inner > capacity)
    piece *= 2;
  return piece;
}

template <typename T, int W>
void launchBatch(const Batch &b, int64_t outer, const uint32_t *keys,
                 const uint32_t *positions, const T *grad, T *out,
                 float *partial, cudaStream_t stream) {
  const int64_t packets = b.inner / W;
  int threads = static_cast<int>((packets + 31) / 32 * 32);
  threads = threads > kBlock ? kBlock : threads;
  const unsigned grid = static_cast<unsigned>(outer * b.pieces);
  pieceKernel<T, W>
      <<<grid, threads, 0, stream>>>(b, keys, positions, grad, out, partial);
  if (b.pieces > 1)
    crossingKernel<T, W><<<grid, threads, 0, stream>>>(b, keys, partial, out);
}

template <typename T>
int gatherGrad(int64_t outer, int64_t axisLen, int64_t inner, int64_t positions,
               const T *grad, const int64_t *indices, int32_t accumulate,
               T *out, void *streamArg) {
  if (outer < 0 || axisLen < 0 || inner < 0 || positions < 0 ||
      (accumulate != 0 && accumulate != 1))
    return 1;
  if (outer == 0 || axisLen == 0 || inner == 0)
    return 0;
  // Keys are 32-bit, with axisLen itself marking indices outside the axis.
  if (axisLen >= int64_t{0xffffffff})
    return 1;
  cudaStream_t stream = asStream(streamArg);
  if (!accumulate &&
      cudaMemsetAsync(out, 0,
                      static_cast<size_t>(outer * axisLen * inner) * sizeof(T),
                      stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  if (positions == 0)
    return launchStatus();
  char *sortBase = sortScratch(stream);
  float *partial = reductionScratch(stream);
  const int bits = keyBits(axisLen);
  const int64_t batch = batchPositions(positions, bits, stream);
  if (!sortBase || !partial || batch == 0)
    return 1;
  const bool packed = packable<T>(inner, {grad, out});
  for (int64_t first = 0; first < positions; first += batch) {
    Batch b;
    b.axisLen = axisLen;
    b.inner = inner;
    b.positions = positions;
    b.first = first;
    b.count = positions - first < batch ? positions - first : batch;
    b.piece = pieceLength(outer, b.count, inner);
    b.pieces = (b.count + b.piece - 1) / b.piece;
    b.accumulate = accumulate || first > 0;
    if (outer * b.pieces > int64_t{0x7fffffff})
      return 1;
    SortSpace s;
    if (!sortSpace(sortBase, b.count, bits, stream, s))
      return 1;
    const int64_t keyBlocks = (b.count + kBlock - 1) / kBlock;
    keysKernel<<<static_cast<unsigned>(keyBlocks < 4096 ? keyBlocks : 4096),
                 kBlock, 0, stream>>>(b.count, axisLen, indices + first,
                                      s.keys[0], s.values[0]);
    cub::DoubleBuffer<uint32_t> keys(s.keys[0], s.keys[1]),
        values(s.values[0], s.values[1]);
    size_t tempBytes = s.tempBytes;
    if (cub::DeviceRadixSort::SortPairs(s.temp, tempBytes, keys, values,
                                        static_cast<int>(b.count), 0, bits,
                                        stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return 1;
    }
    if (packed)
      launchBatch<T, kPack<T>>(b, outer, keys.Current(), values.Current(), grad,
                               out, partial, stream);
    else
      launchBatch<T, 1>(b, outer, keys.Current(), values.Current(), grad, out,
                        partial, stream);
  }
  return launchStatus();
}

} // namespace

int64_t gatherGradBatch(int64_t positions, int64_t axisLen) {
  return batchPositions(positions, keyBits(axisLen), nullptr);
}

} // namespace cuda
} // namespace otcrt

extern "C" {

int otcrt_gather_grad_f32(int64_t outer, int64_t axis_len, int64_t inner,
                          int64_t positions, const float *grad,
                          const int64_t *indices, int32_t accumulate,
                          float *out, void *stream) {
  return otcrt::cuda::gatherGrad(outer, axis_len, inner, positions, grad,
                                 indices, accumulate, out, stream);
}
int otcrt_gather_grad_bf16(int64_t outer, int64_t axis_len, int64_t inner,
                           int64_t positions, const otcrt_bf16 *grad,
                           const int64_t *indices, int32_t accumulate,
                           otcrt_bf16 *out, void *stream) {
  return otcrt::cuda::gatherGrad(outer, axis_len, inner, positions, grad,
                                 indices, accumulate, out, stream);
}

} // extern "C"
