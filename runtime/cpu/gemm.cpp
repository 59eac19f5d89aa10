// The host GEMM of libotcrt_cpu (otcrt::cpu::gemm, whose C entry point
// otcrt_gemm is in cpu/kernels_abi.cpp). Where OpenBLAS is installed
// (libopenblas.so.0, looked up once at the first product, so that a program
// runs the same with or without it), each batch entry is one cblas_sgemm;
// OTCRT_BLAS=off in the environment keeps the built-in GEMM. OpenBLAS must
// share the runtime's threads: its OpenMP build does (one libgomp pool), so
// it is preferred (Debian's libopenblas0-openmp, found beside the library
// the loader picks); a pthread build runs single-threaded, since its
// spinning threads and OpenMP's would take the cores from each other
// (GPT-2-shaped 4 x 256, micro-batch 8, 2 cores: 1480 ms a step with both
// spinning, 1085 with the pthread build on one thread, 800 with the OpenMP
// build). The built-in
// GEMM, used otherwise: a cache-blocked i-k-j loop GEMM parallelized with
// OpenMP over (batch entry, row block). When op(B) is a transpose, B is
// first packed into row-major K x N so the innermost loop always streams
// contiguous rows of B and C (vectorizable). BF16 operands are widened
// (exactly) and run the same FP32 product; a BF16 C gets the FP32 result
// rounded once. The epilogues (bias, addend, GELU with its pre-activation,
// GELU's gradient) work on the FP32 product and round once to the storage
// type. Semantics follow the ABI comment in otcrt/abi.h, including beta == 0
// overwriting C without reading it and stride 0 meaning broadcast; a
// descriptor that breaks its rules (gemm_check.h) is refused before
// anything is written. This is also the oracle the GPU test compares
// cuBLASLt and the cuda fallback epilogues with. The FP8 GEMM
// (otcrt_gemm_fp8) is emulated: each operand's values rounded to its FP8
// format after its per-tensor scale (otcrt/fp8.h; from the amax the call
// site saw on its previous call, its own on its first), held exactly in
// BF16, multiplied by the BF16 GEMM with alpha divided by the two scales.
// Or its operands come quantized (otcrt_fp8_quantize: the FP8 bytes of one
// copy per tensor, its amax per copy site), widened exactly the same way.
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "otcrt/bf16.h"
#include "otcrt/fp8.h"
#include "src/gemm_check.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {


/// cblas_sgemm, with the CBLAS enumerators' values.
using CblasSgemm = void (*)(int order, int transA, int transB, int M, int N,
                            int K, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C,
                            int ldc);
/// cblas_sgemv: y = alpha op(A) x + beta y.
using CblasSgemv = void (*)(int order, int trans, int M, int N, float alpha,
                            const float *A, int lda, const float *x, int incx,
                            float beta, float *y, int incy);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

/// OpenBLAS's threading (openblas_get_parallel): 0 sequential, 1 its own
/// pthreads, 2 OpenMP.
using GetParallel = int (*)();
using SetThreads = void (*)(int);

/// The OpenMP build of OpenBLAS beside `lib` (a pthread build), where the
/// system has both (Debian: <libdir>/openblas-pthread/ and
/// <libdir>/openblas-openmp/), or null.
void *openmpSibling(void *lib) {
  void *sym = dlsym(lib, "cblas_sgemm");
  Dl_info info;
  if (!sym || !dladdr(sym, &info) || !info.dli_fname)
    return nullptr;
  // The loader's name may be the alternatives link
  // (<libdir>/libopenblas.so.0): the file it leads to says which build.
  char *resolved = realpath(info.dli_fname, nullptr);
  if (!resolved)
    return nullptr;
  std::string path = resolved;
  std::free(resolved);
  size_t dir = path.rfind("/openblas-pthread/");
  if (dir == std::string::npos)
    return nullptr;
  std::string sibling = path.substr(0, dir) + "/openblas-openmp/libopenblas.so.0";
  return dlopen(sibling.c_str(), RTLD_NOW | RTLD_LOCAL);
}

