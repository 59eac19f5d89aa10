// Host implementation of otcrt_gemm_f32 for libotcrt_cpu. Where OpenBLAS is
// installed (libopenblas.so.0, looked up once at the first product, so that
// a program runs the same with or without it), each batch entry is one
// cblas_sgemm; OTCRT_BLAS=off in the environment keeps the built-in GEMM.
// The built-in GEMM, used otherwise: a cache-blocked
// i-k-j loop GEMM parallelized with OpenMP over (batch entry, row block).
// When op(B) is a transpose, B is first packed into row-major K x N so the
// innermost loop always streams contiguous rows of B and C (vectorizable).
// Semantics follow the ABI comment in otcrt/abi.h, including beta == 0
// overwriting C without reading it and stride 0 meaning broadcast. The BF16
// entry point widens its operands (exactly) and runs the same FP32 product.
#include "otcrt/abi.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <dlfcn.h>
#include <vector>

namespace {

/// cblas_sgemm, with the CBLAS enumerators' values.
using CblasSgemm = void (*)(int order, int transA, int transB, int M, int N,
                            int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C,
                            int ldc);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

/// OpenBLAS's cblas_sgemm, or null when it is not installed or
/// OTCRT_BLAS=off.
CblasSgemm blasSgemm() {
  static const CblasSgemm fn = []() -> CblasSgemm {
    const char *env = std::getenv("OTCRT_BLAS");
    if (env && std::strcmp(env, "off") == 0)
      return nullptr;
    void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return nullptr;
    return reinterpret_cast<CblasSgemm>(dlsym(lib, "cblas_sgemm"));
  }();
  return fn;
}

/// Whether BLAS takes the product as it is: sizes and leading dimensions
/// that fit its int arguments and meet its rules (row-major: each stored
/// row holds at least its logical columns).
bool blasTakes(int transA, int transB, int64_t M, int64_t N, int64_t K,
               int64_t lda, int64_t ldb, int64_t ldc) {
  auto fits = [](int64_t v) { return v >= 1 && v <= INT_MAX; };
  return fits(M) && fits(N) && fits(K) && fits(lda) && fits(ldb) &&
         fits(ldc) && lda >= (transA ? M : K) && ldb >= (transB ? K : N) &&
         ldc >= N;
}

constexpr int64_t kRowBlock = 16;
constexpr int64_t kColBlock = 512;
constexpr int64_t kDepthBlock = 128;

/// Applies C_row = beta * C_row (beta == 0 writes zeros, ignoring NaNs).
inline void scaleRow(float *c, int64_t n, float beta) {
  if (beta == 0.0f) {
    std::fill(c, c + n, 0.0f);
  } else if (beta != 1.0f) {
    for (int64_t j = 0; j < n; ++j)
      c[j] *= beta;
  }
}

/// Computes one row block [i0, i1) of one batch entry: C += alpha * op(A) * B
/// where B is row-major K x N with row stride ldb (already untransposed).
void rowBlock(int transA, int64_t i0, int64_t i1, int64_t N, int64_t K,
              float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc) {
  for (int64_t i = i0; i < i1; ++i)
    scaleRow(C + i * ldc, N, beta);
  for (int64_t j0 = 0; j0 < N; j0 += kColBlock) {
    int64_t j1 = std::min(N, j0 + kColBlock);
    for (int64_t k0 = 0; k0 < K; k0 += kDepthBlock) {
      int64_t k1 = std::min(K, k0 + kDepthBlock);
      for (int64_t i = i0; i < i1; ++i) {
        float *__restrict c = C + i * ldc;
        for (int64_t k = k0; k < k1; ++k) {
          float a = alpha * (transA ? A[k * lda + i] : A[i * lda + k]);
          const float *__restrict b = B + k * ldb;
          for (int64_t j = j0; j < j1; ++j)
            c[j] += a * b[j];
        }
      }
    }
  }
}

} // namespace

