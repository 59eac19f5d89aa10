/* The C ABI between code emitted by the otc code generator and the otcrt
 * runtime library. A compiled model is a C++ (cpu target) or CUDA (cuda
 * target) translation unit that defines its kernels and a static OtcProgram
 * descriptor, and whose main() hands that descriptor to otcrt_main(). The
 * runtime owns everything else: the arena, parameter loading, the batch, the
 * training loop and the GEMM entry point used by the generated kernels. This
 * header must stay C-compatible; its names and layouts change only with
 * OTC_ABI_VERSION. */
#ifndef OTCRT_ABI_H
#define OTCRT_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What a slot of the arena holds.
enum OtcSlotKind {
  OTC_SLOT_PARAM = 0,
  OTC_SLOT_GRAD = 1,
  OTC_SLOT_ADAM_M = 2,
  OTC_SLOT_ADAM_V = 3,
  OTC_SLOT_INPUT = 4,
  OTC_SLOT_LOSS = 5,
  OTC_SLOT_LR = 6,
  OTC_SLOT_STEP = 7,
  OTC_SLOT_RNG = 8,
  OTC_SLOT_GRAD_SCALE = 9,   /* version 3: f32 scalar, the micro-batch's weight
                                in its step's gradient, set by the runtime
                                before each micro_step */
  OTC_SLOT_BUFFER = 10,      /* version 3: an F32 initializer that is not
                               trained (frozen, a rotary table): loaded from
                               the initial parameters, no gradient, moments
                               or master, and written by no function (the
                               compiler checks it), so checkpoints keep only
                               its CRC-32 and a resume loads it from the
                               initial parameters again; version 10: or BF16
                               (rounded from F32 initial values) */
  OTC_SLOT_GRAD_FACTOR = 11, /* version 5: f32 scalar, the factor AdamW
                              multiplies the step's gradients by (clipping
                              and batch ramp; not finite: the update is
                              skipped), written by the runtime on the device
                              (otcrt_grad_factor) before each
                              optimizer_step */
  /* Version 9, the slots of decode_step (otc-compile --generate): */
  OTC_SLOT_DECODE_TOKENS = 12,   /* I64 or I32 [micro_batch, 1]: each row's
                                    id at the position; named after the
                                    token input */
  OTC_SLOT_DECODE_POSITION = 13, /* I64 [1]: the position, from 0 */
  OTC_SLOT_KV_CACHE = 14,        /* the keys or values of one attention at
                                    every position decoded so far (F32 or
                                    BF16, [micro_batch, ..]); decode_step
                                    writes the position's; the runtime
                                    zeroes them for a new sequence */
  OTC_SLOT_LOGITS = 15           /* F32 [micro_batch, V]: each row's logits
                                    at the position */
};

/// Element type of a slot.
enum OtcDType {
  OTC_F32 = 0,
  OTC_I64 = 1,
  OTC_BOOL = 2 /* one byte */,
  OTC_F64 = 3,
  OTC_I32 = 4,
  OTC_BF16 = 5 /* bfloat16: the upper half of an IEEE float32 */
};

typedef struct {
  const char *name; /* ONNX initializer name for PARAM/GRAD/ADAM_M/ADAM_V, ONNX
                       graph input name for INPUT, "" otherwise. PARAM, ADAM_M
                       and ADAM_V are F32; GRAD is F32 or BF16. */
  int32_t kind;     /* OtcSlotKind */
  int32_t dtype;    /* OtcDType */
  int32_t rank;
  const int64_t *shape;
  int64_t offset; /* byte offset in the arena */
  int64_t nbytes;
} OtcSlot;

/// Flags of an OtcIndexRange.
enum OtcIndexFlags {
  OTC_INDEX_NEGATIVE = 1, /* values in [-bound, 0) are valid too (a gather
                             counts them from the end of its axis) */
  OTC_INDEX_IGNORE = 2    /* ignore_index is valid (a loss skips its rows) */
};

