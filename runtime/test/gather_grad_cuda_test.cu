// GPU check of the gather gradient of libotcrt_cuda (otcrt_gather_grad_*,
// an embedding's gradient) against the host kernel of libotcrt_cpu: GPT-2
// shapes with Zipf-distributed token ids, one token everywhere, odd and
// misaligned rows, a middle axis, negative and outside indices, more
// positions than one sort holds, a repeated call's bits and allocations,
// and calls that add into a gradient slot.
// Part of otcrt-cuda-kernel-tests (kernels_cuda_test.cu runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda/gather_grad.h"
#include "cuda_test_util.cuh"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cudatest {
namespace {

/// The gather gradient (an embedding's gradient) of f32 and bf16 storage
/// against the host kernel, which adds each row's positions in position
/// order: the device adds them in pieces of sorted positions, so a row
/// agrees within float rounding of that many additions (2^-23 x positions
/// of the row x the sum of their magnitudes), exactly when all positions
/// fall in one piece (at most 32 positions); a repeated call gives the same
/// bits and allocates nothing; the bf16 device result is exactly the f32
/// device result rounded (same order for both storages) where one sort
/// takes every position (beyond, later batches add to the stored bf16
/// result, each rounding it once); grad and out lie `skew` elements past
/// alignment. Added into a slot (accumulate = 1), each picked row is the
/// slot's value plus the device's own sum (one float addition, rounded once
/// to the storage; beyond one sort's batch of positions, plus each batch's
/// sum in turn, rounded after each), and every row no position picks keeps
/// its bits, NaN and -0 included.

/// A quiet NaN with a payload that bfloat16 keeps (0x7fc5 in its top half).
float payloadNan() {
  const uint32_t bits = 0x7fc50000u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Element i of bfloat16 values, as a double.
double gb32(const Bf16s &x, int64_t i) { return bf16ToFloat(x[i]); }

void testGatherGrad(std::mt19937 &rng, const std::string &name, int64_t outer,
                    int64_t axisLen, int64_t inner,
                    const std::vector<int64_t> &indices, size_t skew = 0) {
  const int64_t P = static_cast<int64_t>(indices.size());
  const size_t n = outer * axisLen * inner;
  Check c("gather_grad " + name + " " + std::to_string(outer) + "x" +
          std::to_string(axisLen) + "x" + std::to_string(inner) + " from " +
          std::to_string(P) + (skew ? " skewed" : ""));
  Floats g = random(outer * P * inner, rng), want(n);
  otcrt::cpu::gatherGrad(outer, axisLen, inner, P, g.data(), indices.data(), 0,
                         want.data());
  // Per result element: positions added and the sum of their magnitudes.
  std::vector<double> bound(n, 0.0);
  std::vector<int64_t> count(axisLen, 0);
  for (int64_t p = 0; p < P; ++p) {
    int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
    if (a >= 0 && a < axisLen)
      ++count[a];
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p = 0; p < P; ++p) {
      int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
      if (a < 0 || a >= axisLen)
        continue;
      for (int64_t e = 0; e < inner; ++e)
        bound[(o * axisLen + a) * inner + e] +=
            std::fabs(g[(o * P + p) * inner + e]);
    }
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    bound[i] *=
        std::ldexp(static_cast<double>(count[(i / inner) % axisLen]), -23);
  const int64_t *dIdx = device(indices);
  const float *dG = device(g, skew);
  float *dOut = device(Floats(n, NAN), skew);
  c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, P, dG, dIdx, 0, dOut,
                             nullptr),
       "f32");
  Floats got = host(dOut, n);
  for (size_t i = 0; i < n && c.ok; ++i) {
    double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    c.worst = std::max(c.worst, err);
    if (!(err <= bound[i]) || (P <= 32 && err != 0)) {
      std::printf("  [%zu]: gpu %.9g cpu %.9g (bound %.3g)\n", i, got[i],
                  want[i], bound[i]);
      c.ok = false;
    }
  }
  allocatesNothing(c.ok, [&] {
    c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, P, dG, dIdx, 0, dOut,
                               nullptr),
         "f32 again");
  });
  c.ok = sameBits(host(dOut, n), got, "f32 again") && c.ok;
  Bf16s gb = toBf16(g);
  // Added into a slot: random values, a row no position picks (if any)
  // holding NaN and -0.
  const int64_t batch = otcrt::cuda::gatherGradBatch(P, axisLen);
  {
    std::vector<bool> picked(axisLen, false);
    for (int64_t p = 0; p < P; ++p) {
      int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
      if (a >= 0 && a < axisLen)
        picked[a] = true;
    }
    Floats slot = random(n, rng, -2, 2);
    const auto quiet = std::find(picked.begin(), picked.end(), false);
    if (quiet != picked.end())
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < inner; ++e)
          slot[(o * axisLen + (quiet - picked.begin())) * inner + e] =
              e % 2 ? -0.0f : payloadNan();
    Bf16s slotB = toBf16(slot);
    float *dSlot = device(slot, skew);
    otcrt_bf16 *dSlotB = device(slotB, skew);
    c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, P, dG, dIdx, 1, dSlot,
                               nullptr),
         "f32 added into a slot");
    c.rc(otcrt_gather_grad_bf16(outer, axisLen, inner, P, device(gb, skew),
                                dIdx, 1, dSlotB, nullptr),
         "bf16 added into a slot");
    Floats added = host(dSlot, n), want32(slot);
    Bf16s addedB = host(dSlotB, n), wantB(slotB);
    // The sums each call adds, one batch of positions at a time: the
    // device's own overwriting sums of that batch alone (one batch: the
    // whole call's; the bf16 sums are the f32 ones, the random values being
    // bfloat16 values: same order, same values). Beyond one batch each
    // batch's sums are added to the slot in turn, rounded after each.
    std::vector<std::pair<Floats, std::vector<bool>>> sums;
    if (P <= batch) {
      sums.emplace_back(got, picked);
    } else if (outer != 1) {
      std::printf("  batches of positions are checked with outer 1 only\n");
      c.ok = false;
    } else {
      for (int64_t first = 0; first < P; first += batch) {
        const int64_t count = std::min(batch, P - first);
        std::vector<bool> in(axisLen, false);
        for (int64_t p = first; p < first + count; ++p) {
          int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
          if (a >= 0 && a < axisLen)
            in[a] = true;
        }
        float *dPart = device(Floats(n, NAN));
        c.rc(otcrt_gather_grad_f32(outer, axisLen, inner, count,
                                   dG + first * inner, dIdx + first, 0, dPart,
                                   nullptr),
             "f32 one batch");
        sums.emplace_back(host(dPart, n), in);
      }
    }
    for (const auto &[sum, in] : sums)
      for (size_t i = 0; i < n; ++i)
        if (in[(i / inner) % axisLen]) {
          want32[i] = want32[i] + sum[i];
          wantB[i] = floatToBf16(bf16ToFloat(wantB[i]) + sum[i]);
        }
    c.ok = sameBits(added, want32, "f32 slot + sum, other rows kept") && c.ok;
    c.ok = sameBits(toFloat(addedB), toFloat(wantB),
                    "bf16 slot + sum rounded once, other rows kept") &&
           c.ok;
  }
  otcrt_bf16 *dOutB = device(Bf16s(n, 0x7fc0), skew);
  c.rc(otcrt_gather_grad_bf16(outer, axisLen, inner, P, device(gb, skew), dIdx,
                              0, dOutB, nullptr),
       "bf16");
  c.ok = (P == 0 || batch > 0) && c.ok;
  if (P <= batch) {
    c.ok = sameBits(toFloat(host(dOutB, n)), toFloat(toBf16(got)),
                    "bf16 vs rounded f32") &&
           c.ok;
    return;
  }
  // Batches add into the stored bfloat16 result, which rounds after each:
  // at most half a bfloat16 unit (2^-8 relative) of the running sum per
  // batch (sums of the host's values in batch order), beside the float
  // bound of the additions themselves.
  std::vector<double> running(n, 0.0), bf16Bound(bound);
  for (int64_t first = 0; first < P; first += batch) {
    for (int64_t p = first; p < std::min(P, first + batch); ++p) {
      int64_t a = indices[p] < 0 ? indices[p] + axisLen : indices[p];
      if (a < 0 || a >= axisLen)
        continue;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < inner; ++e)
          running[(o * axisLen + a) * inner + e] += gb32(gb, (o * P + p) * inner + e);
    }
    for (size_t i = 0; i < n; ++i)
      bf16Bound[i] += std::ldexp(std::fabs(running[i]) + bf16Bound[i], -8);
  }
  Floats gotB = toFloat(host(dOutB, n));
  for (size_t i = 0; i < n && c.ok; ++i) {
    double err = std::fabs(static_cast<double>(gotB[i]) - got[i]);
    c.worst = std::max(c.worst, err);
    if (!(err <= bf16Bound[i])) {
      std::printf("  bf16 [%zu]: gpu %.9g f32 gpu %.9g (bound %.3g)\n", i,
                  gotB[i], got[i], bf16Bound[i]);
      c.ok = false;
    }
  }
}

} // namespace


