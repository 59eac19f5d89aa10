/* The kernel library of the otcrt runtime (versioned with OTC_ABI_VERSION,
 * otcrt/abi.h): the fused ops of the otc dialect as shape-generic functions,
 * compiled once into libotcrt_cpu.a and libotcrt_cuda.a, that generated
 * programs call with sizes and pointers
 * (host pointers on the cpu target, device pointers on cuda). Each function
 * exists once per storage type: `_f32` (float) and `_bf16` (bfloat16 stored
 * as the upper 16 bits of an IEEE float, `otcrt_bf16`); arithmetic, the
 * statistics (mean, rstd, lse) and the loss are float whatever the storage.
 * `stream` is a cudaStream_t on the cuda target (NULL: the default stream)
 * and ignored on the cpu target. Every function returns 0, or a non-zero
 * code on a launch error (cuda) or bad arguments. A cuda function neither
 * synchronizes nor allocates once it has run for a shape, so that a CUDA
 * graph can capture it: errors in the data, which only the device sees,
 * go to the library's error record (otcrt_kernel_error) instead of the
 * return code. The semantics are those of the matching ops of
 * ir/OtcFusedOps.td. The signatures below are also written in
 * otcrt/kernels.def, the table the runtime's build checks them against and
 * the code generator checks its calls against: a change here goes there
 * too. This header must stay C-compatible. */
#ifndef OTCRT_KERNELS_H
#define OTCRT_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// BF16 storage: the upper half of an IEEE float32, rounded to nearest even.
typedef uint16_t otcrt_bf16;

/// Dropout's keep test, shared by every kernel and by generated code: element
/// `index` of a tensor dropped with `key` (per micro-step), `stream` (per op)
/// and `ratio` is kept when u >= ratio, u uniform in [0, 1) from splitmix64
/// of key * 0x9E3779B97F4A7C15 ^ (stream << 32) ^ index (53 bits).
#define OTCRT_DROPOUT_BITS(key, stream, index)                                \
  ((uint64_t)(key) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)(stream) << 32) ^     \
   (uint64_t)(index))

/// Loss reductions.
enum OtcrtReduction { OTCRT_MEAN = 0, OTCRT_SUM = 1, OTCRT_NONE = 2 };

/*===--- Normalization -----------------------------------------------------===*/

/// Layer norm of `rows` rows of `cols` elements: y = (x - mean) * rstd *
/// gamma + beta, rstd = 1 / sqrt(var + eps) (biased variance). gamma and
/// beta ([cols]) may be NULL (1 and 0). Writes mean and rstd per row.
int otcrt_layer_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                             const float *x, const float *gamma,
                             const float *beta, float *y, float *mean,
                             float *rstd, void *stream);
int otcrt_layer_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const otcrt_bf16 *beta, otcrt_bf16 *y,
                              float *mean, float *rstd, void *stream);

/// Its gradient: with xhat = (x - mean) rstd and g = dy gamma,
/// dx = rstd (g - mean(g) - xhat mean(g xhat)) per row; dgamma = sum over
/// rows of dy xhat and dbeta = sum of dy ([cols], summed in float). They
/// are overwritten, or added into where `accumulate` says so (bit 1:
/// dgamma, bit 2: dbeta; a gradient slot): each element then becomes its
/// value plus the float sum, rounded once to the storage. gamma NULL means
/// 1; dgamma and dbeta may be NULL (not wanted).
/// residual ([rows, cols], NULL = none) is a gradient added to dx: dx =
/// residual + the expression above, formed in float and rounded once (a
/// residual connection's gradient, without a separate add). dx may be the
/// very buffer of dy or of residual (not a shifted overlap of either).
int otcrt_layer_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                             const float *x, const float *gamma,
                             const float *mean, const float *rstd,
                             const float *residual, int32_t accumulate,
                             float *dx, float *dgamma, float *dbeta,
                             void *stream);
