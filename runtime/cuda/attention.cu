// Device scaled dot-product attention of libotcrt_cuda (otc.attention and
// otc.attention_grad) for float and bfloat16 storage: causal hiding (and a
// sliding window, or a bidirectional one), soft-capped scores (Gemma 2), an
// additive broadcast mask or a key padding (key_padding: a value at most -9984
// hides its key as the causal band does, so that a row can see no key: zeros,
// lse +inf or its sink) and, in the backward, the scores' gradient dS where the
// mask carries one (T5's relative bias), grouped-query heads, dropout and
// attention sinks (GPT-OSS: a logit per head in every row's softmax, with no
// value). A simple correct form, not a fast one: the float entry points always
// run it, the bfloat16 ones when cuDNN's SDPA cannot (attention_dispatch.cpp).
// One block per query row keeps the row's scores in shared memory (one warp per
// key for the dot products, block reductions for the maximum and the sum of
// exponentials) and writes the output and lse. The backward rebuilds the
// probabilities from the scores and lse in two kernels that never share an
// output element between blocks: one block per query row for dq (which also
// saves D_i = dO_i . O_i to the library's scratch, scratch.h) and one block
// per key row for dk and dv, whose warps walk the visible queries of every
// query head of the key's group and whose per-warp partial sums are added in
// a fixed order (deterministic). The sinks' gradient is one more kernel over
// the saved D_i: one block per head, its b·t terms added in a fixed order.
// Also here: what the cuDNN path (attention_cudnn.cpp) needs around cuDNN's
// graphs (a mask written out along the queries, a key padding's lengths, the
// rows of a key padding that see no key, the keys' gradients past them).
#include "attention.h"
#include "common.cuh"
#include "scratch.h"

#include <algorithm>

namespace otcrt {
namespace cuda {
namespace {

/// Threads per attention block (four warps).
constexpr int kAttnBlock = 128;
constexpr int kAttnWarps = kAttnBlock / 32;
/// Dynamic shared memory available without opting in.
constexpr size_t kDefaultSharedBytes = 48 * 1024;
/// A key padding's value at or below this hides its key.
constexpr float kPaddingHides = OTCRT_KEY_PADDING_HIDES;

/// Index arithmetic and per-element terms shared by the kernels.
struct Geometry {
  OtcrtAttention a;
  int64_t group; ///< query heads per key/value head
  float keepScale;

