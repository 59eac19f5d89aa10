// GPU check of the cross-entropy kernels of libotcrt_cuda against the host
// kernels of libotcrt_cpu: forward and backward (in place for f32) and the
// fused call (its gradient the device's forward then backward bit for bit),
// f32 and bf16, every reduction, at GPT-2's vocabulary and odd sizes; and a
// bad label reaching the library's error record without the call waiting
// for the device (the LM head's chunked call too). Part of
// otcrt-cuda-kernel-tests (kernels_cuda_test.cu runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace cudatest {
namespace {

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
    return otcrt_linear_cross_entropy_f32(
        rows, hidden, classes, 2, dDloss, dH, dW, OTCRT_W_CLASSES_HIDDEN, l, 1,
        -100, OTCRT_MEAN, OTC_F32, 0, nullptr, dLoss, dRowLoss, dDh, dDw,
        nullptr, dChunk, stream);
  };
  c.rc(linear(dGood), "linear, good labels");
  cudaStreamSynchronize(stream);
  spin(stream, 200);
  c.rc(linear(dLabels), "linear");
  expectRecorded();
  cudaStreamDestroy(stream);
}

} // namespace

void testCrossEntropies(std::mt19937 &rng) {
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
  testCrossEntropyFused<otcrt_bf16>(OTCRT_NONE, "none", rng, 16, 70000, 1);
  testCrossEntropyFused<float>(OTCRT_SUM, "sum", rng, 5, 4);
  testBadLabel(rng);
}

} // namespace cudatest
