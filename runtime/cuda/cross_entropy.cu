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
// aligned, else one logit (as layer_norm.cu's row kernels). The fused loss
// and gradient runs the forward's sweep and the gradient's in one block per
// row, with the forward's arithmetic (the same device functions, the same
// block), so its gradient is the two calls' bit for bit: a row that fits in
// shared memory is read from memory once, staged there for the gradient's
// sweep, a longer one is read twice; its mean or sum adds the rows' float
// losses in double in a fixed order. A bad label is written to the
// library's error record (kernel_error.cu) by the block of its row: no
// call allocates or synchronizes once it has run (the fused kernels set
// their shared-memory limit on their first call), so a CUDA graph can
// capture them.
#include "common.cuh"
#include "otcrt/abi.h"
#include "src/linear_cross_entropy_gemms.h"

#include <mutex>
#include <type_traits>

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

/// Every row's label checked (one block, each thread every blockDim.x-th
/// row), so that a bad one is recorded with its row in the whole batch
/// before any chunk's kernel records it within its chunk.
__global__ void checkLabelsKernel(int64_t rows, const int64_t *labels,
                                  int64_t classes, int32_t hasIgnore,
                                  int64_t ignoreIndex,
                                  OtcrtKernelError *record) {
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    checkLabel(labels, r, classes, hasIgnore, ignoreIndex, record);
}

/// Folds the W logits v into a thread's running maximum and sum of exp(x -
/// max), the sum rescaled when they raise the maximum.
template <int W>
__device__ __forceinline__ void accumulateLse(const float (&v)[W], float &max,
                                              float &sum) {
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

/// The row's lse from every thread's running maximum and sum: the block
/// takes the largest maximum and adds every sum rescaled to it.
__device__ __forceinline__ float blockLse(float max, float sum,
                                          float *scratch) {
  const float rowMax = blockMax(max, scratch);
  // A thread that saw no finite logit adds nothing (its max is -inf).
  sum = max == -INFINITY ? 0.0f : sum * expf(max - rowMax);
  sum = blockSum(sum, scratch);
  return rowMax + logf(sum);
}

/// One block per row: lse[r], and loss[r] for OTCRT_NONE, in one sweep of
/// the row: thread t folds logits [c, c + W) for c = W t, W (t +
/// blockDim.x), ... below classes, which W divides, into its running
/// maximum and sum (accumulateLse), then blockLse.
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
    accumulateLse(v, max, sum);
  }
  const float rowLse = blockLse(max, sum, scratch);
  if (threadIdx.x != 0)
    return;
  checkLabel(labels, r, classes, hasIgnore, ignoreIndex, record);
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

/// Row r's gradient scale g: dloss[r] (none), dloss[0] (sum) or dloss[0] /
/// the counted rows (mean).
__device__ __forceinline__ float rowScale(int32_t reduction, const float *dloss,
                                          int64_t r, const long long *counted) {
  return reduction == OTCRT_NONE  ? dloss[r]
         : reduction == OTCRT_SUM ? dloss[0]
                                  : dloss[0] / static_cast<float>(*counted);
}

/// The gradient g (softmax - onehot) of the W logits v at classes [c, c +
/// W), in place.
template <int W>
__device__ __forceinline__ void gradient(float (&v)[W], int64_t c,
                                         int64_t label, float g, float rowLse) {
#pragma unroll
  for (int i = 0; i < W; ++i) {
    float softmax = expf(v[i] - rowLse);
    v[i] = g * (softmax - (c + i == label ? 1.0f : 0.0f));
  }
}

/// Zeros one row of dlogits, W elements a thread as the sweeps.
template <typename T, int W>
__device__ __forceinline__ void zeroRow(int64_t classes, T *out) {
  const float zeros[W] = {};
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * W; c < classes;
       c += static_cast<int64_t>(blockDim.x) * W)
    storePacket(out + c, zeros);
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
    zeroRow<T, W>(classes, out);
    return;
  }
  float g = rowScale(reduction, dloss, r, counted);
  float rowLse = lse[r];
  int64_t label = labels[r];
  // out may be row: the packet is read whole before it is written.
  for (int64_t c = first; c < classes; c += step) {
    float v[W];
    loadPacket(row + c, v);
    gradient(v, c, label, g, rowLse);
    storePacket(out + c, v);
  }
}

