// GPU check of the device kernels of libotcrt_cuda (otcrt/kernels.h): every
// kernel runs on random inputs (a fresh seed per run, printed; or argv[1]),
// at several shapes, on the GPU and on the host (the host kernels
// of libotcrt_cpu, compiled in under their C++ names), and the results must
// agree within float tolerance (bfloat16 results within a couple of
// bfloat16 units). The two-stage column reductions (column sums, the norms'
// parameter gradients) and the gather gradient (on skewed token ids, the
// GPT-2 shapes among others, gather_grad_cuda_test.cu) must also repeat bit
// for bit and give bf16 results that are exactly their f32 results rounded.
// The fused cross-entropy must give the gradient of the device's forward
// then backward bit for bit, in place too; the LM head with its loss in
// chunks must match the host's (linear_cross_entropy_cuda_test.cu).
// The attention runs on both of its device implementations
// (attention_cuda_test.cu). Also checks that a bad label reaches the library's error record without the
// call waiting for the device, and that library calls captured in a CUDA
// graph replay to the same bits as eager calls; and otcrt_gemm against the
// host GEMM, cuBLASLt's epilogues and the runtime's fallback for them
// (gemm_cuda_test.cu). Prints PASS or FAIL per
// check and exits non-zero on any failure; exits 77 when no GPU is present.
// Run by the GPU tests (test/gpu/run.sh, ctest label gpu).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace cudatest;

