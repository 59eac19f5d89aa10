/* The C ABI between code emitted by the otc code generator and the otcrt
 * runtime library. A compiled model is a C++ (cpu target) or CUDA (cuda
 * target) translation unit that defines its kernels and a static OtcProgram
 * descriptor, and whose main() hands that descriptor to otcrt_main(). The
 * runtime owns everything else: the arena, parameter loading, the batch, the
 * training loop and the GEMM entry point used by the generated kernels. This
 * header must stay C-compatible and its names must not change. */
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
  OTC_SLOT_GRAD_SCALE = 9, /* version 3: f32 scalar, the micro-batch's weight
                              in its step's gradient, set by the runtime
                              before each micro_step */
  OTC_SLOT_BUFFER = 10      /* version 3: an F32 initializer that is not
                              trained (frozen, a rotary table): loaded from
                              the initial parameters, kept in checkpoints,
                              no gradient, moments or master */
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
 * count_input and count_ignore_index, and the GRAD_SCALE and BUFFER slots. The runtime
 * accepts all three and reads each field only from a descriptor of a version
 * that has it. */
#define OTC_ABI_VERSION 3

typedef struct {
  int32_t abi_version; /* 1, 2 or 3 (OTC_ABI_VERSION) */
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
                                          scalar, 1-based); updates PARAM,
                                          ADAM_M, ADAM_V */
  /* Version 2: fills the constants the steps read, which live in arena bytes
     outside every slot of the table; called once after the arena is
     allocated and zeroed, before any other function. Nothing else writes
     those bytes, so loading a checkpoint leaves them as they are. May be
     null. */
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
} OtcProgram;

/// Entry point of a compiled training program: parses the command line,
/// runs it and returns the process exit code.
int otcrt_main(int argc, char **argv, const OtcProgram *program);

/// Row-major batched GEMM: for b in [0,batch): C_b = alpha * op(A_b) * op(B_b) + beta * C_b,
/// op(A_b) is M x K (stored K x M when transA), op(B_b) is K x N (stored N x K when transB),
/// lda/ldb/ldc are row strides (elements) of the stored matrices, strideX the element distance between batch entries (0 = broadcast).
/// cpu target: host pointers. cuda target: device pointers, the runtime's stream
/// (otcrt_stream), cuBLASLt.
void otcrt_gemm_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb, int64_t strideB,
                    float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch);

/// The same product on BF16 operands (bfloat16 as the upper 16 bits of an
/// IEEE float) with FP32 accumulation into a float C: each operand element is
/// widened exactly. cuda target: cuBLASLt with BF16 inputs and FP32 compute.
void otcrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                     const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B, int64_t ldb, int64_t strideB,
                     float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch);

/// BF16 operands, FP32 accumulation, C in BF16: each result is the FP32
/// alpha * product + beta * C rounded to nearest even once.
void otcrt_gemm_bf16_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                          const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B, int64_t ldb,
                          int64_t strideB, float beta, uint16_t *C, int64_t ldc, int64_t strideC, int64_t batch);

/// The stream every kernel launch, library call, memset and copy of the
/// generated code goes to: a cudaStream_t on the cuda target (non-blocking,
/// created once by the runtime, so that the runtime can capture a whole
/// function into a CUDA graph), NULL on the cpu target.
void *otcrt_stream(void);

/// The same products with a bias epilogue: C = alpha op(A) op(B) + beta C +
/// bias, bias[j] ([N], C's element type) added to column j of every row of
/// every batch entry before C's one rounding. cuda target: cuBLASLt's BIAS
/// epilogue.
void otcrt_gemm_bias_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                         int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC,
                         int64_t batch, const float *bias);
void otcrt_gemm_bias_bf16_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                               const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
                               int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
                               int64_t strideC, int64_t batch, const uint16_t *bias);

/// The same products plus another matrix: C = alpha op(A) op(B) + beta
/// addend (+ bias[j] on column j when bias is not NULL), addend laid out like
/// C (ldc, strideC) in another buffer, the sum formed in FP32 and rounded
/// once (a residual connection after a projection). cuda target: cuBLASLt
/// reading addend as its C matrix and writing our C as its D (BIAS
/// epilogue with a bias).
void otcrt_gemm_add_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                        int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC,
                        int64_t batch, const float *bias, const float *addend);
void otcrt_gemm_add_bf16_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K,
                              float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
                              const uint16_t *B, int64_t ldb, int64_t strideB, float beta,
                              uint16_t *C, int64_t ldc, int64_t strideC, int64_t batch,
                              const uint16_t *bias, const uint16_t *addend);

/// The same products with a GELU epilogue (its tanh form, gelu(v) = 0.5 v
/// (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))) on the FP32 result v = alpha
/// op(A) op(B) (+ bias[j] on column j when bias is not NULL); beta must be 0.
/// aux is laid out like C (ldc, strideC) and N is a multiple of 8. C =
/// gelu(v) and aux = v, each rounded once to the storage type (the
/// pre-activation for the backward). cuda target: cuBLASLt's GELU_AUX_BIAS
/// (GELU_AUX without a bias) epilogue.
void otcrt_gemm_gelu_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, int64_t strideA, const float *B,
                         int64_t ldb, int64_t strideB, float beta, float *C, int64_t ldc,
                         int64_t strideC, int64_t batch, const float *bias, float *aux);
void otcrt_gemm_gelu_bf16_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K,
                               float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
                               const uint16_t *B, int64_t ldb, int64_t strideB, float beta,
                               uint16_t *C, int64_t ldc, int64_t strideC, int64_t batch,
                               const uint16_t *bias, uint16_t *aux);

/// The GELU backward as an epilogue: C = v gelu'(aux) with v = alpha op(A)
/// op(B) in FP32 and gelu' the derivative of the tanh form above, rounded
/// once; aux (read) is laid out like C, N is a multiple of 8, beta must be
/// 0. cuda target: cuBLASLt's DGELU epilogue.
void otcrt_gemm_dgelu_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                          const float *A, int64_t lda, int64_t strideA, const float *B,
                          int64_t ldb, int64_t strideB, float beta, float *C, int64_t ldc,
                          int64_t strideC, int64_t batch, const float *aux);
void otcrt_gemm_dgelu_bf16_bf16(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
                                const uint16_t *B, int64_t ldb, int64_t strideB, float beta,
                                uint16_t *C, int64_t ldc, int64_t strideC, int64_t batch,
                                const uint16_t *aux);

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
