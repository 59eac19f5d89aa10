// GPU check of the expert products of libotcrt_cuda (otcrt_expert_matmul_*
// and otcrt_expert_matmul_wgrad_*, a mixture of experts' per-row products)
// against the host kernels of libotcrt_cpu: both layouts of the experts,
// f32 and bf16 storage, uniform routing at an OLMoE-like shape, every row
// to one expert (the other experts' gradients zero), negative and outside
// indices (zero rows), widths and depths that are not multiples of the
// tile, more rows than one sort holds (sorted in batches, the weight
// gradient adding the later ones), and a repeated call's bits.
// Part of otcrt-cuda-kernel-tests (kernels_cuda_test.cu runs it).
#include "cpu/common.h"
#include "cpu/kernels_cpu.h"
#include "cuda_test_util.cuh"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace cudatest {
namespace {

/// The device forward and weight gradient of f32 and bf16 storage against
/// the host's (a GEMM per expert): both sum in float in another order, so
/// they agree within float rounding of `depth` (forward) or an expert's
/// rows (weight gradient) products of values in [-1, 1]: 1e-4 relative
/// with an absolute floor. A repeated device call gives the same bits.
void testExpert(std::mt19937 &rng, const std::string &name, int64_t experts,
                int64_t depth, int64_t width, bool transposed,
                const std::vector<int64_t> &ids) {
  const int64_t rows = static_cast<int64_t>(ids.size());
  Check c("expert_matmul " + name + " " + std::to_string(rows) + " rows, " +
          std::to_string(experts) + " experts " + std::to_string(depth) + "x" +
          std::to_string(width) + (transposed ? " transposed" : ""));
  const int32_t t = transposed ? 1 : 0;
  Floats x = random(rows * depth, rng), w = random(experts * depth * width, rng),
         dy = random(rows * width, rng);
  Floats want(rows * width), wantDw(experts * depth * width);
  otcrt::cpu::expertMatmul(rows, experts, depth, width, t, x.data(), ids.data(),
                           w.data(), want.data());
  otcrt::cpu::expertMatmulWgrad(rows, experts, depth, width, t, dy.data(),
                                x.data(), ids.data(), wantDw.data());
  const int64_t *dIds = device(ids);
  float *dOut = device(Floats(want.size(), 7.0f));
  float *dDw = device(Floats(wantDw.size(), 7.0f));
  const double atol = 1e-5 * std::sqrt(double(std::max(depth, rows)));
  {
    const float *dx = device(x), *dw = device(w), *ddy = device(dy);
    c.rc(otcrt_expert_matmul_f32(rows, experts, depth, width, t, dx, dIds, dw,
                                 dOut, nullptr),
         "otcrt_expert_matmul_f32");
    Floats got = host(dOut, want.size());
    c.ok = near(got, want, 1e-4, atol, "out", c.worst) && c.ok;
    c.rc(otcrt_expert_matmul_f32(rows, experts, depth, width, t, dx, dIds, dw,
                                 dOut, nullptr),
         "otcrt_expert_matmul_f32 again");
    c.ok = sameBits(host(dOut, want.size()), got, "out repeated") && c.ok;
    c.rc(otcrt_expert_matmul_wgrad_f32(rows, experts, depth, width, t, ddy, dx,
                                       dIds, dDw, nullptr),
         "otcrt_expert_matmul_wgrad_f32");
    c.ok = near(host(dDw, wantDw.size()), wantDw, 1e-4, atol, "dw", c.worst) &&
           c.ok;
  }
  {
    // bf16 storage of the same (bf16-representable) values: the same sums.
    const otcrt_bf16 *dx = device(toBf16(x)), *dw = device(toBf16(w)),
                     *ddy = device(toBf16(dy));
    c.rc(otcrt_expert_matmul_bf16(rows, experts, depth, width, t, dx, dIds, dw,
                                  dOut, nullptr),
         "otcrt_expert_matmul_bf16");
    c.ok = near(host(dOut, want.size()), want, 1e-4, atol, "bf16 out",
                c.worst) &&
           c.ok;
    c.rc(otcrt_expert_matmul_wgrad_bf16(rows, experts, depth, width, t, ddy, dx,
                                        dIds, dDw, nullptr),
         "otcrt_expert_matmul_wgrad_bf16");
    c.ok = near(host(dDw, wantDw.size()), wantDw, 1e-4, atol, "bf16 dw",
                c.worst) &&
           c.ok;
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
  // More rows than one sort of the scratch holds (4 MiB / 16 bytes).
  testExpert(rng, "batches", 16, 32, 40, false, uniformIds(300000, 16, rng));
}

} // namespace cudatest
