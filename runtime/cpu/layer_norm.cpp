// Host layer norm and RMS norm of libotcrt_cpu, forward and backward, for
// float and bfloat16 storage. Rows are independent and spread over OpenMP
// threads; each row's statistics are summed in double and applied in float.
// The parameter gradients (sums over rows) are computed per block of
// columns, one thread per block, so every output element has one writer and
// the result does not depend on the thread count. The column sums run
// before dx is written, so dx may share dy's buffer; each element of dx is
// written after its row's dy and residual element are read, so dx may also
// be the residual's buffer (the same bytes, not a shifted overlap).
#include "common.h"
#include "kernels_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

/// Columns per block of the parameter-gradient sums.
constexpr int64_t kColumnBlock = 256;

/// 1 unless gamma is given.
template <typename T> inline float gammaAt(const T *gamma, int64_t c) {
  return gamma ? load(gamma[c]) : 1.0f;
}

template <typename T>
int layerNormFwdImpl(int64_t rows, int64_t cols, float eps, const T *x,
                     const T *gamma, const T *beta, T *y, float *mean,
                     float *rstd) {
  if (rows <= 0 || cols <= 0)
    return 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      sum += load(xr[c]);
    float mu = static_cast<float>(sum / static_cast<double>(cols));
    double squares = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      double dev = load(xr[c]) - mu;
      squares += dev * dev;
    }
    float rs = static_cast<float>(
        1.0 / std::sqrt(squares / static_cast<double>(cols) + eps));
    if (mean)
      mean[r] = mu;
    if (rstd)
      rstd[r] = rs;
    T *yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float v = (load(xr[c]) - mu) * rs * gammaAt(gamma, c);
      if (beta)
        v += load(beta[c]);
      store(yr + c, v);
    }
  }
  return 0;
}

/// dgamma[c] = sum_r dy xhat and dbeta[c] = sum_r dy (either may be NULL),
/// xhat = (x - shift_r) scale_r with shift NULL meaning 0 (RMS norm); each
/// added into (its value plus the sum, one rounding) where `accumulate`
/// says so (bit 1: dgamma, bit 2: dbeta).
template <typename T>
void parameterGradients(int64_t rows, int64_t cols, const T *dy, const T *x,
                        const float *shift, const float *scale,
                        int32_t accumulate, T *dgamma, T *dbeta) {
  int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    int64_t c0 = blk * kColumnBlock;
    int64_t n = std::min(kColumnBlock, cols - c0);
    double accGamma[kColumnBlock] = {}, accBeta[kColumnBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T *dyr = dy + r * cols + c0, *xr = x + r * cols + c0;
      float mu = shift ? shift[r] : 0.0f, rs = scale[r];
      for (int64_t c = 0; c < n; ++c) {
        float g = load(dyr[c]);
        accGamma[c] += g * ((load(xr[c]) - mu) * rs);
        accBeta[c] += g;
      }
    }
    auto put = [](T *p, double sum, bool add) {
      store(p,
            add ? load(*p) + static_cast<float>(sum) : static_cast<float>(sum));
    };
    for (int64_t c = 0; c < n; ++c) {
      if (dgamma)
        put(dgamma + c0 + c, accGamma[c], accumulate & 1);
      if (dbeta)
        put(dbeta + c0 + c, accBeta[c], accumulate & 2);
    }
  }
}

/// dx per row for both norms: rstd (g - mean(g) - xhat mean(g xhat)), the
/// mean(g) term only for layer norm (shift != NULL), plus the residual
/// gradient when given (added in float, one rounding).
template <typename T>
void inputGradient(int64_t rows, int64_t cols, const T *dy, const T *x,
                   const T *gamma, const float *shift, const float *scale,
                   const T *residual, T *dx) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *dyr = dy + r * cols, *xr = x + r * cols;
    float mu = shift ? shift[r] : 0.0f, rs = scale[r];
    double sumG = 0.0, sumGXhat = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      float g = load(dyr[c]) * gammaAt(gamma, c);
      sumG += g;
      sumGXhat += g * ((load(xr[c]) - mu) * rs);
    }
    float meanG =
        shift ? static_cast<float>(sumG / static_cast<double>(cols)) : 0.0f;
    float meanGXhat = static_cast<float>(sumGXhat / static_cast<double>(cols));
    T *dxr = dx + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      float g = load(dyr[c]) * gammaAt(gamma, c);
      float xhat = (load(xr[c]) - mu) * rs;
      float v = rs * (g - meanG - xhat * meanGXhat);
      if (residual)
        v += load(residual[r * cols + c]);
      store(dxr + c, v);
    }
  }
}

