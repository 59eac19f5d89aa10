// GPU check of otcrt_gemm on the cuda target (cuda/gemm_cublaslt.cpp)
// against the host GEMM (otcrt::cpu::gemm, compiled in): every epilogue and
// type combination the code generator emits (f32; bf16 into f32, plain;
// bf16 into bf16: plain with beta 0 and 1, batched, bias, addend with and
// without a bias, GELU with and without a bias, dGELU) on the route cuBLASLt
// takes and again with the fallback epilogue forced (cuBLASLt's plain
// product and the runtime's epilogue kernel), a second call of each route
// repeating the first bit for bit; products of depth 0 (the epilogue kernel
// alone); an aux leading dimension cuBLASLt cannot take and a dGELU writing
// over its aux (fallbacks of their own); GEMMs of every route captured in a
// CUDA graph replaying to the eager bits; a shape first seen inside a
// capture refused without breaking it; bad descriptors refused with nothing
// written. f32 results agree within float tolerance (3e-4 relative; GELU's
// within 2e-3, since cuBLASLt's GELU may use a faster tanh), bf16 ones
// of a linear epilogue within a bfloat16 unit of the element and of its
// terms' magnitudes (compareLinearBf16), GELU's within a couple of bfloat16
// units.
#include "cpu/kernels_cpu.h"
#include "cuda/gemm.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"

#include <cstring>