int otcrt_layer_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const float *mean, const float *rstd,
                              const otcrt_bf16 *residual, int32_t accumulate,
                              otcrt_bf16 *dx, otcrt_bf16 *dgamma,
                              otcrt_bf16 *dbeta, void *stream);

/// RMS norm: y = x rstd gamma with rstd = 1 / sqrt(mean(x^2) + eps).
int otcrt_rms_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                           const float *x, const float *gamma, float *y,
                           float *rstd, void *stream);
int otcrt_rms_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            otcrt_bf16 *y, float *rstd, void *stream);

/// Its gradient: xhat = x rstd, g = dy gamma, dx = rstd (g - xhat mean(g
/// xhat)); dgamma = sum over rows of dy xhat (may be NULL), added into when
/// `accumulate` is 1 (as for layer norm's bit 1). `residual` (NULL = none)
/// is added to dx as for layer norm, and dx may likewise be dy's or the
/// residual's very buffer.
int otcrt_rms_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                           const float *x, const float *gamma,
                           const float *rstd, const float *residual,
                           int32_t accumulate, float *dx, float *dgamma,
                           void *stream);
int otcrt_rms_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            const float *rstd, const otcrt_bf16 *residual,
                            int32_t accumulate, otcrt_bf16 *dx,
                            otcrt_bf16 *dgamma, void *stream);

/*===--- Rotary embedding ------------------------------------------------===*/

/// Rotary position embedding (otc.rope) of x, [n0, n1, n2, dim] row-major:
/// the first `rot` features of a row (rot even, at most dim) rotate, the
/// others are copied. The rotated features form rot / 2 pairs (a, b):
/// (p, p + rot / 2), or (2p, 2p + 1) with `interleaved`; y[a] = x[a] cos[a]
/// - x[b] sin[a] and y[b] = x[b] cos[b] + x[a] sin[b], in float and rounded
/// once to the storage. The tables are float whatever the storage, rows of
/// rot: element (i0, i1, i2, j) of a table is table[i0 c0 + i1 c1 + i2 c2 +
/// j] (a stride of 0 broadcasts that dimension). With `transposed` (the
/// gradient), y[a] = x[a] cos[a] + x[b] sin[b] and y[b] = x[b] cos[b] - x[a]
/// sin[a]. y must not overlap x.
int otcrt_rope_f32(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
                   int64_t c0, int64_t c1, int64_t c2, const float *x,
                   const float *cos, const float *sin, int32_t transposed,
                   int32_t interleaved, float *y, void *stream);
int otcrt_rope_bf16(int64_t n0, int64_t n1, int64_t n2, int64_t dim,
                    int64_t rot, int64_t c0, int64_t c1, int64_t c2,
                    const otcrt_bf16 *x, const float *cos, const float *sin,
                    int32_t transposed, int32_t interleaved, otcrt_bf16 *y,
                    void *stream);

/*===--- Reductions ------------------------------------------------------===*/

/// Column sums of a row-major [rows, cols] matrix (otc.column_sum, a bias's
/// gradient): out[c] = sum over r of x[r * cols + c], accumulated in float
/// whatever the storage (bf16 widens exactly). The cpu target sums each
/// column in row order; the cuda target in a fixed order of its own, which
/// depends on the shape and the device's SM count alone (chunks of rows
/// summed by many blocks, then the chunks' sums added), so results agree to
/// float rounding, repeat bit for bit run to run on one GPU model and are
/// the same for bf16 and f32 storage of the same values.
int otcrt_column_sum_f32(int64_t rows, int64_t cols, const float *x,
                         float *out, void *stream);
int otcrt_column_sum_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                          float *out, void *stream);
/// The same sums added into acc ([cols], x's storage: a bias's gradient
/// slot): acc[c] becomes its value plus the float sum, rounded once.
int otcrt_column_sum_into_f32(int64_t rows, int64_t cols, const float *x,
                              float *acc, void *stream);
int otcrt_column_sum_into_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                               otcrt_bf16 *acc, void *stream);

/*===--- Gather gradient ---------------------------------------------------===*/

