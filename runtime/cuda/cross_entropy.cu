// Device softmax cross-entropy of libotcrt_cuda (otc.cross_entropy and its
// gradient) for float and bfloat16 logits. The forward runs one block per
// row, sweeping it once (each thread's running maximum and sum of
// exponentials, combined by block reductions, give the lse and, for
// OTCRT_NONE, the row's loss) and, for the mean and sum, a one-block
// kernel that adds the rows' losses (lse_r - logits[r, label_r]) in double
// in a fixed order and counts the rows that count. The gradient of the mean
// first counts those rows with a one-block kernel into a scratch word
// allocated once, then runs one block per row, reading each logit before
// writing the same element, so dlogits may be the logits' buffer. The row
// kernels access W logits at a time: a 16-byte packet (common.cuh) when the
// classes are a multiple of the packet and the rows' arrays are 16-byte
// aligned, else one logit (as layer_norm.cu's row kernels). A bad label is
// written to the library's error record (kernel_error.cu) by the block of
// its row: no call allocates or synchronizes, so a CUDA graph can capture
// them.
#include "common.cuh"

#include <mutex>

namespace otcrt {
namespace cuda {
namespace {

/// Whether row r counts.
__device__ __forceinline__ bool counts(const int64_t *labels, int64_t r,
                                       int32_t hasIgnore, int64_t ignoreIndex) {
  return !(hasIgnore && labels[r] == ignoreIndex);
}

/// Whether row r counts and its label can be read.
__device__ __forceinline__ bool usable(const int64_t *labels, int64_t r,
                                       int64_t classes, int32_t hasIgnore,
                                       int64_t ignoreIndex) {
  return counts(labels, r, hasIgnore, ignoreIndex) && labels[r] >= 0 &&
         labels[r] < classes;
}

/// One block: the number of rows that count, into *counted.
__global__ void countRowsKernel(int64_t rows, const int64_t *labels,
                                int32_t hasIgnore, int64_t ignoreIndex,
                                long long *counted) {
  __shared__ long long scratch[32];
  long long n = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    n += counts(labels, r, hasIgnore, ignoreIndex) ? 1 : 0;
  n = blockSum(n, scratch);
  if (threadIdx.x == 0)
    *counted = n;
}

/// Records row r's label when it counts but lies outside [0, classes).
__device__ __forceinline__ void checkLabel(const int64_t *labels, int64_t r,
                                           int64_t classes, int32_t hasIgnore,
                                           int64_t ignoreIndex,
                                           OtcrtKernelError *record) {
  if (counts(labels, r, hasIgnore, ignoreIndex) &&
      (labels[r] < 0 || labels[r] >= classes))
    recordError(record, OTCRT_ERROR_LABEL, r, labels[r], classes);
}

/// One block per row: lse[r], and loss[r] for OTCRT_NONE, in one sweep of
/// the row: thread t reads logits [c, c + W) for c = W t, W (t +
/// blockDim.x), ... below classes, which W divides, keeping its running
/// maximum m and sum of exp(x - m) (rescaled when a packet raises m); the
/// block then takes the largest m and adds every thread's sum rescaled to it.
template <typename T, int W>
__global__ void rowLseKernel(int64_t classes, const T *logits,
                             const int64_t *labels, int32_t hasIgnore,
                             int64_t ignoreIndex, bool perRowLoss, float *loss,
                             float *lse, OtcrtKernelError *record) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * W,
                step = static_cast<int64_t>(blockDim.x) * W;
  const T *row = logits + r * classes;
  float max = -INFINITY, sum = 0.0f;
  for (int64_t c = first; c < classes; c += step) {
    float v[W];
    loadPacket(row + c, v);
    float packetMax = v[0];
#pragma unroll
    for (int i = 1; i < W; ++i)
      packetMax = fmaxf(packetMax, v[i]);
    if (packetMax > max) {
      // exp(-inf - finite) is 0: the first packet needs no special case.
      sum *= expf(max - packetMax);
      max = packetMax;
    }
#pragma unroll
    for (int i = 0; i < W; ++i)
      sum += expf(v[i] - max);
  }
  const float rowMax = blockMax(max, scratch);
  // A thread that saw no finite logit adds nothing (its max is -inf).
  sum = max == -INFINITY ? 0.0f : sum * expf(max - rowMax);
  sum = blockSum(sum, scratch);
  if (threadIdx.x != 0)
    return;
  checkLabel(labels, r, classes, hasIgnore, ignoreIndex, record);
  float rowLse = rowMax + logf(sum);
  lse[r] = rowLse;
  if (perRowLoss)
    loss[r] = usable(labels, r, classes, hasIgnore, ignoreIndex)
                  ? rowLse - load(row[labels[r]])
                  : 0.0f;
}

/// One block: loss[0] = the sum (or mean) of lse_r - logits[r, label_r].
template <typename T>
__global__ void reduceLossKernel(int64_t rows, int64_t classes, const T *logits,
                                 const int64_t *labels, int32_t hasIgnore,
                                 int64_t ignoreIndex, const float *lse,
                                 bool mean, float *loss) {
  __shared__ double scratch[32];
  __shared__ long long countScratch[32];
  double sum = 0.0;
  long long counted = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    counted += counts(labels, r, hasIgnore, ignoreIndex) ? 1 : 0;
    if (usable(labels, r, classes, hasIgnore, ignoreIndex))
      sum += static_cast<double>(lse[r]) -
             static_cast<double>(load(logits[r * classes + labels[r]]));
  }
  sum = blockSum(sum, scratch);
  counted = blockSum(counted, countScratch);
  if (threadIdx.x != 0)
    return;
  if (!mean)
    loss[0] = static_cast<float>(sum);
  else
    loss[0] = counted == 0
                  ? NAN
                  : static_cast<float>(sum / static_cast<double>(counted));
}

/// One block per row: dlogits = g (softmax - onehot), 0 for ignored rows;
/// logits [c, c + W) per thread as in rowLseKernel.
template <typename T, int W>
__global__ void gradKernel(int64_t classes, const float *dloss, const T *logits,
                           const int64_t *labels, const float *lse,
                           int32_t hasIgnore, int64_t ignoreIndex,
                           int32_t reduction, const long long *counted,
                           OtcrtKernelError *record, T *dlogits) {
  const int64_t r = blockIdx.x;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * W,
                step = static_cast<int64_t>(blockDim.x) * W;
  const T *row = logits + r * classes;
  T *out = dlogits + r * classes;
  if (threadIdx.x == 0)
    checkLabel(labels, r, classes, hasIgnore, ignoreIndex, record);
  if (!usable(labels, r, classes, hasIgnore, ignoreIndex)) {
    const float zeros[W] = {};
    for (int64_t c = first; c < classes; c += step)
      storePacket(out + c, zeros);
    return;
  }
  float g = reduction == OTCRT_NONE ? dloss[r]
            : reduction == OTCRT_SUM
                ? dloss[0]
                : dloss[0] / static_cast<float>(*counted);
  float rowLse = lse[r];
  int64_t label = labels[r];
  // out may be row: the packet is read whole before it is written.
  for (int64_t c = first; c < classes; c += step) {
    float v[W];
    loadPacket(row + c, v);
#pragma unroll
    for (int i = 0; i < W; ++i) {
      float softmax = expf(v[i] - rowLse);
      v[i] = g * (softmax - (c + i == label ? 1.0f : 0.0f));
    }
    storePacket(out + c, v);
  }
}

/// The gradient's count of rows, in device memory allocated on the first
/// call (calls on one stream reuse it in order); null when that fails.
long long *countScratch() {
  static std::once_flag once;
  static long long *scratch = nullptr;
  std::call_once(once, [] {
    void *p = nullptr;
    if (cudaMalloc(&p, sizeof(long long)) == cudaSuccess)
      scratch = static_cast<long long *>(p);
    else
      (void)cudaGetLastError();
  });
  return scratch;
}

/// Whether `reduction` is one of OtcrtReduction.
inline bool validReduction(int32_t reduction) {
  return reduction == OTCRT_MEAN || reduction == OTCRT_SUM ||
         reduction == OTCRT_NONE;
}

template <typename T>
int forward(int64_t rows, int64_t classes, const T *logits,
            const int64_t *labels, int32_t hasIgnore, int64_t ignoreIndex,
            int32_t reduction, float *loss, float *lse, void *streamArg) {
  if (!validReduction(reduction) || classes <= 0 || !lse)
    return 1;
  rows = rows < 0 ? 0 : rows;
  cudaStream_t stream = asStream(streamArg);
  OtcrtKernelError *record = errorRecord();
  if (!record)
    return 1;
  // ir/OtcLibraryCalls.cpp describes these launches (and backward's) for the
  // step-time prediction: keep the two in step.
  if (rows > 0) {
    const unsigned grid = static_cast<unsigned>(rows);
    if (packable<T>(classes, {logits}))
      rowLseKernel<T, kPack<T>><<<grid, kBlock, 0, stream>>>(
          classes, logits, labels, hasIgnore, ignoreIndex,
          reduction == OTCRT_NONE, loss, lse, record);
    else
      rowLseKernel<T, 1><<<grid, kBlock, 0, stream>>>(
          classes, logits, labels, hasIgnore, ignoreIndex,
          reduction == OTCRT_NONE, loss, lse, record);
  }
  if (reduction != OTCRT_NONE)
    reduceLossKernel<T><<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, classes, logits, labels, hasIgnore, ignoreIndex, lse,
        reduction == OTCRT_MEAN, loss);
  return launchStatus();
}