/// The values an integer INPUT slot may hold, when they index a table of the
/// model: the rows of an embedding (gather) or the classes of a loss. The
/// runtime checks every value it loads into the slot against it.
typedef struct {
  int32_t slot;         /* index in OtcProgram::slots of an integer INPUT */
  int32_t flags;        /* OtcIndexFlags */
  int64_t bound;        /* values lie in [0, bound) */
  int64_t ignore_index; /* read with OTC_INDEX_IGNORE */
  const char *what;     /* what the values index, for messages ("the rows of
                           'wte'", "the classes of the loss") */
} OtcIndexRange;

/* Version 2 appends init_constants to version 1; version 3 the index ranges,
 * count_input and count_ignore_index, and the GRAD_SCALE and BUFFER slots.
 * Version 4 adds no field: it replaces the eleven otcrt_gemm_* functions of
 * versions 1 to 3 (void, one per type and epilogue) by otcrt_gemm (an
 * OtcrtGemm descriptor and a status), so an older program no longer links
 * against this runtime and a version 4 program needs one of version 4 or
 * later. Version 5 adds no field: the GRAD_FACTOR slot, which
 * optimizer_step reads (a program of version 5 has one). Version 6 appends
 * `shards` (ZeRO-1) and the function otcrt_rank; otc-compile writes version
 * 6 only for a program whose optimizer is sharded, version 5 otherwise. The
 * Version 7 appends the gradient buckets (`num_bucket_ranges`,
 * `bucket_ranges`) and the function otcrt_gradients_ready; otc-compile
 * writes it only for a program with buckets. Version 8 appends `eval_step`
 * (otc-compile writes it for every program it compiles). Version 9 appends
 * `decode_step` and its slot kinds (otc-compile writes it for a program
 * compiled with --generate). Version 10 has version 9's fields and lets a
 * BUFFER slot be BF16 (a frozen parameter the steps read in BF16 alone).
 * Version 11 appends what the runtime reports a step's throughput with:
 * `precision`, `tokens_per_micro_step` and `micro_step_flops`; otc-compile
 * writes it for every program it compiles. Version 12 appends
 * `bidirectional`; otc-compile writes it for every program it compiles.
 * Version 13 appends `prediction_rows`; otc-compile writes it for every
 * program it compiles. The runtime accepts descriptors of versions 1 to 13
 * and reads each field only from a descriptor of a version that has it
 * (before 11: no model FLOPs, so no MFU; before 12: no refusal of
 * next-token data for an encoder; before 13: the loss at every position). */
#define OTC_ABI_VERSION 13

/// Version 11: the precision of a program's products (otc-compile
/// --precision), which decides the device peak its MFU is quoted against
/// (otcrt/device_peaks.h).
enum OtcPrecision {
  OTC_PRECISION_FP32 = 0, /* FP32 operands, FP32 compute (no TF32) */
  OTC_PRECISION_BF16 = 1  /* BF16 operands, FP32 accumulation */
};

/// Version 7: a range of the gradients in a bucket that the backward of
/// micro_step finishes at one point (it then calls
/// otcrt_gradients_ready(bucket)): `count` elements at byte `offset`, BF16
/// when `bf16` is 1, else F32. The ranges of a bucket follow each other in
/// the table; buckets are numbered from 0 in the order micro_step finishes
/// them, and together they cover every GRAD slot.
typedef struct {
  int32_t bucket;
  int32_t bf16;
  int64_t offset;
  int64_t count;
} OtcBucketRange;