extern "C" void otcrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                               int64_t K, float alpha, const float *A,
                               int64_t lda, int64_t strideA, const float *B,
                               int64_t ldb, int64_t strideB, float beta,
                               float *C, int64_t ldc, int64_t strideC,
                               int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;

  if (CblasSgemm sgemm = blasSgemm();
      sgemm && blasTakes(transA, transB, M, N, K, lda, ldb, ldc)) {
    // In batch order: entries that share C (stride 0) apply one after
    // another, as the built-in GEMM applies them.
    for (int64_t b = 0; b < batch; ++b)
      sgemm(kCblasRowMajor, transA ? kCblasTrans : kCblasNoTrans,
            transB ? kCblasTrans : kCblasNoTrans, int(M), int(N), int(K),
            alpha, A + b * strideA, int(lda), B + b * strideB, int(ldb), beta,
            C + b * strideC, int(ldc));
    return;
  }

  // Untranspose B once per distinct batch entry: packed is K x N row-major.
  std::vector<float> packed;
  const float *bBase = B;
  int64_t bLd = ldb, bStride = strideB;
  if (transB && K > 0) {
    int64_t entries = strideB == 0 ? 1 : batch;
    packed.resize(static_cast<size_t>(entries * K * N));
#pragma omp parallel for collapse(2) schedule(static) if (entries * K * N > 65536)
    for (int64_t e = 0; e < entries; ++e)
      for (int64_t k = 0; k < K; ++k) {
        const float *src = B + e * strideB;
        float *dst = packed.data() + (e * K + k) * N;
        for (int64_t j = 0; j < N; ++j)
          dst[j] = src[j * ldb + k];
      }
    bBase = packed.data();
    bLd = N;
    bStride = strideB == 0 ? 0 : K * N;
  }

  const int64_t rowBlocks = (M + kRowBlock - 1) / kRowBlock;
  const bool big = batch * M * N * std::max<int64_t>(K, 1) > 32768;
  auto run = [&](int64_t b, int64_t rb) {
    int64_t i0 = rb * kRowBlock, i1 = std::min(M, i0 + kRowBlock);
    rowBlock(transA, i0, i1, N, K, alpha, A + b * strideA, lda,
             bBase + b * bStride, bLd, beta, C + b * strideC, ldc);
  };
  if (strideC == 0 && batch > 1) {
    // Every batch entry updates the same C: apply them in order.
    for (int64_t b = 0; b < batch; ++b) {
#pragma omp parallel for schedule(static) if (big)
      for (int64_t rb = 0; rb < rowBlocks; ++rb)
        run(b, rb);
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) if (big)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t rb = 0; rb < rowBlocks; ++rb)
      run(b, rb);
}

namespace {

/// The matrices of a BF16 operand, widened: one entry for a broadcast
/// operand (stride 0), else `batch` of `stride` elements each.
std::vector<float> widen(const uint16_t *x, int64_t rows, int64_t ld,
                         int64_t stride, int64_t batch) {
  int64_t entries = stride == 0 ? 1 : batch;
  // Same offsets as the operand: entry e at e * stride, rows x ld each.
  std::vector<float> out(static_cast<size_t>((entries - 1) * stride + rows * ld));
#pragma omp parallel for schedule(static) if (out.size() > 65536)
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    uint32_t bits = static_cast<uint32_t>(x[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    out[i] = f;
  }
  return out;
}

} // namespace

extern "C" void otcrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N,
                                int64_t K, float alpha, const uint16_t *A,
                                int64_t lda, int64_t strideA, const uint16_t *B,
                                int64_t ldb, int64_t strideB, float beta,
                                float *C, int64_t ldc, int64_t strideC,
                                int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;
  // The rows each operand spans as stored.
  std::vector<float> a = widen(A, transA ? K : M, lda, strideA, batch);
  std::vector<float> b = widen(B, transB ? N : K, ldb, strideB, batch);
  otcrt_gemm_f32(transA, transB, M, N, K, alpha, a.data(), lda, strideA,
                 b.data(), ldb, strideB, beta, C, ldc, strideC, batch);
}

namespace {

/// Adds bias[j] to column j of every row of every entry of the float
/// matrix `c`.
void addBias(float *c, const float *bias, int64_t M, int64_t N, int64_t ldc,
             int64_t strideC, int64_t batch) {
  int64_t entries = strideC == 0 ? 1 : batch;
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        c[e * strideC + i * ldc + j] += bias[j];
}

/// The BF16 GEMM into a BF16 C: the FP32 product (plus the bias, when
/// given) into a widened C, then one rounding per element.
void gemmBf16Bf16(int transA, int transB, int64_t M, int64_t N, int64_t K,
                  float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
                  const uint16_t *B, int64_t ldb, int64_t strideB, float beta,
                  uint16_t *C, int64_t ldc, int64_t strideC, int64_t batch,
                  const uint16_t *bias) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;
  std::vector<float> c = widen(C, M, ldc, strideC, batch);
  otcrt_gemm_bf16(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
                  strideB, beta, c.data(), ldc, strideC, batch);
  if (bias)
    addBias(c.data(), widen(bias, 1, N, 0, 1).data(), M, N, ldc, strideC,
            batch);
  int64_t entries = strideC == 0 ? 1 : batch;
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = e * strideC + i * ldc + j;
        uint32_t bits;
        std::memcpy(&bits, &c[at], sizeof(bits));
        if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
          C[at] = static_cast<uint16_t>((bits >> 16) | 0x40u);
        else
          C[at] = static_cast<uint16_t>(
              (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
      }
}

} // namespace

