// The C entry points of otcrt/kernels.h, and otcrt_gemm, otcrt_gemm_sums,
// otcrt_gemm_fp8, otcrt_fp8_quantize and otcrt_gemm_fp8_copies of
// otcrt/abi.h, in libotcrt_cpu: each forwards to the host kernel of
// kernels_cpu.h for its storage type; `stream` is ignored. Data errors are
// returned, so the error record is always empty.
#include "kernels_cpu.h"

#include "otcrt/abi.h"
#include "otcrt/kernels.h"

#include <cstdio>
#include <type_traits>

using namespace otcrt::cpu;

// The declarations of otcrt/kernels.h (and otcrt_gemm's of otcrt/abi.h)
// have the signatures of otcrt/kernels.def, the one statement of them; the
// definitions below, and the cuda library's, must match the declarations
// to compile, and the code generator checks its calls against the same
// table (codegen/KernelAbi.cpp).
namespace kernels_def {
namespace f32 {
using T = float;
#define OTCRT_TYPED_KERNEL(name, params)                                       \
  static_assert(std::is_same_v<decltype(otcrt_##name##_f32), int params>,      \
                "otcrt_" #name "_f32 differs from otcrt/kernels.def");
#define OTCRT_KERNEL(ret, name, params)                                        \
  static_assert(std::is_same_v<decltype(otcrt_##name), ret params>,            \
                "otcrt_" #name " differs from otcrt/kernels.def");
#include "otcrt/kernels.def"
#undef OTCRT_TYPED_KERNEL
#undef OTCRT_KERNEL
} // namespace f32
namespace bf16 {
using T = otcrt_bf16;
#define OTCRT_TYPED_KERNEL(name, params)                                       \
  static_assert(std::is_same_v<decltype(otcrt_##name##_bf16), int params>,     \
                "otcrt_" #name "_bf16 differs from otcrt/kernels.def");
#define OTCRT_KERNEL(ret, name, params)
#include "otcrt/kernels.def"
#undef OTCRT_TYPED_KERNEL
#undef OTCRT_KERNEL
} // namespace bf16
} // namespace kernels_def

extern "C" {

int otcrt_layer_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                             const float *x, const float *gamma,
                             const float *beta, float *y, float *mean,
                             float *rstd, void *) {
  return layerNormFwd(rows, cols, eps, x, gamma, beta, y, mean, rstd);
}
int otcrt_layer_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const otcrt_bf16 *beta, otcrt_bf16 *y,
                              float *mean, float *rstd, void *) {
  return layerNormFwd(rows, cols, eps, x, gamma, beta, y, mean, rstd);
}
int otcrt_layer_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                             const float *x, const float *gamma,
                             const float *mean, const float *rstd,
                             const float *residual, int32_t accumulate,
                             float *dx, float *dgamma, float *dbeta, void *) {
  return layerNormBwd(rows, cols, dy, x, gamma, mean, rstd, residual,
                      accumulate, dx, dgamma, dbeta);
}
int otcrt_layer_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                              const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                              const float *mean, const float *rstd,
                              const otcrt_bf16 *residual, int32_t accumulate,
                              otcrt_bf16 *dx, otcrt_bf16 *dgamma,
                              otcrt_bf16 *dbeta, void *) {
  return layerNormBwd(rows, cols, dy, x, gamma, mean, rstd, residual,
                      accumulate, dx, dgamma, dbeta);
}

int otcrt_gemm(const OtcrtGemm *g, const void *a, const void *b, void *c,
               const void *bias, const void *addend, void *aux, void *) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  return gemm(*g, a, b, c, bias, addend, aux);
}

int otcrt_gemm_sums(const OtcrtGemm *g, const void *a, const void *b, void *c,
                    void *sums, int32_t sums_of, int32_t sums_type,
                    int32_t accumulate_sums, void *) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm_sums: error: no descriptor\n");
    return 1;
  }
  return gemmSums(*g, a, b, c, sums, sums_of, sums_type, accumulate_sums);
}

int otcrt_gemm_fp8(const OtcrtGemm *g, int32_t a_format, int32_t b_format,
                   const void *a, const void *b, void *c, const void *bias,
                   const void *addend, void *aux, void *) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  return gemmFp8(*g, a_format, b_format, a, b, c, bias, addend, aux);
}