  /// End of the keys visible from query i (the causal prefix, or a
  /// bidirectional window's end).
  __device__ int64_t visibleKeys(int64_t i) const {
    int64_t end = a.causal ? i + 1 : a.window > 0 ? i + a.window : a.s;
    return end < a.s ? end : a.s;
  }
  /// First key visible from query i (a sliding window's start).
  __device__ int64_t firstKey(int64_t i) const {
    return a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;
  }
  /// First query that sees key j (causal: itself; a bidirectional
  /// window's start).
  __device__ int64_t firstQuery(int64_t j) const {
    if (a.causal)
      return j;
    return a.window > 0 && j - a.window + 1 > 0 ? j - a.window + 1 : 0;
  }
  /// End of the queries that see key j (a sliding window's end).
  __device__ int64_t endQuery(int64_t j) const {
    return a.window > 0 && j + a.window < a.t ? j + a.window : a.t;
  }
  __device__ int64_t kvOffset(int64_t b, int64_t kh, int64_t j) const {
    return ((b * a.hk + kh) * a.s + j) * a.d;
  }
  template <typename T>
  __device__ float maskAt(const T *mask, int64_t b, int64_t hi, int64_t i,
                          int64_t j) const {
    if (!mask)
      return 0.0f;
    return load(mask[b * a.mask_strides[0] + hi * a.mask_strides[1] +
                     i * a.mask_strides[2] + j * a.mask_strides[3]]);
  }
  /// Score `sc` of key j for query i with the mask: added, or with a key
  /// padding -inf where it hides the key (the key is not seen).
  template <typename T>
  __device__ float masked(float sc, const T *mask, int64_t b, int64_t hi,
                          int64_t i, int64_t j) const {
    const float m = maskAt(mask, b, hi, i, j);
    return a.key_padding && m <= kPaddingHides ? -INFINITY : sc + m;
  }
  /// The scores of q.k (the dot product `qk`) before the mask: scaled, then
  /// soft-capped where the call asks, c tanh(s / c), its tanh in `th` (0
  /// without a cap) for the backward's slope 1 - tanh^2.
  __device__ float capped(float qk, float &th) const {
    const float sc = a.scale * qk;
    if (a.softcap <= 0.0f) {
      th = 0.0f;
      return sc;
    }
    th = tanhf(sc / a.softcap);
    return a.softcap * th;
  }
  /// 0 or 1 / (1 - dropout) for probability (row, j); 1 without dropout.
  __device__ float dropFactor(int64_t row, int64_t j) const {
    if (a.dropout <= 0.0f)
      return 1.0f;
    return dropoutKeep(static_cast<uint64_t>(*a.key), a.dropout_stream,
                       static_cast<uint64_t>(row * a.s + j), a.dropout)
               ? keepScale
               : 0.0f;
  }
};

Geometry makeGeometry(const OtcrtAttention &a) {
  Geometry g;
  g.a = a;
  g.group = a.h / a.hk;
  g.keepScale = a.dropout > 0.0f ? 1.0f / (1.0f - a.dropout) : 1.0f;
  return g;
}

/// One block per query row (b, hi, i): shared q row [d] and scores [s]. A
/// sink joins the row's maximum and its sum of exponentials (so lse), not
/// the output. A row that sees no key (all its scores -inf) gets 0 and lse =
/// sinks[hi], or +inf without a sink: every exp(s - lse) is then 0.
template <typename T>
__global__ void forwardKernel(Geometry g, const T *q, const T *k, const T *v,
                              const T *mask, T *out, float *lse) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const OtcrtAttention &a = g.a;
  float *qRow = smem, *p = smem + a.d;
  const int64_t row = blockIdx.x;
  const int64_t i = row % a.t, hi = (row / a.t) % a.h, b = row / (a.t * a.h);
  const int64_t kh = hi / g.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x)
    qRow[c] = load(q[row * a.d + c]);
  __syncthreads();
  const T *kb = k + g.kvOffset(b, kh, 0), *vb = v + g.kvOffset(b, kh, 0);
  const int64_t first = g.firstKey(i), end = g.visibleKeys(i);
  float max = -INFINITY;
  for (int64_t j = first + warp; j < end; j += kAttnWarps) {
    float part = 0.0f;
    for (int64_t c = lane; c < a.d; c += 32)
      part += qRow[c] * load(kb[j * a.d + c]);
    float th;
    float sc = g.masked(g.capped(warpSum(part), th), mask, b, hi, i, j);
    if (lane == 0)
      p[j] = sc;
    max = fmaxf(max, sc);
  }
  const float sink = a.sinks ? a.sinks[hi] : -INFINITY;
  max = fmaxf(blockMax(max, scratch), sink);
  // No key seen and no sink: max is -inf, and exp(-inf - max) would be NaN.
  const bool none = max == -INFINITY;
  const float shift = none ? 0.0f : max;
  float sum = 0.0f;
  for (int64_t j = first + threadIdx.x; j < end; j += blockDim.x)
    sum += expf(p[j] - shift);
  sum = blockSum(sum, scratch) + (a.sinks ? expf(sink - shift) : 0.0f);
  const float rowLse = none ? INFINITY : max + logf(sum);
  if (threadIdx.x == 0)
    lse[row] = rowLse;
  for (int64_t j = first + threadIdx.x; j < end; j += blockDim.x)
    p[j] = expf(p[j] - rowLse) * g.dropFactor(row, j);
  __syncthreads();
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = first; j < end; ++j)
      acc += p[j] * load(vb[j * a.d + c]);
    store(out + row * a.d + c, acc);
  }
}

/// One block per query row: D_i, then dS_ij into shared memory (and into
/// dscores, [b, h, t, s] in T, 0 for the keys the row does not see, when the
/// call asks for it) and dq_i = scale sum_j dS_ij (1 - tanh_ij^2) k_j, the
/// slope 1 without a soft cap. A key the padding hides (score -inf) and
/// every key of a row that sees none (lse +inf) have probability 0, so dS
/// 0. Shared: q row [d], dO row [d], dS [s].
template <typename T>
__global__ void queryGradKernel(Geometry g, const T *dout, const T *q,
                                const T *k, const T *v, const T *mask,
                                const T *out, const float *lse, float *rowD,
                                T *dq, T *dscores) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const OtcrtAttention &a = g.a;
  float *qRow = smem, *dORow = smem + a.d, *dS = smem + 2 * a.d;
  const int64_t row = blockIdx.x;
  const int64_t i = row % a.t, hi = (row / a.t) % a.h, b = row / (a.t * a.h);
  const int64_t kh = hi / g.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float dOO = 0.0f;
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
    qRow[c] = load(q[row * a.d + c]);
    dORow[c] = load(dout[row * a.d + c]);
    dOO += dORow[c] * load(out[row * a.d + c]);
  }
  const float D = blockSum(dOO, scratch); // also publishes qRow and dORow
  if (threadIdx.x == 0)
    rowD[row] = D;
  const T *kb = k + g.kvOffset(b, kh, 0), *vb = v + g.kvOffset(b, kh, 0);
  const float rowLse = lse[row];
  const int64_t first = g.firstKey(i), end = g.visibleKeys(i);
  for (int64_t j = first + warp; j < end; j += kAttnWarps) {
    float qk = 0.0f, dOv = 0.0f;
    for (int64_t c = lane; c < a.d; c += 32) {
      qk += qRow[c] * load(kb[j * a.d + c]);
      dOv += dORow[c] * load(vb[j * a.d + c]);
    }
    qk = warpSum(qk);
    dOv = warpSum(dOv);
    if (lane == 0) {
      float th;
      float sc = g.capped(qk, th);
      float prob = expf(g.masked(sc, mask, b, hi, i, j) - rowLse);
      float grad = prob * (g.dropFactor(row, j) * dOv - D);
      if (dscores)
        store(dscores + row * a.s + j, grad);
      dS[j] = grad * (1.0f - th * th);
    }
  }
  if (dscores) {
    // The keys this row does not see (causal, window): dS 0.
    for (int64_t j = threadIdx.x; j < a.s; j += blockDim.x)
      if (j < first || j >= end)
        store(dscores + row * a.s + j, 0.0f);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = first; j < end; ++j)
      acc += dS[j] * load(kb[j * a.d + c]);
    store(dq + row * a.d + c, a.scale * acc);
  }
}