namespace {

/// Column sums (a bias's gradient) of f32 and bf16 storage against the host
/// kernel: float accumulation in a different order (two stages over chunks
/// of rows), so within 1e-4 relative of the column's magnitude; a repeated
/// call gives the same bits, and the bf16 and f32 device sums of the same
/// (representable) values must match bit for bit, also where one storage
/// is read in packets and the other element by element. x lies `skew`
/// elements past alignment.
void testColumnSum(std::mt19937 &rng, int64_t rows, int64_t cols,
                   size_t skew = 0) {
  Floats x = toFloat(toBf16(random(rows * cols, rng, -2, 2)));
  Floats want(cols), got(cols);
  Check c("column_sum" + shapeName(rows, cols, skew));
  otcrt::cpu::columnSum(rows, cols, x.data(), want.data());
  float *dOut = device(got);
  c.rc(otcrt_column_sum_f32(rows, cols, device(x, skew), dOut, nullptr), "f32");
  Floats f32 = host(dOut, cols);
  c.f32(f32, want, "f32 sums", 1e-4 * std::sqrt(static_cast<double>(rows)));
  c.rc(otcrt_column_sum_f32(rows, cols, device(x, skew), dOut, nullptr),
       "f32 again");
  if (!sameBits(host(dOut, cols), f32, "f32 sums, again"))
    c.ok = false;
  float *dOutB = device(got);
  c.rc(otcrt_column_sum_bf16(rows, cols, device(toBf16(x), skew), dOutB,
                             nullptr),
       "bf16");
  Floats b = host(dOutB, cols);
  for (int64_t i = 0; i < cols; ++i)
    if (b[i] != f32[i]) {
      std::printf("  column %lld: bf16 sum %g differs from f32 sum %g\n",
                  static_cast<long long>(i), b[i], f32[i]);
      c.ok = false;
      break;
    }
}

/// Layer norm and RMS norm, forward and backward, f32 and bf16, against the
/// host kernels; x, y, dy and dx lie `skew` elements past alignment.
void testNorms(std::mt19937 &rng, int64_t rows, int64_t cols, size_t skew = 0) {
  const size_t n = rows * cols;
  Floats x = random(n, rng, -2, 2), gamma = random(cols, rng, 0.5f, 1.5f),
         beta = random(cols, rng), dy = random(n, rng);
  for (int rms = 0; rms < 2; ++rms) {
    Floats y(n), mean(rows), rstd(rows), dx(n), dg(cols), db(cols);
    Bf16s yb(n), dxb(n), dgb(cols), dbb(cols);
    std::string kind = rms ? "rms_norm" : "layer_norm";
    std::string shape = shapeName(rows, cols, skew);
    {
      Check c(kind + "_fwd_f32" + shape);
      float *dY = device(y, skew), *dM = device(mean), *dR = device(rstd),
            *dXIn = device(x, skew);
      if (rms) {
        otcrt::cpu::rmsNormFwd(rows, cols, 1e-5f, x.data(), gamma.data(),
                               y.data(), rstd.data());
        c.rc(otcrt_rms_norm_fwd_f32(rows, cols, 1e-5f, dXIn, device(gamma), dY,
                                    dR, nullptr),
             "fwd");
      } else {
        otcrt::cpu::layerNormFwd(rows, cols, 1e-5f, x.data(), gamma.data(),
                                 beta.data(), y.data(), mean.data(),
                                 rstd.data());
        c.rc(otcrt_layer_norm_fwd_f32(rows, cols, 1e-5f, dXIn, device(gamma),
                                      device(beta), dY, dM, dR, nullptr),
             "fwd");
        c.f32(host(dM, rows), mean, "mean");
      }
      c.f32(host(dY, n), y, "y");
      c.f32(host(dR, rows), rstd, "rstd");
    }
    {
      Check c(kind + "_bwd_f32" + shape);
      float *dX = device(dx, skew), *dG = device(dg), *dB = device(db),
            *dXIn = device(x, skew), *dDy = device(dy, skew);
      if (rms) {
        otcrt::cpu::rmsNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                               rstd.data(), dx.data(), dg.data());
        c.rc(otcrt_rms_norm_bwd_f32(rows, cols, dDy, dXIn, device(gamma),
                                    device(rstd), dX, dG, nullptr),
             "bwd");
      } else {
        otcrt::cpu::layerNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                                 mean.data(), rstd.data(), nullptr, dx.data(),
                                 dg.data(), db.data());
        c.rc(otcrt_layer_norm_bwd_f32(rows, cols, dDy, dXIn, device(gamma),
                                      device(mean), device(rstd), nullptr, dX,
                                      dG, dB, nullptr),
             "bwd");
        c.f32(host(dB, cols), db, "dbeta");
      }
      c.f32(host(dX, n), dx, "dx");
      c.f32(host(dG, cols), dg, "dgamma");
    }
    {
      Check c(kind + "_bf16" + shape);
      Bf16s xb = toBf16(x), gb = toBf16(gamma), bb = toBf16(beta),
            dyb = toBf16(dy);
      otcrt_bf16 *dY = device(yb, skew), *dX = device(dxb, skew),
                 *dG = device(dgb), *dB = device(dbb), *dXIn = device(xb, skew),
                 *dDy = device(dyb, skew);
      float *dM = device(mean), *dR = device(rstd);
      if (rms) {
        otcrt::cpu::rmsNormFwd(rows, cols, 1e-5f, xb.data(), gb.data(),
                               yb.data(), rstd.data());
        otcrt::cpu::rmsNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                               rstd.data(), dxb.data(), dgb.data());
        c.rc(otcrt_rms_norm_fwd_bf16(rows, cols, 1e-5f, dXIn, device(gb), dY,
                                     dR, nullptr),
             "fwd");
        c.rc(otcrt_rms_norm_bwd_bf16(rows, cols, dDy, dXIn, device(gb), dR, dX,
                                     dG, nullptr),
             "bwd");
      } else {
        otcrt::cpu::layerNormFwd(rows, cols, 1e-5f, xb.data(), gb.data(),
                                 bb.data(), yb.data(), mean.data(),
                                 rstd.data());
        otcrt::cpu::layerNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                                 mean.data(), rstd.data(), nullptr, dxb.data(),
                                 dgb.data(), dbb.data());
        c.rc(otcrt_layer_norm_fwd_bf16(rows, cols, 1e-5f, dXIn, device(gb),
                                       device(bb), dY, dM, dR, nullptr),
             "fwd");
        c.rc(otcrt_layer_norm_bwd_bf16(rows, cols, dDy, dXIn, device(gb), dM,
                                       dR, nullptr, dX, dG, dB, nullptr),
             "bwd");
        c.bf16(host(dB, cols), dbb, "dbeta");
      }
      c.bf16(host(dY, n), yb, "y");
      c.bf16(host(dX, n), dxb, "dx");
      c.bf16(host(dG, cols), dgb, "dgamma");
    }
    if (!rms) {
      // A residual gradient added to dx (at the same skew), f32 and bf16;
      // then dx written over the residual.
      Check c("layer_norm_bwd_residual" + shape);
      Floats res = random(n, rng), dxr(n), dgr(cols), dbr(cols);
      otcrt::cpu::layerNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                               mean.data(), rstd.data(), res.data(),
                               dxr.data(), dgr.data(), dbr.data());
      float *dX = device(dxr, skew), *dRes = device(res, skew);
      c.rc(otcrt_layer_norm_bwd_f32(rows, cols, device(dy, skew),
                                    device(x, skew), device(gamma),
                                    device(mean), device(rstd), dRes, dX,
                                    device(dgr), device(dbr), nullptr),
           "f32");
      c.f32(host(dX, n), dxr, "dx f32");
      c.rc(otcrt_layer_norm_bwd_f32(rows, cols, device(dy, skew),
                                    device(x, skew), device(gamma),
                                    device(mean), device(rstd), dRes, dRes,
                                    nullptr, nullptr, nullptr),
           "f32 over the residual");
      c.f32(host(dRes, n), dxr, "dx f32 over the residual");
      Bf16s xb = toBf16(x), gb = toBf16(gamma), dyb = toBf16(dy),
            resb = toBf16(res), dxbr(n), dgbr(cols), dbbr(cols);
      otcrt::cpu::layerNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                               mean.data(), rstd.data(), resb.data(),
                               dxbr.data(), dgbr.data(), dbbr.data());
      otcrt_bf16 *dXb = device(dxbr, skew);
      c.rc(otcrt_layer_norm_bwd_bf16(rows, cols, device(dyb, skew),
                                     device(xb, skew), device(gb),
                                     device(mean), device(rstd),
                                     device(resb, skew), dXb, nullptr, nullptr,
                                     nullptr),
           "bf16");
      c.bf16(host(dXb, n), dxbr, "dx bf16");
    }
  }
}