/// fusedKernel's threads per block and the packets a thread loads before
/// it uses the first (launch_config.h).
constexpr int kFusedBlock = OTCRT_CUDA_CE_FUSED_BLOCK;
constexpr int kFusedUnroll = OTCRT_CUDA_CE_FUSED_UNROLL;
static_assert(kFusedBlock == kBlock,
              "the fused lse is the forward's only with the forward's block");

/// One block per row of the fused loss and gradient: rowLseKernel's sweep
/// and arithmetic (so the same lse), each thread loading kFusedUnroll of
/// its packets before it folds them in, in its order, so that several
/// loads are in flight; Staged also copies each packet, as it is, into the
/// row's place in dynamic shared memory. Staged with 16-byte packets, each
/// thread instead copies all its packets to shared memory asynchronously
/// (cp.async, Ampere and later), waits once and folds them in from there:
/// with two blocks an SM holding only 512 threads, registers could keep
/// too few loads in flight (measured on an H100: 1.01 ms for GPT-2's
/// 8192 x 50304 bfloat16 logits, 1.6 TB/s, with 4 packets a thread). Thread 0 then writes the row's
/// loss (row_loss, and loss for OTCRT_NONE), and a second sweep writes
/// gradKernel's gradient from the staged row, or (not Staged) from the
/// logits read again. Each thread's second sweep takes the packets of its
/// first, and the label's logit is read before blockLse's barriers (not
/// Staged) or from shared memory: dlogits may be the logits' buffer. A row
/// that does not count, or whose label is bad, is not read: its loss and
/// gradient are zeros.
template <typename T, int W, bool Staged>
__global__ void
fusedKernel(int64_t classes, const float *dloss, const T *logits,
            const int64_t *labels, int32_t hasIgnore, int64_t ignoreIndex,
            int32_t reduction, const long long *counted, float *loss,
            float *rowLoss, OtcrtKernelError *record, T *dlogits) {
  using P = Packet<T, W>;
  // One declaration for every instantiation: bytes, seen as packets.
  extern __shared__ __align__(16) unsigned char stagedBytes[];
  __shared__ float scratch[32];
  P *staged = reinterpret_cast<P *>(stagedBytes);
  const int64_t r = blockIdx.x;
  const int64_t first = static_cast<int64_t>(threadIdx.x) * W,
                step = static_cast<int64_t>(blockDim.x) * W;
  const T *row = logits + r * classes;
  T *out = dlogits + r * classes;
  const bool perRowLoss = reduction == OTCRT_NONE;
  if (threadIdx.x == 0)
    checkLabel(labels, r, classes, hasIgnore, ignoreIndex, record);
  if (!usable(labels, r, classes, hasIgnore, ignoreIndex)) {
    if (threadIdx.x == 0) {
      rowLoss[r] = 0.0f;
      if (perRowLoss)
        loss[r] = 0.0f;
    }
    zeroRow<T, W>(classes, out);
    return;
  }
  const int64_t label = labels[r];
  float labelLogit = 0.0f;
  if (!Staged && threadIdx.x == 0)
    labelLogit = load(row[label]);
  float max = -INFINITY, sum = 0.0f;
  if (Staged && W * sizeof(T) == 16) {
    // Every packet of the thread copied to shared memory asynchronously
    // (cp.async: no registers held, the whole row in flight at once), then
    // folded in from there in the same order as below.
    for (int64_t c = first; c < classes; c += step) {
      const unsigned dst =
          static_cast<unsigned>(__cvta_generic_to_shared(&staged[c / W]));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                   "l"(__cvta_generic_to_global(row + c))
                   : "memory");
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::
                     : "memory");
    for (int64_t c = first; c < classes; c += step) {
      float v[W];
      unpack(staged[c / W], v);
      accumulateLse(v, max, sum);
    }
  } else {
    for (int64_t c = first; c < classes; c += kFusedUnroll * step) {
      P packets[kFusedUnroll];
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u)
        if (c + u * step < classes)
          packets[u] = *reinterpret_cast<const P *>(row + c + u * step);
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u)
        // Indexed by packet, each store is one 16-byte access (through a T
        // pointer, nvcc splits some into four).
        if (Staged && c + u * step < classes)
          staged[(c + u * step) / W] = packets[u];
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u)
        if (c + u * step < classes) {
          float v[W];
          unpack(packets[u], v);
          accumulateLse(v, max, sum);
        }
    }
  }
  const float rowLse = blockLse(max, sum, scratch);
  if (threadIdx.x == 0) {
    // blockLse's barriers made the whole staged row visible.
    const float l =
        rowLse -
        (Staged ? load(staged[label / W].elements[label % W]) : labelLogit);
    rowLoss[r] = l;
    if (perRowLoss)
      loss[r] = l;
  }
  const float g = rowScale(reduction, dloss, r, counted);
  for (int64_t c = first; c < classes; c += step) {
    // Copied whole first, as loadPacket does: one access.
    const P packet =
        Staged ? staged[c / W] : *reinterpret_cast<const P *>(row + c);
    float v[W];
    unpack(packet, v);
    gradient(v, c, label, g, rowLse);
    storePacket(out + c, v);
  }
}

