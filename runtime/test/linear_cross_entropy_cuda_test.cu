// GPU check of the LM head and its loss in chunks of libotcrt_cuda
// (otcrt_linear_cross_entropy_*) against the host call of libotcrt_cpu:
// GPT-2's vocabulary and width over 3.5 chunks (the last one short), odd
// sizes, one-row chunks, every reduction, a BF16 dw; a repeated call's bits
// and allocations. Part of otcrt-cuda-kernel-tests (kernels_cuda_test.cu
// runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace cudatest {
namespace {

/// The LM head and its loss in chunks (otcrt_linear_cross_entropy_*) of T
/// data, every seventh row ignored, against the host's call: loss and
/// row_loss within 1e-4 (f32) or 1e-2 (bf16: a logit rounded differently
/// after the GEMMs' other summation order moves its row), dh and dw within
/// the same relative tolerance of their magnitudes. The chunk size leaves
/// the loss within 1e-5 in f32 (the GEMMs alone differ); in bf16 the mean
/// within 1e-3 and a row's within 1e-2 (a logit that a GEMM over other rows
/// sums in another order may round to the next bfloat16, 2^-8 of it).
/// Repeated, the call allocates nothing and gives the same bits. With
/// `accumulate` (dw_accumulate), dw starts as the same random values on
/// both sides and the calls add to them. With `withBias`, a random bias of
/// T is added to the logits (OTCRT_GEMM_BIAS) and dbias, the sum of the
/// logits' gradient over the rows (otcrt_gemm_sums beside dw), is compared
/// as dw is.
///
/// BF16 weights are drawn within +-4/sqrt(hidden), so that the logits
/// spread over a few units as a trained head's do (|z| < 8: a bfloat16
/// step there is at most 1/32, within the row tolerance). With weights
/// within +-1 and hidden 768 the largest logits pass 32, where a step is
/// 1/4 and a row's loss moves by more than 1e-2 of it between two correct
/// GEMMs.
template <typename T>
void testLinearCrossEntropy(int32_t reduction, const char *reductionName,
                            std::mt19937 &rng, int64_t rows, int64_t hidden,
                            int64_t classes, int64_t chunk,
                            int32_t dwType = OTC_F32, bool accumulate = false,
                            bool withBias = false,
                            int32_t layout = OTCRT_W_CLASSES_HIDDEN) {
  constexpr bool bf16 = !std::is_same_v<T, float>;
  Check c(std::string("linear_cross_entropy_") + (bf16 ? "bf16 " : "f32 ") +
          reductionName + shapeName(rows, classes, 0) + " hidden " +
          std::to_string(hidden) + " chunk " + std::to_string(chunk) +
          (dwType == OTC_BF16 ? " dw bf16" : "") +
          (accumulate ? " accumulating" : "") +
          (layout == OTCRT_W_HIDDEN_CLASSES ? " w [hidden, classes]" : "") +
          (withBias ? " with a bias" : ""));
  const double tol = bf16 ? 1e-2 : 1e-4;
  const float wMax = bf16 ? 4.0f / std::sqrt(float(hidden)) : 1.0f;
  const size_t nLoss = reduction == OTCRT_NONE ? rows : 1;
  const std::vector<T> h = stored<T>(random(rows * hidden, rng, -1, 1)),
                       w = stored<T>(random(classes * hidden, rng, -wMax, wMax));
  const std::vector<T> bias =
      withBias ? stored<T>(random(classes, rng, -1, 1)) : std::vector<T>();
  Floats dbias(classes);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 7 == 3 ? -100 : (r * 7919) % classes;
  Floats dloss = random(nLoss, rng, 0.5f, 2), loss(nLoss), rowLoss(rows),
         dh(rows * hidden), dw(classes * hidden);
  Bf16s dwBf16(classes * hidden);
  if (accumulate) {
    dwBf16 = toBf16(random(classes * hidden, rng));
    dw = toFloat(dwBf16);
  }
  const Floats dwStart = dw;
  const Bf16s dwStartBf16 = dwBf16;
  void *hostDw = dwType == OTC_BF16 ? static_cast<void *>(dwBf16.data())
                                    : static_cast<void *>(dw.data());
  std::vector<T> scratch(chunk * classes);
  c.rc(otcrt::cpu::linearCrossEntropy(
           rows, hidden, classes, chunk, dloss.data(), h.data(), w.data(),
           layout, labels.data(), 1, -100, reduction, dwType, accumulate,
           withBias ? bias.data() : nullptr, loss.data(), rowLoss.data(),
           dh.data(), hostDw, withBias ? dbias.data() : nullptr,
           scratch.data()),
       "host");

  const int64_t *dLabels = device(labels);
  const float *dDloss = device(dloss);
  const T *dH = device(h), *dW = device(w);
  const T *dBias = withBias ? device(bias) : nullptr;
  float *dDbias = withBias ? device(Floats(classes, NAN)) : nullptr;
  float *dLoss = device(Floats(nLoss)), *dRowLoss = device(Floats(rows, NAN)),
        *dDh = device(Floats(rows * hidden, NAN)),
        *dDwF32 = device(accumulate ? dwStart : Floats(classes * hidden, NAN));
  otcrt_bf16 *dDwBf16 = device(dwStartBf16);
  // What dw holds before each call: the start values when accumulating.
  auto resetDw = [&] {
    if (accumulate) {
      cudaMemcpy(dDwF32, dwStart.data(), dwStart.size() * sizeof(float),
                 cudaMemcpyHostToDevice);
      cudaMemcpy(dDwBf16, dwStartBf16.data(),
                 dwStartBf16.size() * sizeof(otcrt_bf16),
                 cudaMemcpyHostToDevice);
    }
  };
  void *dDw = dwType == OTC_BF16 ? static_cast<void *>(dDwBf16)
                                 : static_cast<void *>(dDwF32);
  auto gotDwFloats = [&] {
    return dwType == OTC_BF16 ? toFloat(host(dDwBf16, classes * hidden))
                              : host(dDwF32, classes * hidden);
  };
  auto call = [&](int64_t chunkRows, T *dChunk) {
    int (*fn)(int64_t, int64_t, int64_t, int64_t, const float *, const T *,
              const T *, int32_t, const int64_t *, int32_t, int64_t, int32_t,
              int32_t, int32_t, const T *, float *, float *, float *, void *,
              float *, T *, void *);
    if constexpr (bf16)
      fn = otcrt_linear_cross_entropy_bf16;
    else
      fn = otcrt_linear_cross_entropy_f32;
    return fn(rows, hidden, classes, chunkRows, dDloss, dH, dW, layout, dLabels,
              1, -100, reduction, dwType, accumulate, dBias, dLoss, dRowLoss,
              dDh, dDw, dDbias, dChunk, nullptr);
  };
  T *dChunk = device(std::vector<T>(chunk * classes));
  c.rc(call(chunk, dChunk), "device");
  const Floats gotLoss = host(dLoss, nLoss), gotDh = host(dDh, rows * hidden),
               gotDw = gotDwFloats();
  c.f32(gotLoss, loss, "loss", tol);
  c.f32(host(dRowLoss, rows), rowLoss, "row_loss", tol);
  c.f32(gotDh, dh, "dh", tol);
  if (dwType == OTC_BF16)
    c.bf16(host(dDwBf16, classes * hidden), dwBf16, "dw");
  else
    c.f32(gotDw, dw, "dw", tol);
  if (withBias)
    c.f32(host(dDbias, classes), dbias, "dbias", tol);

  resetDw();
  allocatesNothing(c.ok, [&] { c.rc(call(chunk, dChunk), "again"); });
  c.ok = sameBits(host(dDh, rows * hidden), gotDh, "dh again") && c.ok;
  c.ok = sameBits(gotDwFloats(), gotDw, "dw again") && c.ok;

  T *dWhole = device(std::vector<T>(rows * classes));
  c.rc(call(rows, dWhole), "one chunk");
  c.f32(host(dLoss, nLoss), gotLoss, "loss, one chunk",
        !bf16 ? 1e-5 : reduction == OTCRT_NONE ? tol : 1e-3);
}

} // namespace

