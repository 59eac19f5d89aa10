// Host softmax cross-entropy of libotcrt_cpu (otc.cross_entropy and its
// gradient) for float and bfloat16 logits. The labels are checked first (a
// label outside [0, classes) that is not ignored fails the call before
// anything is written); rows then run in parallel: the row maximum, the sum
// of exponentials in double, the log-sum-exp and the row's loss. The mean
// and sum add the per-row losses in row order, in double, so the loss does
// not depend on the thread count. The gradient reads each logit before it
// writes the same element, so dlogits may be the logits' buffer. The fused
// loss and gradient is the forward (per-row losses and lse, every logit
// read) then the backward: the same numbers as the two calls. The linear
// form computes the head's logits a chunk of rows at a time into a scratch
// buffer (cpu::gemm), the fused loss and gradient over them with the whole
// call's scale, and the chunk's products of the head's backward.
#include "common.h"
#include "kernels_cpu.h"
#include "src/linear_cross_entropy_gemms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace otcrt {
namespace cpu {
namespace {

/// Whether row r counts (its label is not the ignored one).
inline bool counted(const int64_t *labels, int64_t r, int32_t hasIgnore,
                    int64_t ignoreIndex) {
  return !(hasIgnore && labels[r] == ignoreIndex);
}

/// Checks the labels; returns the number of counted rows, or -1 when a
/// counted row's label is outside [0, classes), which the error record
/// then holds (its row, value and the classes) for the driver's message.
int64_t checkLabels(int64_t rows, int64_t classes, const int64_t *labels,
                    int32_t hasIgnore, int64_t ignoreIndex) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!counted(labels, r, hasIgnore, ignoreIndex))
      continue;
    if (labels[r] < 0 || labels[r] >= classes) {
      recordError(OTCRT_ERROR_LABEL, r, labels[r], classes);
      return -1;
    }
    ++n;
  }
  return n;
}

/// Whether `reduction` is one of OtcrtReduction.
inline bool validReduction(int32_t reduction) {
  return reduction == OTCRT_MEAN || reduction == OTCRT_SUM ||
         reduction == OTCRT_NONE;
}

/// loss[0]: the sum of the per-row losses in row order, in double, or
/// their mean over the n counted rows (NaN when there are none).
void reduceLoss(const float *perRow, int64_t rows, int64_t n, int32_t reduction,
                float *loss) {
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    sum += perRow[r];
  if (reduction == OTCRT_SUM)
    loss[0] = static_cast<float>(sum);
  else
    loss[0] = n == 0 ? std::numeric_limits<float>::quiet_NaN()
                     : static_cast<float>(sum / static_cast<double>(n));
}

/// The gradient scale every row shares: a sum's dloss, a mean's dloss over
/// the n counted rows (0 when none count); 0 for none (rows take their own).
float sharedScale(int32_t reduction, const float *dloss, int64_t n) {
  if (reduction == OTCRT_SUM)
    return dloss[0];
  if (reduction == OTCRT_MEAN && n > 0)
    return dloss[0] / static_cast<float>(n);
  return 0.0f;
}

template <typename T>
int forward(int64_t rows, int64_t classes, const T *logits,
            const int64_t *labels, int32_t hasIgnore, int64_t ignoreIndex,
            int32_t reduction, float *loss, float *lse) {
  if (!validReduction(reduction) || classes <= 0)
    return 1;
  rows = std::max<int64_t>(rows, 0);
  int64_t n = checkLabels(rows, classes, labels, hasIgnore, ignoreIndex);
  if (n < 0)
    return 2;
  std::vector<float> perRow(reduction == OTCRT_NONE ? 0 : rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = logits + r * classes;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      max = std::max(max, load(row[c]));
    // Summed in double, in the vector lanes' order (fixed by the build).
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < classes; ++c)
      sum += expFast(load(row[c]) - max);
    float rowLse = max + static_cast<float>(std::log(sum));
    if (lse)
      lse[r] = rowLse;
    float rowLoss = counted(labels, r, hasIgnore, ignoreIndex)
                        ? rowLse - load(row[labels[r]])
                        : 0.0f;
    if (reduction == OTCRT_NONE)
      loss[r] = rowLoss;
    else
      perRow[r] = rowLoss;
  }
  if (reduction != OTCRT_NONE)
    reduceLoss(perRow.data(), rows, n, reduction, loss);
  return 0;
}

