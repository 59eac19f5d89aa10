// otcrt_gemm (otcrt/abi.h) for libotcrt_cuda, on cuBLASLt. Row-major C =
// op(A) op(B) is computed as the column-major product C^T = op(B)^T op(A)^T,
// i.e. cuBLASLt's A operand is our B and vice versa, with no data movement;
// an addend is read as cuBLASLt's C while our C is its D. The compute type
// is pure FP32 (no TF32); BF16 operands (CUDA_R_16BF) accumulate the same
// way. One handle and one 32 MiB workspace are created on the first call.
//
// Each call shape (sizes, types, layout, epilogue, and the alignment of
// every pointer, which constrains the algorithms) gets a route on its first
// call: the descriptors and layouts, and the first of up to eight
// algorithms of cuBLASLt's heuristic that runs (each is tried on the call's
// own data until one does; with OTCRT_GEMM_TUNE=1, each is timed on it
// first and the fastest tried first: fastestAlgorithm). An epilogue
// cuBLASLt declines (no algorithm for
// GELU_AUX_BIAS, DGELU or BIAS in that type combination, an aux leading
// dimension it cannot take, a dGELU whose C is its aux, or
// OTCRT_GEMM_EPILOGUE=fallback) runs as the
// plain product followed by the runtime's epilogue kernel (cuda/gemm.h):
// into C itself when C is FP32 (and not the aux a dGELU reads), else into
// an FP32 scratch buffer, so that every element still rounds once; stderr
// says so once per shape. A product of depth 0 is the epilogue kernel alone.
// otcrt_gemm_sums (gemm_sums.cpp) asks for cuBLASLt's bias-gradient
// epilogue (gemmWithSums): a route cuBLASLt may decline as an epilogue.
// Later calls reuse the route and neither allocate nor synchronize, so a
// CUDA graph captures them; a shape first seen inside a capture returns an
// error instead (the runtime then runs that function without a graph).
// Every failure returns a non-zero status after one line on stderr naming
// the shape (gemm_check.h); nothing here exits.
#include "cuda/gemm.h"
#include "src/gemm_check.h"
#include "otcrt/abi.h"
#include "otcrt/workspace.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace otcrt;
using namespace otcrt::cuda;

namespace {

constexpr size_t kWorkspaceBytes = OTCRT_CUDA_GEMM_WORKSPACE_BYTES;
/// Algorithms asked of the heuristic and tried in its order.
constexpr int kAlgorithms = 8;

/// "cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (the functionality
/// requested is not supported)".
std::string ltError(const char *what, cublasStatus_t st) {
  return std::string(what) + ": " + cublasLtGetStatusName(st) + " (" +
         cublasLtGetStatusString(st) + ")";
}

#define OTCRT_LT_TRY(call)                                                     \
  do {                                                                         \
    cublasStatus_t st_ = (call);                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                          \
      return ltError(#call, st_);                                              \
  } while (0)

/// The descriptors of one cuBLASLt product and the algorithm that ran it.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  void destroy() {
    if (desc)
      cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
    *this = Plan();
  }
};

/// How a call shape runs.
struct Route {
  Plan plan;
  /// cuBLASLt's plain product, then the epilogue kernel.
  bool fallback = false;
  /// The product goes to the scratch buffer (else into C).
  bool scratch = false;
};

/// The key of a route: the descriptor's fields, the pointers' alignments,
/// whether a bias is given, whether C is the aux it reads, whether the
/// fallback is forced, and the sums (OtcrtGemmSumsOf + 1 or 0, type,
/// accumulate_sums, alignments of the caller's sums and cuBLASLt's).
using RouteKey = std::array<int64_t, 29>;

struct State {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The FP32 products of fallback epilogues; a buffer outgrown stays
  /// allocated, since a captured graph may still use it.
  float *scratch = nullptr;
  size_t scratchBytes = 0;
  std::vector<void *> outgrown;
  std::map<RouteKey, Route> routes;
  std::set<std::string> notices;
};

State &state() {
  static State s;
  return s;
}

thread_local GemmRoute lastRoute = GemmRoute::kNone;

/// -1: OTCRT_GEMM_EPILOGUE decides; 0 or 1: forceGemmEpilogueFallback's.
std::atomic<int> forcedByTest{-1};
/// -1: OTCRT_GEMM_TUNE decides; 0 or 1: setGemmTuning's.
std::atomic<int> tuningByTest{-1};