/// Version 6: a program compiled with --shard-optimizer (ZeRO-1). Every
/// trained parameter lies in one group per kind of state (FP32 parameters,
/// gradients, BF16 working copies), each parameter at the same element in
/// every kind, and each group holds `ranks` x `elements` elements: rank r's
/// part is elements [r x elements, (r + 1) x elements). The AdamW moments
/// exist only as each rank's part (`elements` F32 values each): the program
/// has no ADAM_M or ADAM_V slots, and the moments of the PARAM slot at byte
/// `o` start at element (o - param_offset) / 4 of the group. optimizer_step
/// updates the running rank's part alone (otcrt_rank), reading the summed
/// gradients there: the runtime reduce-scatters the gradient group before
/// it and all-gathers the copy group after it, and the parameter group too
/// when the steps read it (`steps_read_params`); otherwise the other ranks'
/// parts of the FP32 parameters are gathered only when they are read by
/// the runtime (a checkpoint).
typedef struct {
  int32_t ranks;        /* the data-parallel ranks it must run on, >= 2 */
  int32_t grad_dtype;   /* OtcDType of the gradient group: OTC_F32 or OTC_BF16 */
  int32_t steps_read_params; /* 1: zero_grads or micro_step read the F32
                                parameters; 0: only their BF16 copies */
  int32_t masters_sharded;   /* 1 (needs steps_read_params 0): the parameter
                                group holds this rank's part alone
                                (`elements` F32 at param_offset), and each
                                PARAM slot's offset is its place in the whole
                                group (param_offset + 4 x its element), not
                                bytes of the arena: the runtime loads and
                                saves the masters through a host image of the
                                whole group, and refresh_params rounds the
                                rank's part of the copies */
  int64_t elements;     /* elements of one rank's part of each group */
  int64_t param_offset; /* byte offsets in the arena: the F32 parameters, */
  int64_t grad_offset;  /* the gradients, */
  int64_t copy_offset;  /* the BF16 working copies (-1: none), */
  int64_t m_offset;     /* and this rank's parts of the first */
  int64_t v_offset;     /* and second moments */
} OtcOptimizerShards;

