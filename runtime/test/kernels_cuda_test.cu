// GPU check of the device kernels of libotcrt_cuda (otcrt/kernels.h): every
// kernel runs on random inputs (a fresh seed per run, printed; or argv[1]),
// at several shapes, on the GPU and on the host (the host kernels
// of libotcrt_cpu, compiled in under their C++ names), and the results must
// agree within float tolerance (bfloat16 results within a couple of
// bfloat16 units). The two-stage column reductions (column sums, the norms'
// parameter gradients) and the gather gradient (on skewed token ids, the
// GPT-2 shapes among others) must also repeat bit for bit and give bf16
// results that are exactly their f32 results rounded. The bfloat16 attention
// also runs both of its device
// implementations, cuDNN's SDPA through the entry points and the fallback
// kernels directly, against the host at several shapes, again when captured
// in a CUDA graph, and checks that a repeated call allocates nothing. Also
// checks that a bad label reaches the library's error record without the
// call waiting for the device, and that library calls captured in a CUDA
// graph replay to the same bits as eager calls; and otcrt_gemm against the
// host GEMM, cuBLASLt's epilogues and the runtime's fallback for them
// (gemm_cuda_test.cu). Prints PASS or FAIL per
// check and exits non-zero on any failure; exits 77 when no GPU is present.
// Run by the GPU tests (test/gpu/run.sh, ctest label gpu).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda/attention.h"
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
#include <vector>

using namespace cudatest;

namespace {

/// " RxC", the shape part of a check's name, and " skewed" for rows off
/// 16-byte alignment (device's skew).
std::string shapeName(int64_t rows, int64_t cols, size_t skew = 0) {
  return " " + std::to_string(rows) + "x" + std::to_string(cols) +
         (skew ? " skewed" : "");
}

/// Whether got and want hold the same bits (the first difference printed).
bool sameBits(const Floats &got, const Floats &want, const char *what) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      std::printf("  %s[%zu]: %.9g, before %.9g\n", what, i, got[i], want[i]);
      return false;
    }
  return got.size() == want.size();
}

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

/// The gather gradient (an embedding's gradient) of f32 and bf16 storage
/// against the host kernel, which adds each row's positions in position
/// order: the device adds them in pieces of sorted positions, so a row
/// agrees within float rounding of that many additions (2^-23 x positions
/// of the row x the sum of their magnitudes), exactly when all positions
/// fall in one piece (at most 32 positions); a repeated call gives the same
/// bits and allocates nothing; the bf16 device result is exactly the f32
/// device result rounded (same order for both storages) where one sort
/// takes every position (beyond, later batches add to bf16 results, within
/// bf16 tolerance); grad and out lie `skew` elements past alignment.
/// Positions one sort of the gather gradient surely takes (its scratch,
/// OTCRT_CUDA_SORT_SCRATCH_BYTES, holds about 16 bytes a position).
constexpr int64_t kOneSort = 100000;