int otcrt_fp8_quantize(const OtcrtFp8Quantize *q, const void *x, void *copy,
                       void *) {
  if (!q) {
    std::fprintf(stderr, "otcrt: fp8_quantize: error: no descriptor\n");
    return 1;
  }
  return fp8Quantize(*q, x, copy);
}

int otcrt_gemm_fp8_copies(const OtcrtGemm *g, int32_t a_format,
                          int32_t b_format, const void *a_copy,
                          int32_t a_layouts, const void *b_copy,
                          int32_t b_layouts, const void *a, const void *b,
                          void *c, const void *bias, const void *addend,
                          void *aux, void *) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  return gemmFp8Copies(*g, a_format, b_format, a_copy, a_layouts, b_copy,
                       b_layouts, a, b, c, bias, addend, aux);
}

int otcrt_column_sum_f32(int64_t rows, int64_t cols, const float *x,
                          float *out, void *) {
  return columnSum(rows, cols, x, out);
}
int otcrt_column_sum_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                           float *out, void *) {
  return columnSum(rows, cols, x, out);
}
int otcrt_column_sum_into_f32(int64_t rows, int64_t cols, const float *x,
                              float *acc, void *) {
  return columnSumInto(rows, cols, x, acc);
}
int otcrt_column_sum_into_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *x,
                               otcrt_bf16 *acc, void *) {
  return columnSumInto(rows, cols, x, acc);
}

int otcrt_gather_grad_f32(int64_t outer, int64_t axis_len, int64_t inner,
                          int64_t positions, const float *grad,
                          const int64_t *indices, int32_t accumulate,
                          float *out, void *) {
  return gatherGrad(outer, axis_len, inner, positions, grad, indices,
                    accumulate, out);
}
int otcrt_gather_grad_bf16(int64_t outer, int64_t axis_len, int64_t inner,
                           int64_t positions, const otcrt_bf16 *grad,
                           const int64_t *indices, int32_t accumulate,
                           otcrt_bf16 *out, void *) {
  return gatherGrad(outer, axis_len, inner, positions, grad, indices,
                    accumulate, out);
}

int otcrt_expert_matmul_f32(int64_t rows, int64_t experts, int64_t depth,
                            int64_t width, int32_t transpose_w, const float *x,
                            const int64_t *ids, const float *w,
                            int32_t out_type, void *out, void *) {
  return expertMatmul(rows, experts, depth, width, transpose_w, x, ids, w,
                      out_type, out);
}
int otcrt_expert_matmul_bf16(int64_t rows, int64_t experts, int64_t depth,
                             int64_t width, int32_t transpose_w,
                             const otcrt_bf16 *x, const int64_t *ids,
                             const otcrt_bf16 *w, int32_t out_type, void *out,
                             void *) {
  return expertMatmul(rows, experts, depth, width, transpose_w, x, ids, w,
                      out_type, out);
}
int otcrt_expert_matmul_wgrad_f32(int64_t rows, int64_t experts, int64_t depth,
                                  int64_t width, int32_t transpose_w,
                                  const float *dy, const float *x,
                                  const int64_t *ids, int32_t dw_type,
                                  int32_t accumulate, void *dw, void *) {
  return expertMatmulWgrad(rows, experts, depth, width, transpose_w, dy, x, ids,
                           dw_type, accumulate, dw);
}
int otcrt_expert_matmul_wgrad_bf16(int64_t rows, int64_t experts, int64_t depth,
                                   int64_t width, int32_t transpose_w,
                                   const otcrt_bf16 *dy, const otcrt_bf16 *x,
                                   const int64_t *ids, int32_t dw_type,
                                   int32_t accumulate, void *dw, void *) {
  return expertMatmulWgrad(rows, experts, depth, width, transpose_w, dy, x, ids,
                           dw_type, accumulate, dw);
}

OtcrtKernelError *otcrt_kernel_error_record(void) {
  return otcrt::cpu::errorRecord();
}

int otcrt_sum_squares(const char *arena, int32_t num_ranges,
                      const OtcrtRange *ranges, double *sum, void *) {
  return sumSquares(arena, num_ranges, ranges, sum);
}

