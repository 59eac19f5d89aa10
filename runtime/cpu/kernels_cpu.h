// The host kernels of libotcrt_cpu under C++ names, overloaded on the storage
// type (float or otcrt_bf16), with the arguments of the matching C functions
// of otcrt/kernels.h less the stream. kernels_abi.cpp defines the C entry
// points on top of them; keeping the two apart lets a program that also links
// libotcrt_cuda.a (whose C entry points have the same names) compile these
// sources alongside it, as the GPU kernel test does to compare the two.
#ifndef OTCRT_CPU_KERNELS_CPU_H
#define OTCRT_CPU_KERNELS_CPU_H

#include "otcrt/abi.h"
#include "otcrt/kernels.h"

#include <cstdint>

namespace otcrt {
namespace cpu {

/// The GEMM of otcrt_gemm (otcrt/abi.h) on host pointers, its descriptor
/// checked first (cpu/gemm.cpp).
int gemm(const OtcrtGemm &g, const void *a, const void *b, void *c,
         const void *bias, const void *addend, void *aux);

/// otcrt_gemm_sums (otcrt/abi.h) on host pointers: the GEMM above and the
/// column sums of one operand, its call checked first (cpu/gemm_sums.cpp).
int gemmSums(const OtcrtGemm &g, const void *a, const void *b, void *c,
             void *sums, int32_t sumsOf, int32_t sumsType, int32_t accumulate);

/// The FP8 GEMM of otcrt_gemm_fp8 (otcrt/abi.h) on host pointers, emulated
/// (cpu/gemm.cpp), each call site's scales from its previous call's amax.
int gemmFp8(const OtcrtGemm &g, int32_t aFormat, int32_t bFormat, const void *a,
            const void *b, void *c, const void *bias, const void *addend,
            void *aux);

/// otcrt_fp8_quantize (otcrt/abi.h) on host pointers (cpu/gemm.cpp).
int fp8Quantize(const OtcrtFp8Quantize &q, const void *x, void *copy);

/// otcrt_gemm_fp8_copies (otcrt/abi.h) on host pointers, emulated: the
/// copies' FP8 values widened exactly and multiplied as BF16 (cpu/gemm.cpp).
int gemmFp8Copies(const OtcrtGemm &g, int32_t aFormat, int32_t bFormat,
                  const void *aCopy, int32_t aLayouts, const void *bCopy,
                  int32_t bLayouts, const void *a, const void *b, void *c,
                  const void *bias, const void *addend, void *aux);

/// Forgets the amax every FP8 call site and copy saw (tests: each call then
/// scales from its own operands, as a site's first call does).
void forgetFp8Scales();

/// C = alpha op(A) op(B) + beta C on row-major float matrices through the
/// GEMM above (attention.cpp; the attention and expert kernels use it).
void matmul(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
            float alpha, const float *A, int64_t lda, const float *B,
            int64_t ldb, float beta, float *C, int64_t ldc);

/// Layer norm forward and backward (layer_norm.cpp).
int layerNormFwd(int64_t rows, int64_t cols, float eps, const float *x,
                 const float *gamma, const float *beta, float *y, float *mean,
                 float *rstd);
int layerNormFwd(int64_t rows, int64_t cols, float eps, const otcrt_bf16 *x,
                 const otcrt_bf16 *gamma, const otcrt_bf16 *beta, otcrt_bf16 *y,
                 float *mean, float *rstd);
int layerNormBwd(int64_t rows, int64_t cols, const float *dy, const float *x,
                 const float *gamma, const float *mean, const float *rstd,
                 const float *residual, int32_t accumulate, float *dx,
                 float *dgamma, float *dbeta);
int layerNormBwd(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                 const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                 const float *mean, const float *rstd,
                 const otcrt_bf16 *residual, int32_t accumulate, otcrt_bf16 *dx,
                 otcrt_bf16 *dgamma, otcrt_bf16 *dbeta);

/// RMS norm forward and backward (layer_norm.cpp).
int rmsNormFwd(int64_t rows, int64_t cols, float eps, const float *x,
               const float *gamma, float *y, float *rstd);
int rmsNormFwd(int64_t rows, int64_t cols, float eps, const otcrt_bf16 *x,
               const otcrt_bf16 *gamma, otcrt_bf16 *y, float *rstd);
int rmsNormBwd(int64_t rows, int64_t cols, const float *dy, const float *x,
               const float *gamma, const float *rstd, const float *residual,
               int32_t accumulate, float *dx, float *dgamma);
int rmsNormBwd(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
               const otcrt_bf16 *x, const otcrt_bf16 *gamma, const float *rstd,
               const otcrt_bf16 *residual, int32_t accumulate, otcrt_bf16 *dx,
               otcrt_bf16 *dgamma);

/// Rotary position embedding and its transpose, the gradient (rope.cpp).
/// The first `rot` features of a row rotate (pairs (p, p + rot / 2), or
/// (2p, 2p + 1) when `interleaved`), the others are copied.
int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
         int64_t c0, int64_t c1, int64_t c2, const float *x, const float *cos,
         const float *sin, int32_t transposed, int32_t interleaved, float *y);
int rope(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
         int64_t c0, int64_t c1, int64_t c2, const otcrt_bf16 *x,
         const float *cos, const float *sin, int32_t transposed,
         int32_t interleaved, otcrt_bf16 *y);

/// Sums over the rows of a [rows, cols] matrix, in float (column_sum.cpp).
int columnSum(int64_t rows, int64_t cols, const float *x, float *out);
int columnSum(int64_t rows, int64_t cols, const otcrt_bf16 *x, float *out);
/// The same sums added into acc, of x's storage (column_sum.cpp).
int columnSumInto(int64_t rows, int64_t cols, const float *x, float *acc);
int columnSumInto(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                  otcrt_bf16 *acc);

/// The gradient of a gather along one axis (gather_grad.cpp).
int gatherGrad(int64_t outer, int64_t axisLen, int64_t inner, int64_t positions,
               const float *grad, const int64_t *indices, int32_t accumulate,
               float *out);
int gatherGrad(int64_t outer, int64_t axisLen, int64_t inner, int64_t positions,
               const otcrt_bf16 *grad, const int64_t *indices,
               int32_t accumulate, otcrt_bf16 *out);

/// A mixture of experts' per-row products and their weight gradient
/// (expert_matmul.cpp): results of `outType` / `dwType` (OtcDType), the
/// weight gradient's added into dw when `accumulate`.
int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const float *x, const int64_t *ids,
                 const float *w, int32_t outType, void *out);