void testGatherGrad(std::mt19937 &rng, const std::string &name, int64_t outer,
                    int64_t axisLen, int64_t inner,
                    const std::vector<int64_t> &indices, size_t skew = 0) {
  const int64_t P = static_cast<int64_t>(indices.size());
  const size_t n = outer * axisLen * inner;
  Check c("gather_grad " + name + " " + std::to_string(outer) + "x" +
          std::to_string(axisLen) + "x" + std::to_string(inner) + " from " +
          std::to_string(P) + (skew ? " skewed" : ""));
  Floats g = random(outer * P * inner, rng), want(n);
  otcrt::cpu::gatherGrad(outer, axisLen, inner, P, g.data(), indices.data(),
                         want.data());
  // Per result element: positions added and the sum of their magnitudes.
  std::vector<double> bound(n, 0.0);
  std::vector<int64_t> count(axisLen, 0);
  for (int64_t p = 0; p < P; ++p) {
    int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
    if (a >= 0 && a < axisLen)
      ++count[a];
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < P; ++p) {
      int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
      if (a < 0 || a >= axisLen)
        continue;
      for (int64_t e = 0; e < inner; ++e)
        bound[(o * axisLen + a) * inner + e] +=
            std::fabs(g[(o * P + p) * inner + e]);
    }
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    bound[i] *=
        std::ldexp(static_cast<double>(count[(i / inner) % axisLen]), -23);
  const int64_t *dIdx = device(indices);
  const float *dG = device(g, skew);
  float *dOut = device(Floats(n, NAN), skew);
  c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, P, dG, dIdx, dOut, nullptr),
       "f32");
  Floats got = host(dOut, n);
  for (size_t i = 0; i < n && c.ok; ++i) {
    double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    c.worst = std::max(c.worst, err);
    if (!(err <= bound[i]) || (P <= 32 && err != 0)) {
      std::printf("  [%zu]: gpu %.9g cpu %.9g (bound %.3g)\n", i, got[i],
                  want[i], bound[i]);
      c.ok = false;
    }
  }
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeBefore, &total);
  c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, P, dG, dIdx, dOut, nullptr),
       "f32 again");
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeAfter, &total);
  if (freeAfter != freeBefore) {
    std::printf("  a repeated call changed free device memory by %lld bytes\n",
                static_cast<long long>(freeBefore) -
                    static_cast<long long>(freeAfter));
    c.ok = false;
  }
  c.ok = sameBits(host(dOut, n), got, "f32 again") && c.ok;
  Bf16s gb = toBf16(g);
  otcrt_bf16 *dOutB = device(Bf16s(n, 0x7fc0), skew);
  c.rc(otcrt_gather_grad_bf16(outer, axisLen, inner, P, device(gb, skew), dIdx,
                              dOutB, nullptr),
       "bf16");
  if (P <= kOneSort)
    c.ok = sameBits(toFloat(host(dOutB, n)), toFloat(toBf16(got)),
                    "bf16 vs rounded f32") &&
           c.ok;
  else
    c.bf16(host(dOutB, n), toBf16(got), "bf16 vs rounded f32");
}

/// `n` token ids of a `vocab` table drawn as text draws them: Zipf (rank r
/// with weight 1 / (r + 1)) over a shuffled vocabulary, so the frequent
/// rows lie anywhere in the table.
std::vector<int64_t> zipfTokens(int64_t n, int64_t vocab, std::mt19937 &rng) {
  std::vector<double> weights(vocab);
  for (int64_t r = 0; r < vocab; ++r)
    weights[r] = 1.0 / static_cast<double>(r + 1);
  std::vector<int64_t> ids(vocab);
  for (int64_t r = 0; r < vocab; ++r)
    ids[r] = r;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::discrete_distribution<int64_t> zipf(weights.begin(), weights.end());
  std::vector<int64_t> out(n);
  for (int64_t &v : out)
    v = ids[zipf(rng)];
  return out;
}

void testGatherGrads(std::mt19937 &rng) {
  // GPT-2 124M's token embedding: 8192 tokens of real-text skew.
  testGatherGrad(rng, "zipf", 1, 50257, 768, zipfTokens(8192, 50257, rng));
  // One token at every position: one run over all 256 pieces.
  testGatherGrad(rng, "one token", 1, 50257, 768,
                 std::vector<int64_t>(8192, 50256));
  // 70% on one token, negative ids (from the end) and ids outside the axis
  // (which add nothing); odd row lengths (element by element) and rows off
  // 16-byte alignment.
  std::vector<int64_t> mixed = zipfTokens(5000, 1000, rng);
  std::uniform_real_distribution<double> coin(0, 1);
  for (size_t i = 0; i < mixed.size(); ++i) {
    double u = coin(rng);
    if (u < 0.7)
      mixed[i] = 17;
    else if (u < 0.8)
      mixed[i] -= 1000;
    else if (u < 0.82)
      mixed[i] = 1000 + static_cast<int64_t>(i);
  }
  testGatherGrad(rng, "skewed mixed", 1, 1000, 64, mixed);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 63, mixed);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 64, mixed, 1);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 8, mixed);
  // A gather along a middle axis (outer > 1).
  testGatherGrad(rng, "middle axis", 4, 6, 33, zipfTokens(700, 6, rng));
  // At most one piece: the host's bits exactly.
  testGatherGrad(rng, "one piece", 1, 11, 8,
                 {3, 1, 3, -1, 0, 3, 10, -11, 11, -12, 100, -1});
  testGatherGrad(rng, "no positions", 1, 11, 8, {});
  // More positions than one sort holds: sorted and added in batches.
  testGatherGrad(rng, "batches", 1, 1000, 4, zipfTokens(600000, 1000, rng));
}