/// The gradient of a gather along one axis (otc.gather_grad, an embedding's
/// gradient): with grad [outer, positions, inner] and indices [positions],
/// out [outer, axis_len, inner] gets out[o, a, n] = the sum of grad[o, p,
/// n] over the positions p whose index is a, accumulated in float (bf16:
/// grad and out stored as bfloat16, one rounding per element). With
/// `accumulate` 0, rows no index picks are zero (out is overwritten); with
/// 1, each picked row of out gets its sum added (its float value plus the
/// sum, rounded once) and every other row is left as it is, neither read
/// nor written (a gradient slot the call adds into). A negative index
/// counts from the end of the axis; one outside [-axis_len, axis_len) adds
/// nothing and is not an error here (the gather that read the same indices
/// reports it). The cpu target adds each row's positions in position
/// order. The cuda target sorts the positions by index (a stable radix
/// sort) and sums them in pieces of consecutive sorted positions, adding
/// the pieces of a row in order: a row whose positions fall in one piece
/// gets the cpu target's bits, one spread over several agrees to float
/// rounding, and every result repeats bit for bit (no atomics), however
/// skewed the indices. A cuda call of more positions than one sort takes
/// (its scratch's, OTCRT_CUDA_SORT_SCRATCH_BYTES / 16 at most) sorts and
/// sums them in batches, and each batch's sums are added to out in turn,
/// rounded after each (with `accumulate` 0 too, from the first batch's).
int otcrt_gather_grad_f32(int64_t outer, int64_t axis_len, int64_t inner,
                          int64_t positions, const float *grad,
                          const int64_t *indices, int32_t accumulate,
                          float *out, void *stream);
int otcrt_gather_grad_bf16(int64_t outer, int64_t axis_len, int64_t inner,
                           int64_t positions, const otcrt_bf16 *grad,
                           const int64_t *indices, int32_t accumulate,
                           otcrt_bf16 *out, void *stream);

/*===--- Expert products ---------------------------------------------------===*/

/// A mixture of experts' per-row products (otc.expert_matmul): x is
/// [rows, depth], ids [rows], w the experts' matrices, [experts, depth,
/// width] (transpose_w 0) or [experts, width, depth] (1), and out [rows,
/// width] gets out[n, :] = x[n, :] W_e with e = ids[n] (plus experts when
/// negative) and W_e = w[e] or its transpose, accumulated in float. out is
/// of `out_type` (an OtcDType of otcrt/abi.h): OTC_F32, or OTC_BF16 with
/// bf16 data, each float sum then rounded once (to nearest even) as it is
/// stored: the bits of the OTC_F32 result rounded to bfloat16 (any other
/// type is an error, status 1). A row whose index is outside
/// [-experts, experts) gets zeros (the reference interpreter reports it
/// instead; the indices a router's top-k picks are always inside). The
/// rows are grouped by expert, keeping their order within an expert (the
/// cpu target: a counting sort, then one GEMM per expert over its rows
/// gathered; the cuda target: a stable radix sort, then tiles of one
/// expert's rows each), so no [rows, depth, width] tensor is built and
/// results repeat bit for bit however the indices are skewed.
int otcrt_expert_matmul_f32(int64_t rows, int64_t experts, int64_t depth,
                            int64_t width, int32_t transpose_w, const float *x,
                            const int64_t *ids, const float *w,
                            int32_t out_type, void *out, void *stream);
int otcrt_expert_matmul_bf16(int64_t rows, int64_t experts, int64_t depth,
                             int64_t width, int32_t transpose_w,
                             const otcrt_bf16 *x, const int64_t *ids,
                             const otcrt_bf16 *w, int32_t out_type, void *out,
                             void *stream);