template <typename T>
int layerNormBwdImpl(int64_t rows, int64_t cols, const T *dy, const T *x,
                     const T *gamma, const float *mean, const float *rstd,
                     const T *residual, int32_t accumulate, T *dx, T *dgamma,
                     T *dbeta) {
  if (accumulate < 0 || accumulate > 3)
    return 1;
  if (cols <= 0)
    return 0;
  if (dgamma || dbeta)
    parameterGradients(std::max<int64_t>(rows, 0), cols, dy, x, mean, rstd,
                       accumulate, dgamma, dbeta);
  if (rows > 0)
    inputGradient(rows, cols, dy, x, gamma, mean, rstd, residual, dx);
  return 0;
}

template <typename T>
int rmsNormFwdImpl(int64_t rows, int64_t cols, float eps, const T *x,
                   const T *gamma, T *y, float *rstd) {
  if (rows <= 0 || cols <= 0)
    return 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * cols;
    double squares = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      double v = load(xr[c]);
      squares += v * v;
    }
    float rs = static_cast<float>(
        1.0 / std::sqrt(squares / static_cast<double>(cols) + eps));
    if (rstd)
      rstd[r] = rs;
    T *yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      store(yr + c, load(xr[c]) * rs * gammaAt(gamma, c));
  }
  return 0;
}

template <typename T>
int rmsNormBwdImpl(int64_t rows, int64_t cols, const T *dy, const T *x,
                   const T *gamma, const float *rstd, const T *residual,
                   int32_t accumulate, T *dx, T *dgamma) {
  if (accumulate != 0 && accumulate != 1)
    return 1;
  if (cols <= 0)
    return 0;
  if (dgamma)
    parameterGradients<T>(std::max<int64_t>(rows, 0), cols, dy, x, nullptr,
                          rstd, accumulate, dgamma, nullptr);
  if (rows > 0)
    inputGradient<T>(rows, cols, dy, x, gamma, nullptr, rstd, residual, dx);
  return 0;
}

} // namespace

int layerNormFwd(int64_t rows, int64_t cols, float eps, const float *x,
                 const float *gamma, const float *beta, float *y, float *mean,
                 float *rstd) {
  return layerNormFwdImpl(rows, cols, eps, x, gamma, beta, y, mean, rstd);
}
int layerNormFwd(int64_t rows, int64_t cols, float eps, const otcrt_bf16 *x,
                 const otcrt_bf16 *gamma, const otcrt_bf16 *beta, otcrt_bf16 *y,
                 float *mean, float *rstd) {
  return layerNormFwdImpl(rows, cols, eps, x, gamma, beta, y, mean, rstd);
}
int layerNormBwd(int64_t rows, int64_t cols, const float *dy, const float *x,
                 const float *gamma, const float *mean, const float *rstd,
                 const float *residual, int32_t accumulate, float *dx,
                 float *dgamma, float *dbeta) {
  return layerNormBwdImpl(rows, cols, dy, x, gamma, mean, rstd, residual,
                          accumulate, dx, dgamma, dbeta);
}
int layerNormBwd(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                 const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                 const float *mean, const float *rstd,
                 const otcrt_bf16 *residual, int32_t accumulate, otcrt_bf16 *dx,
                 otcrt_bf16 *dgamma, otcrt_bf16 *dbeta) {
  return layerNormBwdImpl(rows, cols, dy, x, gamma, mean, rstd, residual,
                          accumulate, dx, dgamma, dbeta);
}
int rmsNormFwd(int64_t rows, int64_t cols, float eps, const float *x,
               const float *gamma, float *y, float *rstd) {
  return rmsNormFwdImpl(rows, cols, eps, x, gamma, y, rstd);
}
int rmsNormFwd(int64_t rows, int64_t cols, float eps, const otcrt_bf16 *x,
               const otcrt_bf16 *gamma, otcrt_bf16 *y, float *rstd) {
  return rmsNormFwdImpl(rows, cols, eps, x, gamma, y, rstd);
}
int rmsNormBwd(int64_t rows, int64_t cols, const float *dy, const float *x,
               const float *gamma, const float *rstd, const float *residual,
               int32_t accumulate, float *dx, float *dgamma) {
  return rmsNormBwdImpl(rows, cols, dy, x, gamma, rstd, residual, accumulate,
                        dx, dgamma);
}
int rmsNormBwd(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
               const otcrt_bf16 *x, const otcrt_bf16 *gamma, const float *rstd,
               const otcrt_bf16 *residual, int32_t accumulate, otcrt_bf16 *dx,
               otcrt_bf16 *dgamma) {
  return rmsNormBwdImpl(rows, cols, dy, x, gamma, rstd, residual, accumulate,
                        dx, dgamma);
}

} // namespace cpu
} // namespace otcrt