/// One attention problem on both sides, f32 then bf16.
void testAttention(const char *name, OtcrtAttention a, const int64_t *maskDims,
                   std::mt19937 &rng) {
  const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  const size_t rows = a.b * a.h * a.t;
  Floats q = random(qn, rng), k = random(kvn, rng), v = random(kvn, rng),
         dO = random(qn, rng), mask;
  if (maskDims) {
    mask = random(maskDims[0] * maskDims[1] * maskDims[2] * maskDims[3], rng);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      a.mask_strides[i] = maskDims[i] == 1 ? 0 : stride;
      stride *= maskDims[i];
    }
    mask[1] = -INFINITY;
  }
  // The device kernels read the key from device memory.
  OtcrtAttention ad = a;
  ad.key = device(std::vector<int64_t>{*a.key});
  const float *mh = maskDims ? mask.data() : nullptr;
  const float *md = maskDims ? device(mask) : nullptr;
  Floats out(qn), lse(rows), dq(qn), dk(kvn), dv(kvn);
  {
    Check c(std::string("attention_f32 ") + name);
    otcrt::cpu::attentionFwd(a, q.data(), k.data(), v.data(), mh, out.data(),
                             lse.data());
    otcrt::cpu::attentionBwd(a, dO.data(), q.data(), k.data(), v.data(), mh,
                             out.data(), lse.data(), dq.data(), dk.data(),
                             dv.data());
    float *dOut = device(out), *dLse = device(lse), *dQ = device(dq),
          *dK = device(dk), *dV = device(dv);
    c.rc(otcrt_attention_fwd_f32(&ad, device(q), device(k), device(v), md, dOut,
                                 dLse, nullptr),
         "fwd");
    c.f32(host(dOut, qn), out, "out");
    c.f32(host(dLse, rows), lse, "lse");
    // The backward reads the host's forward results, so it is compared alone.
    c.rc(otcrt_attention_bwd_f32(&ad, device(dO), device(q), device(k),
                                 device(v), md, device(out), device(lse), dQ,
                                 dK, dV, nullptr),
         "bwd");
    c.f32(host(dQ, qn), dq, "dq", 2e-4);
    c.f32(host(dK, kvn), dk, "dk", 2e-4);
    c.f32(host(dV, kvn), dv, "dv", 2e-4);
  }
  {
    Check c(std::string("attention_bf16 ") + name);
    Bf16s qb = toBf16(q), kb = toBf16(k), vb = toBf16(v), dOb = toBf16(dO),
          mb = toBf16(mask), outb(qn), dqb(qn), dkb(kvn), dvb(kvn);
    const otcrt_bf16 *mbd = maskDims ? device(mb) : nullptr;
    otcrt::cpu::attentionFwd(a, qb.data(), kb.data(), vb.data(),
                             maskDims ? mb.data() : nullptr, outb.data(),
                             lse.data());
    otcrt::cpu::attentionBwd(a, dOb.data(), qb.data(), kb.data(), vb.data(),
                             maskDims ? mb.data() : nullptr, outb.data(),
                             lse.data(), dqb.data(), dkb.data(), dvb.data());
    otcrt_bf16 *dOut = device(outb), *dQ = device(dqb), *dK = device(dkb),
               *dV = device(dvb);
    float *dLse = device(lse);
    c.rc(otcrt_attention_fwd_bf16(&ad, device(qb), device(kb), device(vb), mbd,
                                  dOut, dLse, nullptr),
         "fwd");
    c.bf16(host(dOut, qn), outb, "out");
    c.rc(otcrt_attention_bwd_bf16(&ad, device(dOb), device(qb), device(kb),
                                  device(vb), mbd, device(outb), device(lse),
                                  dQ, dK, dV, nullptr),
         "bwd");
    c.bf16(host(dQ, qn), dqb, "dq");
    c.bf16(host(dK, kvn), dkb, "dk");
    c.bf16(host(dV, kvn), dvb, "dv");
  }
}

