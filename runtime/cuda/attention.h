// Private interface between the attention files of libotcrt_cuda. The C
// entry points of otcrt/kernels.h (attention_dispatch.cpp) send the float
// calls to the kernels of attention.cu and offer the bfloat16 calls to cuDNN's
// fused SDPA first (attention_cudnn.cpp, built when CMake finds cuDNN and the
// cudnn-frontend headers), falling back to those kernels for what cuDNN
// cannot do: dropout (otc's keep mask is OTCRT_DROPOUT_BITS, which cuDNN does
// not reproduce), head sizes it does not take, mask layouts it cannot read,
// misaligned operands, or when OTCRT_ATTENTION=fallback. Attention sinks:
// cuDNN's forward takes them as its sink token, and the gradient of a
// cuDNN backward is computed by the library's own kernel (sinkGradient). A
// key padding (key_padding) hides the keys it fills, so that a query row can
// see no key (under a sliding window, or in a sequence hiding every key):
// the fallback kernels give it zeros and lse +inf (or its sink), and the
// library's kernels set such rows after cuDNN's graphs (clearNoKeyRows),
// whose output for them cuDNN does not document.
#ifndef OTCRT_CUDA_ATTENTION_H
#define OTCRT_CUDA_ATTENTION_H

#include "otcrt/kernels.h"