int expertMatmul(int64_t rows, int64_t experts, int64_t depth, int64_t width,
                 int32_t transposeW, const otcrt_bf16 *x, const int64_t *ids,
                 const otcrt_bf16 *w, int32_t outType, void *out);
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const float *dy,
                      const float *x, const int64_t *ids, int32_t dwType,
                      int32_t accumulate, void *dw);
int expertMatmulWgrad(int64_t rows, int64_t experts, int64_t depth,
                      int64_t width, int32_t transposeW, const otcrt_bf16 *dy,
                      const otcrt_bf16 *x, const int64_t *ids, int32_t dwType,
                      int32_t accumulate, void *dw);

/// The sum of squares over arena ranges (sum_squares.cpp).
int sumSquares(const char *arena, int32_t numRanges, const OtcrtRange *ranges,
               double *sum);
/// otcrt_grad_factor (sum_squares.cpp).
int gradFactor(const char *arena, int32_t numRanges, const OtcrtRange *ranges,
               float scale, float clip, const float *checks, int32_t numChecks,
               float *factor, double *norm);
/// otcrt_scale_ranges (sum_squares.cpp).
int scaleRanges(char *arena, int32_t numRanges, const OtcrtRange *ranges,
                float factor);

/// Attention forward and backward (attention.cpp).
int attentionFwd(const OtcrtAttention &a, const float *q, const float *k,
                 const float *v, const float *mask, float *out, float *lse);
int attentionFwd(const OtcrtAttention &a, const otcrt_bf16 *q,
                 const otcrt_bf16 *k, const otcrt_bf16 *v,
                 const otcrt_bf16 *mask, otcrt_bf16 *out, float *lse);
