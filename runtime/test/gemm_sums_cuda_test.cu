// GPU check of otcrt_gemm_sums on the cuda target (cuda/gemm_sums.cpp)
// against the host's (otcrt::cpu::gemmSums, compiled in), same inputs: the
// sums of A and of B; f32 operands into f32, bf16 into f32 and bf16 into
// bf16; f32 and bf16 sums, written (starting as NaN, never read) and added
// to known nonzero values; beta 0 (C starting as NaN) and 1; a small odd
// shape (every combination) and a GPT-2-sized weight gradient (K 2048
// tokens, 768 x 3072), each on the route cuBLASLt takes (its bias-gradient
// epilogue where it has one) and again with the fallback forced (the plain
// product and the runtime's column sums), a second call of each route
// repeating the first bit for bit without allocating; sums off their
// alignment; depth 0 and an empty product; calls of every route captured in
// a CUDA graph replaying to the eager bits, and a shape first seen inside
// the capture refused without breaking it. C is compared within FP32's
// error bound of a sum of K products in another order (1e-5 of the sum of
// their magnitudes), a bf16 C within a bfloat16 unit of the element and of
// its terms' magnitudes (as gemm_cuda_test.cu's compareLinearBf16); the
// sums within 1e-5 of the sum of their terms' magnitudes, bf16 sums within
// one bfloat16 unit more (a sum that rounds the other way).
#include "cpu/kernels_cpu.h"
#include "cuda/gemm.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"

#include <cstring>
#include <limits>

