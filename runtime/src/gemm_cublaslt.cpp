// cuBLASLt implementation of otcrt_gemm_f32 for libotcrt_cuda. Row-major
// C = op(A) op(B) is computed as the column-major product C^T = op(B)^T
// op(A)^T, i.e. cuBLASLt's A operand is our B and vice versa, with no data
// movement. One handle and one 32 MiB workspace are created lazily; the
// descriptors, layouts and heuristic algorithm are cached per call shape
// (including pointer alignment, which constrains the algorithm choice, and
// the epilogue: bias, GELU with its pre-activation saved, GELU's gradient;
// an addend is read as cuBLASLt's C while our C is its D). The
// compute type is pure FP32 (no TF32); otcrt_gemm_bf16 reads BF16 operands
// (CUDA_R_16BF) into the same FP32 accumulation and FP32 C. Every product
// runs on the runtime's stream (otcrt_stream), so a CUDA graph captures it;
// the first call of a shape (heuristic, workspace) must run outside a
// capture. The ABI function returns void, so a cuBLASLt failure prints
// file:line and exits with status 1.
#include "otcrt/abi.h"
#include "otcrt/workspace.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

namespace {

constexpr size_t kWorkspaceBytes = OTCRT_CUDA_GEMM_WORKSPACE_BYTES;

[[noreturn]] void fatal(const char *what, const char *detail, const char *file,
                        int line) {
  std::fprintf(stderr, "otc train: error: %s failed at %s:%d: %s\n", what, file,
               line, detail);
  std::fflush(stdout);
  std::exit(1);
}

#define OTCRT_LT_CHECK(call)                                                   \
  do {                                                                         \
    cublasStatus_t st_ = (call);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                          \
      fatal(#call, cublasLtGetStatusString(st_), __FILE__, __LINE__);          \
  } while (0)

#define OTCRT_CUDA_CHECK(call)                                                 \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess)                                                   \
      fatal(#call, cudaGetErrorString(err_), __FILE__, __LINE__);              \
  } while (0)

/// The epilogue of a call: none, bias, GELU with its pre-activation
/// written to aux (with or without a bias), GELU's gradient reading aux.
enum Epilogue : int64_t { kPlain, kBias, kGeluAux, kGeluAuxBias, kDgelu };

/// Everything needed to launch one GEMM shape.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::array<int64_t, 18>;

struct State {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  std::map<PlanKey, Plan> plans;
};

State &state() {
  static State s;
  return s;
}

/// Largest power of two (<= 256) dividing the address and every batch step.
uint32_t alignmentOf(const void *p, int64_t strideElems, int64_t batch,
                     size_t elemBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1 && strideElems != 0)
    bits |= static_cast<uint64_t>(strideElems) * elemBytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, uint64_t rows,
                                  uint64_t cols, int64_t ld, int64_t batch,
                                  int64_t stride) {
  cublasLtMatrixLayout_t layout;
  OTCRT_LT_CHECK(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    OTCRT_LT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    OTCRT_LT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride)));
  }
  return layout;
}