/// OpenBLAS, or null when it is not installed or OTCRT_BLAS=off: the
/// OpenMP build where there is one, else the library found, told to use one
/// thread unless it is sequential or OpenMP.
void *blasLibrary() {
  static void *const handle = []() -> void * {
    const char *env = std::getenv("OTCRT_BLAS");
    if (env && std::strcmp(env, "off") == 0)
      return nullptr;
    void *lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return nullptr;
    auto threading = [](void *l) {
      auto get =
          reinterpret_cast<GetParallel>(dlsym(l, "openblas_get_parallel"));
      return get ? get() : 0;
    };
    if (threading(lib) == 1)
      if (void *openmp = openmpSibling(lib);
          openmp && threading(openmp) == 2 && dlsym(openmp, "cblas_sgemm"))
        lib = openmp;
    if (threading(lib) == 1)
      if (auto set = reinterpret_cast<SetThreads>(
              dlsym(lib, "openblas_set_num_threads")))
        set(1);
    return lib;
  }();
  return handle;
}

/// OpenBLAS's cblas_sgemm, or null (blasLibrary).
CblasSgemm blasSgemm() {
  static const CblasSgemm fn = reinterpret_cast<CblasSgemm>(
      blasLibrary() ? dlsym(blasLibrary(), "cblas_sgemm") : nullptr);
  return fn;
}

/// OpenBLAS's cblas_sgemv, or null: a single row's product streams the
/// matrix once (sgemm packs it first, reading it twice and writing it once).
CblasSgemv blasSgemv() {
  static const CblasSgemv fn = reinterpret_cast<CblasSgemv>(
      blasSgemm() ? dlsym(blasLibrary(), "cblas_sgemv") : nullptr);
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

/// C = alpha op(A) op(B) + beta C on float operands, batched (the ABI's
/// plain f32 form).
void gemmF32(int transA, int transB, int64_t M, int64_t N, int64_t K,
             float alpha, const float *A, int64_t lda, int64_t strideA,
             const float *B, int64_t ldb, int64_t strideB, float beta, float *C,
             int64_t ldc, int64_t strideC, int64_t batch) {
  if (M <= 0 || N <= 0 || batch <= 0)
    return;

  if (CblasSgemv sgemv = blasSgemv();
      sgemv && M == 1 && batch == 1 &&
      blasTakes(transA, transB, M, N, K, lda, ldb, ldc)) {
    // One row (a decode step's projections): C = alpha op(B)^T a + beta C,
    // the row a read with its stride (lda when A is stored transposed).
    if (transB)
      sgemv(kCblasRowMajor, kCblasNoTrans, int(N), int(K), alpha, B, int(ldb),
            A, transA ? int(lda) : 1, beta, C, 1);
    else
      sgemv(kCblasRowMajor, kCblasTrans, int(K), int(N), alpha, B, int(ldb),
            A, transA ? int(lda) : 1, beta, C, 1);
    return;
  }
  if (CblasSgemm sgemm = blasSgemm();
      sgemm && batch > 1 && strideB == 0 && !transA && strideA == M * lda &&
      strideC == M * ldc &&
      blasTakes(transA, transB, M * batch, N, K, lda, ldb, ldc)) {
    // Entries stacked row after row against one shared B (a projection of
    // [batch, M, K] activations): one product of batch x M rows.
    sgemm(kCblasRowMajor, kCblasNoTrans, transB ? kCblasTrans : kCblasNoTrans,
          int(M * batch), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta,
          C, int(ldc));
    return;
  }
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

/// The matrices of a BF16 operand, widened: one entry for a broadcast
/// operand (stride 0), else `batch` of `stride` elements each.
std::vector<float> widen(const uint16_t *x, int64_t rows, int64_t ld,
                         int64_t stride, int64_t batch) {
  int64_t entries = stride == 0 ? 1 : batch;
  // Same offsets as the operand: entry e at e * stride, rows x ld each.
  std::vector<float> out(static_cast<size_t>((entries - 1) * stride + rows * ld));
#pragma omp parallel for schedule(static) if (out.size() > 65536)
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i)
    out[i] = otcrt_bf16_to_float(x[i]);
  return out;
}

/// C = alpha op(A) op(B) + beta C with BF16 operands into a float C.
void gemmBf16(int transA, int transB, int64_t M, int64_t N, int64_t K,
              float alpha, const uint16_t *A, int64_t lda, int64_t strideA,
              const uint16_t *B, int64_t ldb, int64_t strideB, float beta,
              float *C, int64_t ldc, int64_t strideC, int64_t batch) {
  if (K == 0) { // C = beta C: the operands, which may be NULL, are not read
    gemmF32(transA, transB, M, N, K, alpha, nullptr, lda, 0, nullptr, ldb, 0,
            beta, C, ldc, strideC, batch);
    return;
  }
  // The rows each operand spans as stored.
  std::vector<float> a = widen(A, transA ? K : M, lda, strideA, batch);
  std::vector<float> b = widen(B, transB ? N : K, ldb, strideB, batch);
  gemmF32(transA, transB, M, N, K, alpha, a.data(), lda, strideA, b.data(), ldb,
          strideB, beta, C, ldc, strideC, batch);
}

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
  std::vector<float> c = widen(C, M, ldc, strideC, batch);
  gemmBf16(transA, transB, M, N, K, alpha, A, lda, strideA, B, ldb, strideB,
           beta, c.data(), ldc, strideC, batch);
  if (bias)
    addBias(c.data(), widen(bias, 1, N, 0, 1).data(), M, N, ldc, strideC,
            batch);
  int64_t entries = strideC == 0 ? 1 : batch;
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t at = e * strideC + i * ldc + j;
        C[at] = otcrt_float_to_bf16(c[at]);
      }
}