OtcrtAttention attention(int64_t b, int64_t h, int64_t hk, int64_t t, int64_t s,
                         int64_t d, bool causal, float dropout) {
  OtcrtAttention a{};
  a.b = b, a.h = h, a.hk = hk, a.t = t, a.s = s, a.d = d;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.causal = causal;
  a.dropout = dropout;
  static const int64_t key = 42;
  a.key = &key; // host memory: the host kernels' struct
  a.dropout_stream = 3;
  return a;
}

/// One bfloat16 attention problem for testAttentionPaths: the sizes, the
/// mask's dimensions (NULL: none) and whether the entry points must run it
/// on cuDNN when the runtime has it.
struct AttentionCase {
  const char *name;
  OtcrtAttention a;
  const int64_t *maskDims;
  bool cudnnExpected;
};

using AttnFwd = int (*)(const OtcrtAttention *, const otcrt_bf16 *,
                        const otcrt_bf16 *, const otcrt_bf16 *,
                        const otcrt_bf16 *, otcrt_bf16 *, float *, void *);
using AttnBwd = int (*)(const OtcrtAttention *, const otcrt_bf16 *,
                        const otcrt_bf16 *, const otcrt_bf16 *,
                        const otcrt_bf16 *, const otcrt_bf16 *,
                        const otcrt_bf16 *, const float *, otcrt_bf16 *,
                        otcrt_bf16 *, otcrt_bf16 *, void *);

/// Compares bfloat16 results of a fused attention (whose probabilities are
/// rounded to bfloat16 inside): 2e-2 relative, plus 1e-2 of the tensor's
/// largest magnitude (at least 1e-3) absolute.
bool nearAttention(const Bf16s &got, const Bf16s &want, const char *what,
                   double &worst) {
  Floats g = toFloat(got), w = toFloat(want);
  double scale = 0;
  for (float x : w)
    if (std::isfinite(x))
      scale = std::max(scale, std::fabs(static_cast<double>(x)));
  return near(g, w, 2e-2, std::max(1e-3, 1e-2 * scale), what, worst);
}

