// Helpers of the GPU test binary (otcrt-cuda-kernel-tests: kernels_cuda_test.cu
// and the other *_cuda_test.cu): device copies of host vectors and back, random
// inputs exactly representable in bfloat16 (or any float), conversions (and a
// matrix stored as F32 or BF16 bytes), the element-wise comparison of device
// and host results, and the PASS/FAIL verdict of one check, counted in
// `failures`.
#ifndef OTCRT_TEST_CUDA_TEST_UTIL_CUH
#define OTCRT_TEST_CUDA_TEST_UTIL_CUH

#include "cpu/common.h"
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

namespace cudatest {

using otcrt::cpu::bf16ToFloat;
using otcrt::cpu::floatToBf16;
using Bf16s = std::vector<otcrt_bf16>;
using Floats = std::vector<float>;

/// Checks that failed, and device allocations to free at the end.
inline int failures = 0;
inline std::vector<void *> allocations;

/// A device copy of `h`, `skew` elements past the start of its allocation
/// (which cudaMalloc aligns to 256 bytes): a skew of 1 puts every row off
/// 16-byte alignment, so the kernels take their one-element path.
template <typename T> T *device(const std::vector<T> &h, size_t skew = 0) {
  void *p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(1, (skew + h.size()) * sizeof(T))) !=
      cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    std::exit(1);
  }
  allocations.push_back(p);
  T *d = static_cast<T *>(p) + skew;
  if (!h.empty())
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

/// n elements of device memory, copied back.
template <typename T> std::vector<T> host(const T *d, size_t n) {
  std::vector<T> h(n);
  cudaDeviceSynchronize();
  cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}

inline Floats random(size_t n, std::mt19937 &rng, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(n);
  for (float &x : v)
    x = bf16ToFloat(floatToBf16(dist(rng))); // representable in bf16 too
  return v;
}

/// Like random, but any float of the range, not only bfloat16's: FP32
/// operands whose products are not exact in FP32 (nor in TF32).
inline Floats randomFull(size_t n, std::mt19937 &rng, float lo = -1,
                         float hi = 1) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline Bf16s toBf16(const Floats &x) {
  Bf16s out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = floatToBf16(x[i]);
  return out;
}

inline Floats toFloat(const Bf16s &x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = bf16ToFloat(x[i]);
  return out;
}

/// A matrix's bytes as the runtime stores them.
using Bytes = std::vector<char>;

/// `x` stored as `type` (OTC_F32 or OTC_BF16), and back.
inline Bytes stored(const Floats &x, int32_t type) {
  if (type == OTC_F32) {
    Bytes out(x.size() * sizeof(float));
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  Bf16s h = toBf16(x);
  Bytes out(h.size() * sizeof(otcrt_bf16));
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

inline Floats loaded(const Bytes &x, int32_t type) {
  if (type == OTC_F32) {
    Floats out(x.size() / sizeof(float));
    std::memcpy(out.data(), x.data(), x.size());
    return out;
  }
  Bf16s h(x.size() / sizeof(otcrt_bf16));
  std::memcpy(h.data(), x.data(), x.size());
  return toFloat(h);
}

/// Compares got with want (|g - w| <= atol + rtol |w|, infinities equal).
inline bool near(const Floats &got, const Floats &want, double rtol, double atol,
          const std::string &what, double &worst) {
  if (got.size() != want.size())
    return false;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if (std::isinf(w) && g == w)
      continue;
    double err = std::fabs(g - w);
    worst = std::max(worst, err);
    if (!(err <= atol + rtol * std::fabs(w))) {
      std::printf("  %s[%zu]: gpu %.8g cpu %.8g\n", what.c_str(), i, g, w);
      return false;
    }
  }
  return true;
}

/// One kernel's verdict.
struct Check {
  std::string name;
  bool ok = true;
  double worst = 0;
  Check(std::string n) : name(std::move(n)) {}
  void rc(int code, const char *what) {
    if (code != 0) {
      std::printf("  %s returned %d\n", what, code);
      ok = false;
    }
  }
  void f32(const Floats &g, const Floats &w, const char *what,
           double tol = 1e-4) {
    ok = near(g, w, tol, tol * 0.1, what, worst) && ok;
  }
  void bf16(const Bf16s &g, const Bf16s &w, const char *what) {
    ok = near(toFloat(g), toFloat(w), 1.0 / 64, 1e-3, what, worst) && ok;
  }
  ~Check() {
    std::printf("%s %s (max abs diff %.3g)\n", ok ? "PASS" : "FAIL",
                name.c_str(), worst);
    failures += !ok;
  }
};

/// " RxC", the shape part of a check's name, and " skewed" for rows off
/// 16-byte alignment (device's skew).
inline std::string shapeName(int64_t rows, int64_t cols, size_t skew = 0) {
  return " " + std::to_string(rows) + "x" + std::to_string(cols) +
         (skew ? " skewed" : "");
}

/// Whether got and want hold the same bits (the first difference printed).
inline bool sameBits(const Floats &got, const Floats &want, const char *what) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      std::printf("  %s[%zu]: %.9g, before %.9g\n", what, i, got[i], want[i]);
      return false;
    }
  return got.size() == want.size();
}