/// The parameter gradients of layer norm (dgamma, dbeta) and RMS norm
/// (dgamma) at training shapes, where they run as two-stage reductions: the
/// f32 results within float tolerance of the host's, the same bits on a
/// repeated call, and the bf16 results (same representable dy and x, same
/// statistics) exactly the f32 device sums rounded to bf16, since the sum
/// order depends on the shape alone.
void testNormParamGrads(std::mt19937 &rng, int64_t rows, int64_t cols) {
  const size_t n = rows * cols;
  Floats x = random(n, rng, -2, 2), gamma = random(cols, rng, 0.5f, 1.5f),
         dy = random(n, rng), y(n), mean(rows), rstd(rows), dx(n), dg(cols),
         db(cols);
  otcrt::cpu::layerNormFwd(rows, cols, 1e-5f, x.data(), gamma.data(), nullptr,
                           y.data(), mean.data(), rstd.data());
  for (int rms = 0; rms < 2; ++rms) {
    Check c(std::string(rms ? "rms_norm" : "layer_norm") +
            " parameter gradients" + shapeName(rows, cols));
    const float *shift = rms ? nullptr : device(mean);
    float *dG = device(Floats(cols)),
          *dB = rms ? nullptr : device(Floats(cols));
    float *dX = device(Floats(n));
    const float *dDy = device(dy), *dXIn = device(x), *dGamma = device(gamma),
                *dRstd = device(rstd);
    auto f32 = [&] {
      return rms ? otcrt_rms_norm_bwd_f32(rows, cols, dDy, dXIn, dGamma, dRstd,
                                          dX, dG, nullptr)
                 : otcrt_layer_norm_bwd_f32(rows, cols, dDy, dXIn, dGamma,
                                            shift, dRstd, nullptr, dX, dG, dB,
                                            nullptr);
    };
    if (rms)
      otcrt::cpu::rmsNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                             rstd.data(), dx.data(), dg.data());
    else
      otcrt::cpu::layerNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                               mean.data(), rstd.data(), nullptr, dx.data(),
                               dg.data(), db.data());
    c.rc(f32(), "f32");
    const double tol = 1e-4 * std::sqrt(static_cast<double>(rows));
    Floats g32 = host(dG, cols), b32 = rms ? Floats() : host(dB, cols);
    c.f32(g32, dg, "dgamma", tol);
    if (!rms)
      c.f32(b32, db, "dbeta", tol);
    c.rc(f32(), "f32 again");
    c.ok = sameBits(host(dG, cols), g32, "dgamma again") && c.ok;
    if (!rms)
      c.ok = sameBits(host(dB, cols), b32, "dbeta again") && c.ok;
    Bf16s xb = toBf16(x), gb = toBf16(gamma), dyb = toBf16(dy);
    otcrt_bf16 *dGb = device(Bf16s(cols)),
               *dBb = rms ? nullptr : device(Bf16s(cols)),
               *dXb = device(Bf16s(n));
    c.rc(rms ? otcrt_rms_norm_bwd_bf16(rows, cols, device(dyb), device(xb),
                                       device(gb), dRstd, dXb, dGb, nullptr)
             : otcrt_layer_norm_bwd_bf16(rows, cols, device(dyb), device(xb),
                                         device(gb), shift, dRstd, nullptr, dXb,
                                         dGb, dBb, nullptr),
         "bf16");
    auto rounded = [](const Floats &v) { return toFloat(toBf16(v)); };
    c.ok = sameBits(toFloat(host(dGb, cols)), rounded(g32),
                    "bf16 dgamma vs rounded f32") &&
           c.ok;
    if (!rms)
      c.ok = sameBits(toFloat(host(dBb, cols)), rounded(b32),
                      "bf16 dbeta vs rounded f32") &&
             c.ok;
  }
}