/// A switch a test sets (`byTest` 0 or 1), else the environment: whether
/// variable `name` is `on` (read once, at the first call).
template <const char *name, const char *on>
bool envSwitch(const std::atomic<int> &byTest) {
  int set = byTest.load();
  if (set >= 0)
    return set != 0;
  static const bool byEnv = [] {
    const char *env = std::getenv(name);
    return env && std::strcmp(env, on) == 0;
  }();
  return byEnv;
}

constexpr char kTuneVar[] = "OTCRT_GEMM_TUNE", kTuneOn[] = "1";
constexpr char kEpilogueVar[] = "OTCRT_GEMM_EPILOGUE",
               kEpilogueFallback[] = "fallback";

/// Whether a shape's first call times the heuristic's algorithms
/// (OTCRT_GEMM_TUNE=1) instead of taking the first that runs.
bool tuning() { return envSwitch<kTuneVar, kTuneOn>(tuningByTest); }

/// Whether every epilogue runs as the fallback (OTCRT_GEMM_EPILOGUE=fallback).
bool fallbackForced() {
  return envSwitch<kEpilogueVar, kEpilogueFallback>(forcedByTest);
}

/// Whether work queued on `stream` is being captured into a graph (or
/// cannot tell, which counts as captured: nothing may allocate then).
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

/// Largest power of two (<= 256) dividing the address and every batch step.
uint32_t alignmentOf(const void *p, int64_t strideElems, int64_t batch,
                     size_t elemBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1 && strideElems != 0)
    bits |= static_cast<uint64_t>(strideElems) * elemBytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

cudaDataType_t cudaType(int32_t dtype) {
  return dtype == OTC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

size_t elementBytes(int32_t dtype) { return dtype == OTC_BF16 ? 2 : 4; }

/// What one cublasLtMatmul computes: D = alpha op(A) op(B) + beta Cin
/// (then cuBLASLt's epilogue), D and Cin of type dType laid out (ldd,
/// strideD).
struct Product {
  cudaDataType_t dType = CUDA_R_32F;
  void *d = nullptr;
  const void *cIn = nullptr;
  int64_t ldd = 0, strideD = 0;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  const void *aux = nullptr;
  /// The bias pointer is where a bias-gradient epilogue writes its FP32
  /// sums (otcrt_gemm_sums), not a bias of the epilogue type read.
  bool sums = false;
};

cublasLtMatrixLayout_t layout(cudaDataType_t type, uint64_t rows, uint64_t cols,
                              int64_t ld, int64_t batch, int64_t stride,
                              cublasStatus_t &st) {
  cublasLtMatrixLayout_t l = nullptr;
  st = cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld);
  if (st == CUBLAS_STATUS_SUCCESS && batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                          &count, sizeof(count));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatrixLayoutSetAttribute(
          l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
  }
  return l;
}

/// Points the plan's descriptor at the call's bias and aux (the plan is
/// shared by every call of its shape; host-side, so a graph capture
/// records the call as made).
std::string setPointers(Plan &plan, const Product &p) {
  if (p.bias)
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  if (p.aux)
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux,
        sizeof(p.aux)));
  return "";
}