/// One block: loss[0] = the sum of rowLoss[0, rows) in double (thread t adds
/// rows t, t + blockDim.x, ..., then blockSum: a fixed order), or, given
/// the count of the rows that count, their mean (NaN when none counts).
__global__ void sumRowLossKernel(int64_t rows, const float *rowLoss,
                                 const long long *counted, float *loss) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    sum += static_cast<double>(rowLoss[r]);
  sum = blockSum(sum, scratch);
  if (threadIdx.x != 0)
    return;
  if (!counted)
    loss[0] = static_cast<float>(sum);
  else
    loss[0] = *counted == 0
                  ? NAN
                  : static_cast<float>(sum / static_cast<double>(*counted));
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

/// Whether fusedKernel<T, W, true> may take OTCRT_CUDA_CE_STAGED_ROW_BYTES
/// of dynamic shared memory (more than the 48 KB a launch gets unasked),
/// asked for on the first call of the instantiation (thread-safe: a static's
/// initialization), along with the largest shared-memory carveout, so that
/// two blocks share an SM; where the device refuses, rows are read twice
/// instead.
template <typename T, int W> bool stagingAllowed() {
  static const bool allowed = [] {
    const auto kernel = fusedKernel<T, W, true>;
    bool ok =
        cudaFuncSetAttribute(kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             OTCRT_CUDA_CE_STAGED_ROW_BYTES) == cudaSuccess &&
        cudaFuncSetAttribute(kernel,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared) == cudaSuccess;
    if (!ok)
      (void)cudaGetLastError();
    return ok;
  }();
  return allowed;
}

/// fusedKernel<T, W, ...> over `rows` rows: staged where the row fits.
template <typename T, int W>
void launchFused(int64_t rows, int64_t classes, const float *dloss,
                 const T *logits, const int64_t *labels, int32_t hasIgnore,
                 int64_t ignoreIndex, int32_t reduction,
                 const long long *counted, float *loss, float *rowLoss,
                 OtcrtKernelError *record, T *dlogits, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>(rows);
  const size_t rowBytes = static_cast<size_t>(classes) * sizeof(T);
  if (rowBytes <= OTCRT_CUDA_CE_STAGED_ROW_BYTES && stagingAllowed<T, W>())
    fusedKernel<T, W, true><<<grid, kFusedBlock, rowBytes, stream>>>(
        classes, dloss, logits, labels, hasIgnore, ignoreIndex, reduction,
        counted, loss, rowLoss, record, dlogits);
  else
    fusedKernel<T, W, false><<<grid, kFusedBlock, 0, stream>>>(
        classes, dloss, logits, labels, hasIgnore, ignoreIndex, reduction,
        counted, loss, rowLoss, record, dlogits);
}