typedef struct {
  int32_t abi_version; /* 1 to OTC_ABI_VERSION */
  const char *target;  /* "cpu" or "cuda" */
  const char *model;   /* the ONNX file it was compiled from */
  int64_t arena_bytes;
  int32_t micro_batch; /* leading dimension of every INPUT slot */
  int32_t grad_accum;  /* micro-batches per optimizer step */
  int32_t num_slots;
  const OtcSlot *slots;
  void (*zero_grads)(char *arena); /* sets every GRAD slot to zero */
  void (*micro_step)(char *arena); /* forward + backward on the INPUT slots;
                                      writes LOSS (mean over the micro-batch)
                                      and adds grad/grad_accum into GRAD slots */
  void (*optimizer_step)(char *arena); /* AdamW: reads PARAM, GRAD, ADAM_M,
                                          ADAM_V, LR (f32 scalar), STEP (f32
                                          scalar, 1-based), GRAD_FACTOR
                                          (version 5); updates PARAM,
                                          ADAM_M, ADAM_V */
  /* Version 2: fills the constants the steps read, which live in arena bytes
     outside every slot of the table, and computes the values of constants
     and BUFFER slots that the steps read (otc-compile computes them once);
     called once after the arena is allocated and zeroed and the PARAM and
     BUFFER slots loaded (initial values or a checkpoint), before any other
     function. Nothing else writes those bytes, so loading a checkpoint
     leaves them as they are. May be null. */
  void (*init_constants)(char *arena);
  /* Version 3: the ranges of the integer inputs that index a table (at most
     one per slot; inputs without one are not checked). */
  int32_t num_index_ranges;
  const OtcIndexRange *index_ranges;
  /* Also version 3: with more than one micro-batch per step, micro_step adds
     grad * GRAD_SCALE into the GRAD slots. When the loss is a mean over the
     entries of INPUT slot `count_input` that are not `count_ignore_index`
     (the targets of a cross-entropy with an ignore index), the runtime sets
     GRAD_SCALE to the micro-batch's count of such entries over the step's,
     so that the step's gradient is that of the whole batch however it is
     split; otherwise (count_input NULL) to 1 / micro-batches. */
  const char *count_input;
  int64_t count_ignore_index;
  /* Also version 3: rounds the BF16 working copies of the parameters from
     the PARAM slots; called after the parameters are loaded (initial values
     or a checkpoint), before any step, since the optimizer step writes the
     copies only with each update. May be null (the steps refresh them). */
  void (*refresh_params)(char *arena);
  /* Version 6: where a sharded optimizer's groups lie (above); null when the
     optimizer is not sharded. */
  const OtcOptimizerShards *shards;
  /* Version 7: the gradient buckets (above); none when num_bucket_ranges is
     0. A data-parallel run may start summing a bucket over the ranks when
     the last micro-batch of a step reaches its otcrt_gradients_ready. */
  int32_t num_bucket_ranges;
  const OtcBucketRange *bucket_ranges;
  /* Version 8: the loss of one micro-batch on the INPUT slots into LOSS,
     and nothing else: no gradient is computed, no GRAD slot written (the
     runtime's evaluation). May be null (evaluation then runs micro_step,
     whose gradients the next step's zero_grads clears). */
  void (*eval_step)(char *arena);
  /* Version 9: the logits of one position of every row, for sampling:
     reads the PARAM and BUFFER slots, DECODE_TOKENS (the ids at the
     position) and DECODE_POSITION (p); writes the position's keys and
     values into the KV_CACHE slots and attends to those of positions 0 to
     p; writes LOGITS. Positions are decoded in order from 0, the caches
     zeroed before position 0. Only decode_step may run between two calls
     of a sequence. */
  void (*decode_step)(char *arena);
  /* Version 11: what a step's throughput is reported with. `precision`
     (OtcPrecision) picks the device peak MFU is quoted against.
     `tokens_per_micro_step`: the tokens one micro_step reads, B x T of the
     first integer INPUT of rank 2 or more ([B, T, ...]); 0 when there is
     none (the runtime then counts samples, micro_batch per micro_step).
     `micro_step_flops`: the model FLOPs of one micro_step, forward and
     backward as the compiler's cost model counts them, recomputation not
     included (the FLOPs of plan.json's flops.model, which is grad_accum
     times this); 0: unknown (no MFU). */
  int32_t precision;
  int64_t tokens_per_micro_step;
  int64_t micro_step_flops;
  /* Version 12: 1 when a fused self-attention of the model is not causal
     and hides no key by position (no mask, or a key padding alone: a query
     sees the keys after it, as BERT's, ModernBERT's, an encoder's), so that
     the next-token targets `train --data` makes from shards are visible to
     it (the runtime refuses that feed); 0 otherwise (every fused attention
     causal or masked by a run-time mask that may be, or none fused). */
  int32_t bidirectional;
  /* Version 13: the INPUT slot, [micro_batch, K] int64, of the rows whose
     loss is computed (otc-compile --sparse-prediction=K): each entry
     b x T + t, a position t of sequence b of the micro-batch. The runtime
     fills it, never a --batch file: from `count_input`, [micro_batch, T],
     it lists the positions of each sequence whose target is not
     `count_ignore_index`, in order, then positions whose target is (a
     sequence with more than K counted is an error). Null: the loss is
     computed at every position. */
  const char *prediction_rows;
} OtcProgram;

/// Entry point of a compiled training program: parses the command line,
/// runs it and returns the process exit code.
int otcrt_main(int argc, char **argv, const OtcProgram *program);

/// Version 6: the data-parallel rank of this process (0 when it runs
/// alone), fixed before any step function runs: a sharded optimizer step
/// updates this rank's part of the parameters.
int otcrt_rank(void);

/// Version 7: called by micro_step (host code, in order with its kernels,
/// which on the cpu target have finished) when every gradient of `bucket`
/// has its final value for this micro-batch.
void otcrt_gradients_ready(int32_t bucket);