/// The bfloat16 attention of `tc` through one device implementation (the
/// entry points when `dispatched`, else the fallback kernels), against the
/// host: forward, backward (fed the host's forward results), a repeated call
/// that must allocate nothing, and the forward and backward replayed from a
/// CUDA graph.
void testAttentionPath(const AttentionCase &tc, bool dispatched, AttnFwd fwd,
                       AttnBwd bwd, std::mt19937 &rng) {
  OtcrtAttention a = tc.a;
  const size_t qn = a.b * a.h * a.t * a.d, kvn = a.b * a.hk * a.s * a.d;
  const size_t rows = a.b * a.h * a.t;
  Floats mask;
  if (tc.maskDims) {
    const int64_t *m = tc.maskDims;
    mask = random(m[0] * m[1] * m[2] * m[3], rng);
    int64_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      a.mask_strides[i] = m[i] == 1 ? 0 : stride;
      stride *= m[i];
    }
  }
  Bf16s q = toBf16(random(qn, rng)), k = toBf16(random(kvn, rng)),
        v = toBf16(random(kvn, rng)), dO = toBf16(random(qn, rng)),
        mb = toBf16(mask), out(qn), dq(qn), dk(kvn), dv(kvn);
  Floats lse(rows);
  const otcrt_bf16 *mh = tc.maskDims ? mb.data() : nullptr;
  otcrt::cpu::attentionFwd(a, q.data(), k.data(), v.data(), mh, out.data(),
                           lse.data());
  otcrt::cpu::attentionBwd(a, dO.data(), q.data(), k.data(), v.data(), mh,
                           out.data(), lse.data(), dq.data(), dk.data(),
                           dv.data());

  OtcrtAttention ad = a;
  ad.key = device(std::vector<int64_t>{*a.key});
  const otcrt_bf16 *dQ = device(q), *dK = device(k), *dV = device(v),
                   *dDO = device(dO),
                   *dMask = tc.maskDims ? device(mb) : nullptr,
                   *dHostOut = device(out);
  const float *dHostLse = device(lse);
  otcrt_bf16 *gOut = device(Bf16s(qn)), *gDq = device(Bf16s(qn)),
             *gDk = device(Bf16s(kvn)), *gDv = device(Bf16s(kvn));
  float *gLse = device(Floats(rows));

  Check c(std::string("attention_bf16 ") + tc.name);
  auto compare = [&](const char *when) {
    std::string w(when);
    c.ok = nearAttention(host(gOut, qn), out, (w + "out").c_str(), c.worst) &&
           c.ok;
    c.ok = near(host(gLse, rows), lse, 2e-3, 2e-4, w + "lse", c.worst) && c.ok;
    c.ok =
        nearAttention(host(gDq, qn), dq, (w + "dq").c_str(), c.worst) && c.ok;
    c.ok =
        nearAttention(host(gDk, kvn), dk, (w + "dk").c_str(), c.worst) && c.ok;
    c.ok =
        nearAttention(host(gDv, kvn), dv, (w + "dv").c_str(), c.worst) && c.ok;
  };
  auto call = [&](cudaStream_t stream) {
    c.rc(fwd(&ad, dQ, dK, dV, dMask, gOut, gLse, stream), "fwd");
    const char *fwdWhy = otcrt::cuda::lastAttentionFallbackReason();
    c.rc(bwd(&ad, dDO, dQ, dK, dV, dMask, dHostOut, dHostLse, gDq, gDk, gDv,
             stream),
         "bwd");
    const char *bwdWhy = otcrt::cuda::lastAttentionFallbackReason();
    return std::make_pair(fwdWhy, bwdWhy);
  };

  auto [fwdWhy, bwdWhy] = call(nullptr);
  compare("");
  if (!dispatched) {
    c.name += " [fallback kernels]";
  } else {
    auto label = [](const char *why) {
      return why ? std::string("fallback (") + why + ")" : std::string("cuDNN");
    };
    c.name +=
        " [entry points: fwd " + label(fwdWhy) + ", bwd " + label(bwdWhy) + "]";
    const char *forced = std::getenv("OTCRT_ATTENTION");
    bool required = tc.cudnnExpected && otcrt::cuda::cudnnAttentionBuilt() &&
                    !(forced && std::strcmp(forced, "fallback") == 0);
    if (required && (fwdWhy || bwdWhy)) {
      std::printf("  cuDNN expected but not used\n");
      c.ok = false;
    }
    if (a.dropout > 0 && (!fwdWhy || !bwdWhy)) {
      std::printf("  dropout must run on the fallback kernels\n");
      c.ok = false;
    }
  }

  // A repeated call of the same shape allocates no device memory.
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeBefore, &total);
  call(nullptr);
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeAfter, &total);
  if (freeAfter != freeBefore) {
    std::printf("  a repeated call changed free device memory by %lld bytes\n",
                static_cast<long long>(freeBefore) -
                    static_cast<long long>(freeAfter));
    c.ok = false;
  }

  // Forward and backward captured in a CUDA graph, outputs cleared, replayed.
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool captured = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
                      cudaSuccess &&
                  cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) ==
                      cudaSuccess;
  if (captured) {
    call(stream);
    captured = cudaStreamEndCapture(stream, &graph) == cudaSuccess &&
               cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (!captured) {
    std::printf("  capture in a CUDA graph failed: %s\n",
                cudaGetErrorString(cudaGetLastError()));
    c.ok = false;
  } else {
    cudaMemset(gOut, 0, qn * sizeof(otcrt_bf16));
    cudaMemset(gLse, 0, rows * sizeof(float));
    cudaMemset(gDq, 0, qn * sizeof(otcrt_bf16));
    cudaMemset(gDk, 0, kvn * sizeof(otcrt_bf16));
    cudaMemset(gDv, 0, kvn * sizeof(otcrt_bf16));
    cudaDeviceSynchronize();
    c.rc(cudaGraphLaunch(exec, stream) == cudaSuccess ? 0 : 1, "graph launch");
    cudaStreamSynchronize(stream);
    compare("graph replay: ");
  }
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  if (stream)
    cudaStreamDestroy(stream);
}