/// sqrt(2 / pi) and the cubic coefficient of GELU's tanh form.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

/// tanh(u) = 1 - 2 / (e^{2u} + 1) in FP32 through cpu/common.h's expFast,
/// within 2e-7 of it (absolute, the error GELU's 1 + tanh and 1 - tanh^2
/// see; measured over [-50, 50] in steps of 1e-4), NaN for NaN, and a loop
/// of it vectorizes.
inline float tanhFast(float u) {
  return 1.0f - 2.0f / (otcrt::cpu::expFast(2.0f * u) + 1.0f);
}

/// gelu(v) and gelu'(v) of the tanh form, in FP32.
inline float geluTanh(float v) {
  float u = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
  return 0.5f * v * (1.0f + tanhFast(u));
}
inline float geluTanhDerivative(float v) {
  float th = tanhFast(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
  return 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
}

/// Storage elements as floats and back (BF16: widened exactly; stored with
/// one rounding to nearest even, NaN kept a quiet NaN).
float toFloat(float x) { return x; }
float toFloat(uint16_t x) { return otcrt_bf16_to_float(x); }
void put(float *p, float v) { *p = v; }
void put(uint16_t *p, float v) { *p = otcrt_float_to_bf16(v); }

/// The FP32 product of float or BF16 operands into `v` (laid out as C).
void product(const OtcrtGemm &g, const float *A, const float *B, float *v) {
  gemmF32(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, A, g.lda, g.stride_a, B,
          g.ldb, g.stride_b, 0.0f, v, g.ldc, g.stride_c, g.batch);
}
void product(const OtcrtGemm &g, const uint16_t *A, const uint16_t *B,
             float *v) {
  gemmBf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, A, g.lda, g.stride_a,
           B, g.ldb, g.stride_b, 0.0f, v, g.ldc, g.stride_c, g.batch);
}