template <typename T>
int backward(int64_t rows, int64_t classes, const float *dloss, const T *logits,
             const int64_t *labels, const float *lse, int32_t hasIgnore,
             int64_t ignoreIndex, int32_t reduction, T *dlogits,
             void *streamArg) {
  if (!validReduction(reduction) || classes <= 0)
    return 1;
  rows = rows < 0 ? 0 : rows;
  cudaStream_t stream = asStream(streamArg);
  OtcrtKernelError *record = errorRecord();
  long long *counted = countScratch();
  if (!record || !counted)
    return 1;
  if (rows == 0)
    return 0;
  if (reduction == OTCRT_MEAN)
    countRowsKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, labels, hasIgnore, ignoreIndex, counted);
  const unsigned grid = static_cast<unsigned>(rows);
  if (packable<T>(classes, {logits, dlogits}))
    gradKernel<T, kPack<T>><<<grid, kBlock, 0, stream>>>(
        classes, dloss, logits, labels, lse, hasIgnore, ignoreIndex, reduction,
        counted, record, dlogits);
  else
    gradKernel<T, 1><<<grid, kBlock, 0, stream>>>(
        classes, dloss, logits, labels, lse, hasIgnore, ignoreIndex, reduction,
        counted, record, dlogits);
  return launchStatus();
}

} // namespace
} // namespace cuda
} // namespace otcrt

