// Device sum of squares over arena ranges (otcrt_sum_squares in
// otcrt/kernels.h). Each range gets a grid whose size depends on its length
// alone; every block sums a fixed grid-stride share of it in double (read
// in 16-byte packets where the range is aligned to them) and writes one
// partial to its place in a scratch array; one block then adds the
// partials in a fixed order and the sum is copied back. No atomics, so
// the result repeats bit for bit. The scratch array is allocated (and
// grown) on a call, which therefore never runs inside a graph capture.
// otcrt_scale_ranges scales the same ranges in place with one grid-stride
// kernel per range; otcrt_grad_factor ends with one block that also turns
// the sum into AdamW's gradient factor in device memory (NaN, a skipped
// update, when a loss it is given is not finite or a kernel recorded a data
// error) and copies the norm to the host asynchronously: clipping with no
// pass over the gradients and no wait.
#include "common.cuh"

#include <mutex>

namespace otcrt {
namespace cuda {
namespace {

/// One block's partial sum of squares of a grid-stride share of x, read in
/// packets of W elements (x aligned to W; W = 1 reads element by element):
/// each thread loads OTCRT_CUDA_SUMSQ_UNROLL packets a grid stride apart
/// before it adds any, into as many sums, then the rest one packet at a
/// time, and the first threads one element each past the last whole
/// packet; the order depends on n, W and the grid alone.
template <int W, typename T>
__global__ void partialSquares(int64_t n, const T *x, double *partial) {
  constexpr int U = OTCRT_CUDA_SUMSQ_UNROLL;
  __shared__ double scratch[32];
  const int64_t packets = n / W;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t i = first;
  double sums[U] = {};
  for (; i + (U - 1) * stride < packets; i += U * stride) {
    float v[U][W];
#pragma unroll
    for (int u = 0; u < U; ++u)
      loadPacket<W>(x + (i + u * stride) * W, v[u]);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int w = 0; w < W; ++w)
        sums[u] += static_cast<double>(v[u][w]) * v[u][w];
  }
  for (; i < packets; i += stride) {
    float v[W];
    loadPacket<W>(x + i * W, v);
#pragma unroll
    for (int w = 0; w < W; ++w)
      sums[0] += static_cast<double>(v[w]) * v[w];
  }
  if (const int64_t rest = packets * W + first; rest < n) {
    double v = load(x[rest]);
    sums[0] += v * v;
  }
  double acc = 0;
#pragma unroll
  for (int u = 0; u < U; ++u)
    acc += sums[u];
  acc = blockSum(acc, scratch);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = acc;
}

/// Queues partialSquares over the n elements at x, in 16-byte packets when
/// x is 16-byte aligned.
template <typename T>
void launchPartialSquares(int blocks, cudaStream_t stream, int64_t n,
                          const T *x, double *partial) {
  if (reinterpret_cast<uintptr_t>(x) % OTCRT_CUDA_PACKET_BYTES == 0)
    partialSquares<kPack<T>><<<blocks, kBlock, 0, stream>>>(n, x, partial);
  else
    partialSquares<1><<<blocks, kBlock, 0, stream>>>(n, x, partial);
}

template <typename T>
__global__ void scaleKernel(int64_t n, T *x, float factor) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(x + i, load(x[i]) * factor);
}

__global__ void addPartials(int64_t n, const double *partial, double *sum) {
  __shared__ double scratch[32];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += partial[i];
  acc = blockSum(acc, scratch);
  if (threadIdx.x == 0)
    *sum = acc;
}

/// One block: with n = scale sqrt(the sum of the partials, added as
/// addPartials adds them), *factor = scale min(1, clip / n) (clip > 0) or
/// scale when n, every one of the numChecks checks and the error record
/// are good (finite, finite, empty), NaN when not; *norm = n.
__global__ void finishFactor(int64_t n, const double *partial, float scale,
                             float clip, const float *checks, int32_t numChecks,
                             const OtcrtKernelError *record, float *factor,
                             double *norm) {
  __shared__ double scratch[32];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += partial[i];
  acc = blockSum(acc, scratch);
  int bad = 0;
  for (int32_t i = threadIdx.x; i < numChecks; i += blockDim.x)
    bad |= !isfinite(checks[i]);
  bad = __syncthreads_or(bad);
  if (threadIdx.x != 0)
    return;
  if (record && record->code != OTCRT_ERROR_NONE)
    bad = 1;
  double g = static_cast<double>(scale) * sqrt(acc);
  double f = scale;
  if (clip > 0 && g > clip)
    f *= clip / g;
  *factor = isfinite(g) && !bad ? static_cast<float>(f) : NAN;
  *norm = g;
}

/// Blocks for a range of n elements: a function of n only
/// (otcrt/launch_config.h, which the compiler's prediction reads too).
int blocksFor(int64_t n) { return static_cast<int>(otcrt_sumsq_blocks(n)); }

/// Scratch of at least `doubles` device doubles (plus one for the sum).
double *scratch(int64_t doubles) {
  static std::mutex mutex;
  static double *buffer = nullptr;
  static int64_t capacity = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (doubles + 1 > capacity) {
    if (buffer)
      (void)cudaFree(buffer);
    buffer = nullptr;
    capacity = 0;
    void *p = nullptr;
    if (cudaMalloc(&p, static_cast<size_t>(doubles + 1) * sizeof(double)) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    buffer = static_cast<double *>(p);
    capacity = doubles + 1;
  }
  return buffer;
}

/// Queues every range's partial sums of squares into the scratch array
/// (one per block, in range order); *count is how many. NULL on bad ranges
/// or when the scratch cannot be allocated.
double *queuePartials(const char *arena, int32_t numRanges,
                      const OtcrtRange *ranges, cudaStream_t stream,
                      int64_t *count) {
  if (numRanges < 0 || (numRanges > 0 && (!arena || !ranges)))
    return nullptr;
  int64_t partials = 0;
  for (int32_t r = 0; r < numRanges; ++r) {
    if (ranges[r].offset < 0 || ranges[r].count < 0)
      return nullptr;
    partials += blocksFor(ranges[r].count);
  }
  // At least one partial (zero when there are no elements), so that the
  // sum is always that of the scratch array.
  double *partial = scratch(partials > 0 ? partials : 1);
  if (!partial)
    return nullptr;
  if (partials == 0 &&
      cudaMemsetAsync(partial, 0, sizeof(double), stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  int64_t at = 0;
  for (int32_t r = 0; r < numRanges; ++r) {
    const OtcrtRange &range = ranges[r];
    int blocks = blocksFor(range.count);
    const char *p = arena + range.offset;
    if (range.bf16)
      launchPartialSquares(blocks, stream, range.count,
                           reinterpret_cast<const otcrt_bf16 *>(p),
                           partial + at);
    else
      launchPartialSquares(blocks, stream, range.count,
                           reinterpret_cast<const float *>(p), partial + at);
    at += blocks;
  }
  *count = partials > 0 ? partials : 1;
  return partial;
}

/// Queues every range's partials, then `finish` (one block over the
/// partials, writing its double after them) and the copy of that double to
/// `host` (page-locked memory keeps that copy asynchronous); false when
/// any of it fails to queue.
template <typename Finish>
bool queueReduction(const char *arena, int32_t numRanges,
                    const OtcrtRange *ranges, cudaStream_t stream, double *host,
                    Finish finish) {
  int64_t partials = 0;
  double *partial = queuePartials(arena, numRanges, ranges, stream, &partials);
  if (!partial)
    return false;
  finish(partials, partial, partial + partials);
  if (launchStatus())
    return false;
  if (cudaMemcpyAsync(host, partial + partials, sizeof(double),
                      cudaMemcpyDeviceToHost, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

} // namespace
} // namespace cuda
} // namespace otcrt

extern "C" int otcrt_sum_squares(const char *arena, int32_t num_ranges,
                                 const OtcrtRange *ranges, double *sum,
                                 void *streamArg) {
  using namespace otcrt::cuda;
  if (!sum)
    return 1;
  cudaStream_t stream = asStream(streamArg);
  double host = 0;
  if (!queueReduction(arena, num_ranges, ranges, stream, &host,
                      [&](int64_t n, const double *partial, double *out) {
                        addPartials<<<1, kBlock, 0, stream>>>(n, partial, out);
                      }))
    return 1;
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  *sum = host;
  return 0;
}

extern "C" int otcrt_grad_factor(const char *arena, int32_t num_ranges,
                                 const OtcrtRange *ranges, float scale,
                                 float clip, const float *checks,
                                 int32_t num_checks, float *factor,
                                 double *norm, void *streamArg) {
  using namespace otcrt::cuda;
  if (!factor || !norm || num_checks < 0 || (num_checks > 0 && !checks))
    return 1;
  cudaStream_t stream = asStream(streamArg);
  const OtcrtKernelError *record = errorRecord();
  return queueReduction(arena, num_ranges, ranges, stream, norm,
                        [&](int64_t n, const double *partial, double *out) {
                          finishFactor<<<1, kBlock, 0, stream>>>(
                              n, partial, scale, clip, checks, num_checks,
                              record, factor, out);
                        })
             ? 0
             : 1;
}

extern "C" int otcrt_scale_ranges(char *arena, int32_t num_ranges,
                                  const OtcrtRange *ranges, float factor,
                                  void *streamArg) {
  using namespace otcrt::cuda;
  if (num_ranges < 0 || (num_ranges > 0 && (!arena || !ranges)))
    return 1;
  for (int32_t r = 0; r < num_ranges; ++r)
    if (ranges[r].offset < 0 || ranges[r].count < 0)
      return 1;
  cudaStream_t stream = asStream(streamArg);
  for (int32_t r = 0; r < num_ranges; ++r) {
    const OtcrtRange &range = ranges[r];
    if (range.count == 0)
      continue;
    // Four waves of blocks on any current GPU, each thread a few elements.
    int64_t want = (range.count + kBlock * 4 - 1) / (kBlock * 4);
    int blocks = static_cast<int>(want < 1 ? 1 : (want > 4096 ? 4096 : want));
    char *p = arena + range.offset;
    if (range.bf16)
      scaleKernel<<<blocks, kBlock, 0, stream>>>(
          range.count, reinterpret_cast<otcrt_bf16 *>(p), factor);
    else
      scaleKernel<<<blocks, kBlock, 0, stream>>>(
          range.count, reinterpret_cast<float *>(p), factor);
  }
  return launchStatus() ? 1 : 0;
}