/// The stream every kernel launch, library call, memset and copy of the
/// generated code goes to: a cudaStream_t on the cuda target (non-blocking,
/// created once by the runtime, so that the runtime can capture a whole
/// function into a CUDA graph), NULL on the cpu target.
void *otcrt_stream(void);

/// What a GEMM does with its FP32 result v = alpha op(A) op(B) (OtcrtGemm::epilogue).
enum OtcrtGemmEpilogue {
  /* C = v + beta C; bias, addend and aux NULL. */
  OTCRT_GEMM_NONE = 0,
  /* C = v + beta C + bias[j] on column j of every row of every batch entry. */
  OTCRT_GEMM_BIAS = 1,
  /* C = v + beta addend (+ bias[j] when bias is not NULL): addend is laid
     out like C (ldc, stride_c) in another buffer (a residual connection
     after a projection); aux NULL. */
  OTCRT_GEMM_ADD = 2,
  /* x = v (+ bias[j] when bias is not NULL); C = gelu(x) and aux = x (the
     pre-activation, for the backward), gelu the tanh form 0.5 x (1 +
     tanh(sqrt(2/pi) (x + 0.044715 x^3))); beta must be 0. */
  OTCRT_GEMM_GELU = 3,
  /* C = v gelu'(aux), gelu' the derivative of that tanh form, aux read;
     beta must be 0, bias NULL. */
  OTCRT_GEMM_DGELU = 4
};

/// One GEMM call site (the generated code emits one static const
/// descriptor per call): row-major, batched, for b in [0, batch):
/// C_b = epilogue(alpha op(A_b) op(B_b), beta, ...), op(A_b) M x K (stored
/// K x M when trans_a), op(B_b) K x N (stored N x K when trans_b).
/// Every product accumulates in FP32; each element of C (and of aux) is
/// formed in FP32 and rounded once to its storage type (BF16 to nearest
/// even). beta == 0 does not read C (nor the addend). aux and the addend
/// are laid out like C (ldc, stride_c).
typedef struct {
  int32_t trans_a, trans_b; /* 0 or 1 */
  int64_t m, n, k;          /* >= 0; k == 0: v = 0 */
  int64_t batch;            /* >= 0, at most INT32_MAX */
  float alpha, beta;
  int32_t ab_type;       /* OtcDType of A and B: OTC_F32 or OTC_BF16 */
  int32_t c_type;        /* of C and the addend: OTC_F32, or OTC_BF16 with
                            BF16 A and B */
  int32_t epilogue_type; /* of bias and aux: C's type */
  int32_t epilogue;      /* OtcrtGemmEpilogue; other than NONE: A, B and C
                            of one type, and one C per batch entry */
  int64_t lda, ldb, ldc; /* row strides (elements) of the stored matrices,
                            at least their columns and at least 1 */
  int64_t stride_a, stride_b, stride_c; /* elements between batch entries;
                                           0: one matrix for every entry
                                           (for C: the entries update it
                                           one after another); entries of
                                           C do not overlap otherwise */
} OtcrtGemm;

/// Computes the GEMM `g` describes. bias ([n], epilogue_type) is required
/// by OTCRT_GEMM_BIAS and optional with ADD and GELU; addend (c_type) is
/// required by ADD; aux (epilogue_type) is written by GELU (not over C)
/// and read by DGELU (C may be aux itself); the pointers an epilogue does
/// not use must be NULL, and A and B may be NULL when K is 0. cpu target:
/// host pointers, `stream` ignored. cuda target: device pointers, work
/// queued on `stream` (a cudaStream_t; NULL: the default stream), cuBLASLt
/// with FP32 compute (no TF32); an epilogue cuBLASLt declines for a shape
/// runs as its plain product and a kernel of the runtime instead (one
/// message on stderr per shape, OTCRT_GEMM_EPILOGUE=fallback forces it).
/// Once a shape has run, a call neither allocates nor synchronizes, so a
/// CUDA graph can capture it; a shape first seen inside a capture returns
/// an error instead. Returns 0, or non-zero after one line on stderr that
/// names the shape, its types, transposes and epilogue: a descriptor that
/// breaks the rules above (nothing is written then) or a library failure.
int otcrt_gemm(const OtcrtGemm *g, const void *a, const void *b, void *c,
               const void *bias, const void *addend, void *aux, void *stream);