int attentionBwd(const OtcrtAttention &a, const float *dout, const float *q,
                 const float *k, const float *v, const float *mask,
                 const float *out, const float *lse, float *dq, float *dk,
                 float *dv);
int attentionBwd(const OtcrtAttention &a, const otcrt_bf16 *dout,
                 const otcrt_bf16 *q, const otcrt_bf16 *k, const otcrt_bf16 *v,
                 const otcrt_bf16 *mask, const otcrt_bf16 *out,
                 const float *lse, otcrt_bf16 *dq, otcrt_bf16 *dk,
                 otcrt_bf16 *dv);

/// Cross-entropy forward, backward and both fused (cross_entropy.cpp).
int crossEntropyFwd(int64_t rows, int64_t classes, const float *logits,
                    const int64_t *labels, int32_t hasIgnore,
                    int64_t ignoreIndex, int32_t reduction, float *loss,
                    float *lse);
int crossEntropyFwd(int64_t rows, int64_t classes, const otcrt_bf16 *logits,
                    const int64_t *labels, int32_t hasIgnore,
                    int64_t ignoreIndex, int32_t reduction, float *loss,
                    float *lse);
int crossEntropyBwd(int64_t rows, int64_t classes, const float *dloss,
                    const float *logits, const int64_t *labels,
                    const float *lse, int32_t hasIgnore, int64_t ignoreIndex,
                    int32_t reduction, float *dlogits);
int crossEntropyBwd(int64_t rows, int64_t classes, const float *dloss,
                    const otcrt_bf16 *logits, const int64_t *labels,
                    const float *lse, int32_t hasIgnore, int64_t ignoreIndex,
                    int32_t reduction, otcrt_bf16 *dlogits);
int crossEntropyFused(int64_t rows, int64_t classes, const float *dloss,
                      const float *logits, const int64_t *labels,
                      int32_t hasIgnore, int64_t ignoreIndex, int32_t reduction,
                      float *loss, float *rowLoss, float *dlogits);
int crossEntropyFused(int64_t rows, int64_t classes, const float *dloss,
                      const otcrt_bf16 *logits, const int64_t *labels,
                      int32_t hasIgnore, int64_t ignoreIndex, int32_t reduction,
                      float *loss, float *rowLoss, otcrt_bf16 *dlogits);

int linearCrossEntropy(int64_t rows, int64_t hidden, int64_t classes,
                       int64_t chunkRows, const float *dloss, const float *h,
                       const float *w, int32_t wLayout, const int64_t *labels,
                       int32_t hasIgnore, int64_t ignoreIndex,
                       int32_t reduction, int32_t dwType, int32_t dwAccumulate,
                       const float *bias, float *loss, float *rowLoss,
                       float *dh, void *dw, float *dbias, float *chunk);
int linearCrossEntropy(int64_t rows, int64_t hidden, int64_t classes,
                       int64_t chunkRows, const float *dloss,
                       const otcrt_bf16 *h, const otcrt_bf16 *w,
                       int32_t wLayout, const int64_t *labels,
                       int32_t hasIgnore, int64_t ignoreIndex,
                       int32_t reduction, int32_t dwType, int32_t dwAccumulate,
                       const otcrt_bf16 *bias, float *loss, float *rowLoss,
                       float *dh, void *dw, float *dbias, otcrt_bf16 *chunk);

/// Records a data error in the library's error record (kernel_error.cpp):
/// the first one since the record was last read wins.
void recordError(int32_t code, int64_t index, int64_t value, int64_t bound);
/// Whether the error record holds an error (the gradient factor then vetoes
/// the step's update).
bool errorRecorded();
/// The error record (otcrt_kernel_error_record).
OtcrtKernelError *errorRecord();
/// Copies the record into *error (where given), clears it and returns its
/// code (otcrt_kernel_error).
int takeError(OtcrtKernelError *error);

} // namespace cpu
} // namespace otcrt

#endif // OTCRT_CPU_KERNELS_CPU_H