int otcrt_grad_factor(const char *arena, int32_t num_ranges,
                      const OtcrtRange *ranges, float scale, float clip,
                      const float *checks, int32_t num_checks, float *factor,
                      double *norm, void *) {
  return gradFactor(arena, num_ranges, ranges, scale, clip, checks, num_checks,
                    factor, norm);
}

int otcrt_scale_ranges(char *arena, int32_t num_ranges,
                       const OtcrtRange *ranges, float factor, void *) {
  return scaleRanges(arena, num_ranges, ranges, factor);
}

int otcrt_rms_norm_fwd_f32(int64_t rows, int64_t cols, float eps,
                           const float *x, const float *gamma, float *y,
                           float *rstd, void *) {
  return rmsNormFwd(rows, cols, eps, x, gamma, y, rstd);
}
int otcrt_rms_norm_fwd_bf16(int64_t rows, int64_t cols, float eps,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            otcrt_bf16 *y, float *rstd, void *) {
  return rmsNormFwd(rows, cols, eps, x, gamma, y, rstd);
}
int otcrt_rms_norm_bwd_f32(int64_t rows, int64_t cols, const float *dy,
                           const float *x, const float *gamma,
                           const float *rstd, const float *residual,
                           int32_t accumulate, float *dx, float *dgamma,
                           void *) {
  return rmsNormBwd(rows, cols, dy, x, gamma, rstd, residual, accumulate, dx,
                    dgamma);
}
int otcrt_rms_norm_bwd_bf16(int64_t rows, int64_t cols, const otcrt_bf16 *dy,
                            const otcrt_bf16 *x, const otcrt_bf16 *gamma,
                            const float *rstd, const otcrt_bf16 *residual,
                            int32_t accumulate, otcrt_bf16 *dx,
                            otcrt_bf16 *dgamma, void *) {
  return rmsNormBwd(rows, cols, dy, x, gamma, rstd, residual, accumulate, dx,
                    dgamma);
}

int otcrt_rope_f32(int64_t n0, int64_t n1, int64_t n2, int64_t dim, int64_t rot,
                   int64_t c0, int64_t c1, int64_t c2, const float *x,
                   const float *cos, const float *sin, int32_t transposed,
                   int32_t interleaved, float *y, void *) {
  return rope(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
              interleaved, y);
}
int otcrt_rope_bf16(int64_t n0, int64_t n1, int64_t n2, int64_t dim,
                    int64_t rot, int64_t c0, int64_t c1, int64_t c2,
                    const otcrt_bf16 *x, const float *cos, const float *sin,
                    int32_t transposed, int32_t interleaved, otcrt_bf16 *y,
                    void *) {
  return rope(n0, n1, n2, dim, rot, c0, c1, c2, x, cos, sin, transposed,
              interleaved, y);
}

int otcrt_attention_fwd_f32(const OtcrtAttention *a, const float *q,
                            const float *k, const float *v, const float *mask,
                            float *out, float *lse, void *) {
  return attentionFwd(*a, q, k, v, mask, out, lse);
}
int otcrt_attention_fwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *q,
                             const otcrt_bf16 *k, const otcrt_bf16 *v,
                             const otcrt_bf16 *mask, otcrt_bf16 *out,
                             float *lse, void *) {
  return attentionFwd(*a, q, k, v, mask, out, lse);
}
int otcrt_attention_bwd_f32(const OtcrtAttention *a, const float *dout,
                            const float *q, const float *k, const float *v,
                            const float *mask, const float *out,
                            const float *lse, float *dq, float *dk, float *dv,
                            void *) {
  return attentionBwd(*a, dout, q, k, v, mask, out, lse, dq, dk, dv);
}
int otcrt_attention_bwd_bf16(const OtcrtAttention *a, const otcrt_bf16 *dout,
                             const otcrt_bf16 *q, const otcrt_bf16 *k,
                             const otcrt_bf16 *v, const otcrt_bf16 *mask,
                             const otcrt_bf16 *out, const float *lse,
                             otcrt_bf16 *dq, otcrt_bf16 *dk, otcrt_bf16 *dv,
                             void *) {
  return attentionBwd(*a, dout, q, k, v, mask, out, lse, dq, dk, dv);
}