template <typename T>
int backward(int64_t rows, int64_t classes, const float *dloss, const T *logits,
             const int64_t *labels, const float *lse, int32_t hasIgnore,
             int64_t ignoreIndex, int32_t reduction, T *dlogits) {
  if (!validReduction(reduction) || classes <= 0)
    return 1;
  rows = std::max<int64_t>(rows, 0);
  int64_t n = checkLabels(rows, classes, labels, hasIgnore, ignoreIndex);
  if (n < 0)
    return 2;
  float shared = sharedScale(reduction, dloss, n);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T *out = dlogits + r * classes;
    if (!counted(labels, r, hasIgnore, ignoreIndex)) {
      for (int64_t c = 0; c < classes; ++c)
        store(out + c, 0.0f);
      continue;
    }
    const T *row = logits + r * classes;
    float g = reduction == OTCRT_NONE ? dloss[r] : shared;
    float rowLse = lse[r];
    int64_t label = labels[r];
    // The label's logit is read first: out may be the logits.
    const float atLabel = expFast(load(row[label]) - rowLse);
#pragma omp simd
    for (int64_t c = 0; c < classes; ++c)
      store(out + c, g * expFast(load(row[c]) - rowLse));
    store(out + label, g * (atLabel - 1.0f));
  }
  return 0;
}

template <typename T>
int fused(int64_t rows, int64_t classes, const float *dloss, const T *logits,
          const int64_t *labels, int32_t hasIgnore, int64_t ignoreIndex,
          int32_t reduction, float *loss, float *rowLoss, T *dlogits) {
  if (!validReduction(reduction) || classes <= 0)
    return 1;
  rows = std::max<int64_t>(rows, 0);
  int64_t n = checkLabels(rows, classes, labels, hasIgnore, ignoreIndex);
  if (n < 0)
    return 2;
  // The forward's per-row losses are row_loss; every logit is read before
  // the backward writes dlogits (which may be the logits).
  std::vector<float> lse(rows);
  forward(rows, classes, logits, labels, hasIgnore, ignoreIndex, OTCRT_NONE,
          rowLoss, lse.data());
  if (reduction == OTCRT_NONE)
    std::copy(rowLoss, rowLoss + rows, loss);
  else
    reduceLoss(rowLoss, rows, n, reduction, loss);
  return backward(rows, classes, dloss, logits, labels, lse.data(), hasIgnore,
                  ignoreIndex, reduction, dlogits);
}

template <typename T>
int linearFused(int64_t rows, int64_t hidden, int64_t classes,
                int64_t chunkRows, const float *dloss, const T *h, const T *w,
                int32_t wLayout, const int64_t *labels, int32_t hasIgnore,
                int64_t ignoreIndex, int32_t reduction, int32_t dwType,
                int32_t dwAccumulate, const T *bias, float *loss,
                float *rowLoss, float *dh, void *dw, float *dbias, T *chunk) {
  if (!validReduction(reduction) || classes <= 0 || hidden < 0 ||
      chunkRows < 1 || (dbias && !bias) ||
      !LinearCrossEntropyGemms::knownLayout(wLayout) ||
      !(dwType == OTC_F32 ||
        (dwType == OTC_BF16 && std::is_same<T, otcrt_bf16>::value)))
    return 1;
  rows = std::max<int64_t>(rows, 0);
  int64_t n = checkLabels(rows, classes, labels, hasIgnore, ignoreIndex);
  if (n < 0)
    return 2;
  // A chunk's gradient with the whole call's scale: a sum's dloss, a mean's
  // dloss / n as backward computes it over all rows (0 when none count),
  // or each row's own.
  float shared = sharedScale(reduction, dloss, n);
  const LinearCrossEntropyGemms gemms{
      hidden, classes, std::is_same<T, float>::value ? OTC_F32 : OTC_BF16,
      wLayout == OTCRT_W_HIDDEN_CLASSES};
  std::vector<float> lse(static_cast<size_t>(std::min(chunkRows, rows)));
  if (rows == 0 && !dwAccumulate)
    std::memset(dw, 0, (dwType == OTC_F32 ? 4 : 2) * classes * hidden);
  if (rows == 0 && dbias)
    std::memset(dbias, 0, sizeof(float) * classes);
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t c = std::min(chunkRows, rows - r0);
    const T *hc = h + r0 * hidden;
    OtcrtGemm head = gemms.head(c, bias != nullptr);
    if (int st = gemm(head, hc, w, chunk, bias, nullptr, nullptr))
      return st;
    forward(c, classes, chunk, labels + r0, hasIgnore, ignoreIndex,
            OTCRT_NONE, rowLoss + r0, lse.data());
    if (reduction == OTCRT_NONE) {
      std::copy(rowLoss + r0, rowLoss + r0 + c, loss + r0);
      backward(c, classes, dloss + r0, chunk, labels + r0, lse.data(),
               hasIgnore, ignoreIndex, OTCRT_NONE, chunk);
    } else {
      backward(c, classes, &shared, chunk, labels + r0, lse.data(),
               hasIgnore, ignoreIndex, OTCRT_SUM, chunk);
    }
    OtcrtGemm gdh = gemms.dh(c);
    if (int st = gemm(gdh, chunk, w, dh + r0 * hidden, nullptr, nullptr,
                      nullptr))
      return st;
    OtcrtGemm gdw = gemms.dw(c, dwType, r0 > 0 || dwAccumulate);
    const void *a = gemms.dwA(chunk, hc), *b = gemms.dwB(chunk, hc);
    if (int st = dbias ? gemmSums(gdw, a, b, dw, dbias, gemms.dlogitsSums(),
                                  OTC_F32, r0 > 0)
                       : gemm(gdw, a, b, dw, nullptr, nullptr, nullptr))
      return st;
  }
  if (reduction != OTCRT_NONE)
    reduceLoss(rowLoss, rows, n, reduction, loss);
  return 0;
}

} // namespace