/// Creates the descriptors of product `p` of the call `g` into `plan`.
std::string describe(const OtcrtGemm &g, const Product &p, Plan &plan) {
  OTCRT_LT_TRY(
      cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major view: m = N, n = M; the first operand is our B.
  cublasOperation_t opFirst = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opFirst, sizeof(opFirst)));
  OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
      plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opSecond, sizeof(opSecond)));
  if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    OTCRT_LT_TRY(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                       &p.epilogue, sizeof(p.epilogue)));
  if (p.aux) {
    // The aux matrix is laid out like D (its type, by default, is D's).
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &p.ldd,
        sizeof(p.ldd)));
    if (g.batch > 1)
      OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
          plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &p.strideD,
          sizeof(p.strideD)));
  }
  if (p.bias && p.sums) {
    // The sums a bias-gradient epilogue writes, FP32 (batch 1).
    cudaDataType_t sumsType = CUDA_R_32F;
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &sumsType,
        sizeof(sumsType)));
  } else if (p.bias) {
    // bias[j] of our row-major column j: cuBLASLt's column-major rows (m =
    // N), the same vector for every batch entry, in the epilogue's type.
    cudaDataType_t biasType = cudaType(g.epilogue_type);
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
        sizeof(biasType)));
    int64_t biasStride = 0;
    OTCRT_LT_TRY(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasStride,
        sizeof(biasStride)));
  }
  // The heuristic reads the bias and aux pointers for their alignment.
  std::string why = setPointers(plan, p);
  if (!why.empty())
    return why;
  cudaDataType_t in = cudaType(g.ab_type);
  cublasStatus_t st;
  plan.a = layout(in, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb,
                  g.batch, g.stride_b, st);
  if (st != CUBLAS_STATUS_SUCCESS)
    return ltError("cublasLtMatrixLayoutCreate", st);
  plan.b = layout(in, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda,
                  g.batch, g.stride_a, st);
  if (st != CUBLAS_STATUS_SUCCESS)
    return ltError("cublasLtMatrixLayoutCreate", st);
  plan.d = layout(p.dType, g.n, g.m, p.ldd, g.batch, p.strideD, st);
  if (st != CUBLAS_STATUS_SUCCESS)
    return ltError("cublasLtMatrixLayoutCreate", st);
  return "";
}

/// Runs product `p` with `plan`'s algorithm.
cublasStatus_t run(State &s, const OtcrtGemm &g, const void *a, const void *b,
                   const Product &p, const Plan &plan,
                   const cublasLtMatmulAlgo_t &algo, cudaStream_t stream) {
  return cublasLtMatmul(s.handle, plan.desc, &g.alpha, b, plan.a, a, plan.b,
                        &p.beta, p.cIn, plan.d, p.d, plan.d, &algo, s.workspace,
                        s.workspaceBytes, stream);
}

/// Most bytes of a temporary result that tuning allocates for a product
/// that reads its C (beta != 0); a larger one is not tuned.
constexpr size_t kTuneScratchBytes = size_t(64) << 20;
/// Timed calls per algorithm when tuning (after one untimed call).
constexpr int kTuneCalls = 3;