namespace otcrt {
namespace cuda {

/// The kernels of attention.cu, with the contract of otcrt_attention_fwd/bwd.
/// After the first backward call of a given size on a device, neither
/// allocates nor synchronizes (capturable in a CUDA graph).
int attentionFwdFallback(const OtcrtAttention *a, const float *q,
                         const float *k, const float *v, const float *mask,
                         float *out, float *lse, void *stream);
int attentionFwdFallback(const OtcrtAttention *a, const otcrt_bf16 *q,
                         const otcrt_bf16 *k, const otcrt_bf16 *v,
                         const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse,
                         void *stream);
int attentionBwdFallback(const OtcrtAttention *a, const float *dout,
                         const float *q, const float *k, const float *v,
                         const float *mask, const float *out, const float *lse,
                         float *dq, float *dk, float *dv, void *stream);
int attentionBwdFallback(const OtcrtAttention *a, const otcrt_bf16 *dout,
                         const otcrt_bf16 *q, const otcrt_bf16 *k,
                         const otcrt_bf16 *v, const otcrt_bf16 *mask,
                         const otcrt_bf16 *out, const float *lse,
                         otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                         void *stream);

/// What cuDNN made of one call: `ran` when it launched the call (`status` 0,
/// or 1 on an execution error); otherwise `why` says, in a few words, why the
/// call goes to the fallback kernels (static or cached text: valid for the
/// life of the process).
struct CudnnAttempt {
  bool ran = false;
  int status = 0;
  const char *why = nullptr;
};

/// Offers a bfloat16 call to cuDNN's SDPA (attention_cudnn.cpp). The first
/// call of a shape builds and caches the cuDNN graph and its workspace; later
/// calls only launch on `stream`. Without cuDNN in the build, never runs.
CudnnAttempt cudnnAttentionFwd(const OtcrtAttention *a, const otcrt_bf16 *q,
                               const otcrt_bf16 *k, const otcrt_bf16 *v,
                               const otcrt_bf16 *mask, otcrt_bf16 *out,
                               float *lse, void *stream);
CudnnAttempt cudnnAttentionBwd(const OtcrtAttention *a, const otcrt_bf16 *dout,
                               const otcrt_bf16 *q, const otcrt_bf16 *k,
                               const otcrt_bf16 *v, const otcrt_bf16 *mask,
                               const otcrt_bf16 *out, const float *lse,
                               otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                               void *stream);

/// `mask`, broadcast over the queries (mask_strides[2] == 0: a key padding
/// [b|1, h|1, 1, s]), written out as a [b|1, h, t, s] tensor in the
/// library's scratch (attention.cu), for cuDNN, whose bias takes a full
/// query dimension: over the heads too (the bias cuDNN was seen to get
/// right has them, [1, h, t, s]) and with rows padded to a multiple of 8
/// elements, so that every row starts 16-byte aligned; `expanded` gets `a`
/// with that tensor's strides (writtenMaskStrides). NULL when the scratch
/// cannot be had (its first use inside a graph capture).
const otcrt_bf16 *maskOverQueries(const OtcrtAttention &a,
                                  const otcrt_bf16 *mask,
                                  OtcrtAttention &expanded, void *stream);
/// The strides of the tensor maskOverQueries writes for `a`.
void writtenMaskStrides(const OtcrtAttention &a, int64_t strides[4]);
/// A key padding (`a.key_padding`: mask_strides[1] and [2] 0) as cuDNN's
/// per-sequence lengths, in the library's scratch: b query lengths (all t),
/// then, from element keyLengthsOffset(b) (16-byte aligned, as cuDNN reads
/// its tensors), b key lengths, each the keys seen before the first hidden
/// one, int32; at least 1, as cuDNN is given them (a sequence hiding every
/// key gets 1: the kernels below read the padding's key 0 to tell). A batch
/// row whose seen keys are not a prefix (or with a value neither 0 nor at
/// most -1e4, as BF16 rounds it: -9984) records OTCRT_ERROR_PADDING. NULL
/// when the scratch cannot be had (its first use inside a graph capture).
const int32_t *keyLengths(const OtcrtAttention &a, const otcrt_bf16 *mask,
                          void *stream);
/// Where keyLengths' key lengths start: b rounded up to 4 int32.
inline int64_t keyLengthsOffset(int64_t b) { return (b + 3) / 4 * 4; }
/// Sets to 0 the dK and dV rows (in `a`'s layout) of the keys at or past
/// each batch row's length: `keyLens[b]` (keyLengths' key lengths, device
/// int32), 0 where the key padding `mask` (a's strides) hides key 0 too.
/// The keys a key padding hides, whose gradients are 0. Returns the launch
/// status.
int zeroKeysPastLengths(const OtcrtAttention &a, const int32_t *keyLens,
                        const otcrt_bf16 *mask, otcrt_bf16 *dk, otcrt_bf16 *dv,
                        void *stream);
/// After cuDNN ran call `a` with a key padding (a.key_padding): sets each
/// query row (b, hi, i) that sees no key as the fallback kernels compute it.
/// A row sees no key when none of its band (causal, sliding window) is seen:
/// below the sequence's length (`keyLens` as zeroKeysPastLengths reads it,
/// with the padding `mask`) or, with keyLens NULL, with a value of `mask`
/// (a's strides: the padding written out as cuDNN's bias) above -9984.
/// Such a row gets zeros in `out` (the forward's output, dense in a's
/// layout) and `dq` (the backward's, rows row_stride apart in [b, t, h, d]),
/// each where given, and lse = sinks[hi], or +inf without sinks, where
/// `lse` is given (so that a backward finds every exp(s - lse) 0: +inf, not
/// -inf, which would make NaN of the -inf scores cuDNN hides keys with).
/// Returns the launch status.
int clearNoKeyRows(const OtcrtAttention &a, const int32_t *keyLens,
                   const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse,
                   otcrt_bf16 *dq, void *stream);

/// The sinks' gradient (a.sinks and a.dsinks set) of a backward whose dQ,
/// dK and dV cuDNN computed (attention_cudnn.cpp), as the fallback kernels
/// compute it: D = dO . O of each row (dout and out dense in `a`'s layout)
/// into `rowD` (sinkGradRows), then dsinks[hi] = -sum over (b, i) of
/// exp(sinks[hi] - lse) D, each head's terms added in a fixed order
/// (deterministic). Returns the launch status.
int sinkGradient(const OtcrtAttention &a, const otcrt_bf16 *dout,
                 const otcrt_bf16 *out, const float *lse, float *rowD,
                 void *stream);
/// The library scratch of sinkGradient's rows ([b, h, t] floats), NULL when
/// it cannot be had (its first use inside a graph capture).
float *sinkGradRows(const OtcrtAttention &a, void *stream);

/// For tests: NULL when the last bfloat16 attention call of this thread ran
/// on cuDNN, else why it ran on the fallback kernels.
const char *lastAttentionFallbackReason();

/// For tests: true when libotcrt_cuda was built with cuDNN attention.
bool cudnnAttentionBuilt();

} // namespace cuda
} // namespace otcrt

#endif // OTCRT_CUDA_ATTENTION_H
