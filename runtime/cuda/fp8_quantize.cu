// The quantize kernels of the cuda FP8 GEMM (gemm.h, gemm_fp8.cpp): one
// pass that writes a BF16 matrix's FP8 copy, scaled by otcrt_fp8_scale of
// the amax its call site saw on its previous call and rounded by
// otcrt_float_to_fp8 (otcrt/fp8.h, the host emulation's own functions, so
// the bytes are the cpu's), transposed when asked, with 1 / scale written
// for cuBLASLt's scale pointer, while it gathers this call's amax (each
// block's maximum, then one atomic maximum of its bits, which order
// non-negative floats as integers) for the next call; and, on a site's
// first call only, an amax pass before it, so that the first call scales
// from its own operand. One pass can write both layouts of a shared copy
// (otcrt_fp8_quantize, gemm_fp8.cpp). Everything stays on the device: no
// synchronization, a CUDA graph captures them.
#include "common.cuh"
#include "gemm.h"
#include "otcrt/fp8.h"

namespace otcrt {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void amaxKernel(const uint16_t *x, int64_t rows, int64_t cols,
                           int64_t ld, float *amax) {
  __shared__ float scratch[32];
  float m = 0.0f;
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(otcrt_bf16_to_float(x[(i / cols) * ld + i % cols])));
  m = blockMax(m, scratch);
  if (threadIdx.x == 0)
    atomicMax(reinterpret_cast<int *>(amax), __float_as_int(m));
}

/// The side of the square tiles the quantize kernel walks; each of its
/// kThreads threads covers kTile / (kThreads / kTile) rows of a tile.
constexpr int kTile = 32;
constexpr int kTileRows = kThreads / kTile;

/// One pass over x in kTile x kTile tiles (a grid-stride loop over them):
/// each tile is read along its rows (coalesced), its FP8 bytes written along
/// the rows for the copy as stored, and through shared memory along the
/// columns for a transposed copy, so both layouts read and write whole
/// segments. Every element is converted by the same functions as on the
/// host, so the bytes are the cpu's.
__global__ void quantizeKernel(Fp8Quantize q) {
  __shared__ float scratch[32];
  __shared__ uint8_t tile[kTile][kTile + 4];
  const float scale = otcrt_fp8_scale(*q.prev, q.format);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *q.invScale = 1.0f / scale;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  const int64_t tilesR = (q.rows + kTile - 1) / kTile,
                tilesC = (q.cols + kTile - 1) / kTile;
  // The transposed copy: the output itself, or the second layout.
  uint8_t *transposed = q.transpose ? q.out : q.alsoTransposed;
  float m = 0.0f;
  for (int64_t t = blockIdx.x; t < tilesR * tilesC; t += gridDim.x) {
    const int64_t r0 = (t / tilesC) * kTile, c0 = (t % tilesC) * kTile;
    for (int k = ty; k < kTile; k += kTileRows) {
      const int64_t i = r0 + k, j = c0 + tx;
      if (i >= q.rows || j >= q.cols)
        continue;
      const float v = otcrt_bf16_to_float(q.x[i * q.ld + j]);
      m = fmaxf(m, fabsf(v));
      const uint8_t b = otcrt_float_to_fp8(v * scale, q.format);
      if (!q.transpose)
        q.out[i * q.cols + j] = b;
      tile[k][tx] = b;
    }
    if (!transposed)
      continue;
    __syncthreads();
    for (int k = ty; k < kTile; k += kTileRows) {
      const int64_t j = c0 + k, i = r0 + tx;
      if (i < q.rows && j < q.cols)
        transposed[j * q.rows + i] = tile[tx][k];
    }
    __syncthreads();
  }
  m = blockMax(m, scratch);
  if (threadIdx.x != 0)
    return;
  atomicMax(reinterpret_cast<int *>(q.cur), __float_as_int(m));
  // The last block to finish (every other one has read *prev by then)
  // keeps this call's amax for the next one.
  __threadfence();
  if (atomicAdd(q.counter, 1u) == gridDim.x - 1) {
    *q.prev = __int_as_float(atomicExch(reinterpret_cast<int *>(q.cur), 0));
    *q.counter = 0;
  }
}

int blocksFor(int64_t total) {
  int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);
}

} // namespace

int launchFp8Quantize(const Fp8Quantize &q, cudaStream_t stream) {
  const int64_t total = q.rows * q.cols;
  if (q.first) {
    if (cudaMemsetAsync(q.prev, 0, sizeof(float), stream) != cudaSuccess)
      return 1;
    amaxKernel<<<blocksFor(total), kThreads, 0, stream>>>(q.x, q.rows, q.cols,
                                                          q.ld, q.prev);
  }
  const int64_t tiles =
      ((q.rows + kTile - 1) / kTile) * ((q.cols + kTile - 1) / kTile);
  quantizeKernel<<<static_cast<int>(tiles < 4096 ? (tiles > 0 ? tiles : 1)
                                                   : 4096),
                   kThreads, 0, stream>>>(q);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

} // namespace cuda
} // namespace otcrt