extern "C" void otcrt_gemm_bf16_bf16(int transA, int transB, int64_t M,
                                     int64_t N, int64_t K, float alpha,
                                     const uint16_t *A, int64_t lda,
                                     int64_t strideA, const uint16_t *B,
                                     int64_t ldb, int64_t strideB, float beta,
                                     uint16_t *C, int64_t ldc, int64_t strideC,
                                     int64_t batch) {
  gemmBf16Bf16(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
               strideB, beta, C, ldc, strideC, batch, nullptr);
}

extern "C" void otcrt_gemm_bias_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias) {
  gemmBf16Bf16(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
               strideB, beta, C, ldc, strideC, batch, bias);
}

extern "C" void otcrt_gemm_bias_f32(int transA, int transB, int64_t M,
                                    int64_t N, int64_t K, float alpha,
                                    const float *A, int64_t lda,
                                    int64_t strideA, const float *B,
                                    int64_t ldb, int64_t strideB, float beta,
                                    float *C, int64_t ldc, int64_t strideC,
                                    int64_t batch, const float *bias) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;
  otcrt_gemm_f32(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
                 strideB, beta, C, ldc, strideC, batch);
  addBias(C, bias, M, N, ldc, strideC, batch);
}

namespace {

/// sqrt(2 / pi) and the cubic coefficient of GELU's tanh form.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

/// gelu(v) and gelu'(v) of the tanh form, in FP32.
float geluTanh(float v) {
  float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return 0.5f * v * (1.0f + std::tanh(u));
}
float geluTanhDerivative(float v) {
  float th = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
  return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
}

/// Storage elements as floats and back (BF16: widened exactly; stored with
/// one rounding to nearest even, NaN kept a quiet NaN).
float toFloat(float x) { return x; }
float toFloat(uint16_t x) {
  uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
void put(float *p, float v) { *p = v; }
void put(uint16_t *p, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    *p = static_cast<uint16_t>((bits >> 16) | 0x40u);
  else
    *p = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// The FP32 product of float or BF16 operands into `v` (laid out as C).
void product(int transA, int transB, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, int64_t strideA,
             const float *B, int64_t ldb, int64_t strideB, float *v,
             int64_t ldc, int64_t strideC, int64_t batch) {
  otcrt_gemm_f32(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
                 strideB, 0.0f, v, ldc, strideC, batch);
}
void product(int transA, int transB, int64_t M, int64_t N, int64_t K,
             float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
             const uint16_t *B, int64_t ldb, int64_t strideB, float *v,
             int64_t ldc, int64_t strideC, int64_t batch) {
  otcrt_gemm_bf16(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
                  strideB, 0.0f, v, ldc, strideC, batch);
}

/// Calls `epilogue(at, j, v)` for every element of C: `at` its index in
/// C's layout, `j` its column, `v` the FP32 product alpha op(A) op(B) there.
/// For the forms that write C from the product (one C per batch entry).
template <typename T, typename Epilogue>
void withProduct(const char *name, int transA, int transB, int64_t M,
                 int64_t N, int64_t K, float alpha, const T *A, int64_t lda,
                 int64_t strideA, const T *B, int64_t ldb, int64_t strideB,
                 int64_t ldc, int64_t strideC, int64_t batch,
                 Epilogue epilogue) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;
  if (strideC == 0 && batch > 1) {
    std::fprintf(stderr,
                 "otc train: error: %s needs one C per batch entry\n", name);
    std::exit(1);
  }
  std::vector<float> v(static_cast<size_t>((batch - 1) * strideC + M * ldc));
  product(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
          v.data(), ldc, strideC, batch);
#pragma omp parallel for collapse(2) schedule(static) if (v.size() > 65536)
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = e * strideC + i * ldc + j;
        epilogue(at, j, v[at]);
      }
}

/// The GELU epilogues on the FP32 product v (plus the bias): forward, C =
/// gelu(v) and aux = v; backward (auxIn given), C = v gelu'(aux).
template <typename T>
void gemmGelu(const char *name, int transA, int transB, int64_t M, int64_t N,
              int64_t K, float alpha, const T *A, int64_t lda,
              int64_t strideA, const T *B, int64_t ldb, int64_t strideB,
              float beta, T *C, int64_t ldc, int64_t strideC, int64_t batch,
              const T *bias, T *auxOut, const T *auxIn) {
  if (beta != 0.0f) {
    std::fprintf(stderr, "otc train: error: %s needs beta = 0\n", name);
    std::exit(1);
  }
  withProduct(name, transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb,
              strideB, ldc, strideC, batch,
              [&](int64_t at, int64_t j, float v) {
                float x = v + (bias ? toFloat(bias[j]) : 0.0f);
                if (auxIn) {
                  put(&C[at], x * geluTanhDerivative(toFloat(auxIn[at])));
                } else {
                  put(&auxOut[at], x);
                  put(&C[at], geluTanh(x));
                }
              });
}

} // namespace