/// The experts' weight gradient (otc.expert_matmul_wgrad): with dy [rows,
/// width] and x [rows, depth], dw (the experts' layout, as w above) gets
/// for each expert the sum over its rows of x[n]^T dy[n], accumulated in
/// float; an expert no row picks gets zeros and a row with an index outside
/// the experts adds nothing. dw is of `dw_type` (OTC_F32, or OTC_BF16 with
/// bf16 data); with `accumulate` 0 it is overwritten (each sum rounded once
/// to dw_type), with 1 each element becomes its value plus the sum, formed
/// in float and rounded once (a gradient slot the call adds into: an expert
/// no row picks keeps its values). The cuda target sorts at most a batch
/// of rows at a time (its scratch's, OTCRT_CUDA_SORT_SCRATCH_BYTES / 16):
/// a call of more rows adds each later batch's sums to dw in turn, rounded
/// to dw_type after each (with `accumulate` 0 too, from the first batch's).
int otcrt_expert_matmul_wgrad_f32(int64_t rows, int64_t experts, int64_t depth,
                                  int64_t width, int32_t transpose_w,
                                  const float *dy, const float *x,
                                  const int64_t *ids, int32_t dw_type,
                                  int32_t accumulate, void *dw, void *stream);
int otcrt_expert_matmul_wgrad_bf16(int64_t rows, int64_t experts, int64_t depth,
                                   int64_t width, int32_t transpose_w,
                                   const otcrt_bf16 *dy, const otcrt_bf16 *x,
                                   const int64_t *ids, int32_t dw_type,
                                   int32_t accumulate, void *dw, void *stream);

/*===--- Attention ---------------------------------------------------------===*/

/// The sizes and options of one scaled dot-product attention: q is
/// [b, h, t, d], k and v are [b, hk, s, d] (query head i reads key/value
/// head i / (h / hk)), scores = scale q k^T; with `causal` key j is hidden
/// from query i when j > i; `mask`, when not NULL, is added to the scores,
/// element (bi, hi, ti, si) at mask[bi*ms[0] + hi*ms[1] + ti*ms[2] +
/// si*ms[3]] (strides in elements, 0 along broadcast dimensions, same
/// storage type as q). With dropout > 0, probability (bi, hi, ti, si) is kept
/// by OTCRT_DROPOUT_BITS(key[0], dropout_stream, ((bi*h + hi)*t + ti)*s + si)
/// and scaled by 1 / (1 - dropout); `key` points at the micro-step's key in
/// the arena (device memory on the cuda target; NULL without dropout).
/// A key padding's value at or below OTCRT_KEY_PADDING_HIDES hides its key
/// (a fill of at most -1e4, -9984 once rounded to BF16).
#define OTCRT_KEY_PADDING_HIDES (-9984.0f)
typedef struct {
  int64_t b, h, hk, t, s, d;
  float scale;
  int32_t causal;
  float dropout;
  const int64_t *key;
  uint64_t dropout_stream;
  int64_t mask_strides[4];
  /// How q, k, v, the output and their gradients are stored:
  /// OTCRT_LAYOUT_BHTD ([b, h, t, d], the default: 0) or OTCRT_LAYOUT_BTHD
  /// ([b, t, h, d], sequence before heads, as a projection writes them;
  /// read and written through strides where the implementation allows, else
  /// through transposed copies of its own). lse stays [b, h, t].
  int32_t layout;
  /// A sliding window (t == s): with `causal`, key j is also hidden from
  /// query i when j <= i - window (each query sees itself and the window -
  /// 1 keys before it); without, key j is hidden when |i - j| >= window (a
  /// bidirectional window: itself and the window - 1 keys on either side).
  /// 0: no window.
  int32_t window;
  /// With OTCRT_LAYOUT_BTHD, the elements from one (b, t) row of q, k and v
  /// to the next, and likewise of dq, dk and dv; 0: rows as long as their
  /// heads (h·d for q, hk·d for k and v). A fused projection's output [b,
  /// t, h + 2hk, d] is read where it lies, q, k and v pointing at its heads
  /// 0, h and h + hk with row_stride (h + 2hk)·d, and the gradients are
  /// written into one such tensor the same way. The output, its gradient
  /// and lse stay dense. A non-zero row_stride with OTCRT_LAYOUT_BHTD, or
  /// shorter than h·d or hk·d, is an error (status 1).
  int64_t row_stride;
  /// c > 0: the scores are soft-capped, s -> c tanh(s / c), before the
  /// mask is added (Gemma 2); 0: not. Negative is an error (status 1). On
  /// the cuda target a capped call runs the kernel library's own kernels
  /// (cuDNN's SDPA is not asked).
  float softcap;
  /// The backward only, where the mask carries a gradient (T5's relative
  /// position bias): dS, the gradient of the scores after the soft cap (to
  /// which the mask is added), written dense [b, h, t, s] in the storage
  /// type of q (0 for keys a row does not see); NULL: not wanted. On the
  /// cuda target such a call runs the kernel library's own kernels.
  void *dscores;
  /// 1: the mask is a key padding (mask_strides[1] and [2] are 0, each
  /// value 0 for a key seen or at most -1e4 for one hidden, -9984 as BF16
  /// rounds it). A value at or below -9984 hides its key as the causal
  /// band does (it is not added), so a row can see no key (under a sliding
  /// window, a query W or more past its sequence's last seen key; any query
  /// of a sequence hiding every key): it gives 0, lse = +inf (sinks[hi]
  /// with sinks) and no gradient. The cuda entry points give cuDNN's SDPA
  /// per-sequence key lengths instead of a mask tensor, with or without a
  /// sliding window, and set the rows that see no key after it: the keys
  /// seen must then be a prefix of each sequence (right padding), and a
  /// batch row that is not records OTCRT_ERROR_PADDING (the step's update
  /// is vetoed); with OTCRT_ATTENTION_PADDING=mask in the environment they
  /// write the mask out along the queries instead, any padding then. 0: a
  /// mask as any. The threshold: OTCRT_KEY_PADDING_HIDES.
  int32_t key_padding;
  /// Attention sinks (GPT-OSS): one learned logit per query head, float
  /// [h], that joins every row's softmax as a key with no value: with
  /// L = log(sum_j exp(s_j) + exp(sinks[hi])) (which lse holds), p_j =
  /// exp(s_j - L), so a row's probabilities sum to 1 - exp(sinks[hi] - L)
  /// and a row that sees no key gives 0 with L = sinks[hi]. NULL: none.
  const float *sinks;
  /// The backward only, with sinks: the sinks' gradient, float [h],
  /// overwritten: dsinks[hi] = -sum over (bi, ti) of exp(sinks[hi] - L) *
  /// D, with D = dout . out of the row (the probabilities' rows sum to
  /// less than 1 by exp(sinks - L)). NULL: not wanted.
  float *dsinks;
} OtcrtAttention;