/// Cross-entropy forward and backward (in place for f32), f32 and bf16,
/// against the host kernels, every seventh row ignored; the logits and
/// dlogits lie `skew` elements past alignment.
void testCrossEntropy(int32_t reduction, const char *reductionName,
                      std::mt19937 &rng, int64_t rows, int64_t classes,
                      size_t skew = 0) {
  const std::string name = reductionName + shapeName(rows, classes, skew);
  Floats logits = random(rows * classes, rng, -5, 5);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 7 == 3 ? -100 : (r * 7919) % classes;
  const size_t nLoss = reduction == OTCRT_NONE ? rows : 1;
  Floats dloss = random(nLoss, rng, 0.5f, 2), loss(nLoss), lse(rows),
         dl(logits.size());
  int64_t *dLabels = device(labels);
  {
    Check c("cross_entropy_f32 " + name);
    otcrt::cpu::crossEntropyFwd(rows, classes, logits.data(), labels.data(), 1,
                                -100, reduction, loss.data(), lse.data());
    otcrt::cpu::crossEntropyBwd(rows, classes, dloss.data(), logits.data(),
                                labels.data(), lse.data(), 1, -100, reduction,
                                dl.data());
    float *dLoss = device(loss), *dLse = device(lse),
          *dL = device(logits, skew);
    c.rc(otcrt_cross_entropy_fwd_f32(rows, classes, dL, dLabels, 1, -100,
                                     reduction, dLoss, dLse, nullptr),
         "fwd");
    c.f32(host(dLoss, nLoss), loss, "loss");
    c.f32(host(dLse, rows), lse, "lse");
    c.rc(otcrt_cross_entropy_bwd_f32(rows, classes, device(dloss), dL, dLabels,
                                     device(lse), 1, -100, reduction, dL,
                                     nullptr),
         "bwd in place");
    c.f32(host(dL, logits.size()), dl, "dlogits");
  }
  {
    Check c("cross_entropy_bf16 " + name);
    Bf16s lb = toBf16(logits), dlb(logits.size());
    otcrt::cpu::crossEntropyFwd(rows, classes, lb.data(), labels.data(), 1,
                                -100, reduction, loss.data(), lse.data());
    otcrt::cpu::crossEntropyBwd(rows, classes, dloss.data(), lb.data(),
                                labels.data(), lse.data(), 1, -100, reduction,
                                dlb.data());
    float *dLoss = device(loss), *dLse = device(lse);
    otcrt_bf16 *dL = device(lb, skew), *dG = device(dlb, skew);
    c.rc(otcrt_cross_entropy_fwd_bf16(rows, classes, dL, dLabels, 1, -100,
                                      reduction, dLoss, dLse, nullptr),
         "fwd");
    c.f32(host(dLoss, nLoss), loss, "loss");
    c.f32(host(dLse, rows), lse, "lse");
    c.rc(otcrt_cross_entropy_bwd_bf16(rows, classes, device(dloss), dL, dLabels,
                                      device(lse), 1, -100, reduction, dG,
                                      nullptr),
         "bwd");
    c.bf16(host(dG, logits.size()), dlb, "dlogits");
  }
}

/// The cross-entropy entry points of T logits.
template <typename T> struct CrossEntropyCalls;
template <> struct CrossEntropyCalls<float> {
  static constexpr const char *name = "f32";
  static constexpr auto fwd = otcrt_cross_entropy_fwd_f32;
  static constexpr auto bwd = otcrt_cross_entropy_bwd_f32;
  static constexpr auto fused = otcrt_cross_entropy_fused_f32;
};
template <> struct CrossEntropyCalls<otcrt_bf16> {
  static constexpr const char *name = "bf16";
  static constexpr auto fwd = otcrt_cross_entropy_fwd_bf16;
  static constexpr auto bwd = otcrt_cross_entropy_bwd_bf16;
  static constexpr auto fused = otcrt_cross_entropy_fused_bf16;
};

/// The floats of T storage.
Floats asFloats(const Floats &x) { return x; }
Floats asFloats(const Bf16s &x) { return toFloat(x); }

/// The fused cross-entropy of T logits, every seventh row ignored, against
/// the host's fused call (loss and row_loss within the forward checks'
/// tolerance, dlogits within the backward checks') and against the
/// device's forward then backward: the same gradient bits, and for none
/// the same losses (a mean or sum adds the rows' float losses: within
/// 1e-6).
/// Repeated (allocating nothing) and in place, the same bits again. The
/// logits and dlogits lie `skew` elements past alignment.
template <typename T>
void testCrossEntropyFused(int32_t reduction, const char *reductionName,
                           std::mt19937 &rng, int64_t rows, int64_t classes,
                           size_t skew = 0) {
  using Calls = CrossEntropyCalls<T>;
  Check c(std::string("cross_entropy_fused_") + Calls::name + " " +
          reductionName + shapeName(rows, classes, skew));
  const size_t n = rows * classes, nLoss = reduction == OTCRT_NONE ? rows : 1;
  const std::vector<T> logits = stored<T>(random(n, rng, -5, 5));
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 7 == 3 ? -100 : (r * 7919) % classes;
  Floats dloss = random(nLoss, rng, 0.5f, 2), loss(nLoss), rowLoss(rows);
  std::vector<T> dl(n);
  otcrt::cpu::crossEntropyFused(rows, classes, dloss.data(), logits.data(),
                                labels.data(), 1, -100, reduction, loss.data(),
                                rowLoss.data(), dl.data());

  const int64_t *dLabels = device(labels);
  const float *dDloss = device(dloss);
  float *dLoss = device(Floats(nLoss)), *dRowLoss = device(Floats(rows, NAN));
  const T *dL = device(logits, skew);
  T *dG = device(std::vector<T>(n), skew);
  auto fused = [&](const T *in, T *out) {
    return Calls::fused(rows, classes, dDloss, in, dLabels, 1, -100, reduction,
                        dLoss, dRowLoss, out, nullptr);
  };
  c.rc(fused(dL, dG), "fused");
  const Floats gotLoss = host(dLoss, nLoss), gotRowLoss = host(dRowLoss, rows);
  const std::vector<T> gotGrad = host(dG, n);
  const Floats grad = asFloats(gotGrad);
  c.f32(gotLoss, loss, "loss");
  c.f32(gotRowLoss, rowLoss, "row_loss");
  if constexpr (std::is_same_v<T, float>)
    c.f32(grad, dl, "dlogits");
  else
    c.bf16(gotGrad, dl, "dlogits");

  float *dFwdLoss = device(Floats(nLoss)), *dLse = device(Floats(rows));
  T *dBwd = device(std::vector<T>(n), skew);
  c.rc(Calls::fwd(rows, classes, dL, dLabels, 1, -100, reduction, dFwdLoss,
                  dLse, nullptr),
       "fwd");
  c.rc(Calls::bwd(rows, classes, dDloss, dL, dLabels, dLse, 1, -100, reduction,
                  dBwd, nullptr),
       "bwd");
  c.ok = sameBits(grad, asFloats(host(dBwd, n)), "dlogits vs fwd+bwd") && c.ok;
  if (reduction == OTCRT_NONE)
    c.ok = sameBits(gotLoss, host(dFwdLoss, nLoss), "loss vs fwd") && c.ok;
  else
    c.f32(gotLoss, host(dFwdLoss, nLoss), "loss vs fwd", 1e-6);

  allocatesNothing(c.ok, [&] { c.rc(fused(dL, dG), "fused again"); });
  c.ok = sameBits(asFloats(host(dG, n)), grad, "dlogits again") && c.ok;
  c.ok = sameBits(host(dLoss, nLoss), gotLoss, "loss again") && c.ok;

  T *dIn = device(logits, skew);
  c.rc(fused(dIn, dIn), "fused in place");
  c.ok = sameBits(asFloats(host(dIn, n)), grad, "dlogits in place") && c.ok;
  c.ok = sameBits(host(dLoss, nLoss), gotLoss, "loss in place") && c.ok;
  c.ok =
      sameBits(host(dRowLoss, rows), gotRowLoss, "row_loss in place") && c.ok;
}