/// The bfloat16 attention through cuDNN (via the entry points) and through
/// the fallback kernels, each against the host.
void testAttentionPaths(const AttentionCase &tc, std::mt19937 &rng) {
  AttnFwd fallbackFwd = otcrt::cuda::attentionFwdFallback;
  AttnBwd fallbackBwd = otcrt::cuda::attentionBwdFallback;
  testAttentionPath(tc, true, otcrt_attention_fwd_bf16,
                    otcrt_attention_bwd_bf16, rng);
  testAttentionPath(tc, false, fallbackFwd, fallbackBwd, rng);
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
/// otcrt_kernel_error then names the row and value once, and clears.
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
        *dLse = device(Floats(rows)), *dG = device(Floats(rows * classes));
  int64_t *dLabels = device(labels);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  OtcrtKernelError e{};
  otcrt_kernel_error(&e, stream); // allocates and clears the record
  spin(stream, 200);
  c.rc(otcrt_cross_entropy_fwd_f32(rows, classes, dL, dLabels, 1, -100,
                                   OTCRT_MEAN, dLoss, dLse, stream),
       "fwd");
  c.rc(otcrt_cross_entropy_bwd_f32(rows, classes, dLoss, dL, dLabels, dLse, 1,
                                   -100, OTCRT_MEAN, dG, stream),
       "bwd");
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
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (err == cudaSuccess) {
    c.rc(calls(stream), "captured");
    err = cudaStreamEndCapture(stream, &graph);
  }
  if (err == cudaSuccess)
    err = cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; err == cudaSuccess && i < 2; ++i)
    err = cudaGraphLaunch(exec, stream);
  if (err == cudaSuccess)
    err = cudaStreamSynchronize(stream);
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
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
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