/// Which operand otcrt_gemm_sums sums over the product's depth K.
enum OtcrtGemmSumsOf {
  /* s[i] = sum over k of op(A)[i][k], i < M: A stored K x M (trans_a 1). */
  OTCRT_GEMM_SUMS_A = 0,
  /* s[j] = sum over k of op(B)[k][j], j < N: B stored K x N (trans_b 0). */
  OTCRT_GEMM_SUMS_B = 1
};

/// otcrt_gemm (epilogue NONE, batch 1, alpha 1) that also sums one of its
/// operands over the depth K: a bias's gradient beside its weight's, both read
/// from the layer's output gradient (otc-fuse-gemm-sums). The summed operand is
/// stored as a dense row-major K x W matrix (W = M for OTCRT_GEMM_SUMS_A with
/// trans_a 1 and lda M; W = N for OTCRT_GEMM_SUMS_B with trans_b 0 and ldb N),
/// so s holds its column sums. s is formed in FP32 (BF16 values widen exactly);
/// sums[w] becomes s[w] (plus its own value when accumulate_sums is 1), rounded
/// once to sums_type (OTC_F32 or OTC_BF16). sums ([W] of sums_type) must not
/// overlap A, B or C. K == 0: s = 0 (C = beta C). M or N 0: no product (C may
/// be NULL), the sums still formed; W == 0 (lda or ldb then 1): nothing summed,
/// sums may be NULL. A batch other than 1, another epilogue or alpha other than
/// 1 is refused. The order of the additions is the target's: the cpu target
/// sums each column in row order; the cuda target asks cuBLASLt for the
/// bias-gradient epilogue of that operand (BGRADB for A, BGRADA for B, which
/// cuBLASLt names from its column-major view) and, where cuBLASLt declines it
/// (or OTCRT_GEMM_EPILOGUE=fallback), runs the plain product and the runtime's
/// column sums (otcrt_column_sum_*), after one line on stderr per shape; a
/// shape's first call chooses its route as otcrt_gemm's does (outside a CUDA
/// graph capture), later calls neither allocate nor synchronize. Same rules as
/// otcrt_gemm otherwise; non-zero after one line on stderr for a call that
/// breaks them (nothing written) or a library failure.
int otcrt_gemm_sums(const OtcrtGemm *g, const void *a, const void *b, void *c,
                    void *sums, int32_t sums_of, int32_t sums_type,
                    int32_t accumulate_sums, void *stream);

/// otcrt_gemm with FP8 operands (otc-compile --precision=fp8): A and B are
/// BF16 (ab_type OTC_BF16), C BF16 or F32; a_format and b_format are
/// OtcrtFp8Format (otcrt/fp8.h: E4M3 or E5M2, not both E5M2). Each operand
/// is scaled as one tensor (all its batch entries) by s = max / amax
/// (otcrt_fp8_scale), amax the largest magnitude it had on the previous
/// call of the same descriptor `g` (its call site: delayed scaling; on the
/// first call of `g`, its own), rounded to its format (otcrt_float_to_fp8),
/// and the product is accumulated in FP32 with alpha multiplied by
/// 1 / (s_a s_b) before the epilogue, as otcrt_gemm's rules state. cpu target:
/// the FP8 values are formed exactly and multiplied in FP32 (an emulation).
/// cuda target: a quantize kernel writes each FP8 copy (gathering the amax for
/// the next call) in the layout cuBLASLt's FP8 GEMMs take (A transposed, sizes
/// multiples of 16) and cuBLASLt multiplies them, its scale pointers set
/// on the device (no synchronization; a CUDA graph can capture it); a shape
/// that cuBLASLt cannot multiply in FP8 (a library without FP8 GEMMs, an
/// epilogue it declines, sizes not multiples of 16) runs as otcrt_gemm
/// instead, in BF16, after one line on stderr that says so. A program
/// calling it does not link against a runtime older than it (descriptor
/// fields are unchanged: ABI version 11 still).
int otcrt_gemm_fp8(const OtcrtGemm *g, int32_t a_format, int32_t b_format,
                   const void *a, const void *b, void *c, const void *bias,
                   const void *addend, void *aux, void *stream);