extern "C" void otcrt_gemm_gelu_f32(int transA, int transB, int64_t M,
                                    int64_t N, int64_t K, float alpha,
                                    const float *A, int64_t lda,
                                    int64_t strideA, const float *B,
                                    int64_t ldb, int64_t strideB, float beta,
                                    float *C, int64_t ldc, int64_t strideC,
                                    int64_t batch, const float *bias,
                                    float *aux) {
  gemmGelu("otcrt_gemm_gelu_f32", transA, transB, M, N, K, alpha, A, lda,
           strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, bias, aux,
           static_cast<const float *>(nullptr));
}

extern "C" void otcrt_gemm_gelu_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias, uint16_t *aux) {
  gemmGelu("otcrt_gemm_gelu_bf16_bf16", transA, transB, M, N, K, alpha, A,
           lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch, bias,
           aux, static_cast<const uint16_t *>(nullptr));
}

extern "C" void otcrt_gemm_dgelu_f32(int transA, int transB, int64_t M,
                                     int64_t N, int64_t K, float alpha,
                                     const float *A, int64_t lda,
                                     int64_t strideA, const float *B,
                                     int64_t ldb, int64_t strideB, float beta,
                                     float *C, int64_t ldc, int64_t strideC,
                                     int64_t batch, const float *aux) {
  gemmGelu("otcrt_gemm_dgelu_f32", transA, transB, M, N, K, alpha, A, lda,
           strideA, B, ldb, strideB, beta, C, ldc, strideC, batch,
           static_cast<const float *>(nullptr), static_cast<float *>(nullptr),
           aux);
}

extern "C" void otcrt_gemm_dgelu_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *aux) {
  gemmGelu("otcrt_gemm_dgelu_bf16_bf16", transA, transB, M, N, K, alpha, A,
           lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch,
           static_cast<const uint16_t *>(nullptr),
           static_cast<uint16_t *>(nullptr), aux);
}

namespace {

/// C = alpha op(A) op(B) + beta addend (+ bias), in FP32 with one rounding
/// to C's storage type.
template <typename T>
void gemmAdd(int transA, int transB, int64_t M, int64_t N, int64_t K,
             float alpha, const T *A, int64_t lda, int64_t strideA, const T *B,
             int64_t ldb, int64_t strideB, float beta, T *C, int64_t ldc,
             int64_t strideC, int64_t batch, const T *bias, const T *addend) {
  withProduct("otcrt_gemm_add", transA, transB, M, N, K, alpha, A, lda,
              strideA, B, ldb, strideB, ldc, strideC, batch,
              [&](int64_t at, int64_t j, float v) {
                float x = v + beta * toFloat(addend[at]);
                if (bias)
                  x += toFloat(bias[j]);
                put(&C[at], x);
              });
}

} // namespace

extern "C" void otcrt_gemm_add_f32(int transA, int transB, int64_t M,
                                   int64_t N, int64_t K, float alpha,
                                   const float *A, int64_t lda,
                                   int64_t strideA, const float *B,
                                   int64_t ldb, int64_t strideB, float beta,
                                   float *C, int64_t ldc, int64_t strideC,
                                   int64_t batch, const float *bias,
                                   const float *addend) {
  gemmAdd(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
          beta, C, ldc, strideC, batch, bias, addend);
}

extern "C" void otcrt_gemm_add_bf16_bf16(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
    const uint16_t *A, int64_t lda, int64_t strideA, const uint16_t *B,
    int64_t ldb, int64_t strideB, float beta, uint16_t *C, int64_t ldc,
    int64_t strideC, int64_t batch, const uint16_t *bias,
    const uint16_t *addend) {
  gemmAdd(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
          beta, C, ldc, strideC, batch, bias, addend);
}