/// One block per key row (b, kh, j): dv_j = sum P m dO_i and dk_j = scale
/// sum dS (1 - tanh^2) q_i over the visible queries of the group's heads,
/// one query per
/// warp at a time. Shared: k row [d], v row [d], per-warp sums [2][warps][d].
template <typename T>
__global__ void keyGradKernel(Geometry g, const T *dout, const T *q, const T *k,
                              const T *v, const T *mask, const float *lse,
                              const float *rowD, T *dk, T *dv) {
  extern __shared__ float smem[];
  const OtcrtAttention &a = g.a;
  float *kRow = smem, *vRow = smem + a.d;
  float *accK = smem + 2 * a.d, *accV = accK + kAttnWarps * a.d;
  const int64_t kr = blockIdx.x;
  const int64_t j = kr % a.s, kh = (kr / a.s) % a.hk, b = kr / (a.s * a.hk);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
    kRow[c] = load(k[kr * a.d + c]);
    vRow[c] = load(v[kr * a.d + c]);
  }
  for (int64_t e = threadIdx.x; e < kAttnWarps * a.d; e += blockDim.x)
    accK[e] = accV[e] = 0.0f;
  __syncthreads();
  float *myK = accK + warp * a.d, *myV = accV + warp * a.d;
  const int64_t first = g.firstQuery(j), last = g.endQuery(j);
  const int64_t perHead = last > first ? last - first : 0;
  for (int64_t n = warp; n < g.group * perHead; n += kAttnWarps) {
    const int64_t hi = kh * g.group + n / perHead, i = first + n % perHead;
    const int64_t row = (b * a.h + hi) * a.t + i;
    const T *qi = q + row * a.d, *dOi = dout + row * a.d;
    float qk = 0.0f, dOv = 0.0f;
    for (int64_t c = lane; c < a.d; c += 32) {
      qk += load(qi[c]) * kRow[c];
      dOv += load(dOi[c]) * vRow[c];
    }
    qk = warpSum(qk);
    dOv = warpSum(dOv);
    float th;
    float sc = g.capped(qk, th);
    float prob = expf(g.masked(sc, mask, b, hi, i, j) - lse[row]);
    float m = g.dropFactor(row, j);
    float dS = prob * (m * dOv - rowD[row]) * (1.0f - th * th);
    for (int64_t c = lane; c < a.d; c += 32) {
      myV[c] += prob * m * load(dOi[c]);
      myK[c] += a.scale * dS * load(qi[c]);
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < a.d; c += blockDim.x) {
    float sk = 0.0f, sv = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) {
      sk += accK[w * a.d + c];
      sv += accV[w * a.d + c];
    }
    store(dk + kr * a.d + c, sk);
    store(dv + kr * a.d + c, sv);
  }
}

/// Threads of a sinkGradKernel block.
constexpr int kSinkBlock = 256;

/// One block per head hi: dsinks[hi] = -sum over (b, i) of exp(sinks[hi] -
/// lse) D for the rows (b, hi, i) of lse and rowD ([b, h, t]): the sink's
/// probability times the row's dO . O, the term a key with no value leaves of
/// dS = P (dP - D). Each thread's terms, then the threads' sums, are added
/// in a fixed order (deterministic).
__global__ void sinkGradKernel(const float *sinks, const float *lse,
                               const float *rowD, int64_t b, int64_t h,
                               int64_t t, float *dsinks) {
  __shared__ float scratch[32];
  const int64_t hi = blockIdx.x;
  const float sink = sinks[hi];
  float sum = 0.0f;
  for (int64_t n = threadIdx.x; n < b * t; n += blockDim.x) {
    const int64_t row = ((n / t) * h + hi) * t + n % t;
    sum += expf(sink - lse[row]) * rowD[row];
  }
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0)
    dsinks[hi] = -sum;
}