int crossEntropyFwd(int64_t rows, int64_t classes, const float *logits,
                    const int64_t *labels, int32_t hasIgnore,
                    int64_t ignoreIndex, int32_t reduction, float *loss,
                    float *lse) {
  return forward(rows, classes, logits, labels, hasIgnore, ignoreIndex,
                 reduction, loss, lse);
}
int crossEntropyFwd(int64_t rows, int64_t classes, const otcrt_bf16 *logits,
                    const int64_t *labels, int32_t hasIgnore,
                    int64_t ignoreIndex, int32_t reduction, float *loss,
                    float *lse) {
  return forward(rows, classes, logits, labels, hasIgnore, ignoreIndex,
                 reduction, loss, lse);
}
int crossEntropyBwd(int64_t rows, int64_t classes, const float *dloss,
                    const float *logits, const int64_t *labels,
                    const float *lse, int32_t hasIgnore, int64_t ignoreIndex,
                    int32_t reduction, float *dlogits) {
  return backward(rows, classes, dloss, logits, labels, lse, hasIgnore,
                  ignoreIndex, reduction, dlogits);
}
int crossEntropyBwd(int64_t rows, int64_t classes, const float *dloss,
                    const otcrt_bf16 *logits, const int64_t *labels,
                    const float *lse, int32_t hasIgnore, int64_t ignoreIndex,
                    int32_t reduction, otcrt_bf16 *dlogits) {
  return backward(rows, classes, dloss, logits, labels, lse, hasIgnore,
                  ignoreIndex, reduction, dlogits);
}

int crossEntropyFused(int64_t rows, int64_t classes, const float *dloss,
                      const float *logits, const int64_t *labels,
                      int32_t hasIgnore, int64_t ignoreIndex, int32_t reduction,
                      float *loss, float *rowLoss, float *dlogits) {
  return fused(rows, classes, dloss, logits, labels, hasIgnore, ignoreIndex,
               reduction, loss, rowLoss, dlogits);
}
int crossEntropyFused(int64_t rows, int64_t classes, const float *dloss,
                      const otcrt_bf16 *logits, const int64_t *labels,
                      int32_t hasIgnore, int64_t ignoreIndex, int32_t reduction,
                      float *loss, float *rowLoss, otcrt_bf16 *dlogits) {
  return fused(rows, classes, dloss, logits, labels, hasIgnore, ignoreIndex,
               reduction, loss, rowLoss, dlogits);
}

int linearCrossEntropy(int64_t rows, int64_t hidden, int64_t classes,
                       int64_t chunkRows, const float *dloss, const float *h,
                       const float *w, int32_t wLayout, const int64_t *labels,
                       int32_t hasIgnore, int64_t ignoreIndex,
                       int32_t reduction, int32_t dwType, int32_t dwAccumulate,
                       const float *bias, float *loss, float *rowLoss,
                       float *dh, void *dw, float *dbias, float *chunk) {
  return linearFused(rows, hidden, classes, chunkRows, dloss, h, w, wLayout,
                     labels, hasIgnore, ignoreIndex, reduction, dwType,
                     dwAccumulate, bias, loss, rowLoss, dh, dw, dbias, chunk);
}
int linearCrossEntropy(int64_t rows, int64_t hidden, int64_t classes,
                       int64_t chunkRows, const float *dloss,
                       const otcrt_bf16 *h, const otcrt_bf16 *w,
                       int32_t wLayout, const int64_t *labels,
                       int32_t hasIgnore, int64_t ignoreIndex,
                       int32_t reduction, int32_t dwType, int32_t dwAccumulate,
                       const otcrt_bf16 *bias, float *loss, float *rowLoss,
                       float *dh, void *dw, float *dbias, otcrt_bf16 *chunk) {
  return linearFused(rows, hidden, classes, chunkRows, dloss, h, w, wLayout,
                     labels, hasIgnore, ignoreIndex, reduction, dwType,
                     dwAccumulate, bias, loss, rowLoss, dh, dw, dbias, chunk);
}

} // namespace cpu
} // namespace otcrt
