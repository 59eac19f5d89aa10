// The figures of the `cpu` device model (perf/DeviceModel.cpp), measured
// on the machine that runs the cpu target: the rate of the runtime's own
// FP32 GEMM (otcrt_gemm of libotcrt_cpu, the one every cpu program calls)
// on square products, the bandwidth of a large memcpy counting the
// bytes read and written, and the rate of a simple elementwise loop built as
// the generated kernels are (-O2 -fopenmp). Each figure is the best of a few
// repetitions. Build and run, from the repository root after `make build`:
//
//   c++ -O2 -std=c++17 -fopenmp -Iruntime/include bench/cpu_device_rates.cpp \
//       build/lib/libotcrt_cpu.a -o /tmp/cpu_device_rates &&
//       /tmp/cpu_device_rates
#include "otcrt/abi.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

template <typename F> double bestSeconds(int reps, F &&f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

} // namespace

int main() {
  for (int64_t n : {256, 512, 1024}) {
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
    const OtcrtGemm g = {0, 0, n, n, n, 1, 1.0f, 0.0f, OTC_F32, OTC_F32,
                         OTC_F32, OTCRT_GEMM_NONE, n, n, n, 0, 0, 0};
    double s = bestSeconds(3, [&] {
      otcrt_gemm(&g, a.data(), b.data(), c.data(), nullptr, nullptr, nullptr,
                 nullptr);
    });
    std::printf("gemm f32 %lld^3: %.3f ms, %.1f GFLOP/s\n", (long long)n,
                s * 1e3, 2.0 * n * n * n / s / 1e9);
  }
  const size_t bytes = size_t(256) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double s =
      bestSeconds(5, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  std::printf("memcpy 256 MiB: %.3f ms, %.1f GB/s read + written\n", s * 1e3,
              2.0 * bytes / s / 1e9);

  // One multiply-add per element over data that stays in cache: the rate of
  // arithmetic in a generated elementwise loop.
  const int64_t items = 1 << 16;
  std::vector<float> x(items, 1.0f), y(items, 0.0f);
  const int rounds = 1024;
  s = bestSeconds(3, [&] {
    for (int r = 0; r < rounds; ++r) {
#pragma omp parallel for if (items >= 16384)
      for (int64_t i = 0; i < items; ++i)
        y[i] = y[i] * 0.999f + x[i];
    }
  });
  std::printf("elementwise multiply-add: %.1f GFLOP/s (y=%g)\n",
              2.0 * items * rounds / s / 1e9, (double)y[7]);
  return 0;
}