int otcrt_cross_entropy_fwd_f32(int64_t rows, int64_t classes,
                                const float *logits, const int64_t *labels,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *loss, float *lse,
                                void *) {
  return crossEntropyFwd(rows, classes, logits, labels, has_ignore,
                         ignore_index, reduction, loss, lse);
}
int otcrt_cross_entropy_fwd_bf16(int64_t rows, int64_t classes,
                                 const otcrt_bf16 *logits,
                                 const int64_t *labels, int32_t has_ignore,
                                 int64_t ignore_index, int32_t reduction,
                                 float *loss, float *lse, void *) {
  return crossEntropyFwd(rows, classes, logits, labels, has_ignore,
                         ignore_index, reduction, loss, lse);
}
int otcrt_cross_entropy_bwd_f32(int64_t rows, int64_t classes,
                                const float *dloss, const float *logits,
                                const int64_t *labels, const float *lse,
                                int32_t has_ignore, int64_t ignore_index,
                                int32_t reduction, float *dlogits, void *) {
  return crossEntropyBwd(rows, classes, dloss, logits, labels, lse, has_ignore,
                         ignore_index, reduction, dlogits);
}
int otcrt_cross_entropy_bwd_bf16(int64_t rows, int64_t classes,
                                 const float *dloss, const otcrt_bf16 *logits,
                                 const int64_t *labels, const float *lse,
                                 int32_t has_ignore, int64_t ignore_index,
                                 int32_t reduction, otcrt_bf16 *dlogits,
                                 void *) {
  return crossEntropyBwd(rows, classes, dloss, logits, labels, lse, has_ignore,
                         ignore_index, reduction, dlogits);
}
int otcrt_cross_entropy_fused_f32(int64_t rows, int64_t classes,
                                  const float *dloss, const float *logits,
                                  const int64_t *labels, int32_t has_ignore,
                                  int64_t ignore_index, int32_t reduction,
                                  float *loss, float *row_loss, float *dlogits,
                                  void *) {
  return crossEntropyFused(rows, classes, dloss, logits, labels, has_ignore,
                           ignore_index, reduction, loss, row_loss, dlogits);
}
int otcrt_cross_entropy_fused_bf16(int64_t rows, int64_t classes,
                                   const float *dloss, const otcrt_bf16 *logits,
                                   const int64_t *labels, int32_t has_ignore,
                                   int64_t ignore_index, int32_t reduction,
                                   float *loss, float *row_loss,
                                   otcrt_bf16 *dlogits, void *) {
  return crossEntropyFused(rows, classes, dloss, logits, labels, has_ignore,
                           ignore_index, reduction, loss, row_loss, dlogits);
}

int otcrt_linear_cross_entropy_f32(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const float *h, const float *w, int32_t w_layout,
    const int64_t *labels, int32_t has_ignore, int64_t ignore_index,
    int32_t reduction, int32_t dw_type, int32_t dw_accumulate,
    const float *bias, float *loss, float *row_loss, float *dh, void *dw,
    float *dbias, float *chunk, void *) {
  return linearCrossEntropy(rows, hidden, classes, chunk_rows, dloss, h, w,
                            w_layout, labels, has_ignore, ignore_index,
                            reduction, dw_type, dw_accumulate, bias, loss,
                            row_loss, dh, dw, dbias, chunk);
}
int otcrt_linear_cross_entropy_bf16(
    int64_t rows, int64_t hidden, int64_t classes, int64_t chunk_rows,
    const float *dloss, const otcrt_bf16 *h, const otcrt_bf16 *w,
    int32_t w_layout, const int64_t *labels, int32_t has_ignore,
    int64_t ignore_index, int32_t reduction, int32_t dw_type,
    int32_t dw_accumulate, const otcrt_bf16 *bias, float *loss, float *row_loss,
    float *dh, void *dw, float *dbias, otcrt_bf16 *chunk, void *) {
  return linearCrossEntropy(rows, hidden, classes, chunk_rows, dloss, h, w,
                            w_layout, labels, has_ignore, ignore_index,
                            reduction, dw_type, dw_accumulate, bias, loss,
                            row_loss, dh, dw, dbias, chunk);
}

int otcrt_kernel_error(OtcrtKernelError *error, void *) {
  return otcrt::cpu::takeError(error);
}

} // extern "C"