namespace cudatest {
namespace {

using otcrt::cuda::GemmRoute;

/// One call: types, epilogue, transposes, sizes.
struct GemmCase {
  std::string name;
  int32_t ab, c, epilogue;
  bool bias;
  int ta, tb;
  int64_t m, n, k, batch;
  float alpha, beta;
  /// dGELU only: C is the aux buffer it reads.
  bool auxIsC = false;
};

OtcrtGemm descriptor(const GemmCase &tc) {
  OtcrtGemm g;
  g.trans_a = tc.ta;
  g.trans_b = tc.tb;
  g.m = tc.m;
  g.n = tc.n;
  g.k = tc.k;
  g.batch = tc.batch;
  g.alpha = tc.alpha;
  g.beta = tc.beta;
  g.ab_type = tc.ab;
  g.c_type = g.epilogue_type = tc.c;
  g.epilogue = tc.epilogue;
  g.lda = std::max<int64_t>(1, tc.ta ? tc.m : tc.k);
  g.ldb = std::max<int64_t>(1, tc.tb ? tc.k : tc.n);
  g.ldc = tc.n;
  g.stride_a = tc.batch > 1 ? tc.m * tc.k : 0;
  g.stride_b = tc.batch > 1 ? tc.k * tc.n : 0;
  g.stride_c = tc.m * tc.n;
  return g;
}

const char *routeName(GemmRoute r) {
  switch (r) {
  case GemmRoute::kCublasLt:
    return "cuBLASLt";
  case GemmRoute::kCublasLtFallback:
    return "cuBLASLt + epilogue kernel";
  case GemmRoute::kEpilogueOnly:
    return "epilogue kernel";
  case GemmRoute::kNone:
    break;
  }
  return "none";
}

/// The inputs of one case on the host, in their storage types.
struct GemmInputs {
  Bytes a, b, c, bias, addend, aux;
};

GemmInputs inputs(const GemmCase &tc, std::mt19937 &rng) {
  const size_t nc = tc.batch * tc.m * tc.n;
  GemmInputs in;
  in.a =
      stored(random(std::max<int64_t>(tc.batch * tc.m * tc.k, 1), rng), tc.ab);
  in.b =
      stored(random(std::max<int64_t>(tc.batch * tc.k * tc.n, 1), rng), tc.ab);
  in.c = stored(random(nc, rng), tc.c);
  in.bias = stored(random(tc.n, rng), tc.c);
  in.addend = stored(random(nc, rng), tc.c);
  in.aux = stored(random(nc, rng, -2, 2), tc.c);
  if (tc.auxIsC)
    in.c = in.aux;
  return in;
}

/// The pointer arguments of a case over the buffers a, b, c, bias, addend
/// and aux (host or device).
struct GemmArgs {
  const void *a, *b;
  void *c;
  const void *bias, *addend;
  void *aux;
};

GemmArgs args(const GemmCase &tc, const void *a, const void *b, void *c,
              const void *bias, const void *addend, void *aux) {
  bool gelu = tc.epilogue == OTCRT_GEMM_GELU || tc.epilogue == OTCRT_GEMM_DGELU;
  return {tc.k > 0 ? a : nullptr,
          tc.k > 0 ? b : nullptr,
          c,
          tc.bias ? bias : nullptr,
          tc.epilogue == OTCRT_GEMM_ADD ? addend : nullptr,
          gelu ? (tc.auxIsC ? c : aux) : nullptr};
}

/// Compares a result of storage `type` with the host's.
void compare(Check &c, const Bytes &got, const Bytes &want, int32_t type,
             double tol, const char *what) {
  if (type == OTC_F32) {
    c.f32(loaded(got, type), loaded(want, type), what, tol);
    return;
  }
  Floats g = loaded(got, type), w = loaded(want, type);
  c.bf16(toBf16(g), toBf16(w), what);
}

/// `x` (stored as `type`) with every element's sign dropped.
Bytes magnitudes(const Bytes &x, int32_t type) {
  Floats v = loaded(x, type);
  for (float &e : v)
    e = std::fabs(e);
  return stored(v, type);
}

/// A bfloat16 C of a linear epilogue (none, bias, addend) against the
/// host's, element by element within the classic bound of a product that
/// may round where the host does not: a bfloat16 unit (2^-8) of the
/// element's own size on each side, plus one of the size of its terms,
/// |alpha| |A| |B| + |beta| |C| + |bias| + |addend| (the host's GEMM of the
/// magnitudes), for a library that rounds the product to bfloat16 before it
/// adds beta C (cuBLASLt does, for a bfloat16 C: a sum that cancels to a
/// small value then differs from the host's by several of its own units).
void compareLinearBf16(Check &c, const Bytes &got, const Bytes &want,
                       const OtcrtGemm &g, const GemmCase &tc,
                       const GemmInputs &in) {
  OtcrtGemm abs = g;
  abs.alpha = std::fabs(g.alpha);
  abs.beta = std::fabs(g.beta);
  GemmInputs m = {magnitudes(in.a, tc.ab),      magnitudes(in.b, tc.ab),
                  magnitudes(in.c, tc.c),       magnitudes(in.bias, tc.c),
                  magnitudes(in.addend, tc.c), in.aux};
  // The magnitudes' sum all in FP32 (exact copies of the bfloat16
  // values; bfloat16 storage would round the sum).
  OtcrtGemm f = abs;
  f.ab_type = f.c_type = f.epilogue_type = OTC_F32;
  auto f32 = [](const Bytes &x, int32_t type) {
    return stored(loaded(x, type), OTC_F32);
  };
  Bytes a32 = f32(m.a, tc.ab), b32 = f32(m.b, tc.ab), out32 = f32(m.c, tc.c),
        bias32 = f32(m.bias, tc.c), addend32 = f32(m.addend, tc.c);
  GemmArgs h = args(tc, a32.data(), b32.data(), out32.data(), bias32.data(),
                    addend32.data(), m.aux.data());
  c.rc(otcrt::cpu::gemm(f, h.a, h.b, h.c, h.bias, h.addend, h.aux),
       "host magnitudes");
  Floats gv = loaded(got, tc.c), wv = loaded(want, tc.c),
         mag = loaded(out32, OTC_F32);
  for (size_t i = 0; i < gv.size() && c.ok; ++i) {
    double err = std::fabs(static_cast<double>(gv[i]) - wv[i]);
    double bound = std::ldexp(std::fabs(gv[i]) + std::fabs(wv[i]) + mag[i], -8) +
                   1e-6 * mag[i];
    c.worst = std::max(c.worst, err);
    if (!(err <= bound)) {
      std::printf("  C[%zu]: gpu %.8g cpu %.8g (bound %.3g)\n", i, gv[i], wv[i],
                  bound);
      c.ok = false;
    }
  }
}

/// One case against the host GEMM: on the route cuBLASLt takes, then with
/// the fallback forced where the call has an epilogue cuBLASLt could do.
void testGemm(const GemmCase &tc, std::mt19937 &rng) {
  const OtcrtGemm g = descriptor(tc);
  const GemmInputs in = inputs(tc, rng);
  GemmInputs want = in;
  GemmArgs h = args(tc, want.a.data(), want.b.data(), want.c.data(),
                    want.bias.data(), want.addend.data(), want.aux.data());
  int hostStatus = otcrt::cpu::gemm(g, h.a, h.b, h.c, h.bias, h.addend, h.aux);
  bool fused = tc.epilogue != OTCRT_GEMM_NONE &&
               !(tc.epilogue == OTCRT_GEMM_ADD && !tc.bias);
  bool gelu = tc.epilogue == OTCRT_GEMM_GELU || tc.epilogue == OTCRT_GEMM_DGELU;
  // FP32 sums of up to 96 products in another order (cuBLASLt may split K).
  double tol = gelu && tc.c == OTC_F32 ? 2e-3 : 3e-4;
  for (int forced = 0; forced < (fused && tc.k > 0 ? 2 : 1); ++forced) {
    otcrt::cuda::forceGemmEpilogueFallback(forced != 0);
    Check c("gemm " + tc.name + (forced ? ", fallback forced" : ""));
    c.rc(hostStatus, "host");
    char *dA = device(in.a), *dB = device(in.b), *dC = device(in.c),
         *dBias = device(in.bias), *dAddend = device(in.addend),
         *dAux = device(in.aux);
    GemmArgs d = args(tc, dA, dB, dC, dBias, dAddend, dAux);
    c.rc(otcrt_gemm(&g, d.a, d.b, d.c, d.bias, d.addend, d.aux, nullptr),
         "first call");
    c.name += std::string(" [") + routeName(otcrt::cuda::lastGemmRoute()) + "]";
    Bytes first = host(dC, in.c.size());
    Bytes firstAux = host(dAux, in.aux.size());
    bool linear = tc.epilogue != OTCRT_GEMM_GELU &&
                  tc.epilogue != OTCRT_GEMM_DGELU;
    if (tc.c == OTC_BF16 && linear)
      compareLinearBf16(c, first, want.c, g, tc, in);
    else
      compare(c, first, want.c, tc.c, tol, "C");
    if (tc.epilogue == OTCRT_GEMM_GELU)
      compare(c, firstAux, want.aux, tc.c, 1e-4, "aux");
    // The route again, from the same inputs: the same bits.
    cudaMemcpy(dC, in.c.data(), in.c.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dAux, in.aux.data(), in.aux.size(), cudaMemcpyHostToDevice);
    c.rc(otcrt_gemm(&g, d.a, d.b, d.c, d.bias, d.addend, d.aux, nullptr),
         "second call");
    if (host(dC, in.c.size()) != first ||
        host(dAux, in.aux.size()) != firstAux) {
      std::printf("  the second call's results differ from the first's\n");
      c.ok = false;
    }
  }
  otcrt::cuda::forceGemmEpilogueFallback(false);
}

/// The cases of one element type combination: every epilogue the code
/// generator emits for it.
std::vector<GemmCase> casesOf(int32_t ab, int32_t cType) {
  std::string types = std::string(ab == OTC_BF16 ? "bf16" : "f32") + "->" +
                      (cType == OTC_BF16 ? "bf16" : "f32");
  auto name = [&](const char *what) { return types + " " + what; };
  std::vector<GemmCase> cs = {
      {name("plain 70x64x48 B^T"), ab, cType, OTCRT_GEMM_NONE, false, 0, 1, 70,
       64, 48, 1, 1.0f, 0.0f},
      {name("accumulate 48x64x70 A^T"), ab, cType, OTCRT_GEMM_NONE, false, 1, 0,
       48, 64, 70, 1, 1.0f, 1.0f},
      {name("batched 3 x 33x40x24 B^T"), ab, cType, OTCRT_GEMM_NONE, false, 0,
       1, 33, 40, 24, 3, 1.0f, 0.0f},
      {name("alpha 0.5 beta 0.25 40x24x33"), ab, cType, OTCRT_GEMM_NONE, false,
       0, 0, 40, 24, 33, 1, 0.5f, 0.25f},
  };
  if (ab != cType)
    return cs; // no epilogue form for a bf16 product into f32
  const std::vector<GemmCase> epilogues = {
      {name("bias 70x96x48 B^T"), ab, cType, OTCRT_GEMM_BIAS, true, 0, 1, 70,
       96, 48, 1, 1.0f, 0.0f},
      {name("add 64x48x96"), ab, cType, OTCRT_GEMM_ADD, false, 0, 0, 64, 48, 96,
       1, 1.0f, 1.0f},
      {name("add+bias 64x48x96 B^T"), ab, cType, OTCRT_GEMM_ADD, true, 0, 1, 64,
       48, 96, 1, 1.0f, 1.0f},
      {name("gelu 64x128x32"), ab, cType, OTCRT_GEMM_GELU, false, 0, 0, 64, 128,
       32, 1, 1.0f, 0.0f},
      {name("gelu+bias 64x128x32"), ab, cType, OTCRT_GEMM_GELU, true, 0, 0, 64,
       128, 32, 1, 1.0f, 0.0f},
      {name("dgelu 64x128x32 B^T"), ab, cType, OTCRT_GEMM_DGELU, false, 0, 1,
       64, 128, 32, 1, 1.0f, 0.0f},
      // Rows of 20: cuBLASLt takes no aux leading dimension that is not a
      // multiple of 8, so these fall back on their own.
      {name("gelu+bias 24x20x16 (ldc 20)"), ab, cType, OTCRT_GEMM_GELU, true, 0,
       1, 24, 20, 16, 1, 1.0f, 0.0f},
      {name("dgelu 24x20x16 (ldc 20)"), ab, cType, OTCRT_GEMM_DGELU, false, 0,
       0, 24, 20, 16, 1, 1.0f, 0.0f},
      // C over the aux it reads: neither cuBLASLt's DGELU (it overwrites
      // aux that other tiles still read) nor an FP32 fallback writing its
      // product into C can; the product goes to the scratch buffer.
      {name("dgelu over aux 32x64x40"), ab, cType, OTCRT_GEMM_DGELU, false, 0,
       1, 32, 64, 40, 1, 1.0f, 0.0f, true},
      // Depth 0: v = 0, the epilogue kernel alone.
      {name("add+bias depth 0 8x16"), ab, cType, OTCRT_GEMM_ADD, true, 0, 0, 8,
       16, 0, 1, 1.0f, 0.5f},
      {name("gelu+bias depth 0 8x16"), ab, cType, OTCRT_GEMM_GELU, true, 0, 0,
       8, 16, 0, 1, 1.0f, 0.0f},
      {name("scale depth 0 8x16"), ab, cType, OTCRT_GEMM_NONE, false, 0, 0, 8,
       16, 0, 1, 1.0f, 0.5f},
  };
  cs.insert(cs.end(), epilogues.begin(), epilogues.end());
  return cs;
}

/// GEMMs on every route (cuBLASLt's epilogues, fallbacks into C and into
/// the scratch buffer, forced and on their own, depth 0) run eagerly on a
/// stream, then captured in a CUDA graph and replayed twice: the same bits.
/// A shape first seen inside the capture is refused (status 1, nothing
/// queued) and the capture still ends cleanly.
void testGemmGraph(std::mt19937 &rng) {
  Check c("gemm graph capture");
  struct Call {
    GemmCase tc;
    bool forced;
    OtcrtGemm g;
    GemmInputs in;
    GemmArgs d;
  };
  std::vector<Call> calls;
  auto add = [&](GemmCase tc, bool forced) {
    Call call{tc, forced, descriptor(tc), inputs(tc, rng), {}};
    GemmInputs &in = call.in;
    call.d = args(tc, device(in.a), device(in.b), device(in.c), device(in.bias),
                  device(in.addend), device(in.aux));
    calls.push_back(std::move(call));
  };
  for (int32_t t : {OTC_F32, OTC_BF16}) {
    add({"gelu+bias", t, t, OTCRT_GEMM_GELU, true, 0, 0, 64, 128, 32, 1, 1.0f,
         0.0f},
        false);
    add({"gelu+bias forced", t, t, OTCRT_GEMM_GELU, true, 0, 0, 64, 128, 32, 1,
         1.0f, 0.0f},
        true);
    add({"dgelu ldc 20", t, t, OTCRT_GEMM_DGELU, false, 0, 1, 24, 20, 16, 1,
         1.0f, 0.0f},
        false);
    add({"add+bias", t, t, OTCRT_GEMM_ADD, true, 0, 1, 64, 48, 96, 1, 1.0f,
         1.0f},
        false);
    add({"add+bias depth 0", t, t, OTCRT_GEMM_ADD, true, 0, 0, 8, 16, 0, 1,
         1.0f, 0.5f},
        false);
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  auto runAll = [&]() {
    int status = 0;
    for (const Call &call : calls) {
      otcrt::cuda::forceGemmEpilogueFallback(call.forced);
      const GemmArgs &d = call.d;
      status |=
          otcrt_gemm(&call.g, d.a, d.b, d.c, d.bias, d.addend, d.aux, stream);
    }
    otcrt::cuda::forceGemmEpilogueFallback(false);
    return status;
  };
  c.rc(runAll(), "eager");
  cudaStreamSynchronize(stream);
  std::vector<Bytes> eager;
  for (const Call &call : calls) {
    eager.push_back(host(static_cast<char *>(call.d.c), call.in.c.size()));
    cudaMemset(call.d.c, 0, call.in.c.size());
  }
  cudaDeviceSynchronize(); // the memsets, before the other stream replays
  // A shape no call has run yet, which cannot choose its algorithm inside
  // the capture (its buffers allocated before it).
  GemmCase fresh{
      "fresh", OTC_F32, OTC_F32, OTCRT_GEMM_NONE, false, 0, 1, 17, 24, 40,
      1,       1.0f,    0.0f};
  OtcrtGemm g = descriptor(fresh);
  GemmInputs in = inputs(fresh, rng);
  GemmArgs d = args(fresh, device(in.a), device(in.b), device(in.c), nullptr,
                    nullptr, nullptr);
  cudaError_t err = captureAndReplay(
      stream,
      [&] {
        c.rc(runAll(), "captured");
        if (otcrt_gemm(&g, d.a, d.b, d.c, nullptr, nullptr, nullptr, stream) ==
                0 ||
            otcrt::cuda::lastGemmRoute() != GemmRoute::kNone) {
          std::printf(
              "  a shape first seen inside the capture was not refused\n");
          c.ok = false;
        }
      },
      2);
  if (err != cudaSuccess) {
    std::printf("  %s\n", cudaGetErrorString(err));
    c.ok = false;
  } else {
    for (size_t i = 0; i < calls.size(); ++i)
      if (host(static_cast<char *>(calls[i].d.c), calls[i].in.c.size()) !=
          eager[i]) {
        std::printf("  %s (%s): the replay differs from the eager call\n",
                    calls[i].tc.name.c_str(),
                    calls[i].tc.c == OTC_F32 ? "f32" : "bf16");
        c.ok = false;
      }
  }
  cudaStreamDestroy(stream);
}

/// Descriptors that break the ABI's rules: status 1 and nothing written.
void testGemmRefusals(std::mt19937 &rng) {
  Check c("gemm bad descriptors");
  GemmCase tc{
      "gelu", OTC_BF16, OTC_BF16, OTCRT_GEMM_GELU, true, 0, 0, 16, 32, 8,
      1,      1.0f,     0.0f};
  GemmInputs in = inputs(tc, rng);
  char *dC = device(in.c), *dAux = device(in.aux);
  GemmArgs d =
      args(tc, device(in.a), device(in.b), dC, device(in.bias), nullptr, dAux);
  OtcrtGemm negative = descriptor(tc), beta = descriptor(tc),
            noAux = descriptor(tc);
  negative.k = -1;
  beta.beta = 1.0f;
  if (otcrt_gemm(&negative, d.a, d.b, d.c, d.bias, nullptr, d.aux, nullptr) ==
          0 ||
      otcrt_gemm(&beta, d.a, d.b, d.c, d.bias, nullptr, d.aux, nullptr) == 0 ||
      otcrt_gemm(&noAux, d.a, d.b, d.c, d.bias, nullptr, nullptr, nullptr) ==
          0 ||
      otcrt_gemm(nullptr, d.a, d.b, d.c, d.bias, nullptr, d.aux, nullptr) ==
          0) {
    std::printf("  a bad descriptor was accepted\n");
    c.ok = false;
  }
  if (host(dC, in.c.size()) != in.c || host(dAux, in.aux.size()) != in.aux) {
    std::printf("  a refused call wrote its output\n");
    c.ok = false;
  }
}

} // namespace

void testGemms(std::mt19937 &rng) {
  for (auto [ab, cType] :
       {std::pair{OTC_F32, OTC_F32}, std::pair{OTC_BF16, OTC_F32},
        std::pair{OTC_BF16, OTC_BF16}})
    for (const GemmCase &tc : casesOf(ab, cType))
      testGemm(tc, rng);
  // With tuning on (OTCRT_GEMM_TUNE=1: the heuristic's algorithms timed on
  // a shape's first call), at sizes no other case has, so that their
  // routes are new: a product into C, one that adds into C (timed into a
  // temporary result: C must hold C + AB once) and GELU's epilogue with a
  // bias.
  otcrt::cuda::setGemmTuning(true);
  for (auto [ab, cType] :
       {std::pair{OTC_F32, OTC_F32}, std::pair{OTC_BF16, OTC_F32},
        std::pair{OTC_BF16, OTC_BF16}}) {
    std::string types = std::string(ab == OTC_BF16 ? "bf16" : "f32") + "->" +
                        (cType == OTC_BF16 ? "bf16" : "f32") + " tuned ";
    testGemm({types + "plain 256x192x128 B^T", ab, cType, OTCRT_GEMM_NONE,
              false, 0, 1, 256, 192, 128, 1, 1.0f, 0.0f},
             rng);
    testGemm({types + "accumulate 192x256x320 A^T", ab, cType,
              OTCRT_GEMM_NONE, false, 1, 0, 192, 256, 320, 1, 1.0f, 1.0f},
             rng);
    if (ab == cType)
      testGemm({types + "gelu+bias 128x256x64", ab, cType, OTCRT_GEMM_GELU,
                true, 0, 0, 128, 256, 64, 1, 1.0f, 0.0f},
               rng);
  }
  otcrt::cuda::setGemmTuning(false);
  testGemmGraph(rng);
  testGemmRefusals(rng);
}

} // namespace cudatest