/// Captures what `body` queues on `stream` into a CUDA graph and replays it
/// `replays` times, waiting for the stream: the first error, or cudaSuccess.
/// The graph is gone afterwards.
template <typename Body>
cudaError_t captureAndReplay(cudaStream_t stream, Body body, int replays) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  if (err == cudaSuccess) {
    body();
    err = cudaStreamEndCapture(stream, &graph);
  }
  if (err == cudaSuccess)
    err = cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; err == cudaSuccess && i < replays; ++i)
    err = cudaGraphLaunch(exec, stream);
  if (err == cudaSuccess)
    err = cudaStreamSynchronize(stream);
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  return err;
}

/// Runs `call` (a repeated call of a shape already run) and fails `ok`
/// when it changed the device's free memory: library calls allocate only
/// on their first call of a shape.
template <typename Call> void allocatesNothing(bool &ok, Call call) {
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeBefore, &total);
  call();
  cudaDeviceSynchronize();
  cudaMemGetInfo(&freeAfter, &total);
  if (freeAfter != freeBefore) {
    std::printf("  a repeated call changed free device memory by %lld bytes\n",
                static_cast<long long>(freeBefore) -
                    static_cast<long long>(freeAfter));
    ok = false;
  }
}

/// `n` token ids of a `vocab` table drawn as text draws them: Zipf (rank r
/// with weight 1 / (r + 1)) over a shuffled vocabulary, so the frequent
/// rows lie anywhere in the table.
inline std::vector<int64_t> zipfTokens(int64_t n, int64_t vocab, std::mt19937 &rng) {
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

/// T storage of bfloat16-representable floats.
template <typename T> std::vector<T> stored(const Floats &x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return toBf16(x);
}

/// The GEMM checks (gemm_cuda_test.cu, gemm_fp8_cuda_test.cu,
/// gemm_sums_cuda_test.cu).
void testGemms(std::mt19937 &rng);
void testFp8Gemms(std::mt19937 &rng);
void testGemmSums(std::mt19937 &rng);
/// The attention checks (attention_cuda_test.cu).
void testAttentions(std::mt19937 &rng);
/// The gather-gradient checks (gather_grad_cuda_test.cu).
void testGatherGrads(std::mt19937 &rng);
void testExpertMatmuls(std::mt19937 &rng);
/// The cross-entropy and its bad labels (cross_entropy_cuda_test.cu).
void testCrossEntropies(std::mt19937 &rng);
/// The chunked LM head and loss (linear_cross_entropy_cuda_test.cu).
void testLinearCrossEntropies(std::mt19937 &rng);
/// The rotary embedding and its gradient (rope_cuda_test.cu).
void testRopes(std::mt19937 &rng);

} // namespace cudatest

#endif // OTCRT_TEST_CUDA_TEST_UTIL_CUH