/// One FP8 copy of a BF16 tensor (otc-fp8-copies; otcrt/fp8.h lays its
/// bytes out): the tensor as a row-major `rows` x `cols` matrix, the
/// OtcrtFp8Format of its values, and `layouts`, which of the matrix as
/// stored (OTCRT_FP8_AS_STORED) and its transpose (OTCRT_FP8_TRANSPOSED)
/// the copy holds. A program's static descriptor is the copy's call site:
/// its delayed amax lives with it.
typedef struct OtcrtFp8Quantize {
  int64_t rows, cols;
  int32_t format;
  int32_t layouts;
} OtcrtFp8Quantize;

/// Writes `copy`, the FP8 copy of BF16 `x` that `q` describes: each value
/// scaled by s = otcrt_fp8_scale(amax), amax the largest magnitude x had
/// on the previous call of `q` (delayed scaling; on the first call of `q`,
/// x's own), rounded to the format (otcrt_float_to_fp8), in each layout
/// asked for, then 1 / s as a float (otcrt_fp8_copy_scale_offset). cpu
/// target: host pointers; cuda target: device pointers, queued on
/// `stream`, neither allocating nor synchronizing after the first call of
/// `q` (a CUDA graph can capture it). Returns 0, or non-zero after one line
/// on stderr.
int otcrt_fp8_quantize(const OtcrtFp8Quantize *q, const void *x, void *copy,
                       void *stream);

/// otcrt_gemm_fp8 with its operands already quantized: A's values read
/// from `a_copy` and B's from `b_copy` (FP8 copies that otcrt_fp8_quantize
/// wrote of A and B as stored, with `a_layouts` and `b_layouts` their
/// descriptors' layouts), each holding the layout the product reads: A as
/// [M, K] (its transpose when trans_a), B as [N, K] (its transpose unless
/// trans_b); alpha is multiplied by the two copies' 1 / s. `a` and `b` are
/// the BF16 operands, which the cuda target multiplies in BF16 instead
/// where cuBLASLt cannot in FP8 (as otcrt_gemm_fp8 does). Several calls may
/// read one copy.
int otcrt_gemm_fp8_copies(const OtcrtGemm *g, int32_t a_format,
                          int32_t b_format, const void *a_copy,
                          int32_t a_layouts, const void *b_copy,
                          int32_t b_layouts, const void *a, const void *b,
                          void *c, const void *bias, const void *addend,
                          void *aux, void *stream);

/// cuda target only: checks the last kernel launch; aborts with file:line on error. The cpu library defines it as a no-op.
void otcrt_check_launch(const char *file, int line);

/// Optional profiling hooks for generated code: bracket a kernel or library
/// call with otcrt_trace_begin("<ONNX node name>") and otcrt_trace_end() to
/// get one span per kernel in `train --trace`. Without --trace they return at
/// once; with it the cuda runtime records an event on its stream at each hook
/// (timed after the step), with --trace-sync it synchronizes the device there.
void otcrt_trace_begin(const char *name);
void otcrt_trace_end(void);

#ifdef __cplusplus
}
#endif

#endif /* OTCRT_ABI_H */