/// One warp per query row (b, hi, i) of [b, h, t] rows: rowD = dO_i . O_i,
/// dout and out stored [b, h, t, d] or, with `bthd`, [b, t, h, d] (dense).
template <typename T>
__global__ void rowDotsKernel(const T *dout, const T *out, int64_t rows,
                              int64_t h, int64_t t, int64_t d, bool bthd,
                              float *rowD) {
  const int lane = threadIdx.x & 31;
  const int64_t row =
      blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= rows)
    return; // the whole warp
  const int64_t i = row % t, hi = (row / t) % h, b = row / (t * h);
  const int64_t at = (bthd ? (b * t + i) * h + hi : row) * d;
  float part = 0.0f;
  for (int64_t c = lane; c < d; c += 32)
    part += load(dout[at + c]) * load(out[at + c]);
  part = warpSum(part);
  if (lane == 0)
    rowD[row] = part;
}

/// The sinks' gradient of a call whose [b, h, t] D rows are in `rowD`, when
/// it asks for it (sinks and dsinks given).
void sinkGrad(const OtcrtAttention &a, const float *lse, const float *rowD,
              cudaStream_t stream) {
  if (a.sinks && a.dsinks && a.h > 0)
    sinkGradKernel<<<static_cast<unsigned>(a.h), kSinkBlock, 0, stream>>>(
        a.sinks, lse, rowD, a.b > 0 ? a.b : 0, a.h, a.t > 0 ? a.t : 0,
        a.dsinks);
}

/// The backward of a call without rows or with an empty head size: nothing
/// to compute but the sinks' gradient, which no row adds to (0).
int emptyBackward(const OtcrtAttention &a, cudaStream_t stream) {
  if (!a.sinks || !a.dsinks || a.h <= 0)
    return 0;
  return cudaMemsetAsync(a.dsinks, 0, sizeof(float) * a.h, stream) ==
                 cudaSuccess
             ? 0
             : 1;
}

/// Allows `bytes` of dynamic shared memory for `kernel`; false when the
/// device cannot give that much. The 48 KiB a block gets without opting in
/// hold the kernel's static shared memory (its reduction scratch) too, so
/// the opt-in is needed from 48 KiB minus that, not from 48 KiB.
template <typename Kernel> bool allowShared(Kernel kernel, size_t bytes) {
  cudaFuncAttributes attrs{};
  if (cudaFuncGetAttributes(&attrs, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (bytes + attrs.sharedSizeBytes <= kDefaultSharedBytes)
    return true;
  if (static_cast<int>(bytes) <= attrs.maxDynamicSharedSizeBytes)
    return true; // raised by an earlier call
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes)) == cudaSuccess;
}

/// True when the query heads do not split into groups of the key heads, the
/// window or the soft cap is negative (or the cap NaN), or a row stride is
/// set without the [b, t, h, d] layout or is shorter than the rows of q or
/// of k and v.
bool invalid(const OtcrtAttention &a) {
  return (a.hk <= 0 ? a.h > 0 : a.h % a.hk != 0) || a.window < 0 ||
         !(a.softcap >= 0.0f) ||
         (a.row_stride != 0 &&
          (a.layout != OTCRT_LAYOUT_BTHD || a.row_stride < a.h * a.d ||
           a.row_stride < a.hk * a.d));
}

template <typename T>
int forward(const OtcrtAttention *a, const T *q, const T *k, const T *v,
            const T *mask, T *out, float *lse, void *streamArg) {
  if (invalid(*a))
    return 1;
  const int64_t rows = a->b * a->h * a->t;
  if (a->b <= 0 || a->h <= 0 || a->t <= 0 || a->d <= 0)
    return 0;
  Geometry g = makeGeometry(*a);
  size_t shared = sizeof(float) * static_cast<size_t>(a->d + a->s);
  if (!allowShared(forwardKernel<T>, shared))
    return 1;
  forwardKernel<T><<<static_cast<unsigned>(rows), kAttnBlock, shared,
                     asStream(streamArg)>>>(g, q, k, v, mask, out, lse);
  return launchStatus();
}

template <typename T>
int backward(const OtcrtAttention *a, const T *dout, const T *q, const T *k,
             const T *v, const T *mask, const T *out, const float *lse, T *dq,
             T *dk, T *dv, void *streamArg) {
  if (invalid(*a))
    return 1;
  cudaStream_t stream = asStream(streamArg);
  if (a->b <= 0 || a->h <= 0 || a->d <= 0)
    return emptyBackward(*a, stream);
  Geometry g = makeGeometry(*a);
  const int64_t rows = a->b * a->h * (a->t > 0 ? a->t : 0);
  const int64_t keyRows = a->b * a->hk * (a->s > 0 ? a->s : 0);
  size_t qShared = sizeof(float) * static_cast<size_t>(2 * a->d + a->s);
  size_t kShared =
      sizeof(float) * static_cast<size_t>(a->d) * (2 + 2 * kAttnWarps);
  if (!allowShared(queryGradKernel<T>, qShared) ||
      !allowShared(keyGradKernel<T>, kShared))
    return 1;
  float *rowD = reinterpret_cast<float *>(
      scratch(ScratchUse::AttentionRowD,
              sizeof(float) * static_cast<size_t>(rows), stream));
  if (!rowD)
    return 1;
  if (rows > 0)
    queryGradKernel<T>
        <<<static_cast<unsigned>(rows), kAttnBlock, qShared, stream>>>(
            g, dout, q, k, v, mask, out, lse, rowD, dq,
            static_cast<T *>(a->dscores));
  if (keyRows > 0)
    keyGradKernel<T>
        <<<static_cast<unsigned>(keyRows), kAttnBlock, kShared, stream>>>(
            g, dout, q, k, v, mask, lse, rowD, dk, dv);
  sinkGrad(*a, lse, rowD, stream);
  return launchStatus();
}

