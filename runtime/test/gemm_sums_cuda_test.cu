// GPU check of otcrt_gemm_sums on the cuda target (cuda/gemm_sums.cpp)
// against the host's (otcrt::cpu::gemmSums, compiled in), same inputs: the
// sums of A and of B; f32 operands (any float, not only bfloat16's, so that
// a TF32 product shows) into f32, bf16 into f32 and bf16 into bf16; f32 and
// bf16 sums, written (starting as NaN, never read) and added to known
// nonzero values; beta 0 (C starting as NaN) and 1; a small odd shape (every
// combination of summed operand, the other operand's transpose, beta, types
// and accumulation), a GPT-2-sized weight gradient (K 2048 tokens, 768 x
// 3072), and the layout the compiler emits (the sums of A, trans_a 1,
// trans_b 0, beta 1, the sums accumulated) at depths and widths cuBLASLt
// may split or tile narrowly (64 x 64 x 32768, 10 x 768 x 8192, M 1 and
// M 17), each on the route cuBLASLt takes (its bias-gradient epilogue where
// it has one) and again with the fallback forced (the plain product and the
// runtime's column sums). Each route is called three times: a first call
// against the host's; a second repeating its bits without allocating; a
// third on new C and sums (same alignments, so the same route) with other
// inputs, the sums' FP32 scratch NaN before it, against the host's again,
// which a route that kept a pointer or a value of its first call fails. C
// and the sums end in guard elements that must keep their marker, and a
// device synchronization after every call must find no error. cuBLASLt's
// epilogue is required where its header documents it (f32 operands, C and
// sums: the bias gradient of the output's type) in the weight-gradient
// layouts (trans_a 1, trans_b 0; rows of 16 bytes, sums aligned); the
// routes of every combination are counted and printed (a bf16 C with f32
// sums, an FP32 bias gradient beside a bf16 D, which the header does not
// document, is not required). Also: the layout the compiler emits with
// tuning on (C = C + AB once, the sums added once); sums off their
// alignment; depth 0 and an empty product; calls of every route captured
// in a CUDA graph replaying to the eager bits, and a shape first seen
// inside the capture refused without breaking it. C is compared within
// FP32's error bound of a sum of K products in another order (1e-5 of the
// sum of their magnitudes), a bf16 C within one bfloat16 unit of the larger
// result more (each side rounds its FP32 value once); with beta 1, a bf16 C
// beyond that but within a bfloat16 unit of the product is counted and
// printed, not failed (cuBLASLt was seen rounding the product before it
// adds beta C: gemm_cuda_test.cu's compareLinearBf16). The sums are
// compared within 1e-5 of the sum of their terms' magnitudes, bf16 sums
// within one bfloat16 unit more (a sum that rounds the other way).
#include "cpu/kernels_cpu.h"
#include "cuda/gemm.h"
#include "cuda/scratch.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"

#include <array>
#include <cstring>
#include <limits>
#include <map>