template <typename T>
int fused(int64_t rows, int64_t classes, const float *dloss, const T *logits,
          const int64_t *labels, int32_t hasIgnore, int64_t ignoreIndex,
          int32_t reduction, float *loss, float *rowLoss, T *dlogits,
          void *streamArg) {
  if (!validReduction(reduction) || classes <= 0 || !rowLoss)
    return 1;
  rows = rows < 0 ? 0 : rows;
  cudaStream_t stream = asStream(streamArg);
  OtcrtKernelError *record = errorRecord();
  long long *counted = countScratch();
  if (!record || !counted)
    return 1;
  // ir/OtcLibraryCalls.cpp describes these launches for the step-time
  // prediction: keep the two in step. For a mean, countRowsKernel: 1 block
  // of OTCRT_CUDA_REDUCE_BLOCK threads, each reading every
  // OTCRT_CUDA_REDUCE_BLOCK-th label. Then, for rows > 0, fusedKernel: one
  // block of OTCRT_CUDA_CE_FUSED_BLOCK threads per row (grid = rows), W =
  // a 16-byte packet's elements where packable, else 1; every thread reads
  // the row's label first. A row that counts is swept twice: first each
  // thread loads its ceil(classes / (OTCRT_CUDA_CE_FUSED_BLOCK W)) packets
  // of logits from memory, OTCRT_CUDA_CE_FUSED_UNROLL at a time, then the
  // block reductions give the lse, thread 0 writes row_loss (and loss[r]
  // for none) and every thread reads the row's scale (dloss, and the count
  // for a mean); the second sweep writes as many packets of dlogits,
  // reading the logits from shared memory when classes * sizeof(T) <=
  // OTCRT_CUDA_CE_STAGED_ROW_BYTES (classes * sizeof(T) bytes of dynamic
  // shared memory: the row read from memory once), else from memory again,
  // one packet per iteration (no dynamic shared memory: the row read
  // twice). A row that does not count writes zeros and reads nothing else.
  // Then, for a mean or sum, sumRowLossKernel: 1 block of
  // OTCRT_CUDA_REDUCE_BLOCK threads, each reading every
  // OTCRT_CUDA_REDUCE_BLOCK-th row_loss (float), thread 0 then the count
  // for a mean, writing loss[0].
  if (reduction == OTCRT_MEAN)
    countRowsKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, labels, hasIgnore, ignoreIndex, counted);
  if (rows > 0) {
    if (packable<T>(classes, {logits, dlogits}))
      launchFused<T, kPack<T>>(rows, classes, dloss, logits, labels, hasIgnore,
                               ignoreIndex, reduction, counted, loss, rowLoss,
                               record, dlogits, stream);
    else
      launchFused<T, 1>(rows, classes, dloss, logits, labels, hasIgnore,
                        ignoreIndex, reduction, counted, loss, rowLoss, record,
                        dlogits, stream);
  }
  if (reduction != OTCRT_NONE)
    sumRowLossKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, rowLoss, reduction == OTCRT_MEAN ? counted : nullptr, loss);
  return launchStatus();
}

/// otcrt_linear_cross_entropy_*: checkLabelsKernel over all rows (a bad
/// label recorded with its row in the batch), for a mean countRowsKernel
/// over all rows (the scale every chunk's gradient takes); per chunk of n
/// rows, the head
/// (otcrt_gemm, n x classes x hidden) into `chunk`, fused's fusedKernel over
/// the chunk's rows in place, dh's rows (n x hidden x classes) and dw
/// (classes x hidden x n, added to after the first chunk, or from the first
/// with dw_accumulate); then, for a mean
/// or sum, sumRowLossKernel over all rows. ir/OtcLibraryCalls.cpp describes
/// these launches and GEMMs for the step-time prediction: keep the two in
/// step.
template <typename T>
int linearFused(int64_t rows, int64_t hidden, int64_t classes,
                int64_t chunkRows, const float *dloss, const T *h, const T *w,
                int32_t wLayout, const int64_t *labels, int32_t hasIgnore,
                int64_t ignoreIndex, int32_t reduction, int32_t dwType,
                int32_t dwAccumulate, const T *bias, float *loss,
                float *rowLoss, float *dh, void *dw, float *dbias, T *chunk,
                void *streamArg) {
  if (!validReduction(reduction) || classes <= 0 || hidden < 0 ||
      chunkRows < 1 || !rowLoss || (dbias && !bias) ||
      !LinearCrossEntropyGemms::knownLayout(wLayout) ||
      !(dwType == OTC_F32 ||
        (dwType == OTC_BF16 && std::is_same<T, otcrt_bf16>::value)))
    return 1;
  rows = rows < 0 ? 0 : rows;
  cudaStream_t stream = asStream(streamArg);
  OtcrtKernelError *record = errorRecord();
  long long *counted = countScratch();
  if (!record || !counted)
    return 1;
  const int32_t type = std::is_same<T, float>::value ? OTC_F32 : OTC_BF16;
  if (rows > 0)
    checkLabelsKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, labels, classes, hasIgnore, ignoreIndex, record);
  if (reduction == OTCRT_MEAN)
    countRowsKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, labels, hasIgnore, ignoreIndex, counted);
  if (rows == 0 && !dwAccumulate &&
      cudaMemsetAsync(dw, 0, (dwType == OTC_F32 ? 4 : 2) * classes * hidden,
                      stream) !=
          cudaSuccess)
    return 1;
  if (rows == 0 && dbias &&
      cudaMemsetAsync(dbias, 0, sizeof(float) * classes, stream) != cudaSuccess)
    return 1;
  const bool none = reduction == OTCRT_NONE;
  const LinearCrossEntropyGemms gemms{hidden, classes, type,
                                      wLayout == OTCRT_W_HIDDEN_CLASSES};
  for (int64_t r0 = 0; r0 < rows; r0 += chunkRows) {
    const int64_t n = rows - r0 < chunkRows ? rows - r0 : chunkRows;
    const T *hc = h + r0 * hidden;
    OtcrtGemm head = gemms.head(n, bias != nullptr);
    if (int st =
            otcrt_gemm(&head, hc, w, chunk, bias, nullptr, nullptr, stream))
      return st;
    const float *scale = none ? dloss + r0 : dloss;
    float *rowsLoss = none ? loss + r0 : loss;
    if (packable<T>(classes, {chunk}))
      launchFused<T, kPack<T>>(n, classes, scale, chunk, labels + r0,
                               hasIgnore, ignoreIndex, reduction, counted,
                               rowsLoss, rowLoss + r0, record, chunk, stream);
    else
      launchFused<T, 1>(n, classes, scale, chunk, labels + r0, hasIgnore,
                        ignoreIndex, reduction, counted, rowsLoss,
                        rowLoss + r0, record, chunk, stream);
    OtcrtGemm gdh = gemms.dh(n);
    if (int st = otcrt_gemm(&gdh, chunk, w, dh + r0 * hidden, nullptr,
                            nullptr, nullptr, stream))
      return st;
    OtcrtGemm gdw = gemms.dw(n, dwType, r0 > 0 || dwAccumulate);
    const void *a = gemms.dwA(chunk, hc), *b = gemms.dwB(chunk, hc);
    if (int st =
            dbias
                ? otcrt_gemm_sums(&gdw, a, b, dw, dbias, gemms.dlogitsSums(),
                                  OTC_F32, r0 > 0, stream)
                : otcrt_gemm(&gdw, a, b, dw, nullptr, nullptr, nullptr, stream))
      return st;
  }
  if (!none)
    sumRowLossKernel<<<1, OTCRT_CUDA_REDUCE_BLOCK, 0, stream>>>(
        rows, rowLoss, reduction == OTCRT_MEAN ? counted : nullptr, loss);
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
using otcrt::cuda::fused;
using otcrt::cuda::linearFused;

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