void testGatherGrads(std::mt19937 &rng) {
  // GPT-2 124M's token embedding: 8192 tokens of real-text skew.
  testGatherGrad(rng, "zipf", 1, 50257, 768, zipfTokens(8192, 50257, rng));
  // One token at every position: one run over all 256 pieces.
  testGatherGrad(rng, "one token", 1, 50257, 768,
                 std::vector<int64_t>(8192, 50256));
  // 70% on one token, negative ids (from the end) and ids outside the axis
  // (which add nothing); odd row lengths (element by element) and rows off
  // 16-byte alignment.
  std::vector<int64_t> mixed = zipfTokens(5000, 1000, rng);
  std::uniform_real_distribution<double> coin(0, 1);
  for (size_t i = 0; i < mixed.size(); ++i) {
    double u = coin(rng);
    if (u < 0.7)
      mixed[i] = 17;
    else if (u < 0.8)
      mixed[i] -= 1000;
    else if (u < 0.82)
      mixed[i] = 1000 + static_cast<int64_t>(i);
  }
  testGatherGrad(rng, "skewed mixed", 1, 1000, 64, mixed);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 63, mixed);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 64, mixed, 1);
  testGatherGrad(rng, "skewed mixed", 1, 1000, 8, mixed);
  // A gather along a middle axis (outer > 1).
  testGatherGrad(rng, "middle axis", 4, 6, 33, zipfTokens(700, 6, rng));
  // At most one piece: the host's bits exactly.
  testGatherGrad(rng, "one piece", 1, 11, 8,
                 {3, 1, 3, -1, 0, 3, 10, -11, 11, -12, 100, -1});
  testGatherGrad(rng, "no positions", 1, 11, 8, {});
  // More positions than one sort holds: sorted and added in batches.
  testGatherGrad(rng, "batches", 1, 1000, 4, zipfTokens(600000, 1000, rng));
}

} // namespace cudatest
