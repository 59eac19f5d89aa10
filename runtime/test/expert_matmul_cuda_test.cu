// GPU check of the expert products of libotcrt_cuda (otcrt_expert_matmul_*
// and otcrt_expert_matmul_wgrad_*, a mixture of experts' per-row products)
// against the host kernels of libotcrt_cpu: both layouts of the experts,
// f32 storage (CUDA cores) and bf16 storage (tensor cores), uniform routing
// at an OLMoE-like shape, every row to one expert (the other experts'
// gradients zero), negative and outside indices (zero rows), widths and
// depths that are not multiples of the tile nor of 16 (odd ones, read an
// element at a time, and multiples of 8, read in 16-byte packets), rows off
// 16-byte alignment (an element at a time), more rows than one sort holds
// (sorted in batches, the weight gradient adding the later ones), and a
// repeated call's bits. The stored forms: the forward writing bf16 (the
// device's own FP32 results rounded once, bit for bit) and the weight
// gradient overwriting bf16 or adding into f32 and bf16 slots (the slot
// plus the device's own FP32 sums, rounded once, bit for bit where one sort
// takes every row; an expert without rows keeps its slot), each near the
// host's same form.
// Part of otcrt-cuda-kernel-tests (kernels_cuda_test.cu runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "otcrt/workspace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace cudatest {
namespace {

/// One problem's sizes and indices (on the device and on the host).
struct Experts {
  int64_t rows, experts, depth, width;
  int32_t t;
  const int64_t *dIds;
  const std::vector<int64_t> &ids;
  /// Whether one sort takes every row (half the scratch's 16 bytes a row:
  /// CUB's temporary and the bounds fit in the other half); else later
  /// batches add to dw in turn, rounding after each.
  bool oneSort() const {
    return rows * 16 * 2 <= int64_t{OTCRT_CUDA_SORT_SCRATCH_BYTES};
  }
  /// Whether some row picks each expert.
  std::vector<bool> picked() const {
    std::vector<bool> out(experts, false);
    for (int64_t id : ids)
      if (id >= -experts && id < experts)
        out[id < 0 ? id + experts : id] = true;
    return out;
  }
};

/// `x` rounded to bfloat16 (nearest even) and widened back.
Floats roundedBf16(const Floats &x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = bf16ToFloat(floatToBf16(x[i]));
  return out;
}

/// The forward of bf16 data storing bf16: the device's FP32 output `got` of
/// the same call rounded once, bit for bit, and near the host's bf16 form.
void testBf16Out(Check &c, const Experts &p, const otcrt_bf16 *dx,
                 const otcrt_bf16 *dw, const Bf16s &xh, const Bf16s &wh,
                 const Floats &got, double atol) {
  otcrt_bf16 *dOut = device(Bf16s(got.size(), 0x7fc0));
  c.rc(otcrt_expert_matmul_bf16(p.rows, p.experts, p.depth, p.width, p.t, dx,
                                p.dIds, dw, OTC_BF16, dOut, nullptr),
       "otcrt_expert_matmul_bf16 storing bf16");
  Floats out = toFloat(host(dOut, got.size()));
  c.ok = sameBits(out, roundedBf16(got), "bf16 out stored") && c.ok;
  Bf16s want(got.size());
  otcrt::cpu::expertMatmul(p.rows, p.experts, p.depth, p.width, p.t, xh.data(),
                           p.ids.data(), wh.data(), OTC_BF16, want.data());
  c.ok = near(out, toFloat(want), 1.0 / 64, atol, "bf16 out stored", c.worst) &&
         c.ok;
}

/// The weight gradient into dw of `type` (OTC_F32, or OTC_BF16 for bf16
/// data), added into its values (a slot) or over them: each element the
/// device's FP32 sum `gotDw` of the same operands, plus the slot when
/// `accumulate`, in one float addition and rounded once to bf16 (an expert
/// without rows keeps its slot), bit for bit where one sort takes every
/// row; near the host's same form always.
template <typename T>
void testWgradInto(Check &c, const Experts &p, int32_t type, bool accumulate,
                   const T *ddy, const T *dx, const std::vector<T> &dyh,
                   const std::vector<T> &xh, const Floats &gotDw, double atol,
                   std::mt19937 &rng) {
  const Floats slot = random(gotDw.size(), rng);
  const Bytes before = stored(slot, type);
  char *dSlot = device(before);
  int rc;
  if constexpr (std::is_same_v<T, float>)
    rc = otcrt_expert_matmul_wgrad_f32(p.rows, p.experts, p.depth, p.width, p.t,
                                       ddy, dx, p.dIds, type, accumulate, dSlot,
                                       nullptr);
  else
    rc = otcrt_expert_matmul_wgrad_bf16(p.rows, p.experts, p.depth, p.width,
                                        p.t, ddy, dx, p.dIds, type, accumulate,
                                        dSlot, nullptr);
  const std::string what = std::string(type == OTC_BF16 ? "bf16" : "f32") +
                           (accumulate ? " slot" : " dw stored");
  c.rc(rc, what.c_str());
  const Floats got = loaded(host(dSlot, before.size()), type);
  Bytes hostSlot = before;
  otcrt::cpu::expertMatmulWgrad(p.rows, p.experts, p.depth, p.width, p.t,
                                dyh.data(), xh.data(), p.ids.data(), type,
                                accumulate, hostSlot.data());
  c.ok = near(got, loaded(hostSlot, type), type == OTC_BF16 ? 1.0 / 64 : 1e-4,
              atol, what, c.worst) &&
         c.ok;
  if (!p.oneSort())
    return;
  Floats want(slot.size());
  const int64_t size = p.depth * p.width;
  const std::vector<bool> picked = p.picked();
  for (size_t i = 0; i < want.size(); ++i) {
    const bool kept = accumulate && !picked[int64_t(i) / size];
    const float sum = accumulate ? slot[i] + gotDw[i] : gotDw[i];
    want[i] = kept ? slot[i] : sum;
  }
  c.ok = sameBits(got, type == OTC_BF16 ? roundedBf16(want) : want,
                  what.c_str()) &&
         c.ok;
}

/// The device forward and weight gradient of f32 and bf16 storage against
/// the host's (a GEMM per expert). The inputs are bfloat16 values, so every
/// product is exact in float on all three (the tensor cores multiply the
/// bf16 operands exactly and accumulate in FP32); only the order and the
/// rounding of the sums differ (the tensor cores' FP32 accumulation is not
/// IEEE round-to-nearest: they are reported to truncate), so they agree
/// within float rounding of sums of `depth` (forward) or the largest
/// expert's rows (weight gradient) products of values in [-1, 1]: 1e-4
/// relative with an absolute floor of 1e-5 sqrt(terms). (A model of the
/// sums that truncates every addend and rounds each 16-term product toward
/// zero stays under a third of it at 19200 rows.) A repeated device call
/// gives the same bits. `skew` puts x's and dy's rows off 16-byte alignment.
void testExpert(std::mt19937 &rng, const std::string &name, int64_t experts,
                int64_t depth, int64_t width, bool transposed,
                const std::vector<int64_t> &ids, size_t skew = 0) {
  const int64_t rows = static_cast<int64_t>(ids.size());
  Check c("expert_matmul " + name + " " + std::to_string(rows) + " rows, " +
          std::to_string(experts) + " experts " + std::to_string(depth) + "x" +
          std::to_string(width) + (transposed ? " transposed" : "") +
          (skew ? " skewed" : ""));
  const int32_t t = transposed ? 1 : 0;
  Floats x = random(rows * depth, rng), w = random(experts * depth * width, rng),
         dy = random(rows * width, rng);
  Floats want(rows * width), wantDw(experts * depth * width);
  otcrt::cpu::expertMatmul(rows, experts, depth, width, t, x.data(), ids.data(),
                           w.data(), OTC_F32, want.data());
  otcrt::cpu::expertMatmulWgrad(rows, experts, depth, width, t, dy.data(),
                                x.data(), ids.data(), OTC_F32, 0,
                                wantDw.data());
  const int64_t *dIds = device(ids);
  float *dOut = device(Floats(want.size(), 7.0f));
  float *dDw = device(Floats(wantDw.size(), 7.0f));
  // The most rows one expert sums (outside indices in none).
  std::vector<int64_t> perExpert(experts, 0);
  for (int64_t id : ids)
    if (id >= -experts && id < experts)
      ++perExpert[id < 0 ? id + experts : id];
  const int64_t most = *std::max_element(perExpert.begin(), perExpert.end());
  const double atol = 1e-5 * std::sqrt(double(depth)),
               atolDw = 1e-5 * std::sqrt(double(std::max<int64_t>(most, 1)));
  const Experts p{rows, experts, depth, width, t, dIds, ids};
  {
    const float *dx = device(x, skew), *dw = device(w),
                *ddy = device(dy, skew);
    c.rc(otcrt_expert_matmul_f32(rows, experts, depth, width, t, dx, dIds, dw,
                                 OTC_F32, dOut, nullptr),
         "otcrt_expert_matmul_f32");
    Floats got = host(dOut, want.size());
    c.ok = near(got, want, 1e-4, atol, "out", c.worst) && c.ok;
    c.rc(otcrt_expert_matmul_f32(rows, experts, depth, width, t, dx, dIds, dw,
                                 OTC_F32, dOut, nullptr),
         "otcrt_expert_matmul_f32 again");
    c.ok = sameBits(host(dOut, want.size()), got, "out repeated") && c.ok;
    c.rc(otcrt_expert_matmul_wgrad_f32(rows, experts, depth, width, t, ddy, dx,
                                       dIds, OTC_F32, 0, dDw, nullptr),
         "otcrt_expert_matmul_wgrad_f32");
    Floats gotDw = host(dDw, wantDw.size());
    c.ok = near(gotDw, wantDw, 1e-4, atolDw, "dw", c.worst) && c.ok;
    // FP32 gradient accumulation: added into an f32 slot (the SIMT tiles).
    testWgradInto(c, p, OTC_F32, true, ddy, dx, dy, x, gotDw, atolDw, rng);
  }
  {
    // bf16 storage of the same (bf16-representable) values: the same
    // products, summed on the tensor cores.
    const otcrt_bf16 *dx = device(toBf16(x), skew), *dw = device(toBf16(w)),
                     *ddy = device(toBf16(dy), skew);
    c.rc(otcrt_expert_matmul_bf16(rows, experts, depth, width, t, dx, dIds, dw,
                                  OTC_F32, dOut, nullptr),
         "otcrt_expert_matmul_bf16");
    Floats got = host(dOut, want.size());
    c.ok = near(got, want, 1e-4, atol, "bf16 out", c.worst) && c.ok;
    c.rc(otcrt_expert_matmul_bf16(rows, experts, depth, width, t, dx, dIds, dw,
                                  OTC_F32, dOut, nullptr),
         "otcrt_expert_matmul_bf16 again");
    c.ok = sameBits(host(dOut, want.size()), got, "bf16 out repeated") && c.ok;
    c.rc(otcrt_expert_matmul_wgrad_bf16(rows, experts, depth, width, t, ddy, dx,
                                        dIds, OTC_F32, 0, dDw, nullptr),
         "otcrt_expert_matmul_wgrad_bf16");
    Floats gotDw = host(dDw, wantDw.size());
    c.ok = near(gotDw, wantDw, 1e-4, atolDw, "bf16 dw", c.worst) && c.ok;
    c.rc(otcrt_expert_matmul_wgrad_bf16(rows, experts, depth, width, t, ddy, dx,
                                        dIds, OTC_F32, 0, dDw, nullptr),
         "otcrt_expert_matmul_wgrad_bf16 again");
    c.ok = sameBits(host(dDw, wantDw.size()), gotDw, "bf16 dw repeated") &&
           c.ok;
    // The forms a BF16 program calls: bf16 out, dw into its slot (bf16, or
    // f32 under FP32 gradient accumulation), and bf16 dw written.
    const Bf16s xh = toBf16(x), wh = toBf16(w), dyh = toBf16(dy);
    testBf16Out(c, p, dx, dw, xh, wh, got, atol);
    testWgradInto(c, p, OTC_BF16, true, ddy, dx, dyh, xh, gotDw, atolDw, rng);
    testWgradInto(c, p, OTC_F32, true, ddy, dx, dyh, xh, gotDw, atolDw, rng);
    testWgradInto(c, p, OTC_BF16, false, ddy, dx, dyh, xh, gotDw, atolDw, rng);
  }
}

std::vector<int64_t> uniformIds(int64_t rows, int64_t experts,
                                std::mt19937 &rng) {
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  std::vector<int64_t> ids(rows);
  for (int64_t &i : ids)
    i = pick(rng);
  return ids;
}

} // namespace