/// Keeps `stream` busy for about `ms` milliseconds.
__global__ void spinKernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

void spin(cudaStream_t stream, int ms) {
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  spinKernel<<<1, 1, 0, stream>>>(static_cast<long long>(khz) * ms);
}

/// A label outside [0, classes) is recorded on the device: the call returns
/// 0 while the stream is still busy with earlier work (it did not wait), and
/// otcrt_kernel_error then names the row and value once, and clears; for
/// the forward and backward, then for the fused call.
void testBadLabel(std::mt19937 &rng) {
  Check c("cross_entropy bad label: error record, no synchronization");
  const int64_t rows = 9, classes = 50;
  Floats logits = random(rows * classes, rng);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r;
  labels[5] = classes;  // bad
  labels[7] = -100;     // ignored: not an error
  float *dL = device(logits), *dLoss = device(Floats(1)),
        *dDloss = device(Floats{1.0f}), *dLse = device(Floats(rows)),
        *dRowLoss = device(Floats(rows)), *dG = device(Floats(rows * classes));
  int64_t *dLabels = device(labels);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  OtcrtKernelError e{};
  otcrt_kernel_error(&e, stream); // allocates and clears the record
  spin(stream, 200);
  auto expectRecorded = [&] {
    if (cudaStreamQuery(stream) != cudaErrorNotReady) {
      std::printf("  the calls waited for the stream\n");
      c.ok = false;
    }
    int code = otcrt_kernel_error(&e, stream);
    if (code != OTCRT_ERROR_LABEL || e.code != OTCRT_ERROR_LABEL ||
        e.index != 5 || e.value != classes || e.bound != classes) {
      std::printf("  record: code %d row %lld value %lld bound %lld\n", code,
                  static_cast<long long>(e.index),
                  static_cast<long long>(e.value),
                  static_cast<long long>(e.bound));
      c.ok = false;
    }
    if (otcrt_kernel_error(&e, stream) != OTCRT_ERROR_NONE) {
      std::printf("  the record was not cleared\n");
      c.ok = false;
    }
  };
  c.rc(otcrt_cross_entropy_fwd_f32(rows, classes, dL, dLabels, 1, -100,
                                   OTCRT_MEAN, dLoss, dLse, stream),
       "fwd");
  c.rc(otcrt_cross_entropy_bwd_f32(rows, classes, dLoss, dL, dLabels, dLse, 1,
                                   -100, OTCRT_MEAN, dG, stream),
       "bwd");
  expectRecorded();
  spin(stream, 200);
  c.rc(otcrt_cross_entropy_fused_f32(rows, classes, dDloss, dL, dLabels, 1,
                                     -100, OTCRT_MEAN, dLoss, dRowLoss, dG,
                                     stream),
       "fused");
  expectRecorded();
  // The LM head in chunks of 2 rows: row 5 is row 1 of the third chunk, and
  // is recorded as row 5. Run once with good labels first (a GEMM shape's
  // first call may synchronize).
  const int64_t hidden = 8;
  float *dH = device(random(rows * hidden, rng)),
        *dW = device(random(classes * hidden, rng)),
        *dDh = device(Floats(rows * hidden)),
        *dDw = device(Floats(classes * hidden)),
        *dChunk = device(Floats(2 * classes));
  std::vector<int64_t> good(rows, 0);
  int64_t *dGood = device(good);
  auto linear = [&](const int64_t *l) {
    return otcrt_linear_cross_entropy_f32(rows, hidden, classes, 2, dDloss, dH,
                                          dW, l, 1, -100, OTCRT_MEAN, OTC_F32, 0,
                                          dLoss, dRowLoss, dDh, dDw, dChunk,
                                          stream);
  };
  c.rc(linear(dGood), "linear, good labels");
  cudaStreamSynchronize(stream);
  spin(stream, 200);
  c.rc(linear(dLabels), "linear");
  expectRecorded();
  cudaStreamDestroy(stream);
}