/// y ([b, m, n, d]) = x ([b, n, m, d]) with the middle dimensions swapped:
/// x's (b, n) rows xRow elements apart, y's (b, m) rows yRow apart (the
/// elements between y's rows are left as they are).
template <typename T>
__global__ void swapMiddleKernel(const T *x, T *y, int64_t b, int64_t n,
                                 int64_t m, int64_t d, int64_t xRow,
                                 int64_t yRow) {
  const int64_t total = b * n * m * d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       e < total; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % d, j = (e / d) % m, i = (e / (d * m)) % n,
                  bi = e / (d * m * n);
    y[(bi * m + j) * yRow + i * d + c] = x[(bi * n + i) * xRow + j * d + c];
  }
}

template <typename T>
void swapMiddle(const T *x, T *y, int64_t b, int64_t n, int64_t m, int64_t d,
                int64_t xRow, int64_t yRow, cudaStream_t stream) {
  const int64_t total = b * n * m * d;
  if (total <= 0)
    return;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 4096);
  swapMiddleKernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      x, y, b, n, m, d, xRow, yRow);
}

/// The elements from one (b, t) row of a [b, t, heads, d] operand to the
/// next: row_stride, or heads·d when it is 0.
int64_t rowStride(const OtcrtAttention &a, int64_t heads) {
  return a.row_stride != 0 ? a.row_stride : heads * a.d;
}

/// The fallback kernels read [b, h, t, d]: a [b, t, h, d] call runs them on
/// transposed copies, read from and written to rows row_stride apart (the
/// cuDNN path reads that layout in place).
template <typename T>
int forwardAnyLayout(const OtcrtAttention *a, const T *q, const T *k,
                     const T *v, const T *mask, T *out, float *lse,
                     void *streamArg) {
  if (a->layout == OTCRT_LAYOUT_BHTD)
    return forward(a, q, k, v, mask, out, lse, streamArg);
  if (a->layout != OTCRT_LAYOUT_BTHD || invalid(*a))
    return 1;
  if (a->b <= 0 || a->h <= 0 || a->t <= 0 || a->d <= 0)
    return 0;
  cudaStream_t stream = asStream(streamArg);
  const size_t qn = a->b * a->h * a->t * a->d,
               kvn = a->b * a->hk * (a->s > 0 ? a->s : 0) * a->d;
  T *base = reinterpret_cast<T *>(scratch(
      ScratchUse::AttentionLayout, sizeof(T) * (2 * qn + 2 * kvn), stream));
  if (!base)
    return 1;
  T *qc = base, *oc = base + qn, *kc = base + 2 * qn, *vc = kc + kvn;
  const int64_t rq = rowStride(*a, a->h), rkv = rowStride(*a, a->hk);
  swapMiddle(q, qc, a->b, a->t, a->h, a->d, rq, a->t * a->d, stream);
  swapMiddle(k, kc, a->b, a->s, a->hk, a->d, rkv, a->s * a->d, stream);
  swapMiddle(v, vc, a->b, a->s, a->hk, a->d, rkv, a->s * a->d, stream);
  OtcrtAttention c = *a;
  c.layout = OTCRT_LAYOUT_BHTD;
  c.row_stride = 0;
  int rc = forward(&c, qc, kc, vc, mask, oc, lse, streamArg);
  if (rc == 0)
    swapMiddle(static_cast<const T *>(oc), out, a->b, a->h, a->t, a->d,
               a->t * a->d, a->h * a->d, stream);
  return rc ? rc : launchStatus();
}