enum OtcrtAttentionLayout { OTCRT_LAYOUT_BHTD = 0, OTCRT_LAYOUT_BTHD = 1 };

/// out [b, h, t, d] and lse [b, h, t] (float: the log-sum-exp of each row of
/// masked scores).
int otcrt_attention_fwd_f32(const OtcrtAttention *a, const float *q,
                            const float *k, const float *v, const float *mask,
                            float *out, float *lse, void *stream);
int otcrt_attention_fwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *q,
                             const otcrt_bf16 *k, const otcrt_bf16 *v,
                             const otcrt_bf16 *mask, otcrt_bf16 *out,
                             float *lse, void *stream);

/// dq, dk, dv (overwritten) from dout, q, k, v, out and lse; the
/// probabilities are rebuilt from the scores and lse.
int otcrt_attention_bwd_f32(const OtcrtAttention *a, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *mask, const float *out,
                            const float *lse, float *dq, float *dk, float *dv,
                            void *stream);
int otcrt_attention_bwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *dout,
                             const otcrt_bf16 *q, const otcrt_bf16 *k,
                             const otcrt_bf16 *v, const otcrt_bf16 *mask,
                             const otcrt_bf16 *out, const float *lse,
                             otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                             void *stream);

/*===--- Cross-entropy -----------------------------------------------------===*/