void testExpertMatmuls(std::mt19937 &rng) {
  // OLMoE-like at reduced width: 64 experts, 2048 tokens x top-8.
  testExpert(rng, "uniform", 64, 256, 192, true, uniformIds(16384, 64, rng));
  testExpert(rng, "uniform", 64, 192, 256, false, uniformIds(16384, 64, rng));
  // Every row to one expert: one group of 300 tiles.
  testExpert(rng, "one expert", 8, 128, 96, true,
             std::vector<int64_t>(19200, 5));
  // Sizes off the tile, negative ids and ids outside the experts.
  std::vector<int64_t> mixed = uniformIds(1000, 7, rng);
  for (size_t i = 0; i < mixed.size(); i += 9)
    mixed[i] = i % 2 ? -3 : 7 + static_cast<int64_t>(i);
  testExpert(rng, "mixed", 7, 33, 70, false, mixed);
  testExpert(rng, "mixed", 7, 70, 33, true, mixed);
  testExpert(rng, "small", 3, 5, 4, true, {2, 0, 1, 1, -1});
  // Multiples of 8 but not of 16 (bf16 read in packets, the tiles' and the
  // tensor cores' steps padded with zeros), groups off the tile too.
  std::vector<int64_t> tails = uniformIds(700, 5, rng);
  for (size_t i = 0; i < tails.size(); i += 13)
    tails[i] = -6;
  testExpert(rng, "tails", 5, 40, 72, false, tails);
  testExpert(rng, "tails", 5, 72, 40, true, tails);
  // Sizes that allow packets, rows that do not: one element at a time.
  testExpert(rng, "skewed", 4, 64, 48, false, uniformIds(600, 4, rng), 1);
  testExpert(rng, "skewed", 4, 48, 64, true, uniformIds(600, 4, rng), 1);
  // More rows than one sort of the scratch holds (4 MiB / 16 bytes).
  testExpert(rng, "batches", 16, 32, 40, false, uniformIds(300000, 16, rng));
}

} // namespace cudatest