/// Builds (or finds) the plan for one call shape.
Plan &getPlan(State &s, cudaDataType_t inType, cudaDataType_t outType,
              int transA, int transB,
              int64_t M, int64_t N, int64_t K, int64_t lda, int64_t strideA,
              int64_t ldb, int64_t strideB, int64_t ldc, int64_t strideC,
              int64_t batch, uint32_t alignA, uint32_t alignB,
              uint32_t alignC, Epilogue epi) {
  PlanKey key = {inType, outType, transA,  transB,  M,     N,
                 K,      lda,     ldb,     ldc,     strideA, strideB,
                 strideC, batch,  alignA,  alignB,  alignC, epi};
  auto it = s.plans.find(key);
  if (it != s.plans.end())
    return it->second;

  Plan plan;
  OTCRT_LT_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: m = N, n = M; the first operand is our B.
  cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst)));
  OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond)));
  if (epi != kPlain) {
    cublasLtEpilogue_t epilogue =
        epi == kBias          ? CUBLASLT_EPILOGUE_BIAS
        : epi == kGeluAux     ? CUBLASLT_EPILOGUE_GELU_AUX
        : epi == kGeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                              : CUBLASLT_EPILOGUE_DGELU;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  }
  if (epi == kGeluAux || epi == kGeluAuxBias || epi == kDgelu) {
    // The aux matrix is laid out like C (its type, by default, is C's):
    // column-major N x M with C's leading dimension and batch stride.
    int64_t auxLd = ldc;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
        sizeof(auxLd)));
    if (batch > 1) {
      int64_t auxStride = strideC;
      OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
          plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
          &auxStride, sizeof(auxStride)));
    }
  }
  if (epi == kBias || epi == kGeluAuxBias) {
    // bias[j] of our row-major column j: cuBLASLt's column-major rows (m =
    // N), the same vector for every batch entry, in C's type.
    cudaDataType_t biasType = outType;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
        sizeof(biasType)));
    int64_t biasStride = 0;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
        sizeof(biasStride)));
  }
  plan.a = makeLayout(inType, transB ? K : N, transB ? N : K, ldb, batch,
                      strideB);
  plan.b = makeLayout(inType, transA ? M : K, transA ? K : M, lda, batch,
                      strideA);
  plan.c = makeLayout(outType, N, M, ldc, batch, strideC);

  cublasLtMatmulPreference_t pref;
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = s.workspaceBytes;
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // Our first operand is B, the second A.
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignB, sizeof(alignB)));
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignA, sizeof(alignA)));
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC)));
  OTCRT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof(alignC)));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  OTCRT_LT_CHECK(cublasLtMatmulAlgoGetHeuristic(s.handle, plan.desc, plan.a,
                                                plan.b, plan.c, plan.c, pref, 1,
                                                &result, &returned));
  cublasLtMatmulPreferenceDestroy(pref);
  if (returned == 0)
    fatal("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this GEMM shape",
          __FILE__, __LINE__);
  plan.algo = result.algo;
  return s.plans.emplace(key, plan).first->second;
}

/// The runtime's stream.
cudaStream_t stream() { return static_cast<cudaStream_t>(otcrt_stream()); }

/// C = beta * C for K == 0, which cuBLASLt does not accept: a host round
/// trip on the runtime's stream, since the library has no kernels of its
/// own (it synchronizes, so a graph cannot capture it). Rare and small.
void scaleOnly(int64_t M, int64_t N, float beta, float *C, int64_t ldc,
               int64_t strideC, int64_t batch) {
  std::vector<float> row(static_cast<size_t>(N));
  int64_t entries = strideC == 0 ? 1 : batch;
  float factor = beta;
  if (strideC == 0)
    for (int64_t b = 1; b < batch; ++b)
      factor *= beta;
  for (int64_t b = 0; b < entries; ++b)
    for (int64_t i = 0; i < M; ++i) {
      float *dev = C + b * strideC + i * ldc;
      size_t bytes = row.size() * sizeof(float);
      OTCRT_CUDA_CHECK(cudaMemcpyAsync(row.data(), dev, bytes,
                                       cudaMemcpyDeviceToHost, stream()));
      OTCRT_CUDA_CHECK(cudaStreamSynchronize(stream()));
      for (float &v : row)
        v = factor == 0.0f ? 0.0f : v * factor;
      OTCRT_CUDA_CHECK(cudaMemcpyAsync(dev, row.data(), bytes,
                                       cudaMemcpyHostToDevice, stream()));
      OTCRT_CUDA_CHECK(cudaStreamSynchronize(stream()));
    }
}