template <typename T>
int backwardAnyLayout(const OtcrtAttention *a, const T *dout, const T *q,
                      const T *k, const T *v, const T *mask, const T *out,
                      const float *lse, T *dq, T *dk, T *dv, void *streamArg) {
  if (a->layout == OTCRT_LAYOUT_BHTD)
    return backward(a, dout, q, k, v, mask, out, lse, dq, dk, dv, streamArg);
  if (a->layout != OTCRT_LAYOUT_BTHD || invalid(*a))
    return 1;
  cudaStream_t stream = asStream(streamArg);
  if (a->b <= 0 || a->h <= 0 || a->d <= 0)
    return emptyBackward(*a, stream);
  const size_t qn = a->b * a->h * (a->t > 0 ? a->t : 0) * a->d,
               kvn = a->b * a->hk * (a->s > 0 ? a->s : 0) * a->d;
  T *base = reinterpret_cast<T *>(scratch(
      ScratchUse::AttentionLayout, sizeof(T) * (4 * qn + 4 * kvn), stream));
  if (!base)
    return 1;
  T *dOc = base, *qc = dOc + qn, *oc = qc + qn, *dqc = oc + qn,
    *kc = dqc + qn, *vc = kc + kvn, *dkc = vc + kvn, *dvc = dkc + kvn;
  const int64_t rq = rowStride(*a, a->h), rkv = rowStride(*a, a->hk);
  const int64_t tRow = a->t * a->d, sRow = a->s * a->d;
  swapMiddle(dout, dOc, a->b, a->t, a->h, a->d, a->h * a->d, tRow, stream);
  swapMiddle(q, qc, a->b, a->t, a->h, a->d, rq, tRow, stream);
  swapMiddle(out, oc, a->b, a->t, a->h, a->d, a->h * a->d, tRow, stream);
  swapMiddle(k, kc, a->b, a->s, a->hk, a->d, rkv, sRow, stream);
  swapMiddle(v, vc, a->b, a->s, a->hk, a->d, rkv, sRow, stream);
  OtcrtAttention c = *a;
  c.layout = OTCRT_LAYOUT_BHTD;
  c.row_stride = 0;
  int rc = backward(&c, static_cast<const T *>(dOc), static_cast<const T *>(qc),
                    static_cast<const T *>(kc), static_cast<const T *>(vc),
                    mask, static_cast<const T *>(oc), lse, dqc, dkc, dvc,
                    streamArg);
  if (rc == 0) {
    swapMiddle(static_cast<const T *>(dqc), dq, a->b, a->h, a->t, a->d, tRow,
               rq, stream);
    swapMiddle(static_cast<const T *>(dkc), dk, a->b, a->hk, a->s, a->d, sRow,
               rkv, stream);
    swapMiddle(static_cast<const T *>(dvc), dv, a->b, a->hk, a->s, a->d, sRow,
               rkv, stream);
  }
  return rc ? rc : launchStatus();
}

/// out [bm, h, t, s] (rows of `rowStride` elements) = mask (bi, hi, *, si)
/// with mask's strides (sh = 0: one row for every head): the rows of a
/// mask broadcast over the queries, repeated for each query and head.
__global__ void maskOverQueriesKernel(const otcrt_bf16 *mask, otcrt_bf16 *out,
                                      int64_t bm, int64_t h, int64_t t,
                                      int64_t s, int64_t rowStride, int64_t sb,
                                      int64_t sh, int64_t ss) {
  const int64_t total = bm * h * t * s;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       e < total; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t si = e % s, row = e / s;
    const int64_t hi = (row / t) % h, bi = row / (t * h);
    out[row * rowStride + si] = mask[bi * sb + hi * sh + si * ss];
  }
}

/// One block per batch row: the first hidden key and the last seen one of
/// the row's key padding (values 0: seen; at most -1e4 as BF16 rounds it,
/// -9984: hidden), lens[row] = t and keyLens[row] = the first hidden key
/// (at least 1: keyLength recovers a 0); a seen key after a hidden one, or
/// a value that is neither, is recorded.
__global__ void keyLengthsKernel(const otcrt_bf16 *mask, int64_t sb, int64_t ss,
                                 int64_t t, int64_t s, int32_t *lens,
                                 int32_t *keyLens, OtcrtKernelError *record) {
  __shared__ int firstHidden, lastSeen;
  const int64_t row = blockIdx.x;
  if (threadIdx.x == 0) {
    firstHidden = static_cast<int>(s);
    lastSeen = -1;
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < s; j += blockDim.x) {
    const float m = load(mask[row * sb + j * ss]);
    if (m == 0.0f)
      atomicMax(&lastSeen, static_cast<int>(j));
    else if (m <= kPaddingHides)
      atomicMin(&firstHidden, static_cast<int>(j));
    else
      recordError(record, OTCRT_ERROR_PADDING, row, j, s);
  }
  __syncthreads();
  if (threadIdx.x != 0)
    return;
  if (lastSeen > firstHidden)
    recordError(record, OTCRT_ERROR_PADDING, row, lastSeen, s);
  lens[row] = static_cast<int32_t>(t);
  keyLens[row] = static_cast<int32_t>(firstHidden > 0 ? firstHidden : 1);
}

/// The length of batch row b of a key padding `mask` (batch stride
/// `maskSb`) given to cuDNN as lengths: keyLens[b], cuDNN's (at least 1),
/// or 0 where it is 1 and the padding hides key 0 too (a sequence that
/// hides every key).
__device__ int64_t keyLength(const int32_t *keyLens, const otcrt_bf16 *mask,
                             int64_t maskSb, int64_t b) {
  const int32_t n = keyLens[b];
  return n == 1 && load(mask[b * maskSb]) <= kPaddingHides ? 0 : n;
}