/// With tuning on (OTCRT_GEMM_TUNE=1), the index in `results` of the
/// algorithm that ran product `p` fastest on the call's own operands, or -1
/// (not tuned: the heuristic's order decides). Each algorithm runs once,
/// then kTuneCalls times between two events. A product that does not read
/// C writes the same values each time, so it runs into C itself; one that
/// reads C (beta != 0) runs into a temporary result of at most
/// kTuneScratchBytes, C read as it is; others are not tuned. Synchronizes
/// the stream (outside a capture only: a shape's first call).
int fastestAlgorithm(State &s, const OtcrtGemm &g, const void *a,
                     const void *b, const Product &p, const Plan &plan,
                     const cublasLtMatmulHeuristicResult_t *results,
                     int returned, cudaStream_t stream) {
  if (!tuning() || returned < 2 || p.d == a || p.d == b)
    return -1;
  Product timed = p;
  void *scratch = nullptr;
  if (p.beta != 0.0f) {
    size_t bytes = (p.dType == CUDA_R_16BF ? 2 : 4) *
                   static_cast<size_t>(p.ldd * g.m +
                                       (g.batch - 1) * p.strideD);
    if (bytes > kTuneScratchBytes || cudaMalloc(&scratch, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    timed.d = scratch;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  int best = -1;
  float bestMs = 0;
  if (cudaEventCreate(&start) == cudaSuccess &&
      cudaEventCreate(&stop) == cudaSuccess) {
    for (int i = 0; i < returned; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS)
        continue;
      bool ok = run(s, g, a, b, timed, plan, results[i].algo, stream) ==
                CUBLAS_STATUS_SUCCESS;
      ok = ok && cudaEventRecord(start, stream) == cudaSuccess;
      for (int k = 0; ok && k < kTuneCalls; ++k)
        ok = run(s, g, a, b, timed, plan, results[i].algo, stream) ==
             CUBLAS_STATUS_SUCCESS;
      ok = ok && cudaEventRecord(stop, stream) == cudaSuccess &&
           cudaEventSynchronize(stop) == cudaSuccess;
      float ms = 0;
      ok = ok && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
      if (!ok) {
        (void)cudaGetLastError(); // an algorithm that failed: not chosen
        continue;
      }
      if (best < 0 || ms < bestMs) {
        best = i;
        bestMs = ms;
      }
    }
  }
  (void)cudaGetLastError();
  if (start)
    cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  if (scratch) {
    cudaStreamSynchronize(stream);
    cudaFree(scratch);
  }
  return best;
}

/// Builds the plan of product `p` and runs it with the first of the
/// heuristic's algorithms that runs (with tuning, the fastest first), which
/// the plan keeps; on failure the plan is destroyed and the reason
/// returned.
std::string planAndRun(State &s, const OtcrtGemm &g, const void *a,
                       const void *b, const Product &p, Plan &plan,
                       cudaStream_t stream) {
  std::string why = describe(g, p, plan);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t results[kAlgorithms] = {};
  int returned = 0;
  if (why.empty()) {
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = s.workspaceBytes;
    // Our first operand is B, the second A; cuBLASLt's C is D's layout.
    size_t inBytes = elementBytes(g.ab_type);
    size_t outBytes = p.dType == CUDA_R_16BF ? 2 : 4;
    uint32_t alignFirst = alignmentOf(b, g.stride_b, g.batch, inBytes);
    uint32_t alignSecond = alignmentOf(a, g.stride_a, g.batch, inBytes);
    uint32_t alignD =
        std::min(alignmentOf(p.d, p.strideD, g.batch, outBytes),
                 alignmentOf(p.cIn, p.strideD, g.batch, outBytes));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignFirst},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignSecond},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD}};
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (const auto &[attribute, bytes] : aligns)
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes,
                                                  sizeof(bytes));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(s.handle, plan.desc, plan.a, plan.b,
                                          plan.d, plan.d, pref, kAlgorithms,
                                          results, &returned);
    if (st != CUBLAS_STATUS_SUCCESS)
      why = ltError("cublasLtMatmulAlgoGetHeuristic", st);
    else if (returned == 0)
      why = "the heuristic returned no algorithm";
  }
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (why.empty()) {
    int fastest =
        fastestAlgorithm(s, g, a, b, p, plan, results, returned, stream);
    if (fastest > 0)
      std::rotate(results, results + fastest, results + fastest + 1);
  }
  int tried = 0;
  cublasStatus_t last = CUBLAS_STATUS_SUCCESS;
  for (int i = 0; why.empty() && i < returned; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS)
      continue;
    ++tried;
    last = run(s, g, a, b, p, plan, results[i].algo, stream);
    if (last == CUBLAS_STATUS_SUCCESS) {
      plan.algo = results[i].algo;
      return "";
    }
    (void)cudaGetLastError(); // a launch that failed: try the next one
  }
  if (why.empty())
    why = tried == 0 ? std::string("the heuristic returned no usable algorithm")
                     : "each of the " + std::to_string(tried) +
                           " algorithms of the heuristic failed, the last "
                           "with " +
                           ltError("cublasLtMatmul", last);
  plan.destroy();
  return why;
}

/// The handle and the workspace, created on the first call (outside a
/// graph capture).
std::string ensureHandle(State &s, cudaStream_t stream) {
  if (s.handle)
    return "";
  if (capturing(stream))
    return "the first GEMM runs inside a CUDA graph capture";
  OTCRT_LT_TRY(cublasLtCreate(&s.handle));
  if (cudaMalloc(&s.workspace, kWorkspaceBytes) == cudaSuccess) {
    s.workspaceBytes = kWorkspaceBytes;
  } else {
    (void)cudaGetLastError(); // Run without a workspace instead.
    s.workspace = nullptr;
  }
  return "";
}