/// C = alpha op(A) op(B) + beta C with `T` operands (float or BF16 bits) of
/// cuBLASLt type `inType`, FP32 accumulation, and `C` elements of type
/// `outType` (float, or BF16 rounded once from the FP32 result).
template <typename T, typename C_T>
void gemm(cudaDataType_t inType, cudaDataType_t outType, int transA,
          int transB, int64_t M, int64_t N, int64_t K, float alpha, const T *A,
          int64_t lda, int64_t strideA, const T *B, int64_t ldb,
          int64_t strideB, float beta, C_T *C, int64_t ldc, int64_t strideC,
          int64_t batch, const C_T *bias = nullptr, Epilogue epi = kPlain,
          const void *aux = nullptr, const C_T *addend = nullptr) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;
  if (bias && epi == kPlain)
    epi = kBias;
  if ((epi != kPlain || addend) && (K <= 0 || (strideC == 0 && batch > 1)))
    fatal("otcrt_gemm epilogue",
          "an epilogue needs K > 0 and one C per batch entry", __FILE__,
          __LINE__);
  if (epi != kPlain && epi != kBias && (beta != 0.0f || N % 8 != 0))
    fatal("otcrt_gemm GELU epilogue", "needs beta = 0 and N a multiple of 8",
          __FILE__, __LINE__);
  if (K <= 0) {
    if constexpr (std::is_same_v<C_T, float>)
      scaleOnly(M, N, beta, C, ldc, strideC, batch);
    else
      fatal("otcrt_gemm_bf16_bf16", "K == 0 is not supported with a BF16 C",
            __FILE__, __LINE__);
    return;
  }
  if (strideC == 0 && batch > 1) {
    // Every entry updates the same C: apply them in order.
    for (int64_t b = 0; b < batch; ++b)
      gemm(inType, outType, transA, transB, M, N, K, alpha, A + b * strideA,
           lda, 0, B + b * strideB, ldb, 0, beta, C, ldc, 0, 1);
    return;
  }
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.handle) {
    OTCRT_LT_CHECK(cublasLtCreate(&s.handle));
    if (cudaMalloc(&s.workspace, kWorkspaceBytes) == cudaSuccess) {
      s.workspaceBytes = kWorkspaceBytes;
    } else {
      (void)cudaGetLastError(); // Run without a workspace instead.
      s.workspace = nullptr;
    }
  }
  uint32_t alignA = alignmentOf(A, strideA, batch, sizeof(T));
  uint32_t alignB = alignmentOf(B, strideB, batch, sizeof(T));
  uint32_t alignC = alignmentOf(C, strideC, batch, sizeof(C_T));
  // With an addend, cuBLASLt's C is the addend and its D our C: one layout,
  // the alignment both allow.
  if (addend)
    alignC = std::min(alignC, alignmentOf(addend, strideC, batch, sizeof(C_T)));
  Plan &plan = getPlan(s, inType, outType, transA, transB, M, N, K, lda,
                       strideA, ldb, strideB, ldc, strideC, batch, alignA,
                       alignB, alignC, epi);
  if (aux) {
    const void *pointer = aux;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pointer,
        sizeof(pointer)));
  }
  if (bias) {
    // The plan is shared by every call of this shape: the pointer is set per
    // call (host-side, so graph capture records the call as made).
    const void *pointer = bias;
    OTCRT_LT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
        sizeof(pointer)));
  }
  const void *input = addend ? static_cast<const void *>(addend) : C;
  OTCRT_LT_CHECK(cublasLtMatmul(s.handle, plan.desc, &alpha, B, plan.a, A,
                                plan.b, &beta, input, plan.c, C, plan.c,
                                &plan.algo, s.workspace, s.workspaceBytes,
                                stream()));
}

} // namespace

extern "C" void otcrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                               int64_t K, float alpha, const float *A,
                               int64_t lda, int64_t strideA, const float *B,
                               int64_t ldb, int64_t strideB, float beta,
                               float *C, int64_t ldc, int64_t strideC,
                               int64_t batch) {
  gemm(CUDA_R_32F, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, strideA,
       B, ldb, strideB, beta, C, ldc, strideC, batch);
}