/// The sum of squares over arena ranges (the driver's gradient norm)
/// against the host kernel: an f32 range, a bf16 one and an empty one, in
/// one call, within 1e-9 relative (both accumulate in double); the same call
/// twice gives the same bits; a NaN in a range makes the sum NaN.
void testSumSquares(std::mt19937 &rng) {
  Check c("sum_squares");
  const int64_t nF = 1000003, nB = 4099;
  Floats f = random(nF, rng, -3, 3);
  Bf16s b = toBf16(random(nB, rng, -3, 3));
  std::vector<char> arena(nF * 4 + 64 + nB * 2);
  std::memcpy(arena.data(), f.data(), nF * 4);
  std::memcpy(arena.data() + nF * 4 + 64, b.data(), nB * 2);
  const OtcrtRange ranges[] = {{0, nF, 0, 0}, {nF * 4 + 64, nB, 1, 0}, {0, 0, 0, 0}};
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

/// otcrt_scale_ranges on the device against the host kernel: a float range
/// and a bfloat16 range, bit for bit (one product and one rounding each).
void testScaleRanges(std::mt19937 &rng) {
  Check c("scale_ranges");
  const int64_t nF = 1000003, nB = 4099;
  Floats f = random(nF, rng, -3, 3);
  Bf16s b = toBf16(random(nB, rng, -3, 3));
  std::vector<char> arena(nF * 4 + 64 + nB * 2);
  std::memcpy(arena.data(), f.data(), nF * 4);
  std::memcpy(arena.data() + nF * 4 + 64, b.data(), nB * 2);
  const OtcrtRange ranges[] = {{0, nF, 0, 0}, {nF * 4 + 64, nB, 1, 0}};
  char *dArena = device(arena);
  c.rc(otcrt::cpu::scaleRanges(arena.data(), 2, ranges, 0.37f), "host");
  c.rc(otcrt_scale_ranges(dArena, 2, ranges, 0.37f, nullptr), "device");
  std::vector<char> got(arena.size());
  cudaMemcpy(got.data(), dArena, got.size(), cudaMemcpyDeviceToHost);
  if (std::memcmp(got.data(), arena.data(), nF * 4) != 0 ||
      std::memcmp(got.data() + nF * 4 + 64, arena.data() + nF * 4 + 64,
                  nB * 2) != 0) {
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
  testScaleRanges(rng);
  const int64_t keyPadding[4] = {2, 1, 1, 70};
  const int64_t full[4] = {1, 4, 33, 50};
  testAttention("causal gqa", attention(2, 4, 2, 70, 70, 64, true, 0), nullptr,
                rng);
  testAttention("causal mask dropout",
                attention(2, 4, 1, 70, 70, 32, true, 0.1f), keyPadding, rng);
  testAttention("full mask", attention(1, 4, 4, 33, 50, 40, false, 0), full,
                rng);
  // Both device implementations of the bfloat16 attention; cuDNN must run
  // the causal and plain cases with t == s (mask layouts, t != s and head
  // sizes it may decline are reported, not required).
  const int64_t fullMask64[4] = {1, 4, 64, 64};
  const int64_t padding128[4] = {2, 1, 1, 128};
  // Stored [B, T, H, D] (OTCRT_LAYOUT_BTHD): cuDNN reads it through
  // strides, the fallback through transposed copies.
  auto bthd = [](OtcrtAttention a) {
    a.layout = OTCRT_LAYOUT_BTHD;
    return a;
  };
  auto windowed = [](OtcrtAttention a, int32_t w) {
    a.window = w;
    return a;
  };
  const AttentionCase cases[] = {
      {"t=s=1024 causal d=64", attention(2, 4, 4, 1024, 1024, 64, true, 0),
       nullptr, true},
      {"t=s=1024 causal d=64 bthd",
       bthd(attention(2, 12, 12, 1024, 1024, 64, true, 0)), nullptr, true},
      {"t=s=37 causal gqa h=4 hk=2 d=64 bthd",
       bthd(attention(2, 4, 2, 37, 37, 64, true, 0)), nullptr, true},
      {"t=s=1024 causal gqa h=8 hk=2 d=128",
       attention(1, 8, 2, 1024, 1024, 128, true, 0), nullptr, true},
      {"t=s=1024 d=64 hk=1", attention(1, 4, 1, 1024, 1024, 64, false, 0),
       nullptr, true},
      {"t=s=37 causal gqa d=64", attention(3, 4, 2, 37, 37, 64, true, 0),
       nullptr, true},
      {"t=s=16 d=128", attention(2, 2, 2, 16, 16, 128, false, 0), nullptr,
       true},
      {"t=17 s=40 d=128", attention(2, 2, 2, 17, 40, 128, false, 0), nullptr,
       false},
      {"t=40 s=24 causal d=64", attention(1, 2, 1, 40, 24, 64, true, 0),
       nullptr, false},
      {"t=s=64 full mask d=64", attention(1, 4, 2, 64, 64, 64, false, 0),
       fullMask64, false},
      {"t=s=128 causal key padding d=64",
       attention(2, 4, 4, 128, 128, 64, true, 0), padding128, false},
      {"t=s=64 causal dropout d=64", attention(1, 2, 2, 64, 64, 64, true, 0.1f),
       nullptr, false},
      {"t=s=33 d=40", attention(1, 2, 2, 33, 33, 40, false, 0), nullptr, false},
      // A causal sliding window: cuDNN's diagonal band with a left bound.
      {"t=s=1024 causal window 256 gqa d=64",
       windowed(attention(1, 8, 2, 1024, 1024, 64, true, 0), 256), nullptr,
       true},
      {"t=s=37 causal window 8 d=64 bthd",
       bthd(windowed(attention(2, 4, 2, 37, 37, 64, true, 0), 8)), nullptr,
       true},
  };
  for (const AttentionCase &tc : cases)
    testAttentionPaths(tc, rng);
  testAttention("causal odd length", attention(1, 2, 2, 129, 129, 64, true, 0),
                nullptr, rng);
  // The forward's dynamic shared memory, (d + s) floats, exactly 48 KiB:
  // with the kernel's static scratch over the default limit, so it must opt
  // in (it failed to launch when only dynamic sizes over 48 KiB did).
  testAttention("shared memory at 48 KiB", attention(1, 1, 1, 2, 12224, 64, false, 0),
                nullptr, rng);
  testAttention("causal window 5 key padding",
                windowed(attention(2, 4, 2, 70, 70, 32, true, 0), 5), keyPadding,
                rng);
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
  testBadLabel(rng);
  testGraphs(rng);
  testGemms(rng);
  for (void *p : allocations)
    cudaFree(p);
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