/// Softmax cross-entropy of `rows` rows of `classes` logits against int64
/// labels; rows labelled `ignore_index` (when has_ignore) count for nothing.
/// loss: one float (OTCRT_MEAN over counted rows, NaN when none counts, as
/// PyTorch; OTCRT_SUM) or one per row (OTCRT_NONE, 0 for ignored rows).
/// lse: every row's log-sum-exp. A label outside [0, classes) that is not
/// ignored counts for nothing in the loss and the gradient and is an error:
/// both record it (OTCRT_ERROR_LABEL, its row, value and classes) in the
/// error record, and the cpu functions also return OTCRT_ERROR_LABEL.
int otcrt_cross_entropy_fwd_f32(int64_t rows, int64_t classes,
                                const float *logits, const int64_t *labels,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *loss, float *lse,
                                void *stream);
int otcrt_cross_entropy_fwd_bf16(int64_t rows, int64_t classes,
                                 const otcrt_bf16 *logits,
                                 const int64_t *labels, int32_t has_ignore,
                                 int64_t ignore_index, int32_t reduction,
                                 float *loss, float *lse, void *stream);

/// dlogits = g_r (exp(logits - lse_r) - [c == label_r]) with g_r = dloss[0]
/// / counted rows (mean), dloss[0] (sum) or dloss[r] (none); 0 for ignored
/// rows. dlogits may be the logits themselves (each element is read before
/// it is written).
int otcrt_cross_entropy_bwd_f32(int64_t rows, int64_t classes,
                                const float *dloss, const float *logits,
                                const int64_t *labels, const float *lse,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *dlogits,
                                void *stream);
int otcrt_cross_entropy_bwd_bf16(int64_t rows, int64_t classes,
                                 const float *dloss, const otcrt_bf16 *logits,
                                 const int64_t *labels, const float *lse,
                                 int32_t has_ignore, int64_t ignore_index,
                                 int32_t reduction, otcrt_bf16 *dlogits,
                                 void *stream);

/// The loss of otcrt_cross_entropy_fwd_* and the gradient of
/// otcrt_cross_entropy_bwd_* in one call, for a dloss known before the
/// loss (a seed): no lse is kept, and on the cuda target a row that fits
/// in shared memory (OTCRT_CUDA_CE_STAGED_ROW_BYTES, launch_config.h) is
/// read from memory once. loss as the forward's; row_loss ([rows] floats,
/// written whatever the reduction): lse_r - logits[r, label_r] for a row
/// that counts and whose label is in range, else 0; dlogits as the
/// backward's given the lse that the forward computes on the same target
/// (computed the same way here): the gradient is the two calls' bit for
/// bit. The mean and sum add row_loss in double in a fixed order, so they
/// may differ from the forward's loss in the last bit (cuda's forward
/// subtracts each row's logit from its lse in double; the cpu target's
/// gives the same bits). dlogits may be the logits themselves (every
/// logit, the label's included, is read before it is overwritten). Bad
/// labels as the forward's: the cpu functions return OTCRT_ERROR_LABEL
/// before writing anything, the cuda ones record it.
int otcrt_cross_entropy_fused_f32(int64_t rows, int64_t classes,
                                  const float *dloss, const float *logits,
                                  const int64_t *labels, int32_t has_ignore,
                                  int64_t ignore_index, int32_t reduction,
                                  float *loss, float *row_loss, float *dlogits,
                                  void *stream);
int otcrt_cross_entropy_fused_bf16(int64_t rows, int64_t classes,
                                   const float *dloss, const otcrt_bf16 *logits,
                                   const int64_t *labels, int32_t has_ignore,
                                   int64_t ignore_index, int32_t reduction,
                                   float *loss, float *row_loss,
                                   otcrt_bf16 *dlogits, void *stream);

/// How otcrt_linear_cross_entropy_* reads its head's weight w.
enum OtcrtHeadLayout {
  /* w [classes, hidden]: logits = h wᵀ (a Linear's weight). */
  OTCRT_W_CLASSES_HIDDEN = 0,
  /* w [hidden, classes]: logits = h w (a TorchScript export's transposed
     copy of it); dw has w's layout. */
  OTCRT_W_HIDDEN_CLASSES = 1
};

