// GPU check of the device kernels of libotcrt_cuda (otcrt/kernels.h): every
// kernel runs on random inputs (a fresh seed per run, printed; or argv[1]),
// at several shapes, on the GPU and on the host (the host kernels
// of libotcrt_cpu, compiled in under their C++ names), and the results must
// agree within float tolerance (bfloat16 results within a couple of
// bfloat16 units). The two-stage column reductions (column sums, the norms'
// parameter gradients) and the gather gradient (on skewed token ids, the
// GPT-2 shapes among others, gather_grad_cuda_test.cu) must also repeat bit
// for bit and give bf16 results that are exactly their f32 results rounded.
// The cross-entropy (cross_entropy_cuda_test.cu): the fused call must give
// the gradient of the device's forward then backward bit for bit, in place
// too; the LM head with its loss in chunks must match the host's
// (linear_cross_entropy_cuda_test.cu); the rotary embedding must match the
// host's (rope_cuda_test.cu).
// The attention runs on both of its device implementations
// (attention_cuda_test.cu). A bad label reaches the library's error record
// without the call waiting for the device (cross_entropy_cuda_test.cu).
// Also checks that library calls captured in a CUDA
// graph replay to the same bits as eager calls; and otcrt_gemm against the
// host GEMM, cuBLASLt's epilogues and the runtime's fallback for them
// (gemm_cuda_test.cu), and otcrt_gemm_sums against the host's
// (gemm_sums_cuda_test.cu). Prints PASS or FAIL per
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
                               rstd.data(), nullptr, 0, dx.data(), dg.data());
        c.rc(otcrt_rms_norm_bwd_f32(rows, cols, dDy, dXIn, device(gamma),
                                    device(rstd), nullptr, 0, dX, dG, nullptr),
             "bwd");
      } else {
        otcrt::cpu::layerNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                                 mean.data(), rstd.data(), nullptr, 0,
                                 dx.data(), dg.data(), db.data());
        c.rc(otcrt_layer_norm_bwd_f32(rows, cols, dDy, dXIn, device(gamma),
                                      device(mean), device(rstd), nullptr, 0,
                                      dX, dG, dB, nullptr),
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
                               rstd.data(), nullptr, 0, dxb.data(), dgb.data());
        c.rc(otcrt_rms_norm_fwd_bf16(rows, cols, 1e-5f, dXIn, device(gb), dY,
                                     dR, nullptr),
             "fwd");
        c.rc(otcrt_rms_norm_bwd_bf16(rows, cols, dDy, dXIn, device(gb), dR,
                                     nullptr, 0, dX, dG, nullptr),
             "bwd");
      } else {
        otcrt::cpu::layerNormFwd(rows, cols, 1e-5f, xb.data(), gb.data(),
                                 bb.data(), yb.data(), mean.data(),
                                 rstd.data());
        otcrt::cpu::layerNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                                 mean.data(), rstd.data(), nullptr, 0,
                                 dxb.data(), dgb.data(), dbb.data());
        c.rc(otcrt_layer_norm_fwd_bf16(rows, cols, 1e-5f, dXIn, device(gb),
                                       device(bb), dY, dM, dR, nullptr),
             "fwd");
        c.rc(otcrt_layer_norm_bwd_bf16(rows, cols, dDy, dXIn, device(gb), dM,
                                       dR, nullptr, 0, dX, dG, dB, nullptr),
             "bwd");
        c.bf16(host(dB, cols), dbb, "dbeta");
      }
      c.bf16(host(dY, n), yb, "y");
      c.bf16(host(dX, n), dxb, "dx");
      c.bf16(host(dG, cols), dgb, "dgamma");
    }
    {
      // A residual gradient added to dx (at the same skew), f32 and bf16;
      // then dx written over the residual.
      Check c(kind + "_bwd_residual" + shape);
      Floats res = random(n, rng), dxr(n), dgr(cols), dbr(cols);
      // The call of this norm's f32 or bf16 kernel on either side.
      auto f32 = [&](const float *dy_, const float *x_, const float *g_,
                     const float *m_, const float *r_, const float *res_,
                     float *dx_, float *dg_, float *db_, bool device_) {
        if (rms)
          return device_ ? otcrt_rms_norm_bwd_f32(rows, cols, dy_, x_, g_, r_,
                                                  res_, 0, dx_, dg_, nullptr)
                         : otcrt::cpu::rmsNormBwd(rows, cols, dy_, x_, g_, r_,
                                                  res_, 0, dx_, dg_);
        return device_
                   ? otcrt_layer_norm_bwd_f32(rows, cols, dy_, x_, g_, m_, r_,
                                              res_, 0, dx_, dg_, db_, nullptr)
                   : otcrt::cpu::layerNormBwd(rows, cols, dy_, x_, g_, m_, r_,
                                              res_, 0, dx_, dg_, db_);
      };
      c.rc(f32(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
               res.data(), dxr.data(), dgr.data(), dbr.data(), false),
           "host f32");
      float *dX = device(dxr, skew), *dRes = device(res, skew);
      c.rc(f32(device(dy, skew), device(x, skew), device(gamma), device(mean),
               device(rstd), dRes, dX, device(dgr), device(dbr), true),
           "f32");
      c.f32(host(dX, n), dxr, "dx f32");
      c.rc(f32(device(dy, skew), device(x, skew), device(gamma), device(mean),
               device(rstd), dRes, dRes, nullptr, nullptr, true),
           "f32 over the residual");
      c.f32(host(dRes, n), dxr, "dx f32 over the residual");
      Bf16s xb = toBf16(x), gb = toBf16(gamma), dyb = toBf16(dy),
            resb = toBf16(res), dxbr(n), dgbr(cols), dbbr(cols);
      if (rms)
        otcrt::cpu::rmsNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                               rstd.data(), resb.data(), 0, dxbr.data(),
                               dgbr.data());
      else
        otcrt::cpu::layerNormBwd(rows, cols, dyb.data(), xb.data(), gb.data(),
                                 mean.data(), rstd.data(), resb.data(), 0,
                                 dxbr.data(), dgbr.data(), dbbr.data());
      otcrt_bf16 *dXb = device(dxbr, skew);
      c.rc(rms ? otcrt_rms_norm_bwd_bf16(rows, cols, device(dyb, skew),
                                         device(xb, skew), device(gb),
                                         device(rstd), device(resb, skew), 0,
                                         dXb, nullptr, nullptr)
               : otcrt_layer_norm_bwd_bf16(
                     rows, cols, device(dyb, skew), device(xb, skew),
                     device(gb), device(mean), device(rstd), device(resb, skew),
                     0, dXb, nullptr, nullptr, nullptr),
           "bf16");
      c.bf16(host(dXb, n), dxbr, "dx bf16");
    }
  }
}