/// The epilogues that write C from the FP32 product v = alpha op(A) op(B)
/// (one C per batch entry, which the descriptor's check ensures): add, C =
/// v + beta addend (+ bias); gelu, x = v (+ bias), aux = x, C = gelu(x);
/// dgelu, C = v gelu'(aux). Each stored element rounds once.
template <typename T>
void withProduct(const OtcrtGemm &g, const T *A, const T *B, T *C,
                 const T *bias, const T *addend, T *aux) {
  const int64_t M = g.m, N = g.n, batch = g.batch, ldc = g.ldc,
                strideC = g.stride_c;
  // The product's buffer, kept per thread between calls (a fresh one
  // would be zeroed and faulted in every call).
  static thread_local std::vector<float> scratch;
  const size_t elements = static_cast<size_t>((batch - 1) * strideC + M * ldc);
  if (scratch.size() < elements)
    scratch.resize(elements);
  float *v = scratch.data();
  product(g, A, B, v);
  const int32_t epilogue = g.epilogue;
  const float beta = g.beta;
  const bool addC = epilogue == OTCRT_GEMM_ADD && beta != 0.0f;
  // One row at a time, each of its loops free of calls and branches (the
  // addend and the bias added into the product's row first), so that they
  // vectorize.
#pragma omp parallel for collapse(2) schedule(static) if (elements > 65536)
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < M; ++i) {
      const int64_t row = e * strideC + i * ldc;
      float *vr = v + row;
      T *cr = C + row;
      if (epilogue == OTCRT_GEMM_DGELU) {
        const T *xr = aux + row;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j)
          put(&cr[j], vr[j] * geluTanhDerivative(toFloat(xr[j])));
        continue;
      }
      if (addC) {
        const T *ar = addend + row;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j)
          vr[j] += beta * toFloat(ar[j]);
      }
      if (bias) {
#pragma omp simd
        for (int64_t j = 0; j < N; ++j)
          vr[j] += toFloat(bias[j]);
      }
      if (epilogue == OTCRT_GEMM_GELU) {
        T *xr = aux + row;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) {
          put(&xr[j], vr[j]);
          put(&cr[j], geluTanh(vr[j]));
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < N; ++j)
          put(&cr[j], vr[j]);
      }
    }
}

/// The FP8 values of BF16 operand `x` (`rows` x `cols` of row stride `ld`
/// per batch entry, one entry when `stride` is 0) in `format`: scaled by
/// otcrt_fp8_scale of `scaleAmax` (of x's own largest magnitude when it is
/// negative: no previous call), rounded, and held in `out` (laid out as x;
/// every FP8 value is a BF16 one). Sets `amax` to x's largest magnitude and
/// returns 1 / scale.
float quantize(const uint16_t *x, int64_t rows, int64_t cols, int64_t ld,
               int64_t stride, int64_t batch, int32_t format, float scaleAmax,
               float &amax, std::vector<uint16_t> &out) {
  const int64_t entries = stride == 0 ? 1 : batch;
  out.assign(static_cast<size_t>((entries - 1) * stride + rows * ld), 0);
  amax = 0.0f;
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        amax = std::max(
            amax, std::fabs(otcrt_bf16_to_float(x[e * stride + i * ld + j])));
  const float scale =
      otcrt_fp8_scale(scaleAmax < 0.0f ? amax : scaleAmax, format);
#pragma omp parallel for collapse(2)                                           \
    schedule(static) if (entries * rows * cols > 65536)
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = e * stride + i * ld + j;
        const uint8_t q =
            otcrt_float_to_fp8(otcrt_bf16_to_float(x[at]) * scale, format);
        out[at] = otcrt_float_to_bf16(otcrt_fp8_to_float(q, format));
      }
  return 1.0f / scale;
}

/// The amax of A and B each FP8 call site (its static descriptor) saw on
/// its previous call: the next call's scales (delayed scaling).
struct Fp8History {
  std::mutex mutex;
  std::map<const OtcrtGemm *, std::array<float, 2>> amax;
};

Fp8History &fp8History() {
  static Fp8History h;
  return h;
}

/// The amax each FP8 copy site (its static descriptor) saw on its previous
/// call.
struct Fp8CopyHistory {
  std::mutex mutex;
  std::map<const OtcrtFp8Quantize *, float> amax;
};

Fp8CopyHistory &fp8CopyHistory() {
  static Fp8CopyHistory h;
  return h;
}