namespace cudatest {
namespace {

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
  /// With the timing of a new shape's algorithms on (setGemmTuning).
  bool tuned = false;
};

const char *typeName(int32_t t) { return t == OTC_BF16 ? "bf16" : "f32"; }

size_t bytesOf(int32_t t) { return t == OTC_BF16 ? 2 : 4; }

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

std::string nameOf(const SumsCase &t) {
  const OtcrtGemm g = descriptor(t);
  return std::string("sums of ") + (t.of == OTCRT_GEMM_SUMS_A ? "A" : "B") +
         ", " + typeName(t.ab) + "->" + typeName(t.c) + ", " +
         typeName(t.type) + " sums, accumulate " +
         std::to_string(t.accumulate) + ", beta " +
         std::to_string(static_cast<int>(t.beta)) + ", " + std::to_string(t.m) +
         "x" + std::to_string(t.n) + "x" + std::to_string(t.k) + ", trans_a " +
         std::to_string(g.trans_a) + " trans_b " + std::to_string(g.trans_b) +
         (t.skew ? " (sums skewed)" : "") + (t.tuned ? ", tuned" : "");
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

/// n random values in [lo, hi) to store as `type`: any float for f32,
/// bfloat16's for bf16 (stored exactly).
Floats valuesOf(int32_t type, int64_t n, std::mt19937 &rng, float lo = -1,
                float hi = 1) {
  const size_t count = static_cast<size_t>(std::max<int64_t>(n, 1));
  return type == OTC_F32 ? randomFull(count, rng, lo, hi)
                         : random(count, rng, lo, hi);
}

/// The inputs of one case on the host, in their storage types: C NaN with
/// beta 0, the sums NaN unless they accumulate (neither is read then). C
/// spans about the product's spread (sqrt(K) / 3, at least 1), so that an
/// added or dropped beta C shows in a bf16 C.
struct SumsInputs {
  Bytes a, b, c, sums;
};

SumsInputs inputs(const SumsCase &t, std::mt19937 &rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t width = t.of == OTCRT_GEMM_SUMS_A ? t.m : t.n;
  const float spread =
      std::max(1.0f, std::sqrt(static_cast<float>(t.k)) / 3.0f);
  SumsInputs in;
  in.a = stored(valuesOf(t.ab, t.m * t.k, rng), t.ab);
  in.b = stored(valuesOf(t.ab, t.k * t.n, rng), t.ab);
  Floats c = valuesOf(t.c, t.m * t.n, rng, -spread, spread);
  if (t.beta == 0.0f)
    c.assign(c.size(), nan);
  in.c = stored(c, t.c);
  Floats sums = valuesOf(t.type, width, rng, -4, 4);
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

/// Elements after C and after the sums on the device, each byte
/// kGuardByte: a call writing past either end changes them.
constexpr size_t kGuardElements = 64;
constexpr char kGuardByte = '\xa5';

/// A device copy of `x` (elements of `elementBytes`), `skew` elements past
/// its allocation's alignment, followed by kGuardElements guard elements.
char *guarded(const Bytes &x, size_t elementBytes, size_t skew = 0) {
  Bytes withGuard = x;
  withGuard.resize(x.size() + kGuardElements * elementBytes, kGuardByte);
  return device(withGuard, skew * elementBytes);
}

/// Whether the guard elements after the `bytes` bytes at `d` are intact.
bool guardIntact(const void *d, size_t bytes, size_t elementBytes) {
  const Bytes after =
      host(static_cast<const char *>(d) + bytes, kGuardElements * elementBytes);
  return std::all_of(after.begin(), after.end(),
                     [](char x) { return x == kGuardByte; });
}

/// A case's inputs on the device: C and the sums guarded, the sums
/// t.skew elements off their allocation's alignment.
SumsArgs onDevice(const SumsCase &t, const SumsInputs &in) {
  return {device(in.a), device(in.b), guarded(in.c, bytesOf(t.c)),
          guarded(in.sums, bytesOf(t.type), t.skew)};
}

/// After a call on `d` (of inputs `in`): the device synchronized with no
/// error, and the guards after C and the sums intact.
void afterCall(Check &c, const SumsCase &t, const SumsInputs &in,
               const SumsArgs &d, const char *what) {
  cudaError_t err = cudaDeviceSynchronize();
  const cudaError_t last = cudaGetLastError();
  if (err == cudaSuccess)
    err = last;
  if (err != cudaSuccess) {
    std::printf("  %s: %s: %s\n", c.name.c_str(), what,
                cudaGetErrorString(err));
    c.ok = false;
    return;
  }
  if (!guardIntact(d.c, in.c.size(), bytesOf(t.c))) {
    std::printf("  %s: %s wrote past the end of C\n", c.name.c_str(), what);
    c.ok = false;
  }
  if (!guardIntact(d.sums, in.sums.size(), bytesOf(t.type))) {
    std::printf("  %s: %s wrote past the end of the sums\n", c.name.c_str(),
                what);
    c.ok = false;
  }
}

/// Fills the FP32 scratch that a call of the case reads its sums from
/// (scratch.h's GemmSums: sums that are bf16 or accumulated, gemm_sums.cpp)
/// with NaN, as another call's sums would leave it; the call that ran the
/// case's shape got it, so nothing is allocated.
void poisonSumsScratch(const SumsCase &t, int64_t width) {
  if ((t.type == OTC_F32 && t.accumulate == 0) || t.k == 0 || width == 0)
    return;
  const size_t bytes = static_cast<size_t>(width) * sizeof(float);
  char *s =
      otcrt::cuda::scratch(otcrt::cuda::ScratchUse::GemmSums, bytes, nullptr);
  if (s)
    cudaMemset(s, 0xff, bytes); // 0xffffffff: a NaN
  cudaDeviceSynchronize();
}

/// What a case's results are compared with: the host's results, and the
/// magnitudes of their terms (|A| |B| + |beta C| per element of C, the sum
/// of |x| over the depth per sum).
struct Expected {
  int status = 0;
  Bytes c, sums;
  Floats cMagnitude, sumsMagnitude, oldSums;
  /// A bf16 C with beta != 0: per element, one bfloat16 unit of a bound
  /// of the product's magnitude (|C| + |beta C_in|, a rounding's worth
  /// larger), what rounding the product to bf16 before adding beta C may
  /// add; else empty.
  Floats productRounding;
};

/// One bfloat16 unit (2^-7 of the power of two at or below |x|), 0 for 0.
double bf16Unit(double x) {
  return x == 0.0 ? 0.0 : std::ldexp(1.0, std::ilogb(x) - 7);
}

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
  if (t.c == OTC_BF16 && g.beta != 0.0f) {
    const Floats w = loaded(e.c, t.c), cIn = loaded(in.c, t.c);
    e.productRounding.resize(w.size());
    for (size_t i = 0; i < w.size(); ++i)
      e.productRounding[i] = static_cast<float>(
          bf16Unit((std::fabs(double(w[i])) + std::fabs(g.beta * cIn[i])) *
                   (1.0 + 1.0 / 128)));
  }
  return e;
}

/// C against the host's: 1e-5 of its terms' magnitudes (FP32 sums of the
/// same products in another order), plus for a bf16 C one bfloat16 unit of
/// the larger of the two (each rounds its FP32 value once). An element of
/// a bf16 C with beta != 0 beyond that but within e.productRounding more
/// is counted (the count returned), not failed.
size_t compareC(Check &c, const Bytes &got, const Expected &e, int32_t type) {
  Floats g = loaded(got, type), w = loaded(e.c, type);
  size_t beyond = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double mag = e.cMagnitude[i], err = std::fabs(double(g[i]) - w[i]);
    double bound = 1e-5 * mag + 1e-30;
    if (type == OTC_BF16)
      bound += bf16Unit(std::fmax(std::fabs(g[i]), std::fabs(w[i])));
    c.worst = std::max(c.worst, err);
    if (std::isfinite(err) && err <= bound)
      continue;
    if (std::isfinite(err) && !e.productRounding.empty() &&
        err <= bound + e.productRounding[i]) {
      ++beyond;
      continue;
    }
    std::printf("  C[%zu]: gpu %.8g cpu %.8g (bound %.3g)\n", i, g[i], w[i],
                bound);
    c.ok = false;
    break;
  }
  return beyond;
}

/// The sums against the host's: 1e-5 of the magnitudes of their terms (the
/// old sum's too), plus for bf16 sums one bfloat16 unit.
void compareSums(Check &c, const Bytes &got, const Expected &e, int32_t type,
                 int64_t width, bool accumulate) {
  Floats g = loaded(got, type), w = loaded(e.sums, type);
  for (int64_t i = 0; i < width; ++i) {
    double mag = e.sumsMagnitude[i] +
                 (accumulate ? std::fabs(double(e.oldSums[i])) : 0.0);
    double err = std::fabs(double(g[i]) - w[i]);
    double bound = 1e-5 * mag + 1e-30;
    if (type == OTC_BF16)
      bound += bf16Unit(std::fmax(std::fabs(g[i]), std::fabs(w[i])));
    c.worst = std::max(c.worst, err);
    if (!std::isfinite(err) || !(err <= bound)) {
      std::printf("  sums[%lld]: gpu %.8g cpu %.8g (bound %.3g)\n",
                  static_cast<long long>(i), g[i], w[i], bound);
      c.ok = false;
      break;
    }
  }
}

/// Routes of the products run without the fallback forced, per operand, C
/// and sums type; and the elements of a bf16 C beyond one rounding
/// (compareC), with the calls they were in.
struct RouteCount {
  int cublasLt = 0, declined = 0;
};
std::map<std::array<int32_t, 3>, RouteCount> routeCounts;
size_t cBeyondOneRounding = 0;
int callsBeyondOneRounding = 0;

/// Whether a case must take cuBLASLt's epilogue: the combination its header
/// documents (f32 operands and C, and the bias gradient of the output's
/// type: sums formed in f32, here f32 sums), in the weight-gradient layouts
/// (trans_a 1, trans_b 0: the sums of A, or of B), on rows of 16 bytes and
/// sums on their allocation's alignment (cuBLASLt may decline narrower
/// alignments; those cases print their route).
bool cublasLtRequired(const SumsCase &t) {
  const OtcrtGemm g = descriptor(t);
  return t.ab == OTC_F32 && t.c == OTC_F32 && t.type == OTC_F32 &&
         g.trans_a == 1 && g.trans_b == 0 && t.skew == 0 && t.m > 0 &&
         t.n > 0 && t.k > 0 && t.m % 4 == 0 && t.n % 4 == 0;
}

/// The route of a product (M, N and K positive): the fallback when it is
/// forced; else either, counted, and cuBLASLt's epilogue where required.
void checkRoute(Check &c, const SumsCase &t, bool forced, GemmRoute route) {
  if (forced) {
    if (route != GemmRoute::kCublasLtFallback) {
      std::printf("  not the fallback forced\n");
      c.ok = false;
    }
    return;
  }
  if (route != GemmRoute::kCublasLt && route != GemmRoute::kCublasLtFallback) {
    std::printf("  not a route of a product\n");
    c.ok = false;
    return;
  }
  RouteCount &n = routeCounts[{t.ab, t.c, t.type}];
  ++(route == GemmRoute::kCublasLt ? n.cublasLt : n.declined);
  if (route != GemmRoute::kCublasLt && cublasLtRequired(t)) {
    std::printf("  cuBLASLt declined its bias-gradient epilogue where its "
                "header documents it (f32 operands, C and sums)\n");
    c.ok = false;
  }
}

/// A call's C and sums (copied back) against `e`; the elements of C beyond
/// one rounding added to `beyond`.
void compareCall(Check &c, const SumsCase &t, const SumsInputs &in,
                 const SumsArgs &d, const Expected &e, size_t &beyond) {
  const int64_t width = t.of == OTCRT_GEMM_SUMS_A ? t.m : t.n;
  if (t.m > 0 && t.n > 0)
    beyond += compareC(c, host(static_cast<char *>(d.c), in.c.size()), e, t.c);
  compareSums(c, host(static_cast<char *>(d.sums), in.sums.size()), e, t.type,
              width, t.accumulate != 0);
}

/// One case against the host's: on the route cuBLASLt takes, then with the
/// fallback forced. Each route's second call repeats its first's bits
/// without allocating; its third, on new buffers with other inputs and the
/// FP32 scratch NaN, matches the host's again on the same route.
void testSums(const SumsCase &t, std::mt19937 &rng) {
  const OtcrtGemm g = descriptor(t);
  const SumsInputs in = inputs(t, rng), other = inputs(t, rng);
  const Expected want = expected(t, g, in), wantOther = expected(t, g, other);
  const int64_t width = t.of == OTCRT_GEMM_SUMS_A ? t.m : t.n;
  const bool product = t.m > 0 && t.n > 0 && t.k > 0;
  if (t.tuned)
    otcrt::cuda::setGemmTuning(true);
  for (int forced = 0; forced < (product ? 2 : 1); ++forced) {
    otcrt::cuda::forceGemmEpilogueFallback(forced != 0);
    Check c("gemm_sums " + nameOf(t) + (forced ? ", fallback forced" : ""));
    c.rc(want.status, "host");
    c.rc(wantOther.status, "host, other inputs");
    const SumsArgs d = onDevice(t, in);
    c.rc(call(g, t, d, nullptr), "first call");
    const GemmRoute route = otcrt::cuda::lastGemmRoute();
    afterCall(c, t, in, d, "first call");
    c.name += std::string(" [") + routeName(route) + "]";
    if (product)
      checkRoute(c, t, forced != 0, route);
    size_t beyond = 0;
    compareCall(c, t, in, d, want, beyond);
    // The route again, from the same inputs: the same bits, no allocation.
    char *dC = static_cast<char *>(d.c), *dSums = static_cast<char *>(d.sums);
    const Bytes firstC = host(dC, in.c.size()),
                firstSums = host(dSums, in.sums.size());
    cudaMemcpy(dC, in.c.data(), in.c.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dSums, in.sums.data(), in.sums.size(), cudaMemcpyHostToDevice);
    GemmRoute again = GemmRoute::kNone;
    allocatesNothing(c.ok, [&] {
      c.rc(call(g, t, d, nullptr), "second call");
      again = otcrt::cuda::lastGemmRoute();
    });
    afterCall(c, t, in, d, "second call");
    if (again != route || host(dC, in.c.size()) != firstC ||
        host(dSums, in.sums.size()) != firstSums) {
      std::printf("  the second call differs from the first\n");
      c.ok = false;
    }
    // New C and sums (and operands) of the same alignments, other values,
    // the FP32 scratch NaN: the same route, from this call's pointers.
    poisonSumsScratch(t, width);
    const SumsArgs fresh = onDevice(t, other);
    allocatesNothing(c.ok, [&] {
      c.rc(call(g, t, fresh, nullptr), "call on new buffers");
      again = otcrt::cuda::lastGemmRoute();
    });
    afterCall(c, t, other, fresh, "call on new buffers");
    if (again != route) {
      std::printf("  the call on new buffers took another route (%s)\n",
                  routeName(again));
      c.ok = false;
    }
    compareCall(c, t, other, fresh, wantOther, beyond);
    if (beyond > 0) {
      std::printf("  %zu element(s) of C beyond one rounding of AB + beta C, "
                  "within a rounding of AB before it (counted, not failed)\n",
                  beyond);
      cBeyondOneRounding += beyond;
      ++callsBeyondOneRounding;
    }
  }
  otcrt::cuda::forceGemmEpilogueFallback(false);
  if (t.tuned)
    otcrt::cuda::setGemmTuning(false);
}

/// Every combination at a small odd shape (K 70, M 24, N 40): each summed
/// operand, each transpose of the other, types, sums type, accumulation
/// and beta (among them the call the compiler emits for an FP32 program:
/// the sums of A, trans_a 1, trans_b 0, beta 1, f32 sums accumulated).
std::vector<SumsCase> smallCases() {
  std::vector<SumsCase> cs;
  const std::pair<int32_t, int32_t> types[] = {
      {OTC_F32, OTC_F32}, {OTC_BF16, OTC_F32}, {OTC_BF16, OTC_BF16}};
  for (int32_t of : {OTCRT_GEMM_SUMS_A, OTCRT_GEMM_SUMS_B})
    for (auto [ab, c] : types)
      for (int32_t type : {OTC_F32, OTC_BF16})
        for (int accumulate : {0, 1})
          for (float beta : {0.0f, 1.0f})
            for (int otherTrans : {0, 1})
              cs.push_back(
                  {ab, c, of, type, accumulate, beta, 24, 40, 70, otherTrans});
  return cs;
}

/// The routes counted by checkRoute, one line per combination; the bf16 C
/// with f32 sums (undocumented in cuBLASLt) and the elements of a bf16 C
/// beyond one rounding, a line each (not failures: what a GPU run learns).
void printRouteCounts() {
  for (const auto &[types, n] : routeCounts)
    std::printf("gemm_sums routes: %s operands, %s C, %s sums: %d on "
                "cuBLASLt's epilogue, %d declined (plain product + column "
                "sums)\n",
                typeName(types[0]), typeName(types[1]), typeName(types[2]),
                n.cublasLt, n.declined);
  RouteCount bf16C;
  auto found = routeCounts.find({OTC_BF16, OTC_BF16, OTC_F32});
  if (found != routeCounts.end())
    bf16C = found->second;
  std::printf("gemm_sums: bf16 C with f32 sums (an FP32 bias-gradient vector "
              "beside a bf16 D, which cuBLASLt's header does not document): "
              "%d case(s) took cuBLASLt's epilogue, %d were declined (not a "
              "failure)\n",
              bf16C.cublasLt, bf16C.declined);
  std::printf("gemm_sums: bf16 C with beta 1: %zu element(s) in %d call(s) "
              "beyond one rounding of AB + beta C, within a rounding of AB "
              "before it (not a failure)\n",
              cBeyondOneRounding, callsBeyondOneRounding);
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
  // The layout the compiler emits (dW = dY^T X beside db, the sums of dY:
  // trans_a 1, trans_b 0, C and the sums accumulated), bf16 throughout and
  // f32 throughout, at depths cuBLASLt may split (32768, 8192) and widths
  // that tile narrowly (M 10, 1 and 17).
  const std::array<int64_t, 3> shapes[] = {
      {64, 64, 32768}, {10, 768, 8192}, {1, 64, 4096}, {17, 40, 2048}};
  for (int32_t type : {OTC_BF16, OTC_F32})
    for (const auto &[m, n, k] : shapes)
      testSums({type, type, OTCRT_GEMM_SUMS_A, type, 1, 1.0f, m, n, k}, rng);
  // The same layout with tuning on, at a shape no other case has (its
  // algorithms timed on its first call, into a temporary result: C must
  // hold C + AB once, the sums their old values plus the new once).
  for (int32_t type : {OTC_BF16, OTC_F32}) {
    SumsCase t{type, type, OTCRT_GEMM_SUMS_A, type, 1, 1.0f, 96, 320, 512};
    t.tuned = true;
    testSums(t, rng);
  }
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
  printRouteCounts();
}

} // namespace cudatest
