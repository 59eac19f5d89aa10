// The stable sort by index that the gather gradient (gather_grad.cu) and
// the expert products (expert_matmul.cu) of libotcrt_cuda share: each
// position's key (the row or expert its index picks, the axis length for
// one outside it) beside the position itself, sorted by CUB's radix sort on
// the bits a key needs, in the library's sort scratch
// (OTCRT_CUDA_SORT_SCRATCH_BYTES, scratch.h), a batch of positions at a
// time when they do not all fit. Stable: positions of one key stay in
// position order, so sums over them have a fixed order. Included by .cu
// files only; everything is internal to each.
#ifndef OTCRT_CUDA_SORT_KEYS_CUH
#define OTCRT_CUDA_SORT_KEYS_CUH

#include "otcrt/workspace.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <cstdint>

namespace otcrt {
namespace cuda {
namespace {

/// keys[p] = the row indices[p] picks (axisLen for an index outside
/// [-axisLen, axisLen)), values[p] = p.
__global__ void keysKernel(int64_t count, int64_t axisLen,
                           const int64_t *indices, uint32_t *keys,
                           uint32_t *values) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       p < count; p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t a = indices[p];
    if (a < 0)
      a += axisLen;
    keys[p] = static_cast<uint32_t>(a >= 0 && a < axisLen ? a : axisLen);
    values[p] = static_cast<uint32_t>(p);
  }
}

/// The first of keys[lo, hi) (ascending) that is not below `key`.
__device__ __forceinline__ int64_t lowerBound(const uint32_t *keys, int64_t lo,
                                              int64_t hi, uint32_t key) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Bits of the sort keys: enough for every row and the sentinel axisLen.
int keyBits(int64_t axisLen) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= axisLen)
    ++bits;
  return bits;
}

/// Elements of each key and value buffer for a batch of n positions
/// (rounded up to 256 bytes, keeping every buffer aligned).
int64_t bufferElements(int64_t n) { return (n + 63) / 64 * 64; }

/// Where a batch of `count` positions lives in the sort scratch.
struct SortSpace {
  uint32_t *keys[2], *values[2];
  void *temp;
  size_t tempBytes;
};

/// CUB's temporary bytes for sorting n pairs on `bits` bits, or false.
bool sortTempBytes(int64_t n, int bits, cudaStream_t stream, size_t &bytes) {
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr), values(nullptr, nullptr);
  bytes = 0;
  return cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values,
                                         static_cast<int>(n), 0, bits,
                                         stream) == cudaSuccess;
}

/// The scratch layout of a batch of `count` positions, false when it does
/// not fit `capacity` bytes from `base`.
bool sortSpace(char *base, int64_t count, int bits, cudaStream_t stream,
               SortSpace &s, size_t capacity = OTCRT_CUDA_SORT_SCRATCH_BYTES) {
  const int64_t n = bufferElements(count);
  const size_t buffers = static_cast<size_t>(4 * n) * sizeof(uint32_t);
  if (buffers > capacity ||
      !sortTempBytes(count, bits, stream, s.tempBytes) ||
      buffers + s.tempBytes > capacity)
    return false;
  uint32_t *u = reinterpret_cast<uint32_t *>(base);
  s.keys[0] = u;
  s.keys[1] = u + n;
  s.values[0] = u + 2 * n;
  s.values[1] = u + 3 * n;
  s.temp = base + buffers;
  return true;
}

/// The largest batch (at most `positions`) whose sort fits `capacity`
/// bytes of the scratch; 0 when none does.
int64_t batchPositions(int64_t positions, int bits, cudaStream_t stream,
                       size_t capacity = OTCRT_CUDA_SORT_SCRATCH_BYTES) {
  int64_t n = static_cast<int64_t>(capacity / 16);
  n = n < positions ? n : positions;
  while (n > 0) {
    size_t temp = 0;
    if (!sortTempBytes(n, bits, stream, temp))
      return 0;
    if (static_cast<size_t>(4 * bufferElements(n)) * sizeof(uint32_t) + temp <=
        capacity)
      return n;
    n -= n / 8 + 1;
  }
  return 0;
}

} // namespace
} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_SORT_KEYS_CUH