extern "C" void otcrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N,
                                int64_t K, float alpha, const uint16_t *A,
                                int64_t lda, int64_t strideA, const uint16_t *B,
                                int64_t ldb, int64_t strideB, float beta,
                                float *C, int64_t ldc, int64_t strideC,
                                int64_t batch) {
  gemm(CUDA_R_16BF, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
}

extern "C" void otcrt_gemm_bf16_bf16(int transA, int transB, int64_t M,
                                     int64_t N, int64_t K, float alpha,
                                     const uint16_t *A, int64_t lda,
                                     int64_t strideA, const uint16_t *B,
                                     int64_t ldb, int64_t strideB, float beta,
                                     uint16_t *C, int64_t ldc, int64_t strideC,
                                     int64_t batch) {
  gemm(CUDA_R_16BF, CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
}

extern "C" void otcrt_gemm_bias_f32(int transA, int transB, int64_t M,
                                    int64_t N, int64_t K, float alpha,
                                    const float *A, int64_t lda,
                                    int64_t strideA, const float *B,
                                    int64_t ldb, int64_t strideB, float beta,
                                    float *C, int64_t ldc, int64_t strideC,
                                    int64_t batch, const float *bias) {
  gemm(CUDA_R_32F, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, strideA,
       B, ldb, strideB, beta, C, ldc, strideC, batch, bias);
}

extern "C" void otcrt_gemm_bias_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias) {
  gemm(CUDA_R_16BF, CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, bias);
}

extern "C" void otcrt_gemm_gelu_f32(int transA, int transB, int64_t M,
                                    int64_t N, int64_t K, float alpha,
                                    const float *A, int64_t lda,
                                    int64_t strideA, const float *B,
                                    int64_t ldb, int64_t strideB, float beta,
                                    float *C, int64_t ldc, int64_t strideC,
                                    int64_t batch, const float *bias,
                                    float *aux) {
  gemm(CUDA_R_32F, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, strideA,
       B, ldb, strideB, beta, C, ldc, strideC, batch, bias,
       bias ? kGeluAuxBias : kGeluAux, aux);
}

extern "C" void otcrt_gemm_gelu_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias, uint16_t *aux) {
  gemm(CUDA_R_16BF, CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, bias,
       bias ? kGeluAuxBias : kGeluAux, aux);
}

extern "C" void otcrt_gemm_dgelu_f32(int transA, int transB, int64_t M,
                                     int64_t N, int64_t K, float alpha,
                                     const float *A, int64_t lda,
                                     int64_t strideA, const float *B,
                                     int64_t ldb, int64_t strideB, float beta,
                                     float *C, int64_t ldc, int64_t strideC,
                                     int64_t batch, const float *aux) {
  gemm(CUDA_R_32F, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, strideA,
       B, ldb, strideB, beta, C, ldc, strideC, batch,
       static_cast<const float *>(nullptr), kDgelu, aux);
}

extern "C" void otcrt_gemm_dgelu_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *aux) {
  gemm(CUDA_R_16BF, CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch,
       static_cast<const uint16_t *>(nullptr), kDgelu, aux);
}

extern "C" void otcrt_gemm_add_f32(int transA, int transB, int64_t M,
                                   int64_t N, int64_t K, float alpha,
                                   const float *A, int64_t lda,
                                   int64_t strideA, const float *B,
                                   int64_t ldb, int64_t strideB, float beta,
                                   float *C, int64_t ldc, int64_t strideC,
                                   int64_t batch, const float *bias,
                                   const float *addend) {
  gemm(CUDA_R_32F, CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, strideA,
       B, ldb, strideB, beta, C, ldc, strideC, batch, bias, kPlain, nullptr,
       addend);
}

extern "C" void otcrt_gemm_add_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias,
    const uint16_t *addend) {
  gemm(CUDA_R_16BF, CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda,
       strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, bias, kPlain,
       nullptr, addend);
}