using otcrt::cuda::backward;
using otcrt::cuda::forward;

extern "C" {

int otcrt_cross_entropy_fwd_f32(int64_t rows, int64_t classes,
                                const float *logits, const int64_t *labels,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *loss, float *lse,
                                void *stream) {
  return forward(rows, classes, logits, labels, has_ignore, ignore_index,
                 reduction, loss, lse, stream);
}
int otcrt_cross_entropy_fwd_bf16(int64_t rows, int64_t classes,
                                 const otcrt_bf16 *logits,
                                 const int64_t *labels, int32_t has_ignore,
                                 int64_t ignore_index, int32_t reduction,
                                 float *loss, float *lse, void *stream) {
  return forward(rows, classes, logits, labels, has_ignore, ignore_index,
                 reduction, loss, lse, stream);
}
int otcrt_cross_entropy_bwd_f32(int64_t rows, int64_t classes,
                                const float *dloss, const float *logits,
                                const int64_t *labels, const float *lse,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *dlogits,
                                void *stream) {
  return backward(rows, classes, dloss, logits, labels, lse, has_ignore,
                  ignore_index, reduction, dlogits, stream);
}
int otcrt_cross_entropy_bwd_bf16(int64_t rows, int64_t classes,
                                 const float *dloss, const otcrt_bf16 *logits,
                                 const int64_t *labels, const float *lse,
                                 int32_t has_ignore, int64_t ignore_index,
                                 int32_t reduction, otcrt_bf16 *dlogits,
                                 void *stream) {
  return backward(rows, classes, dloss, logits, labels, lse, has_ignore,
                  ignore_index, reduction, dlogits, stream);
}

} // extern "C"
