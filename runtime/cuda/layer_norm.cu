// Device layer norm and RMS norm of libotcrt_cuda, forward and backward, for
// float and bfloat16 storage. One warp per row (rows of at most
// OTCRT_CUDA_NORM_WARP_MAX_COLS elements, launch_config.h) or one block per
// row: the row's statistics are warp reductions (and, for a block, then one
// value per warp in shared memory) and the row is normalized in a second
// sweep. The parameter
// gradients (sums over rows of dy xhat and dy) are the two-stage column
// reduction of column_reduce.cuh with two results: stage 1 (one block per
// 64 columns and chunk of rows) writes both partial sums per chunk to the
// library's reduction scratch, stage 2 adds them in a fixed order, so the
// result is deterministic and, like column_sum.cu's, the same for bf16 and
// f32 storage of the same values. Both run before the dx kernel, so dx may
// share dy's buffer; a thread of the dx kernel writes only the elements of
// dy and of the residual it has just read, so dx may also be the
// residual's buffer. Every kernel accesses W elements at a time: a 16-byte
// packet (common.cuh) when the columns are a multiple of the packet and
// every row array is 16-byte aligned, else one element.
#include "column_reduce.cuh"

namespace otcrt {
namespace cuda {
namespace {

/// gamma[c, c + W) as floats; 1 unless gamma is given.
template <int W, typename T>
__device__ __forceinline__ void loadGamma(const T *gamma, int64_t c,
                                          float (&v)[W]) {
  if (gamma) {
    loadPacket(gamma + c, v);
    return;
  }
#pragma unroll
  for (int i = 0; i < W; ++i)
    v[i] = 1.0f;
}

/// The row kernels run L threads per row: a warp (L = 32, rows of at most
/// OTCRT_CUDA_NORM_WARP_MAX_COLS, OTCRT_CUDA_NORM_WARP_ROWS rows a block,
/// reductions by warp shuffles) or the whole block (L = kBlock, one row a
/// block, block reductions). A row's sums are added in the same tree either
/// way for a given L. Each thread takes the row's packets of W elements
/// from `first` on, `step` apart.
template <int L, int W> struct RowThreads {
  static_assert(L == 32 || L == kBlock, "a warp or a block per row");
  int64_t row;
  int t; ///< this thread's place among the row's L
  int64_t first, step;
  __device__ RowThreads() {
    if (L == 32) {
      row = static_cast<int64_t>(blockIdx.x) * (kBlock / 32) + threadIdx.x / 32;
      t = static_cast<int>(threadIdx.x % 32);
    } else {
      row = blockIdx.x;
      t = static_cast<int>(threadIdx.x);
    }
    first = static_cast<int64_t>(t) * W;
    step = static_cast<int64_t>(L) * W;
  }
  /// The sum of \p v over the row's threads, on each of them.
  __device__ float sum(float v, float *scratch) const {
    return L == 32 ? warpSum(v) : blockSum(v, scratch);
  }
};

/// Blocks of the row kernels for `rows` rows, L threads each.
template <int L> unsigned rowBlocks(int64_t rows) {
  const int64_t perBlock = L == 32 ? kBlock / 32 : 1;
  return static_cast<unsigned>((rows + perBlock - 1) / perBlock);
}

// The row kernels' thread t of a row takes elements [c, c + W) for c = W t,
// W (t + L), ... below cols. With W a divisor of cols every access lies
// within the row: at cols = 768, bf16 threads 0..95 take one packet each
// (W = 8, c = 0..760) and threads 96.. none; f32 threads 0..191 (W = 4).
// At cols = 8 a bf16 row is thread 0's one packet (f32: threads 0 and 1);
// at cols = 4 an f32 row is thread 0's packet while bf16 (4 not a multiple
// of 8) and cols = 50257 take W = 1, the plain element loop.

/// y = (x - mean) rstd gamma + beta per row; `rms` skips the mean (and
/// beta, which is NULL then).
template <typename T, int W, int L>
__global__ void normFwdKernel(int64_t rows, int64_t cols, float eps, bool rms,
                              const T *x, const T *gamma, const T *beta, T *y,
                              float *mean, float *rstd) {
  __shared__ float scratch[32];
  const RowThreads<L, W> rt;
  // A warp past the last row has nothing to do (and no block-wide
  // reduction to join: with L = kBlock every block has a row).
  if (rt.row >= rows)
    return;
  const int64_t r = rt.row, first = rt.first, step = rt.step;
  const T *xr = x + r * cols;
  float mu = 0.0f;
  if (!rms) {
    float sum = 0.0f;
    for (int64_t c = first; c < cols; c += step) {
      float xv[W];
      loadPacket(xr + c, xv);
#pragma unroll
      for (int i = 0; i < W; ++i)
        sum += xv[i];
    }
    mu = rt.sum(sum, scratch) / static_cast<float>(cols);
  }
  float squares = 0.0f;
  for (int64_t c = first; c < cols; c += step) {
    float xv[W];
    loadPacket(xr + c, xv);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      float dev = xv[i] - mu;
      squares += dev * dev;
    }
  }
  float var = rt.sum(squares, scratch) / static_cast<float>(cols);
  float rs = 1.0f / sqrtf(var + eps);
  if (rt.t == 0) {
    if (mean && !rms)
      mean[r] = mu;
    if (rstd)
      rstd[r] = rs;
  }
  T *yr = y + r * cols;
  for (int64_t c = first; c < cols; c += step) {
    float xv[W], gv[W], bv[W], yv[W];
    loadPacket(xr + c, xv);
    loadGamma(gamma, c, gv);
    if (beta)
      loadPacket(beta + c, bv);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      yv[i] = (xv[i] - mu) * rs * gv[i];
      if (beta)
        yv[i] += bv[i];
    }
    storePacket(yr + c, yv);
  }
}

/// dx = rstd (g - mean(g) - xhat mean(g xhat)) per row, g = dy gamma; the
/// mean(g) term only for layer norm (shift != NULL); plus the residual when
/// given (added in float, one rounding).
template <typename T, int W, int L>
__global__ void normInputGradKernel(int64_t rows, int64_t cols, const T *dy,
                                    const T *x, const T *gamma,
                                    const float *shift, const float *scale,
                                    const T *residual, T *dx) {
  __shared__ float scratch[32];
  const RowThreads<L, W> rt;
  if (rt.row >= rows)
    return;
  const int64_t r = rt.row, first = rt.first, step = rt.step;
  const T *dyr = dy + r * cols, *xr = x + r * cols;
  float mu = shift ? shift[r] : 0.0f, rs = scale[r];
  float sumG = 0.0f, sumGXhat = 0.0f;
  for (int64_t c = first; c < cols; c += step) {
    float dyv[W], xv[W], gv[W];
    loadPacket(dyr + c, dyv);
    loadPacket(xr + c, xv);
    loadGamma(gamma, c, gv);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      float g = dyv[i] * gv[i];
      sumG += g;
      sumGXhat += g * ((xv[i] - mu) * rs);
    }
  }
  float n = static_cast<float>(cols);
  float meanG = shift ? rt.sum(sumG, scratch) / n : 0.0f;
  float meanGXhat = rt.sum(sumGXhat, scratch) / n;
  // dx may be dy or the residual: a thread writes only the elements it has
  // just read.
  T *dxr = dx + r * cols;
  const T *resr = residual ? residual + r * cols : nullptr;
  for (int64_t c = first; c < cols; c += step) {
    float dyv[W], xv[W], gv[W], dxv[W], rv[W];
    loadPacket(dyr + c, dyv);
    loadPacket(xr + c, xv);
    loadGamma(gamma, c, gv);
    if (resr)
      loadPacket(resr + c, rv);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      float g = dyv[i] * gv[i];
      float xhat = (xv[i] - mu) * rs;
      dxv[i] = rs * (g - meanG - xhat * meanGXhat);
      if (resr)
        dxv[i] += rv[i];
    }
    storePacket(dxr + c, dxv);
  }
}

