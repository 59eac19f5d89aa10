// GPU check of the cuda FP8 GEMM (otcrt_gemm_fp8, cuda/gemm_fp8.cpp) and
// its quantize kernels (cuda/fp8_quantize.cu) against the host emulation
// (otcrt::cpu::gemmFp8, compiled in): the FP8 copy of a BF16 matrix, plain
// and transposed, E4M3 and E5M2, byte for byte the host's rounding of the
// same scaled values, with the same 1 / scale, on a call site's first call
// (its own amax) and a second (the first's amax, kept on the device for
// it); then products of every
// transpose pair, E4M3 x E4M3 and E4M3 x E5M2 either way, into BF16 and
// FP32, with beta 0 and 1, a bias, GELU with a bias and its gradient (the
// FP32 product and the epilogue kernel), against the emulation within a
// BF16 unit (the same FP8 values: only the order of the FP32 sums
// differs); and a shape that cannot run in FP8 (M not a multiple of 16),
// which runs as the BF16 GEMM.
#include "cpu/kernels_cpu.h"
#include "cuda/gemm.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"
#include "otcrt/fp8.h"

namespace cudatest {
namespace {

/// The FP8 copy the host makes of h (rows x cols, row stride ld) at the
/// scale of `amax`, and h's own amax.
std::vector<uint8_t> hostCopy(const Bf16s &h, int64_t rows, int64_t cols,
                              int64_t ld, bool transpose, int32_t format,
                              float amax, float &own) {
  own = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      own = std::max(own, std::fabs(bf16ToFloat(h[i * ld + j])));
  const float scale = otcrt_fp8_scale(amax < 0 ? own : amax, format);
  std::vector<uint8_t> want(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      want[transpose ? j * rows + i : i * cols + j] =
          otcrt_float_to_fp8(bf16ToFloat(h[i * ld + j]) * scale, format);
  return want;
}

/// The quantize kernels on a rows x cols BF16 matrix (row stride cols + 3)
/// against the host's bytes: a site's first call (an amax pass, then the
/// copy at its own scale), then a second call on other values, at the
/// first's amax (those past it held at the format's largest value), which
/// leaves its own amax for the next.
void testQuantize(std::mt19937 &rng, int32_t format, bool transpose) {
  const int64_t rows = 40, cols = 56, ld = cols + 3;
  Check c(std::string("fp8 quantize ") +
          (format == OTCRT_FP8_E4M3 ? "e4m3" : "e5m2") +
          (transpose ? " transposed" : ""));
  otcrt::cuda::Fp8Quantize q;
  q.rows = rows;
  q.cols = cols;
  q.ld = ld;
  q.transpose = transpose;
  q.format = format;
  q.out = device(std::vector<uint8_t>(rows * cols));
  float *slots = device(Floats(4)); // prev, cur, 1 / scale, counter
  q.prev = slots;
  q.cur = slots + 1;
  q.invScale = slots + 2;
  q.counter = reinterpret_cast<unsigned *>(slots + 3);
  float amax = -1; // none yet
  for (int call = 0; call < 2; ++call) {
    Floats x = random(rows * ld, rng, -3, 3);
    x[5] = call ? 23.5f : 17.25f; // the amax; the second past the first
    Bf16s h = toBf16(x);
    float own = 0;
    std::vector<uint8_t> want =
        hostCopy(h, rows, cols, ld, transpose, format, amax, own);
    const float scale = otcrt_fp8_scale(amax < 0 ? own : amax, format);
    q.x = reinterpret_cast<const uint16_t *>(device(h));
    q.first = call == 0;
    c.rc(otcrt::cuda::launchFp8Quantize(q, nullptr), "launch");
    std::vector<uint8_t> got = host(q.out, want.size());
    Floats s = host(slots, 4);
    if (got != want) {
      std::printf("  call %d: the device's FP8 bytes differ from the host's\n",
                  call);
      c.ok = false;
    }
    if (s[0] != own || s[1] != 0 || s[2] != 1.0f / scale || s[3] != 0) {
      std::printf("  call %d: amax %g (host %g), 1/scale %g (host %g), cur %g,"
                  " counter %g\n",
                  call, s[0], own, s[2], 1.0f / scale, s[1], s[3]);
      c.ok = false;
    }
    amax = own;
  }
}

struct Fp8Case {
  std::string name;
  int ta, tb;
  int64_t m, n, k;
  int32_t fa, fb, cType, epilogue;
  float beta;
  bool bias;
  /// Elements the device's bias starts past a 256-byte boundary (one BF16
  /// element: not 16-byte aligned, so cuBLASLt's bias epilogue cannot take
  /// it and the FP32 product and the epilogue kernel finish the call).
  int biasOffset = 0;
  /// The shape cannot run in FP8 (sizes not multiples of 16): the call runs
  /// as the BF16 GEMM, so the host's product is the cpu target's BF16 one.
  bool bf16Instead = false;
};

/// One product against the emulation: C, and aux for GELU; each side's
/// first call of the site (both forget the sites' amax first).
void testFp8Gemm(const Fp8Case &tc, std::mt19937 &rng) {
  Check c("fp8 gemm " + tc.name);
  otcrt::cpu::forgetFp8Scales();
  otcrt::cuda::forgetFp8Scales();
  OtcrtGemm g{};
  g.trans_a = tc.ta;
  g.trans_b = tc.tb;
  g.m = tc.m;
  g.n = tc.n;
  g.k = tc.k;
  g.batch = 1;
  g.alpha = 1.0f;
  g.beta = tc.beta;
  g.ab_type = OTC_BF16;
  g.c_type = g.epilogue_type = tc.cType;
  g.epilogue = tc.epilogue;
  g.lda = tc.ta ? tc.m : tc.k;
  g.ldb = tc.tb ? tc.k : tc.n;
  g.ldc = tc.n;
  Bf16s a = toBf16(random(tc.m * tc.k, rng)),
        b = toBf16(random(tc.k * tc.n, rng));
  Floats c0 = random(tc.m * tc.n, rng), bias0 = random(tc.n, rng);
  Floats aux0 = random(tc.m * tc.n, rng);
  bool bf16 = tc.cType == OTC_BF16;
  bool gelu = tc.epilogue == OTCRT_GEMM_GELU || tc.epilogue == OTCRT_GEMM_DGELU;
  // Host: C, bias and aux in C's type.
  Bf16s hc = toBf16(c0), hbias = toBf16(bias0), haux = toBf16(aux0);
  Floats fc = c0, fbias = bias0, faux = aux0;
  void *wantC = bf16 ? (void *)hc.data() : (void *)fc.data();
  const void *wantBias =
      tc.bias ? (bf16 ? (void *)hbias.data() : (void *)fbias.data()) : nullptr;
  void *wantAux =
      gelu ? (bf16 ? (void *)haux.data() : (void *)faux.data()) : nullptr;
  c.rc(tc.bf16Instead ? otcrt::cpu::gemm(g, a.data(), b.data(), wantC, wantBias,
                                         nullptr, wantAux)
                      : otcrt::cpu::gemmFp8(g, tc.fa, tc.fb, a.data(), b.data(),
                                            wantC, wantBias, nullptr, wantAux),
       "host");
  void *dC = bf16 ? (void *)device(toBf16(c0)) : (void *)device(c0);
  const void *dBias = nullptr;
  if (tc.bias) {
    Floats shifted(tc.biasOffset, 0.0f);
    shifted.insert(shifted.end(), bias0.begin(), bias0.end());
    dBias = bf16 ? (const void *)(device(toBf16(shifted)) + tc.biasOffset)
                 : (const void *)(device(shifted) + tc.biasOffset);
  }
  void *dAux =
      gelu ? (bf16 ? (void *)device(toBf16(aux0)) : (void *)device(aux0))
           : nullptr;
  c.rc(otcrt_gemm_fp8(&g, tc.fa, tc.fb, device(a), device(b), dC, dBias,
                      nullptr, dAux, nullptr),
       "device");
  if (bf16) {
    c.bf16(host(static_cast<otcrt_bf16 *>(dC), hc.size()), hc, "C");
    if (tc.epilogue == OTCRT_GEMM_GELU)
      c.bf16(host(static_cast<otcrt_bf16 *>(dAux), haux.size()), haux, "aux");
  } else {
    c.f32(host(static_cast<float *>(dC), fc.size()), fc, "C", 2e-3);
    if (tc.epilogue == OTCRT_GEMM_GELU)
      c.f32(host(static_cast<float *>(dAux), faux.size()), faux, "aux", 2e-3);
  }
}

/// The bytes of one FP8 copy that carry values: each layout's n values and
/// the 1 / scale float after them (not the padding to 256 bytes).
std::vector<uint8_t> copyValues(const std::vector<uint8_t> &copy, int64_t n,
                                int32_t layouts) {
  std::vector<uint8_t> out;
  for (int32_t layout : {OTCRT_FP8_AS_STORED, OTCRT_FP8_TRANSPOSED}) {
    if (!(layouts & layout))
      continue;
    const int64_t at = otcrt_fp8_copy_offset(n, layouts, layout);
    out.insert(out.end(), copy.begin() + at, copy.begin() + at + n);
  }
  const int64_t scale = otcrt_fp8_copy_scale_offset(n, layouts);
  out.insert(out.end(), copy.begin() + scale, copy.begin() + scale + 4);
  return out;
}

/// The shared FP8 copies through the C entry points against the cpu
/// target's: otcrt_fp8_quantize of A [m, k] (both layouts, E4M3) and of B
/// [k, n] (its transpose, E5M2) byte for byte, on two calls of each copy
/// site (the second at the first's amax, with values past it); then
/// otcrt_gemm_fp8_copies reading both copies, C against the host's
/// emulation of the same product.
void testFp8Copies(std::mt19937 &rng) {
  Check c("fp8 copies: quantize in both layouts, the product reading them");
  otcrt::cpu::forgetFp8Scales();
  otcrt::cuda::forgetFp8Scales();
  const int64_t m = 64, n = 96, k = 128;
  static const OtcrtFp8Quantize qa = {
      m, k, OTCRT_FP8_E4M3, OTCRT_FP8_AS_STORED | OTCRT_FP8_TRANSPOSED};
  static const OtcrtFp8Quantize qb = {k, n, OTCRT_FP8_E5M2,
                                      OTCRT_FP8_TRANSPOSED};
  const int64_t aBytes = otcrt_fp8_copy_bytes(m * k, qa.layouts),
                bBytes = otcrt_fp8_copy_bytes(k * n, qb.layouts);
  std::vector<uint8_t> ha(aBytes), hb(bBytes);
  uint8_t *da = device(std::vector<uint8_t>(aBytes)),
          *db = device(std::vector<uint8_t>(bBytes));
  Bf16s a, b;
  for (int call = 0; call < 2; ++call) {
    Floats af = random(m * k, rng, -2, 2), bf = random(k * n, rng, -2, 2);
    af[7] = call ? 9.5f : 6.25f; // the second call's values pass the first's
    bf[3] = call ? -40.0f : 30.0f;
    a = toBf16(af), b = toBf16(bf);
    c.rc(otcrt::cpu::fp8Quantize(qa, a.data(), ha.data()), "host quantize A");
    c.rc(otcrt::cpu::fp8Quantize(qb, b.data(), hb.data()), "host quantize B");
    c.rc(otcrt_fp8_quantize(&qa, device(a), da, nullptr), "quantize A");
    c.rc(otcrt_fp8_quantize(&qb, device(b), db, nullptr), "quantize B");
    if (copyValues(host(da, aBytes), m * k, qa.layouts) !=
            copyValues(ha, m * k, qa.layouts) ||
        copyValues(host(db, bBytes), k * n, qb.layouts) !=
            copyValues(hb, k * n, qb.layouts)) {
      std::printf("  call %d: the device's copies differ from the host's\n",
                  call);
      c.ok = false;
    }
  }
  OtcrtGemm g{};
  g.m = m, g.n = n, g.k = k, g.batch = 1, g.alpha = 1.0f;
  g.ab_type = g.c_type = g.epilogue_type = OTC_BF16;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = k, g.ldb = n, g.ldc = n;
  Bf16s want(m * n);
  c.rc(otcrt::cpu::gemmFp8Copies(g, qa.format, qb.format, ha.data(), qa.layouts,
                                 hb.data(), qb.layouts, a.data(), b.data(),
                                 want.data(), nullptr, nullptr, nullptr),
       "host product");
  otcrt_bf16 *dc = device(Bf16s(m * n));
  c.rc(otcrt_gemm_fp8_copies(&g, qa.format, qb.format, da, qa.layouts, db,
                             qb.layouts, device(a), device(b), dc, nullptr,
                             nullptr, nullptr, nullptr),
       "product");
  c.bf16(host(dc, want.size()), want, "C");
}

} // namespace

void testFp8Gemms(std::mt19937 &rng) {
  testFp8Copies(rng);
  for (int32_t format : {OTCRT_FP8_E4M3, OTCRT_FP8_E5M2})
    for (bool transpose : {false, true})
      testQuantize(rng, format, transpose);
  const int32_t e4 = OTCRT_FP8_E4M3, e5 = OTCRT_FP8_E5M2;
  const int32_t none = OTCRT_GEMM_NONE;
  std::vector<Fp8Case> cases = {
      {"A B 128x96x64", 0, 0, 128, 96, 64, e4, e4, OTC_BF16, none, 0, false},
      {"A B^T 128x96x64", 0, 1, 128, 96, 64, e4, e4, OTC_BF16, none, 0, false},
      {"A^T B 128x96x64", 1, 0, 128, 96, 64, e4, e4, OTC_BF16, none, 0, false},
      {"A^T B^T 64x48x80", 1, 1, 64, 48, 80, e4, e4, OTC_BF16, none, 0, false},
      {"e5m2 A (dX) 128x64x96", 0, 1, 128, 64, 96, e5, e4, OTC_BF16, none, 0,
       false},
      {"e5m2 B (dW) 64x64x128", 1, 0, 64, 64, 128, e4, e5, OTC_BF16, none, 0,
       false},
      {"accumulate into f32 64x64x128", 1, 0, 64, 64, 128, e4, e5, OTC_F32,
       none, 1.0f, false},
      {"accumulate bf16 64x64x64", 0, 0, 64, 64, 64, e4, e4, OTC_BF16, none,
       1.0f, false},
      {"bias 128x96x64", 0, 1, 128, 96, 64, e4, e4, OTC_BF16, OTCRT_GEMM_BIAS,
       0, true},
      // A bias that is not 16-byte aligned: cuBLASLt's bias epilogue cannot
      // read it, so the call goes through the FP32 product and the epilogue
      // kernel (still FP8: a BF16 fallback would miss the emulation's
      // rounding).
      {"bias not 16-byte aligned 128x96x64", 0, 1, 128, 96, 64, e4, e4,
       OTC_BF16, OTCRT_GEMM_BIAS, 0, true, 1},
      {"gelu+bias 64x128x64", 0, 1, 64, 128, 64, e4, e4, OTC_BF16,
       OTCRT_GEMM_GELU, 0, true},
      {"dgelu 64x128x64", 0, 0, 64, 128, 64, e5, e4, OTC_BF16, OTCRT_GEMM_DGELU,
       0, false},
      {"M 24 (bf16 instead) 24x32x32", 0, 1, 24, 32, 32, e4, e4, OTC_BF16, none,
       0, false, 0, true},
  };
  for (const Fp8Case &tc : cases)
    testFp8Gemm(tc, rng);
}

} // namespace cudatest