/// The BF16 values (exact) of one operand's FP8 copy `copy`, holding
/// `layouts`, in the layout the product reads it in: `transposed` of the
/// stored `rows` x `cols`, widened back to the stored layout; and its
/// 1 / s.
float widenCopy(const uint8_t *copy, int32_t layouts, int64_t rows,
                int64_t cols, bool transposed, int32_t format,
                std::vector<uint16_t> &out) {
  const int64_t n = rows * cols;
  const uint8_t *values =
      copy + otcrt_fp8_copy_offset(n, layouts,
                                   transposed ? OTCRT_FP8_TRANSPOSED
                                              : OTCRT_FP8_AS_STORED);
  out.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t q =
          transposed ? values[j * rows + i] : values[i * cols + j];
      out[i * cols + j] = otcrt_float_to_bf16(otcrt_fp8_to_float(q, format));
    }
  float inv;
  std::memcpy(&inv, copy + otcrt_fp8_copy_scale_offset(n, layouts), sizeof inv);
  return inv;
}

} // namespace

void otcrt::cpu::forgetFp8Scales() {
  {
    Fp8History &h = fp8History();
    std::lock_guard<std::mutex> lock(h.mutex);
    h.amax.clear();
  }
  Fp8CopyHistory &h = fp8CopyHistory();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.amax.clear();
}

int otcrt::cpu::fp8Quantize(const OtcrtFp8Quantize &q, const void *x,
                            void *copy) {
  if (q.rows < 0 || q.cols < 0 || q.layouts < 1 || q.layouts > 3 ||
      (q.format != OTCRT_FP8_E4M3 && q.format != OTCRT_FP8_E5M2) ||
      (!x && q.rows * q.cols != 0) || !copy) {
    std::fprintf(stderr,
                 "otcrt: fp8_quantize: error: %lld x %lld, format %d, layouts "
                 "%d: an invalid descriptor or a null pointer\n",
                 static_cast<long long>(q.rows), static_cast<long long>(q.cols),
                 q.format, q.layouts);
    return 1;
  }
  const int64_t rows = q.rows, cols = q.cols, n = rows * cols;
  const auto *in = static_cast<const uint16_t *>(x);
  auto *out = static_cast<uint8_t *>(copy);
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(otcrt_bf16_to_float(in[i])));
  Fp8CopyHistory &h = fp8CopyHistory();
  float previous = amax;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    auto it = h.amax.find(&q);
    if (it != h.amax.end())
      previous = it->second;
    h.amax[&q] = amax;
  }
  const float scale = otcrt_fp8_scale(previous, q.format);
  uint8_t *plain =
      q.layouts & OTCRT_FP8_AS_STORED
          ? out + otcrt_fp8_copy_offset(n, q.layouts, OTCRT_FP8_AS_STORED)
          : nullptr;
  uint8_t *transposed =
      q.layouts & OTCRT_FP8_TRANSPOSED
          ? out + otcrt_fp8_copy_offset(n, q.layouts, OTCRT_FP8_TRANSPOSED)
          : nullptr;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t v = otcrt_float_to_fp8(
          otcrt_bf16_to_float(in[i * cols + j]) * scale, q.format);
      if (plain)
        plain[i * cols + j] = v;
      if (transposed)
        transposed[j * rows + i] = v;
    }
  const float inv = 1.0f / scale;
  std::memcpy(out + otcrt_fp8_copy_scale_offset(n, q.layouts), &inv,
              sizeof inv);
  return 0;
}

int otcrt::cpu::gemmFp8Copies(const OtcrtGemm &g, int32_t aFormat,
                              int32_t bFormat, const void *aCopy,
                              int32_t aLayouts, const void *bCopy,
                              int32_t bLayouts, const void *a, const void *b,
                              void *c, const void *bias, const void *addend,
                              void *aux) {
  std::string why = gemmInvalid(g, a, b, c, bias, addend, aux);
  if (why.empty())
    why = gemmFp8Invalid(g, aFormat, bFormat);
  if (why.empty())
    why = gemmFp8CopiesInvalid(g, aCopy, aLayouts, bCopy, bLayouts);
  if (!why.empty())
    return gemmFailed(g, bias, why);
  if (g.m == 0 || g.n == 0 || g.k == 0)
    return gemm(g, a, b, c, bias, addend, aux);
  std::vector<uint16_t> qa, qb;
  const float invA =
      widenCopy(static_cast<const uint8_t *>(aCopy), aLayouts,
                g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k,
                fp8CopyLayoutOfA(g) == OTCRT_FP8_TRANSPOSED, aFormat, qa);
  const float invB =
      widenCopy(static_cast<const uint8_t *>(bCopy), bLayouts,
                g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n,
                fp8CopyLayoutOfB(g) == OTCRT_FP8_TRANSPOSED, bFormat, qb);
  OtcrtGemm scaled = g;
  scaled.alpha = g.alpha * (invA * invB);
  return gemm(scaled, qa.data(), qb.data(), c, bias, addend, aux);
}