/// Captures `calls` on a fresh stream into a CUDA graph (after one eager run,
/// as the runtime does), then checks that replaying it rewrites `out` with
/// exactly the bytes of the eager run.
template <typename Calls>
void testGraph(const char *name, Calls calls, float *out, size_t n) {
  Check c(std::string("graph replay ") + name);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  c.rc(calls(stream), "eager");
  cudaStreamSynchronize(stream);
  Floats eager = host(out, n);
  cudaMemset(out, 0, n * sizeof(float));
  cudaDeviceSynchronize();
  cudaError_t err = captureAndReplay(
      stream, [&] { c.rc(calls(stream), "captured"); }, 2);
  if (err != cudaSuccess) {
    std::printf("  %s\n", cudaGetErrorString(err));
    c.ok = false;
  } else {
    Floats replayed = host(out, n);
    for (size_t i = 0; i < n && c.ok; ++i)
      if (std::memcmp(&replayed[i], &eager[i], sizeof(float)) != 0) {
        std::printf("  [%zu]: replay %.9g eager %.9g\n", i, replayed[i],
                    eager[i]);
        c.ok = false;
      }
  }
  cudaStreamDestroy(stream);
}

void testGraphs(std::mt19937 &rng) {
  const int64_t rows = 64, cols = 1000, classes = 700;
  float *x = device(random(rows * cols, rng)),
        *gamma = device(random(cols, rng)), *beta = device(random(cols, rng)),
        *y = device(Floats(rows * cols)), *mean = device(Floats(rows)),
        *rstd = device(Floats(rows));
  testGraph(
      "layer_norm_fwd_f32",
      [&](cudaStream_t s) {
        return otcrt_layer_norm_fwd_f32(rows, cols, 1e-5f, x, gamma, beta, y,
                                        mean, rstd, s);
      },
      y, rows * cols);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 5 == 0 ? -100 : (r * 131) % classes;
  float *logits = device(random(rows * classes, rng)),
        *loss = device(Floats(1)), *lse = device(Floats(rows)),
        *dlogits = device(Floats(rows * classes));
  int64_t *dLabels = device(labels);
  testGraph(
      "cross_entropy_f32 fwd+bwd",
      [&](cudaStream_t s) {
        int rc = otcrt_cross_entropy_fwd_f32(rows, classes, logits, dLabels, 1,
                                             -100, OTCRT_MEAN, loss, lse, s);
        return rc ? rc
                  : otcrt_cross_entropy_bwd_f32(rows, classes, loss, logits,
                                                dLabels, lse, 1, -100,
                                                OTCRT_MEAN, dlogits, s);
      },
      dlogits, rows * classes);
  float *seed = device(Floats{1.0f}), *fusedLoss = device(Floats(1)),
        *rowLoss = device(Floats(rows)),
        *fusedDlogits = device(Floats(rows * classes));
  testGraph(
      "cross_entropy_fused_f32",
      [&](cudaStream_t s) {
        return otcrt_cross_entropy_fused_f32(
            rows, classes, seed, logits, dLabels, 1, -100, OTCRT_MEAN,
            fusedLoss, rowLoss, fusedDlogits, s);
      },
      fusedDlogits, rows * classes);
  const int64_t bigRows = 8192, bigCols = 768;
  float *dy = device(random(bigRows * bigCols, rng)),
        *xs = device(random(bigRows * bigCols, rng)),
        *means = device(random(bigRows, rng)),
        *rstds = device(random(bigRows, rng, 0.5f, 2)),
        *sums = device(Floats(bigCols)), *dgb = device(Floats(2 * bigCols)),
        *dxs = device(Floats(bigRows * bigCols));
  testGraph(
      "column_sum_f32 8192x768",
      [&](cudaStream_t s) {
        return otcrt_column_sum_f32(bigRows, bigCols, dy, sums, s);
      },
      sums, bigCols);
  testGraph(
      "layer_norm_bwd_f32 dgamma dbeta 8192x768",
      [&](cudaStream_t s) {
        return otcrt_layer_norm_bwd_f32(bigRows, bigCols, dy, xs, nullptr,
                                        means, rstds, nullptr, dxs, dgb,
                                        dgb + bigCols, s);
      },
      dgb, 2 * bigCols);
  std::vector<int64_t> tokens = zipfTokens(8192, 5000, rng);
  const int64_t *dTokens = device(tokens);
  float *table = device(Floats(5000 * 64));
  testGraph(
      "gather_grad_f32 8192 tokens",
      [&](cudaStream_t s) {
        return otcrt_gather_grad_f32(1, 5000, 64, 8192, dy, dTokens, table, s);
      },
      table, 5000 * 64);
}

} // namespace