/// A scratch buffer of at least `bytes`, grown only outside a capture.
std::string ensureScratch(State &s, size_t bytes, cudaStream_t stream) {
  if (s.scratchBytes >= bytes)
    return "";
  if (capturing(stream))
    return "the scratch buffer would grow inside a CUDA graph capture";
  void *grown = nullptr;
  if (cudaMalloc(&grown, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cannot allocate " + std::to_string(bytes) +
           " bytes for the product of the fallback epilogue";
  }
  if (s.scratch)
    s.outgrown.push_back(s.scratch);
  s.scratch = static_cast<float *>(grown);
  s.scratchBytes = bytes;
  return "";
}

/// cuBLASLt's epilogue for the call, DEFAULT when it needs none.
cublasLtEpilogue_t ltEpilogue(const OtcrtGemm &g, const void *bias) {
  switch (g.epilogue) {
  case OTCRT_GEMM_BIAS:
    return CUBLASLT_EPILOGUE_BIAS;
  case OTCRT_GEMM_ADD:
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  case OTCRT_GEMM_GELU:
    return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  case OTCRT_GEMM_DGELU:
    return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// The product of the call with cuBLASLt doing its epilogue: with `sums`,
/// the bias-gradient epilogue of the summed operand, which cuBLASLt names
/// from its column-major view (our A is its B: BGRADB, over D's columns,
/// our M; our B is its A: BGRADA, over D's rows, our N).
Product directProduct(const OtcrtGemm &g, void *c, const void *bias,
                      const void *addend, void *aux, const GemmSums *sums) {
  Product p;
  p.dType = cudaType(g.c_type);
  p.d = c;
  p.cIn = addend ? addend : c;
  p.ldd = g.ldc;
  p.strideD = g.stride_c;
  p.beta = g.beta;
  p.epilogue = ltEpilogue(g, bias);
  p.bias = p.epilogue == CUBLASLT_EPILOGUE_DEFAULT ? nullptr : bias;
  p.aux = aux;
  if (sums) {
    p.epilogue = sums->of == OTCRT_GEMM_SUMS_A ? CUBLASLT_EPILOGUE_BGRADB
                                               : CUBLASLT_EPILOGUE_BGRADA;
    p.bias = sums->out;
    p.sums = true;
  }
  return p;
}

/// The plain product of a fallback: FP32, into C with beta applied
/// (`scratch` false), or alone into the scratch buffer.
Product fallbackProduct(const State &s, const OtcrtGemm &g, void *c,
                        const void *addend, bool scratch) {
  Product p;
  p.dType = CUDA_R_32F;
  if (scratch) {
    p.d = s.scratch;
    p.cIn = s.scratch;
    p.ldd = g.n;
    p.strideD = g.m * g.n;
  } else {
    p.d = c;
    p.cIn = addend ? addend : c;
    p.ldd = g.ldc;
    p.strideD = g.stride_c;
    p.beta = g.beta;
  }
  return p;
}

/// The epilogue kernel's work after product `p` (null: K == 0).
GemmEpilogue epilogueWork(const OtcrtGemm &g, const Product *p, void *c,
                          const void *bias, const void *addend, void *aux) {
  GemmEpilogue e;
  e.m = g.m;
  e.n = g.n;
  e.batch = g.batch;
  // beta was applied by a product into C; a scratch product, or none, leaves
  // it to the kernel.
  bool intoC = p && p->d == c;
  if (p) {
    e.v = static_cast<const float *>(p->d);
    e.ldv = p->ldd;
    e.strideV = p->strideD;
  }
  if (!intoC) {
    e.xIn = addend ? addend : c;
    e.beta = g.beta;
  }
  e.bias = bias;
  e.aux = aux;
  e.op = g.epilogue == OTCRT_GEMM_GELU    ? GemmEpilogueOp::kGelu
         : g.epilogue == OTCRT_GEMM_DGELU ? GemmEpilogueOp::kDgelu
                                          : GemmEpilogueOp::kStore;
  e.c = c;
  e.ldc = g.ldc;
  e.strideC = g.stride_c;
  e.bf16 = g.c_type == OTC_BF16;
  return e;
}

/// Why cuBLASLt cannot take the epilogue as laid out, or "".
std::string layoutDeclined(const OtcrtGemm &g, const void *c, const void *aux) {
  bool hasAux = g.epilogue == OTCRT_GEMM_GELU || g.epilogue == OTCRT_GEMM_DGELU;
  if (hasAux && (g.ldc % 8 != 0 || (g.batch > 1 && g.stride_c % 8 != 0)))
    return "the aux matrix's leading dimension or batch stride is not a "
           "multiple of 8";
  // cuBLASLt's DGELU writes D while other tiles still read the aux it
  // overwrites (seen on an H200, CUDA 13.0: wrong values, no error).
  if (hasAux && c == aux)
    return "C is the aux matrix the epilogue reads";
  return "";
}

/// Prints `text` once per process.
void noticeOnce(State &s, const std::string &text) {
  if (s.notices.insert(text).second)
    std::fprintf(stderr, "%s\n", text.c_str());
}

/// The line that says how an epilogue cuBLASLt declined (`why`) runs.
std::string fallbackNotice(const OtcrtGemm &g, const void *bias,
                           const GemmSums *sums, const std::string &why) {
  if (sums)
    return "otcrt: gemm: the sums of " +
           std::string(sums->of == OTCRT_GEMM_SUMS_A ? "A" : "B") +
           " run as a plain cuBLASLt GEMM and the runtime's column sums (" +
           why + "): " + describeGemm(g, nullptr) + ", " +
           describeGemmSums(sums->of, sums->type, sums->accumulate);
  return "otcrt: gemm: the " + gemmEpilogueName(g.epilogue, bias != nullptr) +
         " epilogue runs as a plain cuBLASLt GEMM and the runtime's epilogue "
         "kernel (" +
         why + "): " + describeGemm(g, bias);
}

/// One call with a valid descriptor, M, N and batch positive, K positive,
/// one C per batch entry or batch 1; with `sums` (otcrt_gemm_sums: batch
/// 1, epilogue NONE), kGemmSumsDeclined where its shape runs as the plain
/// product and the runtime's column sums, which the caller then runs.
int gemmProduct(const OtcrtGemm &g, const void *a, const void *b, void *c,
                const void *bias, const void *addend, void *aux,
                const GemmSums *sums, cudaStream_t stream) {
  auto failed = [&](const std::string &why) {
    return sums ? gemmSumsFailed(g, sums->of, sums->type, sums->accumulate, why)
                : gemmFailed(g, bias, why);
  };
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::string why = ensureHandle(s, stream);
  if (!why.empty())
    return failed(why);
  const bool forced = fallbackForced();
  const size_t cBytes = elementBytes(g.c_type),
               inBytes = elementBytes(g.ab_type);
  auto alignOf = [&](const void *p, int64_t stride, size_t bytes) {
    return p ? static_cast<int64_t>(alignmentOf(p, stride, g.batch, bytes))
             : int64_t(0);
  };
  RouteKey key = {g.trans_a,
                  g.trans_b,
                  g.m,
                  g.n,
                  g.k,
                  g.batch,
                  g.ab_type,
                  g.c_type,
                  g.epilogue,
                  g.lda,
                  g.ldb,
                  g.ldc,
                  g.stride_a,
                  g.stride_b,
                  g.stride_c,
                  alignOf(a, g.stride_a, inBytes),
                  alignOf(b, g.stride_b, inBytes),
                  alignOf(c, g.stride_c, cBytes),
                  alignOf(addend, g.stride_c, cBytes),
                  alignOf(bias, 0, cBytes),
                  alignOf(aux, g.stride_c, cBytes),
                  bias != nullptr,
                  c == aux,
                  forced,
                  sums ? sums->of + 1 : 0,
                  sums ? sums->type : 0,
                  sums ? sums->accumulate : 0,
                  alignOf(sums ? sums->sums : nullptr, 0,
                          elementBytes(sums ? sums->type : OTC_F32)),
                  alignOf(sums ? sums->out : nullptr, 0, sizeof(float))};
  // After the product ran on route `r`: a fallback's epilogue kernel.
  auto finish = [&](const Route &r, Product &p) {
    if (!r.fallback) {
      lastRoute = GemmRoute::kCublasLt;
      return 0;
    }
    lastRoute = GemmRoute::kCublasLtFallback;
    if (launchGemmEpilogue(epilogueWork(g, &p, c, bias, addend, aux), stream))
      return failed("the epilogue kernel did not launch");
    return 0;
  };
  auto found = s.routes.find(key);
  if (found != s.routes.end()) {
    Route &r = found->second;
    if (r.fallback && sums)
      return kGemmSumsDeclined;
    Product p = r.fallback ? fallbackProduct(s, g, c, addend, r.scratch)
                           : directProduct(g, c, bias, addend, aux, sums);
    why = r.fallback ? "" : setPointers(r.plan, p);
    if (why.empty()) {
      cublasStatus_t st = run(s, g, a, b, p, r.plan, r.plan.algo, stream);
      if (st != CUBLAS_STATUS_SUCCESS)
        why = ltError("cublasLtMatmul", st);
    }
    if (!why.empty())
      return failed("cuBLASLt: " + why);
    return finish(r, p);
  }

  // The first call of this shape: choose its route, running it.
  if (capturing(stream))
    return failed("this GEMM's first call runs inside a CUDA graph "
                  "capture, which cannot choose its algorithm");
  Route r;
  Product direct = directProduct(g, c, bias, addend, aux, sums);
  bool epilogue = direct.epilogue != CUBLASLT_EPILOGUE_DEFAULT;
  if (epilogue) {
    why = forced ? std::string("forced") : layoutDeclined(g, c, aux);
    if (why.empty())
      why = planAndRun(s, g, a, b, direct, r.plan, stream);
    if (why.empty()) {
      s.routes.emplace(key, r);
      lastRoute = GemmRoute::kCublasLt;
      return 0;
    }
    // Declined: the plain product and the epilogue kernel (or, for sums,
    // the caller's column sums).
    noticeOnce(s, fallbackNotice(g, bias, sums, why));
    r.fallback = true;
    if (sums) {
      s.routes.emplace(key, r);
      return kGemmSumsDeclined;
    }
    r.scratch = g.c_type != OTC_F32 || c == aux;
    if (r.scratch) {
      size_t bytes = sizeof(float) * static_cast<size_t>(g.batch * g.m * g.n);
      why = ensureScratch(s, bytes, stream);
      if (!why.empty())
        return failed(why);
    }
  }
  Product p = r.fallback ? fallbackProduct(s, g, c, addend, r.scratch) : direct;
  why = planAndRun(s, g, a, b, p, r.plan, stream);
  if (!why.empty())
    return failed("cuBLASLt: " + why);
  s.routes.emplace(key, r);
  return finish(r, p);
}

int gemm(const OtcrtGemm &g, const void *a, const void *b, void *c,
         const void *bias, const void *addend, void *aux, cudaStream_t stream) {
  lastRoute = GemmRoute::kNone;
  std::string why = gemmInvalid(g, a, b, c, bias, addend, aux);
  if (!why.empty())
    return gemmFailed(g, bias, why);
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return 0;
  if (g.batch > 1 && g.stride_c == 0) {
    // Every entry updates the same C (a plain product): in order.
    OtcrtGemm one = g;
    one.batch = 1;
    one.stride_a = one.stride_b = 0;
    size_t inBytes = elementBytes(g.ab_type);
    for (int64_t e = 0; e < g.batch; ++e) {
      const char *ae = static_cast<const char *>(a),
                 *be = static_cast<const char *>(b);
      if (ae)
        ae += e * g.stride_a * inBytes;
      if (be)
        be += e * g.stride_b * inBytes;
      if (int status = gemm(one, ae, be, c, nullptr, nullptr, nullptr, stream))
        return status;
    }
    return 0;
  }
  if (g.k == 0) {
    // v = 0: C = beta C (or the addend) + bias, through the kernel.
    lastRoute = GemmRoute::kEpilogueOnly;
    if (launchGemmEpilogue(epilogueWork(g, nullptr, c, bias, addend, aux),
                           stream))
      return gemmFailed(g, bias, "the epilogue kernel did not launch");
    return 0;
  }
  return gemmProduct(g, a, b, c, bias, addend, aux, nullptr, stream);
}

} // namespace

namespace otcrt {
namespace cuda {

GemmRoute lastGemmRoute() { return lastRoute; }

void setLastGemmRoute(GemmRoute route) { lastRoute = route; }

int gemmWithSums(const OtcrtGemm &g, const void *a, const void *b, void *c,
                 const GemmSums &sums, cudaStream_t stream) {
  lastRoute = GemmRoute::kNone;
  return gemmProduct(g, a, b, c, nullptr, nullptr, nullptr, &sums, stream);
}

void setGemmTuning(bool on) { tuningByTest.store(on ? 1 : 0); }

void forceGemmEpilogueFallback(bool on) { forcedByTest = on ? 1 : 0; }

} // namespace cuda
} // namespace otcrt

extern "C" int otcrt_gemm(const OtcrtGemm *g, const void *a, const void *b,
                          void *c, const void *bias, const void *addend,
                          void *aux, void *stream) {
  if (!g) {
    std::fprintf(stderr, "otcrt: gemm: error: no descriptor\n");
    return 1;
  }
  return gemm(*g, a, b, c, bias, addend, aux,
              static_cast<cudaStream_t>(stream));
}