void testLinearCrossEntropies(std::mt19937 &rng) {
  // GPT-2's vocabulary and width over 3.5 chunks (the last one short), odd
  // sizes, one row a chunk, a BF16 dw.
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 448, 768, 50257,
                                     128);
  testLinearCrossEntropy<float>(OTCRT_MEAN, "mean", rng, 100, 64, 1001, 32);
  testLinearCrossEntropy<float>(OTCRT_SUM, "sum", rng, 37, 48, 500, 16);
  testLinearCrossEntropy<float>(OTCRT_NONE, "none", rng, 37, 48, 500, 1);
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_NONE, "none", rng, 64, 128, 4096,
                                     24);
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 300, 256, 5000,
                                     64, OTC_BF16);
  // Adding into a tied weight's accumulator, f32 and bf16.
  testLinearCrossEntropy<float>(OTCRT_MEAN, "mean", rng, 100, 64, 1001, 32,
                                OTC_F32, true);
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 300, 256, 5000,
                                     64, OTC_BF16, true);
  // A bias and its gradient (BERT's decoder, BART's final_logits_bias):
  // BART's vocabulary over chunks, the last short; f32 with a sum.
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 300, 256, 50265,
                                     128, OTC_F32, false, true);
  testLinearCrossEntropy<float>(OTCRT_SUM, "sum", rng, 37, 48, 500, 16, OTC_F32,
                                true, true);
  // The head's weight stored [hidden, classes] (an export's transposed
  // copy): BF16 with a bias over chunks, F32 accumulating.
  testLinearCrossEntropy<otcrt_bf16>(OTCRT_MEAN, "mean", rng, 300, 256, 5000,
                                     64, OTC_F32, false, true,
                                     OTCRT_W_HIDDEN_CLASSES);
  testLinearCrossEntropy<float>(OTCRT_MEAN, "mean", rng, 100, 64, 1001, 32,
                                OTC_F32, true, false, OTCRT_W_HIDDEN_CLASSES);
}

} // namespace cudatest