/// The arena of the range checks: kFloatRange's 1,000,003 random floats,
/// 64 bytes of gap, then kBf16Range's 4,099 random bfloat16 (in [-3, 3]).
constexpr int64_t kRangeFloats = 1000003, kRangeBf16s = 4099;
constexpr OtcrtRange kFloatRange = {0, kRangeFloats, 0, 0};
constexpr OtcrtRange kBf16Range = {kRangeFloats * 4 + 64, kRangeBf16s, 1, 0};
static std::vector<char> rangesArena(std::mt19937 &rng) {
  Floats f = random(kRangeFloats, rng, -3, 3);
  Bf16s b = toBf16(random(kRangeBf16s, rng, -3, 3));
  std::vector<char> arena(kBf16Range.offset + kRangeBf16s * 2);
  std::memcpy(arena.data(), f.data(), kRangeFloats * 4);
  std::memcpy(arena.data() + kBf16Range.offset, b.data(), kRangeBf16s * 2);
  return arena;
}

/// The sum of squares over arena ranges (the driver's gradient norm)
/// against the host kernel: an f32 range, a bf16 one and an empty one, in
/// one call, within 1e-9 relative (both accumulate in double); the same call
/// twice gives the same bits; a NaN in a range makes the sum NaN.
void testSumSquares(std::mt19937 &rng) {
  Check c("sum_squares");
  std::vector<char> arena = rangesArena(rng);
  const OtcrtRange ranges[] = {kFloatRange, kBf16Range, {0, 0, 0, 0}};
  double want = 0, got = 0, again = 0;
  c.rc(otcrt::cpu::sumSquares(arena.data(), 3, ranges, &want), "host");
  char *dArena = device(arena);
  c.rc(otcrt_sum_squares(dArena, 3, ranges, &got, nullptr), "device");
  c.rc(otcrt_sum_squares(dArena, 3, ranges, &again, nullptr), "device again");
  c.worst = std::fabs(got - want);
  if (!(std::fabs(got - want) <= 1e-9 * want) || got != again) {
    std::printf("  sum %.17g (again %.17g), host %.17g\n", got, again, want);
    c.ok = false;
  }
  float nan = NAN;
  cudaMemcpy(dArena + 8 * 4, &nan, 4, cudaMemcpyHostToDevice);
  c.rc(otcrt_sum_squares(dArena, 3, ranges, &got, nullptr), "device nan");
  if (!std::isnan(got)) {
    std::printf("  a NaN element gave the sum %g\n", got);
    c.ok = false;
  }
}

/// otcrt_grad_factor on the device against the host kernel, with the norm
/// copied to page-locked memory: the factor without and with clipping, the
/// norm within 1e-9 relative of the host's (both sum in double), the factor
/// within float rounding; an infinite element gives an infinite norm and a
/// NaN factor.
void testGradFactor(std::mt19937 &rng) {
  Check c("grad_factor");
  std::vector<char> arena = rangesArena(rng);
  // The factor's float, 4-byte aligned past the ranges.
  const int64_t factorAt = (static_cast<int64_t>(arena.size()) + 3) / 4 * 4;
  arena.resize(factorAt + 4);
  const OtcrtRange ranges[] = {kFloatRange, kBf16Range};
  char *dArena = device(arena);
  double *pinned = nullptr;
  c.rc(cudaMallocHost(&pinned, sizeof(double)), "cudaMallocHost");
  for (float clip : {0.0f, 100.0f, 1e9f}) {
    float want = 0, got = 0;
    double wantNorm = 0;
    c.rc(otcrt::cpu::gradFactor(arena.data(), 2, ranges, 0.5f, clip,
                                reinterpret_cast<float *>(&want), &wantNorm),
         "host");
    *pinned = -1;
    c.rc(otcrt_grad_factor(dArena, 2, ranges, 0.5f, clip,
                           reinterpret_cast<float *>(dArena + factorAt), pinned,
                           nullptr),
         "device");
    c.rc(cudaDeviceSynchronize(), "synchronize");
    cudaMemcpy(&got, dArena + factorAt, 4, cudaMemcpyDeviceToHost);
    c.worst = std::max(c.worst, std::fabs(*pinned - wantNorm));
    if (!(std::fabs(*pinned - wantNorm) <= 1e-9 * wantNorm) ||
        !(std::fabs(got - want) <= 1e-6f * want)) {
      std::printf("  clip %g: norm %.17g factor %.9g, host %.17g and %.9g\n",
                  clip, *pinned, got, wantNorm, want);
      c.ok = false;
    }
  }
  float inf = INFINITY, got = 0;
  cudaMemcpy(dArena + 8 * 4, &inf, 4, cudaMemcpyHostToDevice);
  c.rc(otcrt_grad_factor(dArena, 2, ranges, 1.0f, 1.0f,
                         reinterpret_cast<float *>(dArena + factorAt), pinned,
                         nullptr),
       "device inf");
  c.rc(cudaDeviceSynchronize(), "synchronize");
  cudaMemcpy(&got, dArena + factorAt, 4, cudaMemcpyDeviceToHost);
  if (!std::isinf(*pinned) || !std::isnan(got)) {
    std::printf("  an infinite element gave the norm %g and factor %g\n",
                *pinned, got);
    c.ok = false;
  }
  cudaFreeHost(pinned);
}