int otcrt::cpu::gemmFp8(const OtcrtGemm &g, int32_t aFormat, int32_t bFormat,
                        const void *a, const void *b, void *c, const void *bias,
                        const void *addend, void *aux) {
  std::string why = gemmInvalid(g, a, b, c, bias, addend, aux);
  if (why.empty())
    why = gemmFp8Invalid(g, aFormat, bFormat);
  if (!why.empty())
    return gemmFailed(g, bias, why);
  if (g.m == 0 || g.n == 0 || g.batch == 0 || g.k == 0)
    return gemm(g, a, b, c, bias, addend, aux);
  // The scales of the site's previous call, or (its first) its own.
  Fp8History &h = fp8History();
  std::array<float, 2> previous = {-1.0f, -1.0f}, current{};
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    auto it = h.amax.find(&g);
    if (it != h.amax.end())
      previous = it->second;
  }
  std::vector<uint16_t> qa, qb;
  const float invA =
      quantize(static_cast<const uint16_t *>(a), g.trans_a ? g.k : g.m,
               g.trans_a ? g.m : g.k, g.lda, g.stride_a, g.batch, aFormat,
               previous[0], current[0], qa);
  const float invB =
      quantize(static_cast<const uint16_t *>(b), g.trans_b ? g.n : g.k,
               g.trans_b ? g.k : g.n, g.ldb, g.stride_b, g.batch, bFormat,
               previous[1], current[1], qb);
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    h.amax[&g] = current;
  }
  OtcrtGemm scaled = g;
  scaled.alpha = g.alpha * (invA * invB);
  return gemm(scaled, qa.data(), qb.data(), c, bias, addend, aux);
}

int otcrt::cpu::gemm(const OtcrtGemm &g, const void *a, const void *b, void *c,
                     const void *bias, const void *addend, void *aux) {
  std::string why = gemmInvalid(g, a, b, c, bias, addend, aux);
  if (!why.empty())
    return gemmFailed(g, bias, why);
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return 0;
  auto f = [](const void *p) { return static_cast<const float *>(p); };
  auto h = [](const void *p) { return static_cast<const uint16_t *>(p); };
  const bool bf16 = g.ab_type == OTC_BF16;
  switch (g.epilogue) {
  case OTCRT_GEMM_NONE:
  case OTCRT_GEMM_BIAS:
    if (!bf16) {
      gemmF32(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, f(a), g.lda,
              g.stride_a, f(b), g.ldb, g.stride_b, g.beta,
              static_cast<float *>(c), g.ldc, g.stride_c, g.batch);
      if (bias)
        addBias(static_cast<float *>(c), f(bias), g.m, g.n, g.ldc, g.stride_c,
                g.batch);
    } else if (g.c_type == OTC_F32) {
      gemmBf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, h(a), g.lda,
               g.stride_a, h(b), g.ldb, g.stride_b, g.beta,
               static_cast<float *>(c), g.ldc, g.stride_c, g.batch);
    } else {
      gemmBf16Bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, h(a), g.lda,
                   g.stride_a, h(b), g.ldb, g.stride_b, g.beta,
                   static_cast<uint16_t *>(c), g.ldc, g.stride_c, g.batch,
                   h(bias));
    }
    return 0;
  default:
    if (!bf16)
      withProduct(g, f(a), f(b), static_cast<float *>(c), f(bias), f(addend),
                  static_cast<float *>(aux));
    else
      withProduct(g, h(a), h(b), static_cast<uint16_t *>(c), h(bias), h(addend),
                  static_cast<uint16_t *>(aux));
    return 0;
  }
}
