// Private helpers of the device kernels of libotcrt_cuda: bfloat16 load and
// store by bit manipulation (round to nearest even, NaN kept a quiet NaN,
// bit for bit as the host kernels), the same over 16-byte packets (one
// vector load or store instead of four or eight) and the host's test for
// rows that allow them, the dropout keep test, warp and block reductions in
// a fixed order (results do not vary from run to run), the mapping of
// launch errors to the 0 / 1 codes of otcrt/kernels.h, and the device side
// of the error record (kernel_error.cu).
#ifndef OTCRT_CUDA_COMMON_CUH
#define OTCRT_CUDA_COMMON_CUH

#include "otcrt/bf16.h"
#include "otcrt/kernels.h"
#include "otcrt/launch_config.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace otcrt {
namespace cuda {

/// Threads per block of the row kernels (a multiple of 32, at most 1024).
constexpr int kBlock = OTCRT_CUDA_ROW_BLOCK;

/// Loads a float or bfloat16 element as a float.
__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ float load(otcrt_bf16 v) {
  return otcrt_bf16_to_float(v);
}

/// Stores a float into a float or bfloat16 element (rounded as
/// otcrt/bf16.h rounds).
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(otcrt_bf16 *p, float v) {
  *p = otcrt_float_to_bf16(v);
}

/// Elements of T in a 16-byte packet: 4 floats or 8 bfloat16.
template <typename T>
constexpr int kPack = OTCRT_CUDA_PACKET_BYTES / static_cast<int>(sizeof(T));

/// W consecutive elements, aligned to their whole size, so that one access
/// moves them all: a 16-byte packet for W = kPack<T> (a 128-bit load or
/// store), a plain element for W = 1 (the kernels' fallback width).
template <typename T, int W> struct alignas(W * sizeof(T)) Packet {
  T elements[W];
};

/// The elements of a packet as floats.
template <int W, typename T>
__device__ __forceinline__ void unpack(const Packet<T, W> &packet,
                                       float (&v)[W]) {
#pragma unroll
  for (int i = 0; i < W; ++i)
    v[i] = load(packet.elements[i]);
}

/// Loads p[0, W) as floats; p must be aligned to W elements.
template <int W, typename T>
__device__ __forceinline__ void loadPacket(const T *p, float (&v)[W]) {
  // Copied whole first: one access (unpacking through the pointer would
  // read element by element).
  Packet<T, W> packet = *reinterpret_cast<const Packet<T, W> *>(p);
  unpack(packet, v);
}

/// Stores v into p[0, W), each element rounded as `store` does; p must be
/// aligned to W elements.
template <int W, typename T>
__device__ __forceinline__ void storePacket(T *p, const float (&v)[W]) {
  Packet<T, W> packet;
#pragma unroll
  for (int i = 0; i < W; ++i)
    store(&packet.elements[i], v[i]);
  *reinterpret_cast<Packet<T, W> *>(p) = packet;
}

/// Whether rows of `cols` elements at each pointer (NULL ones aside) can be
/// accessed in packets: cols is a multiple of kPack<T> and every pointer is
/// 16-byte aligned, so that each row start is too.
template <typename T>
inline bool packable(int64_t cols, std::initializer_list<const void *> ptrs) {
  if (cols % kPack<T> != 0)
    return false;
  for (const void *p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

/// True when element `index` of a tensor dropped with (key, stream, ratio)
/// is kept: splitmix64's finalizer on OTCRT_DROPOUT_BITS, top 53 bits.
__device__ __forceinline__ bool dropoutKeep(uint64_t key, uint64_t stream,
                                            uint64_t index, float ratio) {
  uint64_t h = OTCRT_DROPOUT_BITS(key, stream, index);
  h += 0x9E3779B97F4A7C15ull;
  h ^= h >> 30;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 27;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 31;
  return static_cast<double>(h >> 11) * 0x1.0p-53 >= static_cast<double>(ratio);
}

/// Sum and maximum over the 32 lanes of a warp; every lane gets the result.
template <typename V> __device__ __forceinline__ V warpSum(V v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32); every thread gets the
/// result. `scratch` holds 32 values; it may be reused by the next call.
template <typename V> __device__ __forceinline__ V blockSum(V v, V *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpSum(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : V(0);
  return warpSum(v);
}

/// Maximum over the block, as blockSum.
__device__ __forceinline__ float blockMax(float v, float *scratch) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : -INFINITY;
  return warpMax(v);
}

/// The stream argument of otcrt/kernels.h.
inline cudaStream_t asStream(void *stream) {
  return static_cast<cudaStream_t>(stream);
}

/// 0 when no launch error is pending, 1 otherwise (the error is cleared).
inline int launchStatus() { return cudaGetLastError() == cudaSuccess ? 0 : 1; }

/// The library's error record (otcrt_kernel_error) in device memory,
/// allocated and cleared on the first call; null when that fails.
OtcrtKernelError *errorRecord();

/// Records a data error unless one is recorded already (the first writer
/// wins; the fields after `code` are only read once the kernel is done).
__device__ __forceinline__ void recordError(OtcrtKernelError *record,
                                            int32_t code, int64_t index,
                                            int64_t value, int64_t bound) {
  if (!record || atomicCAS(&record->code, 0, code) != 0)
    return;
  record->index = index;
  record->value = value;
  record->bound = bound;
}

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_COMMON_CUH