/// slot + sum in float, element by element (a slot a call adds into).
Floats plus(const Floats &slot, const Floats &sum) {
  Floats out(slot.size());
  for (size_t i = 0; i < slot.size(); ++i)
    out[i] = slot[i] + sum[i];
  return out;
}

/// The same for a bfloat16 slot holding `slot` rounded: its value plus the
/// float sum, rounded once.
Floats plusBf16(const Floats &slot, const Floats &sum) {
  Floats out(slot.size());
  for (size_t i = 0; i < slot.size(); ++i)
    out[i] =
        bf16ToFloat(floatToBf16(bf16ToFloat(floatToBf16(slot[i])) + sum[i]));
  return out;
}

/// The parameter gradients of layer norm (dgamma, dbeta) and RMS norm
/// (dgamma) at training shapes, where they run as two-stage reductions: the
/// f32 results within float tolerance of the host's, the same bits on a
/// repeated call, and the bf16 results (same representable dy and x, same
/// statistics) exactly the f32 device sums rounded to bf16, since the sum
/// order depends on the shape and the device alone.
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
    // accumulate: bit 1 adds dgamma into g, bit 2 dbeta into b.
    auto f32 = [&](int accumulate, float *g, float *b) {
      return rms ? otcrt_rms_norm_bwd_f32(rows, cols, dDy, dXIn, dGamma, dRstd,
                                          nullptr, accumulate, dX, g, nullptr)
                 : otcrt_layer_norm_bwd_f32(rows, cols, dDy, dXIn, dGamma,
                                            shift, dRstd, nullptr, accumulate,
                                            dX, g, b, nullptr);
    };
    if (rms)
      otcrt::cpu::rmsNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                             rstd.data(), nullptr, 0, dx.data(), dg.data());
    else
      otcrt::cpu::layerNormBwd(rows, cols, dy.data(), x.data(), gamma.data(),
                               mean.data(), rstd.data(), nullptr, 0, dx.data(),
                               dg.data(), db.data());
    c.rc(f32(0, dG, dB), "f32");
    const double tol = 1e-4 * std::sqrt(static_cast<double>(rows));
    Floats g32 = host(dG, cols), b32 = rms ? Floats() : host(dB, cols);
    c.f32(g32, dg, "dgamma", tol);
    if (!rms)
      c.f32(b32, db, "dbeta", tol);
    c.rc(f32(0, dG, dB), "f32 again");
    c.ok = sameBits(host(dG, cols), g32, "dgamma again") && c.ok;
    if (!rms)
      c.ok = sameBits(host(dB, cols), b32, "dbeta again") && c.ok;
    Bf16s xb = toBf16(x), gb = toBf16(gamma), dyb = toBf16(dy);
    otcrt_bf16 *dGb = device(Bf16s(cols)),
               *dBb = rms ? nullptr : device(Bf16s(cols)),
               *dXb = device(Bf16s(n));
    const otcrt_bf16 *dDyb = device(dyb), *dXInb = device(xb),
                     *dGammab = device(gb);
    auto bf16 = [&](int accumulate, otcrt_bf16 *g, otcrt_bf16 *b) {
      return rms ? otcrt_rms_norm_bwd_bf16(rows, cols, dDyb, dXInb, dGammab,
                                           dRstd, nullptr, accumulate, dXb, g,
                                           nullptr)
                 : otcrt_layer_norm_bwd_bf16(rows, cols, dDyb, dXInb, dGammab,
                                             shift, dRstd, nullptr, accumulate,
                                             dXb, g, b, nullptr);
    };
    c.rc(bf16(0, dGb, dBb), "bf16");
    auto rounded = [](const Floats &v) { return toFloat(toBf16(v)); };
    c.ok = sameBits(toFloat(host(dGb, cols)), rounded(g32),
                    "bf16 dgamma vs rounded f32") &&
           c.ok;
    if (!rms)
      c.ok = sameBits(toFloat(host(dBb, cols)), rounded(b32),
                      "bf16 dbeta vs rounded f32") &&
             c.ok;
    // Added into slots (accumulate: bit 1 dgamma, bit 2 dbeta; each bit
    // alone and both): a slot whose bit is set becomes its value plus the
    // device's f32 sum, rounded once; the other is overwritten with the
    // sum. A value with other bits is refused and writes nothing.
    for (int bits : rms ? std::vector<int>{1} : std::vector<int>{1, 2, 3}) {
      const std::string m = " (accumulate " + std::to_string(bits) + ")";
      const Floats sg = random(cols, rng, -3, 3), sb = random(cols, rng, -3, 3);
      float *aG = device(sg), *aB = rms ? nullptr : device(sb);
      c.rc(f32(bits, aG, aB), ("f32 into slots" + m).c_str());
      c.ok = sameBits(host(aG, cols), bits & 1 ? plus(sg, g32) : g32,
                      ("f32 dgamma" + m).c_str()) &&
             c.ok;
      if (!rms)
        c.ok = sameBits(host(aB, cols), bits & 2 ? plus(sb, b32) : b32,
                        ("f32 dbeta" + m).c_str()) &&
               c.ok;
      otcrt_bf16 *aGb = device(toBf16(sg)),
                 *aBb = rms ? nullptr : device(toBf16(sb));
      c.rc(bf16(bits, aGb, aBb), ("bf16 into slots" + m).c_str());
      c.ok = sameBits(toFloat(host(aGb, cols)),
                      bits & 1 ? plusBf16(sg, g32) : rounded(g32),
                      ("bf16 dgamma" + m).c_str()) &&
             c.ok;
      if (!rms)
        c.ok = sameBits(toFloat(host(aBb, cols)),
                        bits & 2 ? plusBf16(sb, b32) : rounded(b32),
                        ("bf16 dbeta" + m).c_str()) &&
               c.ok;
    }
    const Floats kept = random(cols, rng, -3, 3);
    float *rG = device(kept), *rB = rms ? nullptr : device(kept);
    if (f32(rms ? 2 : 4, rG, rB) == 0) {
      std::printf("  accumulate %d was not refused\n", rms ? 2 : 4);
      c.ok = false;
    }
    c.ok = sameBits(host(rG, cols), kept, "refused: dgamma untouched") && c.ok;
    if (!rms)
      c.ok = sameBits(host(rB, cols), kept, "refused: dbeta untouched") && c.ok;
  }
}

