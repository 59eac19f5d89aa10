// Device softmax cross-entropy of libotcrt_cuda (otc.cross_entropy and its
// gradient) for float and bfloat16 logits. A one-block kernel first checks
// the labels and counts the rows that count, into a small stream-ordered
// scratch buffer; the forward then runs one block per row (row maximum and
// sum of exponentials as block reductions, the lse and, for OTCRT_NONE, the
// row's loss) and, for the mean and sum, a one-block kernel adds the rows'
// losses (lse_r - logits[r, label_r]) in double in a fixed order. The
// gradient runs one block per row and reads each logit before writing the
// same element, so dlogits may be the logits' buffer. A bad label must turn
// into a non-zero return code, so each call reads the check's flag back to
// the host: the call synchronizes its stream.
#include "common.cuh"

namespace otcrt {
namespace cuda {
namespace {

/// What the label check leaves in device memory.
struct LabelScratch {
  long long counted; ///< rows whose label is not the ignored one
  int bad;           ///< 1 when a counted label is outside [0, classes)
};

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

/// One block: counts the counted rows and flags bad labels.
__global__ void checkLabelsKernel(int64_t rows, int64_t classes,
                                  const int64_t *labels, int32_t hasIgnore,
                                  int64_t ignoreIndex, LabelScratch *out) {
  __shared__ long long scratch[32];
  __shared__ int badShared;
  if (threadIdx.x == 0)
    badShared = 0;
  __syncthreads();
  long long n = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (!counts(labels, r, hasIgnore, ignoreIndex))
      continue;
    ++n;
    if (labels[r] < 0 || labels[r] >= classes)
      badShared = 1;
  }
  n = blockSum(n, scratch);
  if (threadIdx.x == 0) {
    out->counted = n;
    out->bad = badShared;
  }
}

/// One block per row: lse[r], and loss[r] for OTCRT_NONE.
template <typename T>
__global__ void rowLseKernel(int64_t classes, const T *logits,
                             const int64_t *labels, int32_t hasIgnore,
                             int64_t ignoreIndex, bool perRowLoss, float *loss,
                             float *lse) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *row = logits + r * classes;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    max = fmaxf(max, load(row[c]));
  max = blockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    sum += expf(load(row[c]) - max);
  sum = blockSum(sum, scratch);
  if (threadIdx.x != 0)
    return;
  float rowLse = max + logf(sum);
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
                                 bool mean, const LabelScratch *check,
                                 float *loss) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (usable(labels, r, classes, hasIgnore, ignoreIndex))
      sum += static_cast<double>(lse[r]) -
             static_cast<double>(load(logits[r * classes + labels[r]]));
  sum = blockSum(sum, scratch);
  if (threadIdx.x != 0)
    return;
  if (!mean)
    loss[0] = static_cast<float>(sum);
  else
    loss[0] =
        check->counted == 0
            ? NAN
            : static_cast<float>(sum / static_cast<double>(check->counted));
}

/// One block per row: dlogits = g (softmax - onehot), 0 for ignored rows.
template <typename T>
__global__ void gradKernel(int64_t classes, const float *dloss, const T *logits,
                           const int64_t *labels, const float *lse,
                           int32_t hasIgnore, int64_t ignoreIndex,
                           int32_t reduction, const LabelScratch *check,
                           T *dlogits) {
  const int64_t r = blockIdx.x;
  const T *row = logits + r * classes;
  T *out = dlogits + r * classes;
  if (!usable(labels, r, classes, hasIgnore, ignoreIndex)) {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      store(out + c, 0.0f);
    return;
  }
  float g = reduction == OTCRT_NONE ? dloss[r]
            : reduction == OTCRT_SUM
                ? dloss[0]
                : dloss[0] / static_cast<float>(check->counted);
  float rowLse = lse[r];
  int64_t label = labels[r];
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    float softmax = expf(load(row[c]) - rowLse);
    store(out + c, g * (softmax - (c == label ? 1.0f : 0.0f)));
  }
}

/// Stream-ordered scratch for the label check; freed by release().
struct Scratch {
  LabelScratch *device = nullptr;
  cudaStream_t stream;
  explicit Scratch(cudaStream_t stream) : stream(stream) {
    if (cudaMallocAsync(reinterpret_cast<void **>(&device),
                        sizeof(LabelScratch), stream) != cudaSuccess)
      device = nullptr;
  }
  /// Reads the flag back (synchronizing the stream), frees the buffer and
  /// returns 0, or 1 on a CUDA error, or 2 on a bad label.
  int release() {
    LabelScratch host{};
    cudaError_t err = cudaMemcpyAsync(&host, device, sizeof host,
                                      cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess)
      err = cudaStreamSynchronize(stream);
    cudaError_t freeErr = cudaFreeAsync(device, stream);
    if (err != cudaSuccess || freeErr != cudaSuccess ||
        cudaGetLastError() != cudaSuccess)
      return 1;
    return host.bad ? 2 : 0;
  }
};

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
  Scratch scratch(stream);
  if (!scratch.device)
    return 1;
  checkLabelsKernel<<<1, 1024, 0, stream>>>(rows, classes, labels, hasIgnore,
                                            ignoreIndex, scratch.device);
  if (rows > 0)
    rowLseKernel<T><<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(
        classes, logits, labels, hasIgnore, ignoreIndex,
        reduction == OTCRT_NONE, loss, lse);
  if (reduction != OTCRT_NONE)
    reduceLossKernel<T><<<1, 1024, 0, stream>>>(
        rows, classes, logits, labels, hasIgnore, ignoreIndex, lse,
        reduction == OTCRT_MEAN, scratch.device, loss);
  int launched = launchStatus();
  int checked = scratch.release();
  return launched ? launched : checked;
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
  Scratch scratch(stream);
  if (!scratch.device)
    return 1;
  checkLabelsKernel<<<1, 1024, 0, stream>>>(rows, classes, labels, hasIgnore,
                                            ignoreIndex, scratch.device);
  if (rows > 0)
    gradKernel<T><<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(
        classes, dloss, logits, labels, lse, hasIgnore, ignoreIndex, reduction,
        scratch.device, dlogits);
  int launched = launchStatus();
  int checked = scratch.release();
  return launched ? launched : checked;
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