int otcrt_cross_entropy_fused_f32(int64_t rows, int64_t classes,
                                  const float *dloss, const float *logits,
                                  const int64_t *labels, int32_t has_ignore,
                                  int64_t ignore_index, int32_t reduction,
                                  float *loss, float *row_loss, float *dlogits,
                                  void *stream) {
  return fused(rows, classes, dloss, logits, labels, has_ignore, ignore_index,
               reduction, loss, row_loss, dlogits, stream);
}
int otcrt_cross_entropy_fused_bf16(int64_t rows, int64_t classes,
                                   const float *dloss, const otcrt_bf16 *logits,
                                   const int64_t *labels, int32_t has_ignore,
                                   int64_t ignore_index, int32_t reduction,
                                   float *loss, float *row_loss,
                                   otcrt_bf16 *dlogits, void *stream) {
  return fused(rows, classes, dloss, logits, labels, has_ignore, ignore_index,
               reduction, loss, row_loss, dlogits, stream);
}

int otcrt_linear_cross_entropy_f32(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const float *h, const float *w, int32_t w_layout,
    const int64_t *labels, int32_t has_ignore, int64_t ignore_index,
    int32_t reduction, int32_t dw_type, int32_t dw_accumulate,
    const float *bias, float *loss, float *row_loss, float *dh, void *dw,
    float *dbias, float *chunk, void *stream) {
  return linearFused(rows, hidden, classes, chunk_rows, dloss, h, w, w_layout,
                     labels, has_ignore, ignore_index, reduction, dw_type,
                     dw_accumulate, bias, loss, row_loss, dh, dw, dbias, chunk,
                     stream);
}
int otcrt_linear_cross_entropy_bf16(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const otcrt_bf16 *h, const otcrt_bf16 *w,
    int32_t w_layout, const int64_t *labels, int32_t has_ignore,
    int64_t ignore_index, int32_t reduction, int32_t dw_type,
    int32_t dw_accumulate, const otcrt_bf16 *bias, float *loss, float *row_loss,
    float *dh, void *dw, float *dbias, otcrt_bf16 *chunk, void *stream) {
  return linearFused(rows, hidden, classes, chunk_rows, dloss, h, w, w_layout,
                     labels, has_ignore, ignore_index, reduction, dw_type,
                     dw_accumulate, bias, loss, row_loss, dh, dw, dbias, chunk,
                     stream);
}

} // extern "C"