namespace cudatest {
namespace {

using Bytes = std::vector<char>;
using otcrt::cuda::GemmRoute;

/// One call: operand, C and sums types, which operand is summed, whether
/// the sums accumulate, beta, sizes.
struct SumsCase {
  int32_t ab, c, of, type;
  int accumulate;
  float beta;
  int64_t m, n, k;
  /// The transpose of the operand not summed (trans_b for the sums of A,
  /// trans_a for those of B).
  int otherTrans = 0;
  /// Sums this many elements past their allocation's 256-byte alignment.
  size_t skew = 0;
};

const char *typeName(int32_t t) { return t == OTC_BF16 ? "bf16" : "f32"; }

std::string nameOf(const SumsCase &t) {
  return std::string("sums of ") + (t.of == OTCRT_GEMM_SUMS_A ? "A" : "B") +
         ", " + typeName(t.ab) + "->" + typeName(t.c) + ", " +
         typeName(t.type) + " sums, accumulate " +
         std::to_string(t.accumulate) + ", beta " +
         std::to_string(static_cast<int>(t.beta)) + ", " + std::to_string(t.m) +
         "x" + std::to_string(t.n) + "x" + std::to_string(t.k) +
         (t.otherTrans ? " (other operand T)" : "") +
         (t.skew ? " (sums skewed)" : "");
}

OtcrtGemm descriptor(const SumsCase &t) {
  auto atLeast1 = [](int64_t v) { return std::max<int64_t>(v, 1); };
  OtcrtGemm g;
  g.trans_a = t.of == OTCRT_GEMM_SUMS_A ? 1 : t.otherTrans;
  g.trans_b = t.of == OTCRT_GEMM_SUMS_B ? 0 : t.otherTrans;
  g.m = t.m;
  g.n = t.n;
  g.k = t.k;
  g.batch = 1;
  g.alpha = 1.0f;
  g.beta = t.beta;
  g.ab_type = t.ab;
  g.c_type = g.epilogue_type = t.c;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = atLeast1(g.trans_a ? t.m : t.k);
  g.ldb = atLeast1(g.trans_b ? t.k : t.n);
  g.ldc = atLeast1(t.n);
  g.stride_a = g.stride_b = g.stride_c = 0;
  return g;
}

/// `x` stored as `type` (OTC_F32 or OTC_BF16), and back.
Bytes stored(const Floats &x, int32_t type) {
  if (type == OTC_F32) {
    Bytes out(x.size() * sizeof(float));
    std::memcpy(out.data(), x.data(), out.size());
    return out;
  }
  Bf16s h = toBf16(x);
  Bytes out(h.size() * sizeof(otcrt_bf16));
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

Floats loaded(const Bytes &x, int32_t type) {
  if (type == OTC_F32) {
    Floats out(x.size() / sizeof(float));
    std::memcpy(out.data(), x.data(), x.size());
    return out;
  }
  Bf16s h(x.size() / sizeof(otcrt_bf16));
  std::memcpy(h.data(), x.data(), x.size());
  return toFloat(h);
}

const char *routeName(GemmRoute r) {
  switch (r) {
  case GemmRoute::kCublasLt:
    return "cuBLASLt";
  case GemmRoute::kCublasLtFallback:
    return "cuBLASLt + column sums";
  case GemmRoute::kEpilogueOnly:
    return "epilogue kernel";
  case GemmRoute::kNone:
    break;
  }
  return "none";
}

/// The inputs of one case on the host, in their storage types: C NaN with
/// beta 0, the sums NaN unless they accumulate (neither is read then).
struct SumsInputs {
  Bytes a, b, c, sums;
};

SumsInputs inputs(const SumsCase &t, std::mt19937 &rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t width = t.of == OTCRT_GEMM_SUMS_A ? t.m : t.n;
  SumsInputs in;
  in.a = stored(random(std::max<int64_t>(t.m * t.k, 1), rng), t.ab);
  in.b = stored(random(std::max<int64_t>(t.k * t.n, 1), rng), t.ab);
  Floats c = random(std::max<int64_t>(t.m * t.n, 1), rng);
  if (t.beta == 0.0f)
    c.assign(c.size(), nan);
  in.c = stored(c, t.c);
  Floats sums = random(std::max<int64_t>(width, 1), rng, -4, 4);
  if (!t.accumulate)
    sums.assign(sums.size(), nan);
  in.sums = stored(sums, t.type);
  return in;
}

/// The pointers of one call over buffers a, b, c and sums (host or device).
struct SumsArgs {
  const void *a, *b;
  void *c, *sums;
};

int call(const OtcrtGemm &g, const SumsCase &t, const SumsArgs &p,
         cudaStream_t stream) {
  return otcrt_gemm_sums(&g, p.a, p.b, p.c, p.sums, t.of, t.type, t.accumulate,
                         stream);
}

/// What a case's results are compared with: the host's results, and the
/// magnitudes of their terms (|A| |B| + |beta C| per element of C, the sum
/// of |x| over the depth per sum).
struct Expected {
  int status = 0;
  Bytes c, sums;
  Floats cMagnitude, sumsMagnitude, oldSums;
};

Expected expected(const SumsCase &t, const OtcrtGemm &g, const SumsInputs &in) {
  Expected e;
  e.c = in.c;
  e.sums = in.sums;
  e.status = otcrt::cpu::gemmSums(g, in.a.data(), in.b.data(), e.c.data(),
                                  e.sums.data(), t.of, t.type, t.accumulate);
  auto magnitudes = [](const Bytes &x, int32_t type) {
    Floats v = loaded(x, type);
    for (float &f : v)
      f = std::fabs(f);
    return v;
  };
  Floats a = magnitudes(in.a, t.ab), b = magnitudes(in.b, t.ab);
  e.cMagnitude = magnitudes(in.c, t.c);
  OtcrtGemm f = g;
  f.ab_type = f.c_type = f.epilogue_type = OTC_F32;
  f.beta = std::fabs(g.beta);
  if (otcrt::cpu::gemm(f, a.data(), b.data(), e.cMagnitude.data(), nullptr,
                       nullptr, nullptr) != 0)
    e.status = 1;
  const bool ofA = t.of == OTCRT_GEMM_SUMS_A;
  const int64_t width = ofA ? t.m : t.n;
  const Floats &x = ofA ? a : b;
  e.sumsMagnitude.assign(std::max<int64_t>(width, 1), 0.0f);
  for (int64_t k = 0; k < t.k; ++k)
    for (int64_t w = 0; w < width; ++w)
      e.sumsMagnitude[w] += x[k * width + w];
  e.oldSums = loaded(in.sums, t.type);
  return e;
}

/// One bfloat16 unit (2^-7 of the power of two at or below |x|), 0 for 0.
double bf16Unit(double x) {
  return x == 0.0 ? 0.0 : std::ldexp(1.0, std::ilogb(x) - 7);
}

/// C against the host's: 1e-5 of its terms' magnitudes, plus for a bf16 C
/// a bfloat16 unit (2^-8 on each side) of the element and of its terms.
void compareC(Check &c, const Bytes &got, const Expected &e, int32_t type) {
  Floats g = loaded(got, type), w = loaded(e.c, type);
  for (size_t i = 0; i < g.size() && c.ok; ++i) {
    double mag = e.cMagnitude[i], err = std::fabs(double(g[i]) - w[i]);
    double bound = 1e-5 * mag + 1e-30;
    if (type == OTC_BF16)
      bound += std::ldexp(std::fabs(g[i]) + std::fabs(w[i]) + mag, -8);
    c.worst = std::max(c.worst, err);
    if (!(err <= bound)) {
      std::printf("  C[%zu]: gpu %.8g cpu %.8g (bound %.3g)\n", i, g[i], w[i],
                  bound);
      c.ok = false;
    }
  }
}

/// The sums against the host's: 1e-5 of the magnitudes of their terms (the
/// old sum's too), plus for bf16 sums one bfloat16 unit.
void compareSums(Check &c, const Bytes &got, const Expected &e, int32_t type,
                 int64_t width, bool accumulate) {
  Floats g = loaded(got, type), w = loaded(e.sums, type);
  for (int64_t i = 0; i < width && c.ok; ++i) {
    double mag = e.sumsMagnitude[i] +
                 (accumulate ? std::fabs(double(e.oldSums[i])) : 0.0);
    double err = std::fabs(double(g[i]) - w[i]);
    double bound = 1e-5 * mag + 1e-30;
    if (type == OTC_BF16)
      bound += bf16Unit(std::max(std::fabs(g[i]), std::fabs(w[i])));
    c.worst = std::max(c.worst, err);
    if (!(err <= bound)) {
      std::printf("  sums[%lld]: gpu %.8g cpu %.8g (bound %.3g)\n",
                  static_cast<long long>(i), g[i], w[i], bound);
      c.ok = false;
    }
  }
}

/// One case against the host's: on the route cuBLASLt takes, then with the
/// fallback forced; each route's second call repeats its first's bits.
void testSums(const SumsCase &t, std::mt19937 &rng) {
  const OtcrtGemm g = descriptor(t);
  const SumsInputs in = inputs(t, rng);
  const Expected want = expected(t, g, in);
  const int64_t width = t.of == OTCRT_GEMM_SUMS_A ? t.m : t.n;
  const bool product = t.m > 0 && t.n > 0 && t.k > 0;
  for (int forced = 0; forced < (product ? 2 : 1); ++forced) {
    otcrt::cuda::forceGemmEpilogueFallback(forced != 0);
    Check c("gemm_sums " + nameOf(t) + (forced ? ", fallback forced" : ""));
    c.rc(want.status, "host");
    const size_t sumsBytes = t.type == OTC_BF16 ? 2 : 4;
    SumsArgs d = {device(in.a), device(in.b), device(in.c),
                  device(in.sums, t.skew * sumsBytes)};
    c.rc(call(g, t, d, nullptr), "first call");
    const GemmRoute route = otcrt::cuda::lastGemmRoute();
    c.name += std::string(" [") + routeName(route) + "]";
    if (product && (forced ? route != GemmRoute::kCublasLtFallback
                           : route != GemmRoute::kCublasLt &&
                                 route != GemmRoute::kCublasLtFallback)) {
      std::printf("  not the route expected\n");
      c.ok = false;
    }
    char *dC = static_cast<char *>(d.c), *dSums = static_cast<char *>(d.sums);
    const Bytes firstC = host(dC, in.c.size()),
                firstSums = host(dSums, in.sums.size());
    if (t.m > 0 && t.n > 0)
      compareC(c, firstC, want, t.c);
    compareSums(c, firstSums, want, t.type, width, t.accumulate != 0);
    // The route again, from the same inputs: the same bits, no allocation.
    cudaMemcpy(dC, in.c.data(), in.c.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dSums, in.sums.data(), in.sums.size(), cudaMemcpyHostToDevice);
    allocatesNothing(c.ok,
                     [&] { c.rc(call(g, t, d, nullptr), "second call"); });
    if (otcrt::cuda::lastGemmRoute() != route ||
        host(dC, in.c.size()) != firstC ||
        host(dSums, in.sums.size()) != firstSums) {
      std::printf("  the second call differs from the first\n");
      c.ok = false;
    }
  }
  otcrt::cuda::forceGemmEpilogueFallback(false);
}

/// Every combination at a small odd shape (K 70, M 24, N 40).
std::vector<SumsCase> smallCases() {
  std::vector<SumsCase> cs;
  const std::pair<int32_t, int32_t> types[] = {
      {OTC_F32, OTC_F32}, {OTC_BF16, OTC_F32}, {OTC_BF16, OTC_BF16}};
  for (int32_t of : {OTCRT_GEMM_SUMS_A, OTCRT_GEMM_SUMS_B})
    for (auto [ab, c] : types)
      for (int32_t type : {OTC_F32, OTC_BF16})
        for (int accumulate : {0, 1})
          for (float beta : {0.0f, 1.0f})
            cs.push_back({ab, c, of, type, accumulate, beta, 24, 40, 70,
                          beta != 0.0f ? 1 : 0});
  return cs;
}

/// Calls of every route (cuBLASLt's epilogue into the sums and into the
/// scratch, forced fallbacks straight into the sums, into them and through
/// the scratch) run eagerly on a stream; their outputs reset, then
/// captured in a CUDA graph and replayed once: the eager bits. A sums shape
/// no call has run is refused inside the capture (status 1, nothing
/// queued) and the capture still ends cleanly.
void testSumsGraph(std::mt19937 &rng) {
  Check c("gemm_sums graph capture");
  struct Call {
    SumsCase t;
    bool forced;
    OtcrtGemm g;
    SumsInputs in;
    SumsArgs d;
  };
  std::vector<Call> calls;
  auto add = [&](SumsCase t, bool forced) {
    Call x{t, forced, descriptor(t), inputs(t, rng), {}};
    x.d = {device(x.in.a), device(x.in.b), device(x.in.c), device(x.in.sums)};
    calls.push_back(std::move(x));
  };
  for (bool forced : {false, true}) {
    add({OTC_BF16, OTC_BF16, OTCRT_GEMM_SUMS_A, OTC_BF16, 1, 1.0f, 48, 80, 96},
        forced);
    add({OTC_F32, OTC_F32, OTCRT_GEMM_SUMS_B, OTC_F32, 0, 0.0f, 40, 24, 70},
        forced);
    add({OTC_BF16, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_F32, 1, 1.0f, 24, 40, 70},
        forced);
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  auto runAll = [&]() {
    int status = 0;
    for (const Call &x : calls) {
      otcrt::cuda::forceGemmEpilogueFallback(x.forced);
      status |= call(x.g, x.t, x.d, stream);
    }
    otcrt::cuda::forceGemmEpilogueFallback(false);
    return status;
  };
  c.rc(runAll(), "eager");
  cudaStreamSynchronize(stream);
  std::vector<std::pair<Bytes, Bytes>> eager;
  for (const Call &x : calls) {
    char *dC = static_cast<char *>(x.d.c),
         *dSums = static_cast<char *>(x.d.sums);
    eager.emplace_back(host(dC, x.in.c.size()), host(dSums, x.in.sums.size()));
    cudaMemcpy(dC, x.in.c.data(), x.in.c.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dSums, x.in.sums.data(), x.in.sums.size(),
               cudaMemcpyHostToDevice);
  }
  cudaDeviceSynchronize();
  SumsCase fresh{OTC_F32, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_F32, 0, 0.0f, 17,
                 24,      40};
  OtcrtGemm g = descriptor(fresh);
  SumsInputs in = inputs(fresh, rng);
  SumsArgs d = {device(in.a), device(in.b), device(in.c), device(in.sums)};
  cudaError_t err = captureAndReplay(
      stream,
      [&] {
        c.rc(runAll(), "captured");
        if (call(g, fresh, d, stream) == 0 ||
            otcrt::cuda::lastGemmRoute() != GemmRoute::kNone) {
          std::printf(
              "  a shape first seen inside the capture was not refused\n");
          c.ok = false;
        }
      },
      1);
  if (err != cudaSuccess) {
    std::printf("  %s\n", cudaGetErrorString(err));
    c.ok = false;
  } else {
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call &x = calls[i];
      if (host(static_cast<char *>(x.d.c), x.in.c.size()) != eager[i].first ||
          host(static_cast<char *>(x.d.sums), x.in.sums.size()) !=
              eager[i].second) {
        std::printf("  %s%s: the replay differs from the eager call\n",
                    nameOf(x.t).c_str(), x.forced ? " (forced)" : "");
        c.ok = false;
      }
    }
  }
  cudaStreamDestroy(stream);
}

} // namespace

void testGemmSums(std::mt19937 &rng) {
  for (const SumsCase &t : smallCases())
    testSums(t, rng);
  // A GPT-2-sized weight gradient (K 2048 tokens, width 768, 3072 wide),
  // with its bias's gradient: dW = dY^T X and the sums of dY (A), or the
  // transposed product and the sums of B.
  testSums({OTC_BF16, OTC_BF16, OTCRT_GEMM_SUMS_A, OTC_BF16, 1, 1.0f, 768, 3072,
            2048},
           rng);
  testSums(
      {OTC_BF16, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_F32, 1, 1.0f, 3072, 768, 2048},
      rng);
  testSums({OTC_BF16, OTC_BF16, OTCRT_GEMM_SUMS_B, OTC_F32, 0, 0.0f, 768, 3072,
            2048},
           rng);
  testSums(
      {OTC_F32, OTC_F32, OTCRT_GEMM_SUMS_B, OTC_BF16, 0, 1.0f, 3072, 768, 2048},
      rng);
  // Sums off 16-byte alignment (routes of their own).
  testSums(
      {OTC_F32, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_F32, 0, 0.0f, 24, 40, 70, 0, 1},
      rng);
  testSums({OTC_BF16, OTC_BF16, OTCRT_GEMM_SUMS_B, OTC_BF16, 1, 1.0f, 24, 40,
            70, 1, 1},
           rng);
  // Depth 0 (C = beta C, the sums 0 or kept) and an empty product (N 0:
  // the sums of A alone).
  testSums(
      {OTC_BF16, OTC_BF16, OTCRT_GEMM_SUMS_B, OTC_BF16, 1, 1.0f, 24, 40, 0},
      rng);
  testSums({OTC_F32, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_F32, 0, 0.0f, 24, 40, 0},
           rng);
  testSums({OTC_BF16, OTC_F32, OTCRT_GEMM_SUMS_A, OTC_BF16, 1, 0.0f, 24, 0, 70},
           rng);
  testSumsGraph(rng);
}

} // namespace cudatest