/// Stage 1 of dgamma[c] = sum_r dy xhat and dbeta[c] = sum_r dy (either
/// may be NULL): block (kTileLanes, kTilePhases) per (tile blockIdx.x,
/// chunk blockIdx.y), as column_sum.cu's, with two sums per column; into
/// partial[0 or 1][chunk] or, for a single chunk, into dgamma and dbeta
/// (added to them where `accumulate` has bit 1 or 2).
template <typename T, int W>
__global__ void normParamGradKernel(int64_t rows, int64_t cols,
                                    int64_t chunkRows, int64_t chunks,
                                    const T *dy, const T *x, const float *shift,
                                    const float *scale, float *partial,
                                    int accumulate, T *dgamma, T *dbeta) {
  __shared__ float partGamma[kTilePhases][kTileCols + 1],
      partBeta[kTilePhases][kTileCols + 1];
  const int lane = static_cast<int>(threadIdx.x),
            phase = static_cast<int>(threadIdx.y);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunkRows;
  const int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  float accGamma[kTileSums] = {}, accBeta[kTileSums] = {};
  for (int64_t r = begin + phase; r < end; r += kTilePhases) {
    const float mu = shift ? shift[r] : 0.0f, rs = scale[r];
#pragma unroll
    for (int j = 0; j < kTileSums; j += W) {
      const int64_t c = first + tileColumn<W>(lane, j);
      if (c < cols) {
        float g[W], xv[W];
        loadPacket(dy + r * cols + c, g);
        loadPacket(x + r * cols + c, xv);
#pragma unroll
        for (int i = 0; i < W; ++i) {
          accGamma[j + i] += g[i] * ((xv[i] - mu) * rs);
          accBeta[j + i] += g[i];
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kTileSums; ++j) {
    partGamma[phase][tileColumn<W>(lane, j)] = accGamma[j];
    partBeta[phase][tileColumn<W>(lane, j)] = accBeta[j];
  }
  const int t = phase * kTileLanes + lane;
  float sumGamma, sumBeta;
  // addPhases synchronizes the block before reading either array.
  const bool holds = addPhases(partGamma, t, &sumGamma);
  if (holds) {
    sumBeta = partBeta[0][t];
    for (int p = 1; p < kTilePhases; ++p)
      sumBeta += partBeta[p][t];
  }
  if (!holds || first + t >= cols)
    return;
  const int64_t c = first + t;
  if (partial) {
    float *chunk = partial + static_cast<int64_t>(blockIdx.y) * cols;
    chunk[c] = sumGamma;
    chunk[chunks * cols + c] = sumBeta;
    return;
  }
  if (dgamma)
    putSum(dgamma + c, sumGamma, accumulate & 1);
  if (dbeta)
    putSum(dbeta + c, sumBeta, accumulate & 2);
}

template <typename T>
int normFwd(int64_t rows, int64_t cols, float eps, bool rms, const T *x,
            const T *gamma, const T *beta, T *y, float *mean, float *rstd,
            void *stream) {
  if (rows <= 0 || cols <= 0)
    return 0;
  const bool packed = packable<T>(cols, {x, gamma, beta, y});
  cudaStream_t s = asStream(stream);
  if (cols <= OTCRT_CUDA_NORM_WARP_MAX_COLS) {
    if (packed)
      normFwdKernel<T, kPack<T>, 32><<<rowBlocks<32>(rows), kBlock, 0, s>>>(
          rows, cols, eps, rms, x, gamma, beta, y, mean, rstd);
    else
      normFwdKernel<T, 1, 32><<<rowBlocks<32>(rows), kBlock, 0, s>>>(
          rows, cols, eps, rms, x, gamma, beta, y, mean, rstd);
  } else if (packed) {
    normFwdKernel<T, kPack<T>, kBlock><<<rowBlocks<kBlock>(rows), kBlock, 0, s>>>(
        rows, cols, eps, rms, x, gamma, beta, y, mean, rstd);
  } else {
    normFwdKernel<T, 1, kBlock><<<rowBlocks<kBlock>(rows), kBlock, 0, s>>>(
        rows, cols, eps, rms, x, gamma, beta, y, mean, rstd);
  }
  return launchStatus();
}

template <typename T>
int normBwd(int64_t rows, int64_t cols, const T *dy, const T *x, const T *gamma,
            const float *shift, const float *scale, const T *residual,
            int accumulate, T *dx, T *dgamma, T *dbeta, void *streamArg) {
  // Bits 1 (dgamma) and 2 (dbeta); RMS norm (no shift) has only dgamma.
  if (accumulate < 0 || accumulate > (shift ? 3 : 1))
    return 1;
  if (cols <= 0)
    return 0;
  rows = rows < 0 ? 0 : rows;
  const bool packed = packable<T>(cols, {dy, x, gamma, residual, dx});
  cudaStream_t stream = asStream(streamArg);
  if (dgamma || dbeta) {
    ColumnPlan plan;
    if (!planColumns(rows, cols, 2, stream, plan))
      return 1;
    const dim3 grid(static_cast<unsigned>(plan.tiles),
                    static_cast<unsigned>(plan.chunks)),
        block(kTileLanes, kTilePhases);
    if (packed)
      normParamGradKernel<T, kPack<T>><<<grid, block, 0, stream>>>(
          rows, cols, plan.chunkRows, plan.chunks, dy, x, shift, scale,
          plan.partial, accumulate, dgamma, dbeta);
    else
      normParamGradKernel<T, 1><<<grid, block, 0, stream>>>(
          rows, cols, plan.chunkRows, plan.chunks, dy, x, shift, scale,
          plan.partial, accumulate, dgamma, dbeta);
    addPartials(plan, cols, 2, dgamma, dbeta, stream, accumulate);
  }
  if (rows > 0) {
    if (cols <= OTCRT_CUDA_NORM_WARP_MAX_COLS) {
      if (packed)
        normInputGradKernel<T, kPack<T>, 32>
            <<<rowBlocks<32>(rows), kBlock, 0, stream>>>(
                rows, cols, dy, x, gamma, shift, scale, residual, dx);
      else
        normInputGradKernel<T, 1, 32>
            <<<rowBlocks<32>(rows), kBlock, 0, stream>>>(
                rows, cols, dy, x, gamma, shift, scale, residual, dx);
    } else if (packed) {
      normInputGradKernel<T, kPack<T>, kBlock>
          <<<rowBlocks<kBlock>(rows), kBlock, 0, stream>>>(
              rows, cols, dy, x, gamma, shift, scale, residual, dx);
    } else {
      normInputGradKernel<T, 1, kBlock>
          <<<rowBlocks<kBlock>(rows), kBlock, 0, stream>>>(
              rows, cols, dy, x, gamma, shift, scale, residual, dx);
    }
  }
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

using otcrt::cuda::normBwd;
using otcrt::cuda::normFwd;

extern "C" {

int otcrt_layer_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                             const float *x, const float *gamma,
                             const float *beta, float *y, float *mean,
                             float *rstd, void *stream) {
  return normFwd(rows, cols, eps, false, x, gamma, beta, y, mean, rstd, stream);
}
int otcrt_layer_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const otcrt_bf16 *beta, otcrt_bf16 *y,
                              float *mean, float *rstd, void *stream) {
  return normFwd(rows, cols, eps, false, x, gamma, beta, y, mean, rstd, stream);
}
int otcrt_layer_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                             const float *x, const float *gamma,
                             const float *mean, const float *rstd,
                             const float *residual, int32_t accumulate,
                             float *dx, float *dgamma, float *dbeta,
                             void *stream) {
  return normBwd(rows, cols, dy, x, gamma, mean, rstd, residual, accumulate, dx,
                 dgamma, dbeta, stream);
}
int otcrt_layer_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const float *mean, const float *rstd,
                              const otcrt_bf16 *residual, int32_t accumulate,
                              otcrt_bf16 *dx, otcrt_bf16 *dgamma,
                              otcrt_bf16 *dbeta, void *stream) {
  return normBwd(rows, cols, dy, x, gamma, mean, rstd, residual, accumulate, dx,
                 dgamma, dbeta, stream);
}

int otcrt_rms_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                           const float *x, const float *gamma, float *y,
                           float *rstd, void *stream) {
  return normFwd<float>(rows, cols, eps, true, x, gamma, nullptr, y, nullptr,
                        rstd, stream);
}
int otcrt_rms_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            otcrt_bf16 *y, float *rstd, void *stream) {
  return normFwd<otcrt_bf16>(rows, cols, eps, true, x, gamma, nullptr, y,
                             nullptr, rstd, stream);
}
int otcrt_rms_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                           const float *x, const float *gamma,
                           const float *rstd, const float *residual,
                           int32_t accumulate, float *dx, float *dgamma,
                           void *stream) {
  return normBwd<float>(rows, cols, dy, x, gamma, nullptr, rstd, residual,
                        accumulate, dx, dgamma, nullptr, stream);
}
int otcrt_rms_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            const float *rstd, const otcrt_bf16 *residual,
                            int32_t accumulate, otcrt_bf16 *dx,
                            otcrt_bf16 *dgamma, void *stream) {
  return normBwd<otcrt_bf16>(rows, cols, dy, x, gamma, nullptr, rstd, residual,
                             accumulate, dx, dgamma, nullptr, stream);
}

} // extern "C"
