// otcrt_gemm_fp8 (otcrt/abi.h) for libotcrt_cuda: the FP8 GEMM of
// --precision=fp8 on cuBLASLt. Each operand gets its FP8 copy
// (fp8_quantize.cu), scaled from the amax its call site (its static descriptor)
// saw on its previous call (delayed scaling: one pass, which gathers this
// call's amax for the next; a site's first call scales from its own, an amax
// pass before), in the one layout cuBLASLt's FP8 GEMMs take, "TN": in the
// column-major product C^T = op(B)^T op(A)^T that the BF16 GEMM
// (gemm_cublaslt.cpp) computes, the first operand transposed, so our B is
// copied as [N, K] and our A as [M, K], each transposed on the way when it
// is stored the other way. cuBLASLt multiplies them (FP32 compute, the
// scale pointers at the two 1 / scale values the quantize kernels wrote)
// into C with a plain or bias epilogue, beta as given; other epilogues
// (GELU, its gradient, an addend) take the product into an FP32 scratch
// buffer and the runtime's epilogue kernel (gemm.h) finishes it, as the
// BF16 GEMM's fallback does. A call shape that cannot run in FP8 (a batch,
// sizes not multiples of 16, no FP8 algorithm in this cuBLASLt) runs as
// otcrt_gemm in BF16 instead, stderr saying so once per shape. The first
// call of a shape allocates (outside a graph capture: inside one it
// returns an error, and the runtime runs that function without a graph);
// later calls neither allocate nor synchronize. otcrt_fp8_quantize and
// otcrt_gemm_fp8_copies split the same work for a program whose FP8
// operands are shared copies in its arena (otc-fp8-copies): one quantize
// pass per copy, in the layouts its readers take, its amax state per copy
// site; the product then reads the copies and their 1 / scale in place.
#include "cuda/gemm.h"
#include "otcrt/abi.h"
#include "otcrt/fp8.h"
#include "otcrt/workspace.h"
#include "src/gemm_check.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace otcrt;
using namespace otcrt::cuda;

namespace {

/// How one call shape runs: in FP8 with these descriptors, or (`fp8`
/// false) as the BF16 GEMM.
struct Fp8Route {
  bool fp8 = false;
  /// The product goes to the FP32 scratch buffer, then the epilogue kernel.
  bool scratch = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  /// The heuristic's algorithms, best first; the first call tries them in
  /// order and keeps the first that runs (`algo`, `proven`).
  std::vector<cublasLtMatmulAlgo_t> algos;
  cublasLtMatmulAlgo_t algo{};
  bool proven = false;

