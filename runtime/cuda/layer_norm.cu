// Device layer norm and RMS norm of libotcrt_cuda, forward and backward, for
// float and bfloat16 storage. One block per row: the row's statistics are
// block reductions (warp shuffles, then one value per warp in shared
// memory) and the row is normalized in a second sweep. The parameter
// gradients (sums over rows) run in their own kernel, one 32 x 8 block per
// 32 columns: each thread sums a strided subset of the rows for its column
// and the eight partial sums are added in a fixed order, so the result is
// deterministic. That kernel is launched before the dx kernel, so dx may
// share dy's buffer.
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

/// Rows of the parameter-gradient blocks.
constexpr int kParamRows = 8;

/// 1 unless gamma is given.
template <typename T>
__device__ __forceinline__ float gammaAt(const T *gamma, int64_t c) {
  return gamma ? load(gamma[c]) : 1.0f;
}

/// y = (x - mean) rstd gamma + beta per row; `rms` skips the mean (and
/// beta, which is NULL then).
template <typename T>
__global__ void normFwdKernel(int64_t cols, float eps, bool rms, const T *x,
                              const T *gamma, const T *beta, T *y, float *mean,
                              float *rstd) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *xr = x + r * cols;
  float mu = 0.0f;
  if (!rms) {
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      sum += load(xr[c]);
    mu = blockSum(sum, scratch) / static_cast<float>(cols);
  }
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float dev = load(xr[c]) - mu;
    squares += dev * dev;
  }
  float var = blockSum(squares, scratch) / static_cast<float>(cols);
  float rs = 1.0f / sqrtf(var + eps);
  if (threadIdx.x == 0) {
    if (mean && !rms)
      mean[r] = mu;
    if (rstd)
      rstd[r] = rs;
  }
  T *yr = y + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (load(xr[c]) - mu) * rs * gammaAt(gamma, c);
    if (beta)
      v += load(beta[c]);
    store(yr + c, v);
  }
}

/// dx = rstd (g - mean(g) - xhat mean(g xhat)) per row, g = dy gamma; the
/// mean(g) term only for layer norm (shift != NULL).
template <typename T>
__global__ void normInputGradKernel(int64_t cols, const T *dy, const T *x,
                                    const T *gamma, const float *shift,
                                    const float *scale, T *dx) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *dyr = dy + r * cols, *xr = x + r * cols;
  float mu = shift ? shift[r] : 0.0f, rs = scale[r];
  float sumG = 0.0f, sumGXhat = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = load(dyr[c]) * gammaAt(gamma, c);
    sumG += g;
    sumGXhat += g * ((load(xr[c]) - mu) * rs);
  }
  float n = static_cast<float>(cols);
  float meanG = shift ? blockSum(sumG, scratch) / n : 0.0f;
  float meanGXhat = blockSum(sumGXhat, scratch) / n;
  T *dxr = dx + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = load(dyr[c]) * gammaAt(gamma, c);
    float xhat = (load(xr[c]) - mu) * rs;
    store(dxr + c, rs * (g - meanG - xhat * meanGXhat));
  }
}

/// dgamma[c] = sum_r dy xhat, dbeta[c] = sum_r dy (either may be NULL);
/// block (32, kParamRows) per 32 columns.
template <typename T>
__global__ void normParamGradKernel(int64_t rows, int64_t cols, const T *dy,
                                    const T *x, const float *shift,
                                    const float *scale, T *dgamma, T *dbeta) {
  __shared__ float partGamma[kParamRows][33], partBeta[kParamRows][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float accGamma = 0.0f, accBeta = 0.0f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kParamRows) {
      float g = load(dy[r * cols + c]);
      float mu = shift ? shift[r] : 0.0f;
      accGamma += g * ((load(x[r * cols + c]) - mu) * scale[r]);
      accBeta += g;
    }
  }
  partGamma[threadIdx.y][threadIdx.x] = accGamma;
  partBeta[threadIdx.y][threadIdx.x] = accBeta;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  for (int i = 1; i < kParamRows; ++i) {
    accGamma += partGamma[i][threadIdx.x];
    accBeta += partBeta[i][threadIdx.x];
  }
  if (dgamma)
    store(dgamma + c, accGamma);
  if (dbeta)
    store(dbeta + c, accBeta);
}

template <typename T>
int normFwd(int64_t rows, int64_t cols, float eps, bool rms, const T *x,
            const T *gamma, const T *beta, T *y, float *mean, float *rstd,
            void *stream) {
  if (rows <= 0 || cols <= 0)
    return 0;
  normFwdKernel<T>
      <<<static_cast<unsigned>(rows), kBlock, 0, asStream(stream)>>>(
          cols, eps, rms, x, gamma, beta, y, mean, rstd);
  return launchStatus();
}

template <typename T>
int normBwd(int64_t rows, int64_t cols, const T *dy, const T *x, const T *gamma,
            const float *shift, const float *scale, T *dx, T *dgamma, T *dbeta,
            void *stream) {
  if (cols <= 0)
    return 0;
  rows = rows < 0 ? 0 : rows;
  if (dgamma || dbeta) {
    dim3 block(32, kParamRows);
    unsigned grid = static_cast<unsigned>((cols + 31) / 32);
    normParamGradKernel<T><<<grid, block, 0, asStream(stream)>>>(
        rows, cols, dy, x, shift, scale, dgamma, dbeta);
  }
  if (rows > 0)
    normInputGradKernel<T>
        <<<static_cast<unsigned>(rows), kBlock, 0, asStream(stream)>>>(
            cols, dy, x, gamma, shift, scale, dx);
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
                             const float *mean, const float *rstd, float *dx,
                             float *dgamma, float *dbeta, void *stream) {
  return normBwd(rows, cols, dy, x, gamma, mean, rstd, dx, dgamma, dbeta,
                 stream);
}
int otcrt_layer_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const float *mean, const float *rstd,
                              otcrt_bf16 *dx, otcrt_bf16 *dgamma,
                              otcrt_bf16 *dbeta, void *stream) {
  return normBwd(rows, cols, dy, x, gamma, mean, rstd, dx, dgamma, dbeta,
                 stream);
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
                           const float *rstd, float *dx, float *dgamma,
                           void *stream) {
  return normBwd<float>(rows, cols, dy, x, gamma, nullptr, rstd, dx, dgamma,
                        nullptr, stream);
}
int otcrt_rms_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            const float *rstd, otcrt_bf16 *dx,
                            otcrt_bf16 *dgamma, void *stream) {
  return normBwd<otcrt_bf16>(rows, cols, dy, x, gamma, nullptr, rstd, dx,
                             dgamma, nullptr, stream);
}

} // extern "C"