/// otcrt_scale_ranges on the device against the host kernel: a float range
/// and a bfloat16 range, bit for bit (one product and one rounding each).
void testScaleRanges(std::mt19937 &rng) {
  Check c("scale_ranges");
  std::vector<char> arena = rangesArena(rng);
  const OtcrtRange ranges[] = {kFloatRange, kBf16Range};
  char *dArena = device(arena);
  c.rc(otcrt::cpu::scaleRanges(arena.data(), 2, ranges, 0.37f), "host");
  c.rc(otcrt_scale_ranges(dArena, 2, ranges, 0.37f, nullptr), "device");
  std::vector<char> got(arena.size());
  cudaMemcpy(got.data(), dArena, got.size(), cudaMemcpyDeviceToHost);
  if (std::memcmp(got.data(), arena.data(), kRangeFloats * 4) != 0 ||
      std::memcmp(got.data() + kBf16Range.offset,
                  arena.data() + kBf16Range.offset, kRangeBf16s * 2) != 0) {
    std::printf("  the device's scaled values differ from the host's\n");
    c.ok = false;
  }
}

int main(int argc, char **argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  // Fresh inputs on every run; the seed is printed so that a failure can be
  // replayed: otcrt-cuda-kernel-tests SEED.
  unsigned seed = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10))
                           : std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  // Rows of a warp's multiple and not; widths of a packet's multiple (8
  // bf16, 4 floats: 16-byte accesses) and not, and rows off 16-byte
  // alignment (skewed), which the kernels read element by element.
  testNorms(rng, 64, 1000);
  testNorms(rng, 5, 768);
  testNorms(rng, 7, 64);
  testNorms(rng, 3, 8); // one bf16 packet a row
  testNorms(rng, 2, 4); // one f32 packet a row, bf16 by element
  testNorms(rng, 3, 4099);
  testNorms(rng, 4, 1001);
  testNorms(rng, 5, 768, 1);
  testColumnSum(rng, 8192, 768);
  testColumnSum(rng, 37, 3000);
  testColumnSum(rng, 100, 64);
  testColumnSum(rng, 5, 4);
  testColumnSum(rng, 1, 33);
  testColumnSum(rng, 33, 1001);
  testColumnSum(rng, 100, 768, 1);
  testColumnSum(rng, 8192, 3072);
  testColumnSum(rng, 65536, 768);
  testColumnSum(rng, 8192, 4);
  testNormParamGrads(rng, 8192, 768);
  testNormParamGrads(rng, 8192, 3072);
  testNormParamGrads(rng, 4096, 1001);
  testGatherGrads(rng);
  testSumSquares(rng);
  testGradFactor(rng);
  testScaleRanges(rng);
  testAttentions(rng);
  testCrossEntropy(OTCRT_MEAN, "mean", rng, 37, 5000);
  testCrossEntropy(OTCRT_SUM, "sum", rng, 37, 5000);
  testCrossEntropy(OTCRT_NONE, "none", rng, 37, 5000);
  testCrossEntropy(OTCRT_MEAN, "mean", rng, 8, 50304);
  testCrossEntropy(OTCRT_NONE, "none", rng, 3, 1023);
  testCrossEntropy(OTCRT_MEAN, "mean", rng, 11, 768);
  testCrossEntropy(OTCRT_SUM, "sum", rng, 9, 64);
  testCrossEntropy(OTCRT_NONE, "none", rng, 5, 8);
  testCrossEntropy(OTCRT_MEAN, "mean", rng, 5, 4);
  testCrossEntropy(OTCRT_MEAN, "mean", rng, 11, 1001);
  testCrossEntropy(OTCRT_SUM, "sum", rng, 11, 768, 1);
  // The fused call: rows staged in shared memory (GPT-2's vocabulary in
  // bf16; packets, and element by element for odd classes or skewed rows)
  // and rows too long for it (read twice); more rows than the summing
  // block's threads.
  testCrossEntropyFused<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 64, 50304);
  testCrossEntropyFused<otcrt_bf16>(OTCRT_NONE, "none", rng, 64, 50304);
  testCrossEntropyFused<float>(OTCRT_NONE, "none", rng, 37, 1001);
  testCrossEntropyFused<float>(OTCRT_SUM, "sum", rng, 37, 1000, 1);
  testCrossEntropyFused<float>(OTCRT_MEAN, "mean", rng, 2000, 64);
  testCrossEntropyFused<float>(OTCRT_MEAN, "mean", rng, 64, 50304);
  testCrossEntropyFused<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 16, 70000);
  testLinearCrossEntropies(rng);
  testCrossEntropyFused<otcrt_bf16>(OTCRT_NONE, "none", rng, 16, 70000, 1);
  testCrossEntropyFused<float>(OTCRT_SUM, "sum", rng, 5, 4);
  testBadLabel(rng);
  testGraphs(rng);
  testGemms(rng);
  for (void *p : allocations)
    cudaFree(p);
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