  void destroy() {
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (d)
      cublasLtMatrixLayoutDestroy(d);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
    a = b = d = nullptr;
    desc = nullptr;
  }
};

/// The most algorithms of cuBLASLt's heuristic a route tries.
constexpr int kFp8Algorithms = 8;

using Fp8Key = std::array<int64_t, 21>;

/// One call site's (static descriptor's) amax state on the device: for A
/// and B, the amax of its previous call, this call's as it is gathered,
/// and the count of finished quantize blocks (gemm.h's Fp8Quantize).
struct Fp8Site {
  float *slots = nullptr; // prev A, cur A, prev B, cur B, counter A, counter B
  bool called = false;
};

struct Fp8State {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The FP8 copies of A and B, the FP32 product of a scratch route, and
  /// 1 / scale A, 1 / scale B (at 2 and 3 of 4 floats). Outgrown buffers
  /// stay allocated: a captured graph may still use them.
  uint8_t *operands = nullptr;
  size_t operandBytes = 0;
  float *product = nullptr;
  size_t productBytes = 0;
  float *scales = nullptr;
  std::vector<void *> outgrown;
  std::map<Fp8Key, Fp8Route> routes;
  std::map<const OtcrtGemm *, Fp8Site> sites;
  /// The amax state of each FP8 copy site (otcrt_fp8_quantize's static
  /// descriptor): prev, cur and counter of its one tensor.
  std::map<const OtcrtFp8Quantize *, Fp8Site> copySites;
  std::set<std::string> notices;
};

Fp8State &fp8State() {
  static Fp8State s;
  return s;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

cudaDataType_t fp8Type(int32_t format) {
  return format == OTCRT_FP8_E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

/// Why the call cannot run in FP8 whatever the library, or "".
std::string notFp8(const OtcrtGemm &g) {
  if (g.batch != 1)
    return "a batch of products";
  if (g.m % 16 || g.n % 16 || g.k % 16)
    return "sizes not multiples of 16";
  if (g.ldc % 16)
    return "a leading dimension of C not a multiple of 16";
  return "";
}

/// Grows `*p` to `bytes` (outside a capture), keeping the old buffer.
template <typename T>
std::string grow(Fp8State &s, T *&p, size_t &have, size_t bytes) {
  if (have >= bytes)
    return "";
  void *grown = nullptr;
  if (cudaMalloc(&grown, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cannot allocate " + std::to_string(bytes) + " bytes";
  }
  if (p)
    s.outgrown.push_back(p);
  p = static_cast<T *>(grown);
  have = bytes;
  return "";
}

/// The handle, workspace and scales, then the buffers of call `g` (its
/// operands' FP8 copies unless `copies`: otcrt_gemm_fp8_copies reads them
/// from the program's).
std::string ensureBuffers(Fp8State &s, const OtcrtGemm &g, bool scratch,
                          bool copies) {
  if (!s.handle) {
    if (cublasLtCreate(&s.handle) != CUBLAS_STATUS_SUCCESS)
      return "cublasLtCreate failed";
    if (cudaMalloc(&s.workspace, OTCRT_CUDA_GEMM_WORKSPACE_BYTES) ==
        cudaSuccess)
      s.workspaceBytes = OTCRT_CUDA_GEMM_WORKSPACE_BYTES;
    else
      (void)cudaGetLastError();
  }
  if (!s.scales && cudaMalloc(&s.scales, 4 * sizeof(float)) != cudaSuccess) {
    (void)cudaGetLastError();
    s.scales = nullptr;
    return "cannot allocate the FP8 scales";
  }
  // A's copy, then B's at a 256-byte boundary.
  size_t aBytes = (size_t(g.m * g.k) + 255) / 256 * 256;
  std::string why =
      copies ? "" : grow(s, s.operands, s.operandBytes, aBytes + g.n * g.k);
  if (why.empty() && scratch)
    why = grow(s, s.product, s.productBytes, size_t(g.m * g.n) * 4);
  return why;
}

#define OTCRT_FP8_TRY(call)                                                    \
  do {                                                                         \
    if ((call) != CUBLAS_STATUS_SUCCESS)                                       \
      return #call " failed";                                                  \
  } while (0)

/// Points the product's scales at `aInv` and `bInv`, 1 / scale of our A
/// and B: cuBLASLt's A is our B, and its B our A.
cublasStatus_t setScales(Fp8Route &r, const float *aInv, const float *bInv) {
  cublasStatus_t st = cublasLtMatmulDescSetAttribute(
      r.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &bInv, sizeof(bInv));
  if (st != CUBLAS_STATUS_SUCCESS)
    return st;
  return cublasLtMatmulDescSetAttribute(
      r.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &aInv, sizeof(aInv));
}

/// The largest power of two up to 256 that divides `p`'s address.
uint32_t alignmentOf(const void *p) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

/// The descriptors of call `g` (FP8 A and B, FP32 compute) and the
/// algorithms of cuBLASLt's heuristic (at most kFp8Algorithms, best first)
/// for its output aligned to `alignD` bytes; an error when it has none.
std::string plan(Fp8State &s, const OtcrtGemm &g, int32_t aFormat,
                 int32_t bFormat, const void *bias, uint32_t alignD,
                 Fp8Route &r) {
  OTCRT_FP8_TRY(
      cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  OTCRT_FP8_TRY(cublasLtMatmulDescSetAttribute(
      r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  OTCRT_FP8_TRY(cublasLtMatmulDescSetAttribute(
      r.desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
  OTCRT_FP8_TRY(setScales(r, s.scales + 2, s.scales + 3));
  if (!r.scratch && bias) {
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t biasType = g.c_type == OTC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    OTCRT_FP8_TRY(cublasLtMatmulDescSetAttribute(
        r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
    OTCRT_FP8_TRY(cublasLtMatmulDescSetAttribute(
        r.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
        sizeof(biasType)));
    OTCRT_FP8_TRY(cublasLtMatmulDescSetAttribute(
        r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  OTCRT_FP8_TRY(
      cublasLtMatrixLayoutCreate(&r.a, fp8Type(bFormat), g.k, g.n, g.k));
  OTCRT_FP8_TRY(
      cublasLtMatrixLayoutCreate(&r.b, fp8Type(aFormat), g.k, g.m, g.k));
  cudaDataType_t dType =
      r.scratch || g.c_type != OTC_BF16 ? CUDA_R_32F : CUDA_R_16BF;
  OTCRT_FP8_TRY(cublasLtMatrixLayoutCreate(&r.d, dType, g.n, g.m,
                                           r.scratch ? g.n : g.ldc));
  cublasLtMatmulPreference_t pref = nullptr;
  OTCRT_FP8_TRY(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t bytes = s.workspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
  // The operands' copies start 256-byte aligned; the output as it lies.
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignD,
                                                sizeof(alignD));
  cublasLtMatmulHeuristicResult_t results[kFp8Algorithms] = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(s.handle, r.desc, r.a, r.b, r.d, r.d,
                                        pref, kFp8Algorithms, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS)
    return std::string("the heuristic query failed: ") +
           cublasLtGetStatusName(st);
  for (int i = 0; i < found; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      r.algos.push_back(results[i].algo);
  if (r.algos.empty())
    return "this cuBLASLt has no FP8 algorithm for it";
  r.algo = r.algos.front();
  return "";
}

/// Says once per shape that call `g` runs in BF16 instead, and why.
void noticeBf16(Fp8State &s, const OtcrtGemm &g, const std::string &why) {
  std::string text = "otcrt: gemm: FP8 " + std::to_string(g.m) + " x " +
                     std::to_string(g.n) + " x " + std::to_string(g.k) +
                     " runs in BF16 instead: " + why;
  if (s.notices.insert(text).second)
    std::fprintf(stderr, "%s\n", text.c_str());
}

/// The route of call `g`, made on its first call.
std::string routeOf(Fp8State &s, const OtcrtGemm &g, int32_t aFormat,
                    int32_t bFormat, const void *c, const void *bias,
                    cudaStream_t stream, bool copies, Fp8Route *&route) {
  // Through the FP32 product and the epilogue kernel: every epilogue but the
  // bias, and the bias where cuBLASLt's FP8 products take none (FP32 C: its
  // FP8 bias is BF16 or FP16 only) or where it is not 16-byte aligned.
  bool scratch =
      (g.epilogue != OTCRT_GEMM_NONE && g.epilogue != OTCRT_GEMM_BIAS) ||
      (bias && (g.c_type != OTC_BF16 || alignmentOf(bias) < 16));
  // A route is planned for its output's alignment (the product's buffer,
  // 256-byte aligned, on the scratch route).
  const uint32_t alignD = scratch ? 256u : alignmentOf(c);
  Fp8Key key = {g.trans_a,
                g.trans_b,
                g.m,
                g.n,
                g.k,
                g.lda,
                g.ldb,
                g.ldc,
                g.batch,
                g.stride_a,
                g.stride_b,
                g.stride_c,
                g.c_type,
                g.epilogue,
                aFormat,
                bFormat,
                bias != nullptr,
                g.beta != 0.0f,
                copies,
                scratch,
                alignD};
  auto it = s.routes.find(key);
  if (it != s.routes.end()) {
    route = &it->second;
    return "";
  }
  if (capturing(stream))
    return "an FP8 GEMM shape first seen inside a CUDA graph capture";
  Fp8Route r;
  r.scratch = scratch;
  std::string why = notFp8(g);
  if (why.empty())
    why = ensureBuffers(s, g, scratch, copies);
  if (why.empty())
    why = plan(s, g, aFormat, bFormat, bias, alignD, r);
  r.fp8 = why.empty();
  if (!r.fp8) {
    r.destroy();
    r.algos.clear();
    noticeBf16(s, g, why);
  }
  route = &s.routes.emplace(key, r).first->second;
  return "";
}

/// The amax state of call site `key` in `sites`, made (zeroed) on its
/// first call.
template <typename Key>
std::string siteOf(std::map<Key, Fp8Site> &sites, Key key, cudaStream_t stream,
                   Fp8Site *&site) {
  site = &sites[key];
  if (site->slots)
    return "";
  if (capturing(stream))
    return "an FP8 call site first seen inside a CUDA graph capture";
  // Zeroed on the stream the quantize kernels run on (the runtime's is
  // non-blocking: a plain cudaMemset would not be ordered before them).
  void *p = nullptr;
  if (cudaMalloc(&p, 8 * sizeof(float)) != cudaSuccess) {
    (void)cudaGetLastError();
    sites.erase(key);
    return "cannot allocate an FP8 call site's amax";
  }
  if (cudaMemsetAsync(p, 0, 8 * sizeof(float), stream) != cudaSuccess) {
    (void)cudaGetLastError();
    cudaFree(p);
    sites.erase(key);
    return "cannot zero an FP8 call site's amax";
  }
  site->slots = static_cast<float *>(p);
  return "";
}

/// What multiply returns when no algorithm of a new route ran: the call
/// (and every later one of its shape) runs as the BF16 GEMM instead.
constexpr int kRunBf16 = -1;

/// The quantize kernels of A and B, cuBLASLt's product, and the epilogue
/// kernel of a scratch route.
int multiply(Fp8State &s, Fp8Route &r, const OtcrtGemm &g, const uint8_t *aq,
             const uint8_t *bq, const float *aInv, const float *bInv, void *c,
             const void *bias, const void *addend, void *aux,
             cudaStream_t stream);

int runFp8(Fp8State &s, Fp8Route &r, Fp8Site &site, const OtcrtGemm &g,
           int32_t aFormat, int32_t bFormat, const void *a, const void *b,
           void *c, const void *bias, const void *addend, void *aux,
           cudaStream_t stream) {
  size_t aBytes = (size_t(g.m * g.k) + 255) / 256 * 256;
  Fp8Quantize qa, qb;
  qa.x = static_cast<const uint16_t *>(a);
  qa.rows = g.trans_a ? g.k : g.m;
  qa.cols = g.trans_a ? g.m : g.k;
  qa.ld = g.lda;
  qa.transpose = g.trans_a; // to [M, K]
  qa.format = aFormat;
  qa.out = s.operands;
  qa.prev = site.slots;
  qa.cur = site.slots + 1;
  qa.counter = reinterpret_cast<unsigned *>(site.slots + 4);
  qa.invScale = s.scales + 2;
  qb.x = static_cast<const uint16_t *>(b);
  qb.rows = g.trans_b ? g.n : g.k;
  qb.cols = g.trans_b ? g.k : g.n;
  qb.ld = g.ldb;
  qb.transpose = !g.trans_b; // to [N, K]
  qb.format = bFormat;
  qb.out = s.operands + aBytes;
  qb.prev = site.slots + 2;
  qb.cur = site.slots + 3;
  qb.counter = reinterpret_cast<unsigned *>(site.slots + 5);
  qb.invScale = s.scales + 3;
  qa.first = qb.first = !site.called;
  site.called = true;
  if (launchFp8Quantize(qa, stream) || launchFp8Quantize(qb, stream))
    return gemmFailed(g, bias, "the FP8 quantize kernels did not launch");
  return multiply(s, r, g, qa.out, qb.out, qa.invScale, qb.invScale, c, bias,
                  addend, aux, stream);
}

/// cuBLASLt's product of FP8 A [M, K] and B [N, K] at `aq` and `bq`, their
/// 1 / scale at `aInv` and `bInv`, and the epilogue kernel of a scratch
/// route.
int multiply(Fp8State &s, Fp8Route &r, const OtcrtGemm &g, const uint8_t *aq,
             const uint8_t *bq, const float *aInv, const float *bInv, void *c,
             const void *bias, const void *addend, void *aux,
             cudaStream_t stream) {
  if (setScales(r, aInv, bInv) != CUBLAS_STATUS_SUCCESS)
    return gemmFailed(g, bias, "cannot set the FP8 GEMM's scales");
  if (!r.scratch && bias &&
      cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &bias,
                                     sizeof(bias)) != CUBLAS_STATUS_SUCCESS)
    return gemmFailed(g, bias, "cannot set the FP8 GEMM's bias");
  void *d = r.scratch ? static_cast<void *>(s.product) : c;
  float beta = r.scratch ? 0.0f : g.beta;
  auto run = [&](const cublasLtMatmulAlgo_t &algo) {
    return cublasLtMatmul(s.handle, r.desc, &g.alpha, bq, r.a, aq, r.b, &beta,
                          d, r.d, d, r.d, &algo, s.workspace, s.workspaceBytes,
                          stream);
  };
  cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (r.proven) {
    st = run(r.algo);
  } else {
    // The first call (outside a capture: routeOf made the route just now)
    // keeps the first of the heuristic's algorithms that runs; when none
    // does, the shape runs in BF16 from here on.
    for (const cublasLtMatmulAlgo_t &algo : r.algos) {
      st = run(algo);
      if (st == CUBLAS_STATUS_SUCCESS) {
        r.algo = algo;
        r.proven = true;
        break;
      }
    }
    if (!r.proven) {
      r.fp8 = false;
      r.destroy();
      noticeBf16(s, g,
                 std::string("no FP8 algorithm of cuBLASLt ran it (") +
                     cublasLtGetStatusName(st) + ")");
      return kRunBf16;
    }
  }
  if (st != CUBLAS_STATUS_SUCCESS)
    return gemmFailed(g, bias,
                      std::string("cublasLtMatmul (FP8): ") +
                          cublasLtGetStatusName(st));
  if (!r.scratch)
    return 0;
  GemmEpilogue e;
  e.m = g.m;
  e.n = g.n;
  e.batch = 1;
  e.v = s.product;
  e.ldv = g.n;
  e.xIn = addend ? addend : c;
  e.beta = g.beta;
  e.bias = bias;
  e.aux = aux;
  e.op = g.epilogue == OTCRT_GEMM_GELU    ? GemmEpilogueOp::kGelu
         : g.epilogue == OTCRT_GEMM_DGELU ? GemmEpilogueOp::kDgelu
                                          : GemmEpilogueOp::kStore;
  e.c = c;
  e.ldc = g.ldc;
  e.bf16 = g.c_type == OTC_BF16;
  if (launchGemmEpilogue(e, stream))
    return gemmFailed(g, bias, "the FP8 GEMM's epilogue kernel did not launch");
  return 0;
}

} // namespace

void otcrt::cuda::forgetFp8Scales() {
  Fp8State &s = fp8State();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto &[g, site] : s.sites)
    s.outgrown.push_back(site.slots);
  s.sites.clear();
  for (auto &[q, site] : s.copySites)
    s.outgrown.push_back(site.slots);
  s.copySites.clear();
}

namespace {

/// The FP8 route of `g` (its copies read when `copies`), under `lock`; or
/// null, the call then done with its status in `rc`: run as the BF16 GEMM
/// (the lock released first) where FP8 does not take the shape, failed
/// where no route can be made.
Fp8Route *fp8RouteOrRun(Fp8State &s, std::unique_lock<std::mutex> &lock,
                        const OtcrtGemm *g, int32_t a_format, int32_t b_format,
                        const void *a, const void *b, void *c, const void *bias,
                        const void *addend, void *aux, void *stream,
                        bool copies, int &rc) {
  Fp8Route *route = nullptr;
  std::string why = routeOf(s, *g, a_format, b_format, c, bias,
                            static_cast<cudaStream_t>(stream), copies, route);
  if (!why.empty()) {
    rc = gemmFailed(*g, bias, why);
    return nullptr;
  }
  if (route->fp8)
    return route;
  lock.unlock();
  rc = otcrt_gemm(g, a, b, c, bias, addend, aux, stream);
  return nullptr;
}

} // namespace

extern "C" int otcrt_gemm_fp8(const OtcrtGemm *g, int32_t a_format,
                              int32_t b_format, const void *a, const void *b,
                              void *c, const void *bias, const void *addend,
                              void *aux, void *stream) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  std::string why = gemmInvalid(*g, a, b, c, bias, addend, aux);
  if (why.empty())
    why = gemmFp8Invalid(*g, a_format, b_format);
  if (!why.empty())
    return gemmFailed(*g, bias, why);
  if (g->m == 0 || g->n == 0 || g->batch == 0 || g->k == 0)
    return otcrt_gemm(g, a, b, c, bias, addend, aux, stream);
  auto cudaStream = static_cast<cudaStream_t>(stream);
  Fp8State &s = fp8State();
  std::unique_lock<std::mutex> lock(s.mutex);
  int rc = 0;
  Fp8Route *route = fp8RouteOrRun(s, lock, g, a_format, b_format, a, b, c, bias,
                                  addend, aux, stream, false, rc);
  if (!route)
    return rc;
  Fp8Site *site = nullptr;
  why = siteOf(s.sites, g, cudaStream, site);
  if (!why.empty())
    return gemmFailed(*g, bias, why);
  rc = runFp8(s, *route, *site, *g, a_format, b_format, a, b, c, bias, addend,
              aux, cudaStream);
  if (rc != kRunBf16)
    return rc;
  lock.unlock();
  return otcrt_gemm(g, a, b, c, bias, addend, aux, stream);
}

extern "C" int otcrt_fp8_quantize(const OtcrtFp8Quantize *q, const void *x,
                                  void *copy, void *stream) {
  if (!q || q->rows < 0 || q->cols < 0 || q->layouts < 1 || q->layouts > 3 ||
      (q->format != OTCRT_FP8_E4M3 && q->format != OTCRT_FP8_E5M2) || !copy ||
      (!x && q->rows * q->cols != 0)) {
    std::fprintf(stderr, "otcrt: fp8_quantize: error: an invalid descriptor "
                         "or a null pointer\n");
    return 1;
  }
  const int64_t n = q->rows * q->cols;
  if (n == 0)
    return 0;
  auto cudaStream = static_cast<cudaStream_t>(stream);
  Fp8State &s = fp8State();
  std::lock_guard<std::mutex> lock(s.mutex);
  Fp8Site *site = nullptr;
  std::string why = siteOf(s.copySites, q, cudaStream, site);
  if (!why.empty()) {
    std::fprintf(stderr, "otcrt: fp8_quantize: error: %s\n", why.c_str());
    return 1;
  }
  auto *base = static_cast<uint8_t *>(copy);
  Fp8Quantize k;
  k.x = static_cast<const uint16_t *>(x);
  k.rows = q->rows;
  k.cols = q->cols;
  k.ld = q->cols;
  k.format = q->format;
  // One pass: as stored (and the transpose alongside), or the transpose.
  if (q->layouts & OTCRT_FP8_AS_STORED) {
    k.out = base + otcrt_fp8_copy_offset(n, q->layouts, OTCRT_FP8_AS_STORED);
    if (q->layouts & OTCRT_FP8_TRANSPOSED)
      k.alsoTransposed =
          base + otcrt_fp8_copy_offset(n, q->layouts, OTCRT_FP8_TRANSPOSED);
  } else {
    k.out = base + otcrt_fp8_copy_offset(n, q->layouts, OTCRT_FP8_TRANSPOSED);
    k.transpose = true;
  }
  k.prev = site->slots;
  k.cur = site->slots + 1;
  k.counter = reinterpret_cast<unsigned *>(site->slots + 4);
  k.invScale = reinterpret_cast<float *>(
      base + otcrt_fp8_copy_scale_offset(n, q->layouts));
  k.first = !site->called;
  site->called = true;
  if (launchFp8Quantize(k, cudaStream)) {
    std::fprintf(stderr,
                 "otcrt: fp8_quantize: error: the kernel did not launch\n");
    return 1;
  }
  return 0;
}

extern "C" int otcrt_gemm_fp8_copies(const OtcrtGemm *g, int32_t a_format,
                                     int32_t b_format, const void *a_copy,
                                     int32_t a_layouts, const void *b_copy,
                                     int32_t b_layouts, const void *a,
                                     const void *b, void *c, const void *bias,
                                     const void *addend, void *aux,
                                     void *stream) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  std::string why = gemmInvalid(*g, a, b, c, bias, addend, aux);
  if (why.empty())
    why = gemmFp8Invalid(*g, a_format, b_format);
  if (why.empty())
    why = gemmFp8CopiesInvalid(*g, a_copy, a_layouts, b_copy, b_layouts);
  if (!why.empty())
    return gemmFailed(*g, bias, why);
  if (g->m == 0 || g->n == 0 || g->batch == 0 || g->k == 0)
    return otcrt_gemm(g, a, b, c, bias, addend, aux, stream);
  auto cudaStream = static_cast<cudaStream_t>(stream);
  Fp8State &s = fp8State();
  std::unique_lock<std::mutex> lock(s.mutex);
  int rc = 0;
  Fp8Route *route = fp8RouteOrRun(s, lock, g, a_format, b_format, a, b, c, bias,
                                  addend, aux, stream, true, rc);
  if (!route)
    return rc;
  const int64_t an = g->m * g->k, bn = g->n * g->k;
  auto *ac = static_cast<const uint8_t *>(a_copy);
  auto *bc = static_cast<const uint8_t *>(b_copy);
  rc = multiply(s, *route, *g,
                ac + otcrt_fp8_copy_offset(an, a_layouts, fp8CopyLayoutOfA(*g)),
                bc + otcrt_fp8_copy_offset(bn, b_layouts, fp8CopyLayoutOfB(*g)),
                reinterpret_cast<const float *>(
                    ac + otcrt_fp8_copy_scale_offset(an, a_layouts)),
                reinterpret_cast<const float *>(
                    bc + otcrt_fp8_copy_scale_offset(bn, b_layouts)),
                c, bias, addend, aux, cudaStream);
  if (rc != kRunBf16)
    return rc;
  lock.unlock();
  return otcrt_gemm(g, a, b, c, bias, addend, aux, stream);
}