/// The LM head, the cross-entropy and their gradients (otc.linear_cross_
/// entropy_with_grad), `chunk_rows` rows at a time: for the rows [r0, r0 +
/// n) of each chunk, their logits h[r0:] wᵀ ([n, classes], h's type) into
/// `chunk`, otcrt_cross_entropy_fused's gradient over them in place (the
/// scale of a mean over the counted rows of all `rows`), dh[r0:] = dlogits w
/// and dw = (sum over the chunks so far) dlogitsᵀ h[r0:], all through
/// otcrt_gemm with FP32 accumulation. h is [rows, hidden], w [classes,
/// hidden] (or [hidden, classes] with w_layout OTCRT_W_HIDDEN_CLASSES),
/// dh FP32 of h's shape, dw of w's shape and `dw_type` (an
/// OtcDType of otcrt/abi.h: OTC_F32, or OTC_BF16 with bf16 data, each
/// chunk's sum then rounded to bfloat16 as it is added); with
/// `dw_accumulate` non-zero the first chunk adds to dw's values too (dw +=
/// the whole sum: a tied weight's gradient accumulator). chunk [chunk_rows,
/// classes] (scratch, left holding the last chunk's gradient). loss and
/// row_loss as otcrt_cross_entropy_fused's over all rows (the same bits given
/// the same logits). Bad labels as that call's. `bias` ([classes], h's type;
/// NULL: none) is added to each row's logits by the head's product
/// (OTCRT_GEMM_BIAS: formed in FP32, rounded once); `dbias` ([classes],
/// FP32; NULL: none, and only with a bias) becomes the sum over all rows of
/// the logits' gradient (each chunk's column sums added to the earlier
/// chunks', through otcrt_gemm_sums beside dw's product).
int otcrt_linear_cross_entropy_f32(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const float *h, const float *w, int32_t w_layout,
    const int64_t *labels, int32_t has_ignore, int64_t ignore_index,
    int32_t reduction, int32_t dw_type, int32_t dw_accumulate,
    const float *bias, float *loss, float *row_loss, float *dh, void *dw,
    float *dbias, float *chunk, void *stream);
int otcrt_linear_cross_entropy_bf16(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const otcrt_bf16 *h, const otcrt_bf16 *w,
    int32_t w_layout, const int64_t *labels, int32_t has_ignore,
    int64_t ignore_index, int32_t reduction, int32_t dw_type,
    int32_t dw_accumulate, const otcrt_bf16 *bias, float *loss, float *row_loss,
    float *dh, void *dw, float *dbias, otcrt_bf16 *chunk, void *stream);

/*===--- Gradient norm -----------------------------------------------------===*/

/// A range of an arena for otcrt_sum_squares: `count` elements at byte
/// `offset`, float (bf16 = 0) or bfloat16 (bf16 = 1).
typedef struct {
  int64_t offset;
  int64_t count;
  int32_t bf16;
  int32_t reserved;
} OtcrtRange;

/// The sum of the squares of every element of the `num_ranges` ranges of
/// `arena` (host memory on the cpu target, device memory on cuda),
/// accumulated in double in an order fixed by the ranges alone (the same
/// bits on every run), written to *sum in host memory once the work queued
/// on `stream` is done: it waits for the stream, so it runs between step
/// functions, never inside a captured one. A NaN or an infinity anywhere
/// makes the sum NaN or infinite. The train driver's global gradient norm
/// and non-finite check: one pass over the gradients (one range when they
/// lie contiguously in the arena) and one value read back per step. Returns
/// 0, or 1 on bad arguments or a device failure.
int otcrt_sum_squares(const char *arena, int32_t num_ranges,
                      const OtcrtRange *ranges, double *sum, void *stream);