/// dK and dV of key (bi, kh, j) set to 0 where j is at or past the length
/// of row bi (keyLength); element (bi, kh, j, c) at bi * sb + kh * sh + j *
/// ss + c.
__global__ void zeroKeysKernel(const int32_t *keyLens, const otcrt_bf16 *mask,
                               int64_t maskSb, otcrt_bf16 *dk, otcrt_bf16 *dv,
                               int64_t b, int64_t hk, int64_t s, int64_t d,
                               int64_t sb, int64_t sh, int64_t ss) {
  const int64_t total = b * hk * s * d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       e < total; e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % d, j = (e / d) % s, kh = (e / (d * s)) % hk,
                  bi = e / (d * s * hk);
    if (j < keyLength(keyLens, mask, maskSb, bi))
      continue;
    const int64_t at = bi * sb + kh * sh + j * ss + c;
    store(dk + at, 0.0f);
    store(dv + at, 0.0f);
  }
}

/// Whether query row i of head (b, hi) of a call with a key padding sees a
/// key (the warp's lanes together): one of its band [firstKey, visibleKeys)
/// below the sequence's length (keyLens and the padding `mask`: keyLength)
/// or, without keyLens, whose value of `mask` (a's strides) does not hide it.
__device__ bool seesKey(const Geometry &g, const int32_t *keyLens,
                        const otcrt_bf16 *mask, int64_t b, int64_t hi,
                        int64_t i, int lane) {
  const int64_t first = g.firstKey(i), end = g.visibleKeys(i);
  if (keyLens) {
    const int64_t len = keyLength(keyLens, mask, g.a.mask_strides[0], b);
    return (end < len ? end : len) > first;
  }
  for (int64_t j0 = first; j0 < end; j0 += 32) {
    const int64_t j = j0 + lane;
    if (__any_sync(0xffffffffu,
                   j < end && g.maskAt(mask, b, hi, i, j) > kPaddingHides))
      return true;
  }
  return false;
}

/// Warps of a noKeyRowsKernel block.
constexpr int kNoKeyWarps = 8;

/// One warp per query row (b, hi, i): a row that sees no key (seesKey) gets
/// zeros in `out` (dense in a's layout) and `dq` (rows dqRow apart in [b,
/// t, h, d]), where given, and lse = sinks[hi], or +inf without sinks, when
/// `lse` is given.
__global__ void noKeyRowsKernel(Geometry g, const int32_t *keyLens,
                                const otcrt_bf16 *mask, otcrt_bf16 *out,
                                float *lse, otcrt_bf16 *dq, int64_t dqRow) {
  const OtcrtAttention &a = g.a;
  const int lane = threadIdx.x & 31;
  const int64_t row =
      blockIdx.x * static_cast<int64_t>(kNoKeyWarps) + (threadIdx.x >> 5);
  if (row >= a.b * a.h * a.t)
    return; // the whole warp
  const int64_t i = row % a.t, hi = (row / a.t) % a.h, b = row / (a.t * a.h);
  if (seesKey(g, keyLens, mask, b, hi, i, lane))
    return;
  const bool bthd = a.layout == OTCRT_LAYOUT_BTHD;
  const int64_t outAt = (bthd ? (b * a.t + i) * a.h + hi : row) * a.d;
  const int64_t dqAt = bthd ? (b * a.t + i) * dqRow + hi * a.d : row * a.d;
  for (int64_t c = lane; c < a.d; c += 32) {
    if (out)
      store(out + outAt + c, 0.0f);
    if (dq)
      store(dq + dqAt + c, 0.0f);
  }
  if (lse && lane == 0)
    lse[row] = a.sinks ? a.sinks[hi] : INFINITY;
}

} // namespace

int zeroKeysPastLengths(const OtcrtAttention &a, const int32_t *keyLens,
                        const otcrt_bf16 *mask, otcrt_bf16 *dk, otcrt_bf16 *dv,
                        void *streamArg) {
  const int64_t total = a.b * a.hk * a.s * a.d;
  if (total <= 0)
    return 0;
  int64_t sb, sh, ss;
  if (a.layout == OTCRT_LAYOUT_BTHD) {
    const int64_t row = rowStride(a, a.hk);
    sb = a.s * row, sh = a.d, ss = row;
  } else {
    sb = a.hk * a.s * a.d, sh = a.s * a.d, ss = a.d;
  }
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 4096);
  zeroKeysKernel<<<static_cast<unsigned>(blocks), 256, 0,
                   asStream(streamArg)>>>(keyLens, mask, a.mask_strides[0], dk,
                                          dv, a.b, a.hk, a.s, a.d, sb, sh, ss);
  return launchStatus();
}

int clearNoKeyRows(const OtcrtAttention &a, const int32_t *keyLens,
                   const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse,
                   otcrt_bf16 *dq, void *streamArg) {
  const int64_t rows = a.b * a.h * a.t;
  if (rows <= 0 || a.d <= 0 || !mask)
    return 0;
  const int64_t blocks = (rows + kNoKeyWarps - 1) / kNoKeyWarps;
  noKeyRowsKernel<<<static_cast<unsigned>(blocks), 32 * kNoKeyWarps, 0,
                    asStream(streamArg)>>>(makeGeometry(a), keyLens, mask, out,
                                           lse, dq, rowStride(a, a.h));
  return launchStatus();
}

