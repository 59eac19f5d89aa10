// The attention entry points of otcrt/kernels.h on the cuda target: float
// calls run the kernels of attention.cu; bfloat16 calls go to cuDNN's fused
// SDPA (attention_cudnn.cpp) when it can run them and to those kernels
// otherwise, or always when the environment sets OTCRT_ATTENTION=fallback.
// The first call prints which implementation attention uses, once per
// process ("otcrt: attention: cuDNN SDPA" or "otcrt: attention: fallback
// kernels (why)"); a later call that falls back for another reason says so
// once per reason.
#include "attention.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace otcrt {
namespace cuda {
namespace {

/// Why the last bfloat16 call of this thread ran on the fallback kernels.
thread_local const char *lastFallback = nullptr;

/// True when OTCRT_ATTENTION=fallback (read once).
bool fallbackForced() {
  static const bool forced = [] {
    const char *env = std::getenv("OTCRT_ATTENTION");
    return env && std::strcmp(env, "fallback") == 0;
  }();
  return forced;
}

/// Prints the implementation of the first call, then each further reason to
/// fall back once. `why` is NULL for cuDNN.
void announce(const char *why) {
  static std::atomic<bool> cudnnSeen{false};
  if (!why && cudnnSeen.load(std::memory_order_relaxed))
    return; // the steady state of the cuDNN path: no lock
  static std::mutex mutex;
  static bool announced = false;
  static std::set<std::string> reasons;
  std::lock_guard<std::mutex> lock(mutex);
  if (!why) {
    if (!announced)
      std::fprintf(stderr, "otcrt: attention: cuDNN SDPA\n");
    announced = true;
    cudnnSeen = true;
    return;
  }
  if (!reasons.insert(why).second)
    return;
  if (!announced)
    std::fprintf(stderr, "otcrt: attention: fallback kernels (%s)\n", why);
  else
    std::fprintf(stderr, "otcrt: attention: fallback kernels %s(%s)\n",
                 cudnnSeen ? "for some calls " : "", why);
  announced = true;
}

/// Whether a bfloat16 call goes to cuDNN: the reason not to, or NULL.
const char *cudnnSkipped() {
  if (fallbackForced())
    return "OTCRT_ATTENTION=fallback";
  if (!cudnnAttentionBuilt())
    return "libotcrt_cuda built without cuDNN";
  return nullptr;
}

} // namespace

const char *lastAttentionFallbackReason() { return lastFallback; }

#ifndef OTCRT_HAVE_CUDNN
// Built without cuDNN: every bfloat16 call goes to the fallback kernels.
bool cudnnAttentionBuilt() { return false; }
CudnnAttempt cudnnAttentionFwd(const OtcrtAttention *, const otcrt_bf16 *,
                               const otcrt_bf16 *, const otcrt_bf16 *,
                               const otcrt_bf16 *, otcrt_bf16 *, float *,
                               void *) {
  return {false, 0, "libotcrt_cuda built without cuDNN"};
}
CudnnAttempt cudnnAttentionBwd(const OtcrtAttention *, const otcrt_bf16 *,
                               const otcrt_bf16 *, const otcrt_bf16 *,
                               const otcrt_bf16 *, const otcrt_bf16 *,
                               const otcrt_bf16 *, const float *, otcrt_bf16 *,
                               otcrt_bf16 *, otcrt_bf16 *, void *) {
  return {false, 0, "libotcrt_cuda built without cuDNN"};
}
#endif

} // namespace cuda
} // namespace otcrt

using namespace otcrt::cuda;

extern "C" {

int otcrt_attention_fwd_f32(const OtcrtAttention *a, const float *q,
                            const float *k, const float *v, const float *mask,
                            float *out, float *lse, void *stream) {
  announce("float32 storage");
  return attentionFwdFallback(a, q, k, v, mask, out, lse, stream);
}

int otcrt_attention_fwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *q,
                             const otcrt_bf16 *k, const otcrt_bf16 *v,
                             const otcrt_bf16 *mask, otcrt_bf16 *out,
                             float *lse, void *stream) {
  const char *why = cudnnSkipped();
  if (!why) {
    CudnnAttempt run = cudnnAttentionFwd(a, q, k, v, mask, out, lse, stream);
    if (run.ran) {
      lastFallback = nullptr;
      announce(nullptr);
      return run.status;
    }
    why = run.why;
  }
  lastFallback = why;
  announce(why);
  return attentionFwdFallback(a, q, k, v, mask, out, lse, stream);
}

int otcrt_attention_bwd_f32(const OtcrtAttention *a, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *mask, const float *out,
                            const float *lse, float *dq, float *dk, float *dv,
                            void *stream) {
  announce("float32 storage");
  return attentionBwdFallback(a, dout, q, k, v, mask, out, lse, dq, dk, dv,
                              stream);
}

int otcrt_attention_bwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *dout,
                             const otcrt_bf16 *q, const otcrt_bf16 *k,
                             const otcrt_bf16 *v, const otcrt_bf16 *mask,
                             const otcrt_bf16 *out, const float *lse,
                             otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                             void *stream) {
  const char *why = cudnnSkipped();
  if (!why) {
    CudnnAttempt run =
        cudnnAttentionBwd(a, dout, q, k, v, mask, out, lse, dq, dk, dv, stream);
    if (run.ran) {
      lastFallback = nullptr;
      announce(nullptr);
      return run.status;
    }
    why = run.why;
  }
  lastFallback = why;
  announce(why);
  return attentionBwdFallback(a, dout, q, k, v, mask, out, lse, dq, dk, dv,
                              stream);
}

} // extern "C"
