//===- LaunchModel.h - the time of a kernel launch by its grid --*- C++ -*-===//
//
// Prices one kernel launch on a GPU of perf/DeviceModel.h by what it
// does, not only by what its bytes allow. A launch of B blocks of T threads
// (KernelLaunch, perf/GridLaunch.h) runs in waves: an SM holds
//   R = min(maxBlocksPerSm, floor(maxThreadsPerSm / T))
// blocks at once, so W = ceil(B / (SMs · R)) waves, the last one (the tail)
// holding what is left. Wave w, with B_w blocks, takes the longest of
//   bandwidth  bytes · B_w/B / bandwidth
//   compute    FLOPs · B_w/B / (vectorRate · min(1, B_w·T / (SMs · lanes)))
//   latency    steps · memoryLatency + cachedSteps · cacheLatency
// where steps are the dependent loads of the kernel's longest thread (a
// loop of N iterations that each wait for a load costs N latencies). The
// latency term is also Little's law: a wave that moves its bytes in `steps`
// rounds keeps bytes / steps in flight, which sustains at most
// (bytes / steps) / latency, so too few threads or loads in flight cannot
// saturate the memory. The launch costs W waves plus a fixed launch
// overhead. Each wave's time is charged to the limit that set it, and the
// launch's binding limit is the one charged the most: `bandwidth`,
// `compute`, `latency` (occupancy and serial work) or `launch` (the
// overhead outweighs the work).
//
// GEMMs keep their measured curve (DeviceModel's GemmRate), divided by the
// share of the SMs their output tiles keep busy over their waves; launches
// priced by a measured rate or by bytes alone (attention, memsets, copies,
// every launch on the cpu) by `priceRoofline`.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_LAUNCHMODEL_H
#define OTC_CODEGEN_LAUNCHMODEL_H

#include "perf/DeviceModel.h"
#include "perf/GridLaunch.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>

namespace otc {

/// What sets the time of (part of) a launch.
enum class Limit { Bandwidth, Compute, Latency, Launch };
constexpr unsigned kNumLimits = 4;

/// "bandwidth", "compute", "latency" or "launch".
llvm::StringRef limitName(Limit limit);

/// Seconds of a launch (or of several), each charged to the limit that set
/// it.
struct LaunchCost {
  std::array<double, kNumLimits> seconds{};
  /// Waves of its grid (0 for a launch priced without one).
  int64_t waves = 0;

  double total() const;
  /// The limit charged the most seconds (ties: bandwidth, compute, latency,
  /// launch, in that order).
  Limit binding() const;
  double &operator[](Limit l) { return seconds[static_cast<unsigned>(l)]; }
  double operator[](Limit l) const { return seconds[static_cast<unsigned>(l)]; }
  LaunchCost &operator+=(const LaunchCost &other);
};

/// Blocks of `threads` threads, each with `sharedBytes` of dynamic shared
/// memory, one SM of `device` holds at once (at least one).
int64_t residentBlocks(const DeviceModel &device, int64_t threads,
                       int64_t sharedBytes = 0);

/// The time of kernel launch `k` computing `flops` on `device`, a GPU
/// (device.sms > 0), launch overhead included.
LaunchCost priceKernel(const DeviceModel &device, const KernelLaunch &k,
                       double flops);

/// The time of a launch whose work takes `workSeconds` (a measured rate)
/// unless its `bytes` take longer at the device's bandwidth, launch overhead
/// included: `compute` or `bandwidth` binds, or `launch`.
LaunchCost priceRoofline(const DeviceModel &device, double workSeconds,
                         double bytes);

/// The share of a GPU's SMs that an M x N x K product (`batch` of them)
/// keeps busy over its waves: ceil(M / tile) · ceil(N / tile) · batch output
/// tiles, each split along K into s slices of at least gemmMinSplitK (the
/// split that fills the SMs best, s from 1), one tile slice per SM at a
/// time: units / (waves · SMs). 1 on the cpu.
double gemmWaveEfficiency(const DeviceModel &device, int64_t m, int64_t n,
                          int64_t k, int64_t batch);

} // namespace otc

#endif // OTC_CODEGEN_LAUNCHMODEL_H