/// Multiplies every element of the `num_ranges` ranges of `arena` by
/// `factor` in place (a bfloat16 element widened, multiplied in float and
/// rounded to nearest even): the train driver's gradient clipping and
/// batch-ramp scaling, on the device where the gradients are. Queued on
/// `stream` without waiting (capturable). Returns 0, or 1 on bad arguments
/// or a launch failure.
int otcrt_scale_ranges(char *arena, int32_t num_ranges,
                       const OtcrtRange *ranges, float factor, void *stream);

/// The factor of a step's gradients for AdamW's GRAD_FACTOR slot, computed
/// where the gradients are, without waiting for them: with n = scale times
/// the square root of the ranges' sum of squares (added as
/// otcrt_sum_squares adds them), the factor is scale * min(1, clip / n)
/// (clip > 0) or scale (clip <= 0) when n is finite, and NaN when it is not
/// (AdamW then skips the update). The factor is NaN as well when one of
/// the `num_checks` floats at `checks` (where the arena is; the step's
/// micro-batch losses) is not finite, and on cuda when the library's error
/// record (otcrt_kernel_error) holds an error: a step whose loss or data
/// is bad is skipped on the device before the host reads either, and n
/// stays the gradients' norm. Writes the factor, a float, to *factor (in
/// the arena: host memory on the cpu target, device memory on cuda) and n
/// to *norm in host memory once the work queued on `stream` before it is
/// done: at once on the cpu target; on cuda through an asynchronous copy,
/// which *norm must be page-locked for (else the call waits), read after
/// the caller synchronizes the stream. Returns 0, or 1 on bad arguments or
/// a device failure.
int otcrt_grad_factor(const char *arena, int32_t num_ranges,
                      const OtcrtRange *ranges, float scale, float clip,
                      const float *checks, int32_t num_checks, float *factor,
                      double *norm, void *stream);

/*===--- Status ------------------------------------------------------------===*/

/// Called by generated code when a kernel returns a non-zero status: prints
/// "train: error: <kernel> failed (status) at <node>" and exits (`node`:
/// the span name of the call, "<ONNX node> (<op>)"). While the
/// runtime captures a CUDA graph it records the failure instead (the
/// capture is then dropped and the function runs without a graph).
void otcrt_kernel_failed(const char *kernel, const char *node, int status);

/// Codes of data errors.
enum OtcrtErrorCode {
  OTCRT_ERROR_NONE = 0,
  OTCRT_ERROR_LABEL = 2,  /* a label outside [0, bound) */
  OTCRT_ERROR_INDEX = 3,  /* a gather index outside [-bound, bound) */
  OTCRT_ERROR_PADDING = 4 /* an attention key padding (key_padding) whose
                             batch row `index` is not right-padded: key
                             `value` of `bound` is seen after a hidden one,
                             or is neither 0 nor at most -1e4 */
};

/// An error in the data a kernel read: `value` at `index` (a row, or a
/// position of a gather's indices) is outside [0, bound) (a label) or
/// [-bound, bound) (an index).
typedef struct {
  int32_t code; /* OtcrtErrorCode */
  int32_t reserved;
  int64_t index;
  int64_t value;
  int64_t bound;
} OtcrtKernelError;

/// The library's error record: the first data error a kernel found since
/// the record was last read, written where the kernel runs (atomically, the
/// first writer wins) so that the call that found it needs no
/// synchronization. Copies the record into *error once the work queued on
/// `stream` is done (on the cuda target one small copy, which synchronizes
/// the stream), clears it and returns error->code. The cpu loss kernels
/// also return their label errors (status OTCRT_ERROR_LABEL) after
/// recording them. The first call on the cuda target allocates the record;
/// the runtime makes it before running any step.
int otcrt_kernel_error(OtcrtKernelError *error, void *stream);

/// The address of the error record (device memory on the cuda target), for
/// kernels of generated code that record into it (a gather's index out of
/// range).
OtcrtKernelError *otcrt_kernel_error_record(void);

#ifdef __cplusplus
}
#endif

#endif /* OTCRT_KERNELS_H */