/// Column sums added into a slot of the input's storage
/// (otcrt_column_sum_into_*): the slot plus the device's f32 column sums
/// (the same sums for bf16 storage of the same values), rounded once.
void testColumnSumInto(std::mt19937 &rng, int64_t rows, int64_t cols) {
  Check c("column_sum_into" + shapeName(rows, cols));
  Floats x = random(rows * cols, rng), slot = random(cols, rng, -3, 3);
  float *dSum = device(Floats(cols));
  c.rc(otcrt_column_sum_f32(rows, cols, device(x), dSum, nullptr), "sums");
  const Floats sum = host(dSum, cols);
  float *dSlot = device(slot);
  c.rc(otcrt_column_sum_into_f32(rows, cols, device(x), dSlot, nullptr), "f32");
  c.ok = sameBits(host(dSlot, cols), plus(slot, sum), "f32 slot") && c.ok;
  otcrt_bf16 *dSlotB = device(toBf16(slot));
  c.rc(otcrt_column_sum_into_bf16(rows, cols, device(toBf16(x)), dSlotB,
                                  nullptr),
       "bf16");
  c.ok =
      sameBits(toFloat(host(dSlotB, cols)), plusBf16(slot, sum), "bf16 slot") &&
      c.ok;
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
                                        means, rstds, nullptr, 0, dxs, dgb,
                                        dgb + bigCols, s);
      },
      dgb, 2 * bigCols);
  std::vector<int64_t> tokens = zipfTokens(8192, 5000, rng);
  const int64_t *dTokens = device(tokens);
  float *table = device(Floats(5000 * 64));
  testGraph(
      "gather_grad_f32 8192 tokens",
      [&](cudaStream_t s) {
        return otcrt_gather_grad_f32(1, 5000, 64, 8192, dy, dTokens, 0, table,
                                     s);
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
/// against the host kernel, within 1e-9 relative (both accumulate in
/// double): in one call, an f32 range (16-byte aligned: packets, and 3
/// elements past the last), a bf16 one at an offset of 12 mod 16 (element
/// by element), an empty one, a bf16 one that is aligned and one more f32
/// one that is not; then 5,000,011 floats alone, which the grid's 1024
/// blocks read in rounds of packets (each thread more than UNROLL of
/// them). The same call twice gives the same bits; a NaN in a range makes
/// the sum NaN.
void testSumSquares(std::mt19937 &rng) {
  Check c("sum_squares");
  auto compare = [&](const std::vector<char> &arena, int32_t n,
                     const OtcrtRange *ranges, const char *what) {
    double want = 0, got = 0, again = 0;
    c.rc(otcrt::cpu::sumSquares(arena.data(), n, ranges, &want), "host");
    char *dArena = device(arena);
    c.rc(otcrt_sum_squares(dArena, n, ranges, &got, nullptr), "device");
    c.rc(otcrt_sum_squares(dArena, n, ranges, &again, nullptr), "device again");
    c.worst = std::max(c.worst, std::fabs(got - want) / want);
    if (!(std::fabs(got - want) <= 1e-9 * want) || got != again) {
      std::printf("  %s: sum %.17g (again %.17g), host %.17g\n", what, got,
                  again, want);
      c.ok = false;
    }
    return dArena;
  };
  std::vector<char> arena = rangesArena(rng);
  const OtcrtRange ranges[] = {kFloatRange,
                               kBf16Range,
                               {0, 0, 0, 0},
                               {kBf16Range.offset + 4, kRangeBf16s - 2, 1, 0},
                               {4, kRangeFloats - 3, 0, 0}};
  char *dArena = compare(arena, 5, ranges, "five ranges");
  float nan = NAN;
  cudaMemcpy(dArena + 8 * 4, &nan, 4, cudaMemcpyHostToDevice);
  double got = 0;
  c.rc(otcrt_sum_squares(dArena, 5, ranges, &got, nullptr), "device nan");
  if (!std::isnan(got)) {
    std::printf("  a NaN element gave the sum %g\n", got);
    c.ok = false;
  }
  constexpr int64_t kMany = 5000011;
  Floats many = random(kMany, rng, -3, 3);
  std::vector<char> big(kMany * 4);
  std::memcpy(big.data(), many.data(), kMany * 4);
  const OtcrtRange whole = {0, kMany, 0, 0};
  compare(big, 1, &whole, "5000011 floats");
}

/// otcrt_grad_factor on the device against the host kernel, with the norm
/// copied to page-locked memory: the factor without and with clipping, the
/// norm within 1e-9 relative of the host's (both sum in double), the factor
/// within float rounding; a NaN among the checks it is given, or an error
/// in the library's record, gives a NaN factor and the gradients' norm; an
/// infinite element gives an infinite norm and a NaN factor.
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
    c.rc(otcrt::cpu::gradFactor(arena.data(), 2, ranges, 0.5f, clip, nullptr, 0,
                                reinterpret_cast<float *>(&want), &wantNorm),
         "host");
    *pinned = -1;
    c.rc(otcrt_grad_factor(dArena, 2, ranges, 0.5f, clip, nullptr, 0,
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
  // The checks (a step's losses, 300 of them: more than one per thread of
  // the finishing block) and the error record veto the update: the factor
  // is NaN, the norm stays the gradients'.
  {
    float *factorAddr = reinterpret_cast<float *>(dArena + factorAt);
    std::vector<float> losses(300, 2.5f);
    float *dLosses = nullptr;
    c.rc(cudaMalloc(&dLosses, losses.size() * 4), "cudaMalloc");
    auto factorWith = [&](int32_t checks, float &got) {
      cudaMemcpy(dLosses, losses.data(), losses.size() * 4,
                 cudaMemcpyHostToDevice);
      *pinned = -1;
      c.rc(otcrt_grad_factor(dArena, 2, ranges, 1.0f, 0.0f, dLosses, checks,
                             factorAddr, pinned, nullptr),
           "device checks");
      c.rc(cudaDeviceSynchronize(), "synchronize");
      cudaMemcpy(&got, factorAddr, 4, cudaMemcpyDeviceToHost);
    };
    float good = 0, bad = 0, unread = 0, recorded = 0;
    factorWith(300, good);
    losses[299] = NAN;
    factorWith(300, bad);
    factorWith(299, unread);
    if (good != 1.0f || !std::isnan(bad) || unread != 1.0f ||
        !(*pinned > 0 && std::isfinite(*pinned))) {
      std::printf("  checks: factor %g (finite losses), %g (a NaN), %g (the "
                  "NaN not counted), norm %g\n",
                  good, bad, unread, *pinned);
      c.ok = false;
    }
    losses[299] = 2.5f;
    OtcrtKernelError e{};
    e.code = OTCRT_ERROR_LABEL;
    e.index = 17;
    c.rc(cudaMemcpy(otcrt_kernel_error_record(), &e, sizeof e,
                    cudaMemcpyHostToDevice),
         "record");
    factorWith(300, recorded);
    OtcrtKernelError read{};
    int code = otcrt_kernel_error(&read, nullptr);
    if (!std::isnan(recorded) || code != OTCRT_ERROR_LABEL ||
        read.index != 17 ||
        otcrt_kernel_error(&read, nullptr) != OTCRT_ERROR_NONE) {
      std::printf("  a recorded error gave the factor %g (record %d at %lld)\n",
                  recorded, code, static_cast<long long>(read.index));
      c.ok = false;
    }
    cudaFree(dLosses);
  }
  float inf = INFINITY, got = 0;
  cudaMemcpy(dArena + 8 * 4, &inf, 4, cudaMemcpyHostToDevice);
  c.rc(otcrt_grad_factor(dArena, 2, ranges, 1.0f, 1.0f, nullptr, 0,
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
  // A warp a row up to OTCRT_CUDA_NORM_WARP_MAX_COLS (2048) columns, with
  // a last block of fewer rows than warps; a block a row just above.
  testNorms(rng, 9, 2048);
  testNorms(rng, 3, 2056);
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
  testNormParamGrads(rng, 16, 768); // one chunk: the sums stored by stage 1
  testColumnSumInto(rng, 8192, 768);
  testColumnSumInto(rng, 8192, 3072);
  testColumnSumInto(rng, 16, 768);
  testColumnSumInto(rng, 33, 1001);
  testColumnSumInto(rng, 16, 1001); // one chunk, element by element
  testGatherGrads(rng);
  testExpertMatmuls(rng);
  testSumSquares(rng);
  testGradFactor(rng);
  testScaleRanges(rng);
  testAttentions(rng);
  testCrossEntropies(rng);
  testLinearCrossEntropies(rng);
  testRopes(rng);
  testGraphs(rng);
  testGemms(rng);
  testFp8Gemms(rng);
  testGemmSums(rng);
  for (void *p : allocations)
    cudaFree(p);
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