float *sinkGradRows(const OtcrtAttention &a, void *streamArg) {
  const int64_t rows = a.b * a.h * a.t;
  return reinterpret_cast<float *>(
      scratch(ScratchUse::AttentionRowD,
              sizeof(float) * static_cast<size_t>(rows > 0 ? rows : 0),
              asStream(streamArg)));
}

int sinkGradient(const OtcrtAttention &a, const otcrt_bf16 *dout,
                 const otcrt_bf16 *out, const float *lse, float *rowD,
                 void *streamArg) {
  cudaStream_t stream = asStream(streamArg);
  const int64_t rows = a.b * a.h * a.t;
  if (rows <= 0 || a.d <= 0)
    return emptyBackward(a, stream);
  constexpr int kRowsPerBlock = 8; // warps of a rowDotsKernel block
  rowDotsKernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) /
                                        kRowsPerBlock),
                  32 * kRowsPerBlock, 0, stream>>>(
      dout, out, rows, a.h, a.t, a.d, a.layout == OTCRT_LAYOUT_BTHD, rowD);
  sinkGrad(a, lse, rowD, stream);
  return launchStatus();
}

const int32_t *keyLengths(const OtcrtAttention &a, const otcrt_bf16 *mask,
                          void *streamArg) {
  cudaStream_t stream = asStream(streamArg);
  const int64_t keys = keyLengthsOffset(a.b);
  int32_t *lens = reinterpret_cast<int32_t *>(
      scratch(ScratchUse::AttentionLengths,
              sizeof(int32_t) * static_cast<size_t>(2 * keys), stream));
  if (!lens || a.b <= 0 || a.s <= 0 || a.s > INT32_MAX)
    return nullptr;
  keyLengthsKernel<<<static_cast<unsigned>(a.b), 256, 0, stream>>>(
      mask, a.mask_strides[0], a.mask_strides[3], a.t, a.s, lens, lens + keys,
      errorRecord());
  if (cudaGetLastError() != cudaSuccess)
    return nullptr;
  return lens;
}

void writtenMaskStrides(const OtcrtAttention &a, int64_t strides[4]) {
  const int64_t row = (a.s + 7) / 8 * 8;
  strides[0] = a.mask_strides[0] != 0 && a.b > 1 ? a.h * a.t * row : 0;
  strides[1] = a.h > 1 ? a.t * row : 0;
  strides[2] = row;
  strides[3] = 1;
}

const otcrt_bf16 *maskOverQueries(const OtcrtAttention &a,
                                  const otcrt_bf16 *mask,
                                  OtcrtAttention &expanded, void *streamArg) {
  cudaStream_t stream = asStream(streamArg);
  const int64_t bm = a.mask_strides[0] != 0 ? a.b : 1;
  const int64_t row = (a.s + 7) / 8 * 8;
  const int64_t total = bm * a.h * a.t * a.s;
  otcrt_bf16 *out = reinterpret_cast<otcrt_bf16 *>(scratch(
      ScratchUse::AttentionMask,
      sizeof(otcrt_bf16) * static_cast<size_t>(bm * a.h * a.t * row), stream));
  if (!out || total <= 0)
    return nullptr;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 4096);
  maskOverQueriesKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      mask, out, bm, a.h, a.t, a.s, row, a.mask_strides[0], a.mask_strides[1],
      a.mask_strides[3]);
  if (cudaGetLastError() != cudaSuccess)
    return nullptr;
  expanded = a;
  writtenMaskStrides(a, expanded.mask_strides);
  return out;
}

int attentionFwdFallback(const OtcrtAttention *a, const float *q,
                         const float *k, const float *v, const float *mask,
                         float *out, float *lse, void *stream) {
  return forwardAnyLayout(a, q, k, v, mask, out, lse, stream);
}
int attentionFwdFallback(const OtcrtAttention *a, const otcrt_bf16 *q,
                         const otcrt_bf16 *k, const otcrt_bf16 *v,
                         const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse,
                         void *stream) {
  return forwardAnyLayout(a, q, k, v, mask, out, lse, stream);
}
int attentionBwdFallback(const OtcrtAttention *a, const float *dout,
                         const float *q, const float *k, const float *v,
                         const float *mask, const float *out, const float *lse,
                         float *dq, float *dk, float *dv, void *stream) {
  return backwardAnyLayout(a, dout, q, k, v, mask, out, lse, dq, dk, dv,
                           stream);
}
int attentionBwdFallback(const OtcrtAttention *a, const otcrt_bf16 *dout,
                         const otcrt_bf16 *q, const otcrt_bf16 *k,
                         const otcrt_bf16 *v, const otcrt_bf16 *mask,
                         const otcrt_bf16 *out, const float *lse,
                         otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                         void *stream) {
  return backwardAnyLayout(a, dout, q, k, v, mask, out, lse, dq, dk, dv,
                           stream);
}

} // namespace cuda
} // namespace otcrt
