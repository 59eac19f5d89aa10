//===- LaunchModel.cpp - the time of one kernel launch from its grid ------===//
//
// Waves, residency, serial steps and the GEMM's wave quantization: see
// LaunchModel.h for the model.
//
//===----------------------------------------------------------------------===//

#include "perf/LaunchModel.h"

#include <algorithm>
#include <cmath>

using namespace otc;

llvm::StringRef otc::limitName(Limit limit) {
  switch (limit) {
  case Limit::Bandwidth:
    return "bandwidth";
  case Limit::Compute:
    return "compute";
  case Limit::Latency:
    return "latency";
  case Limit::Launch:
    return "launch";
  }
  return "";
}

double LaunchCost::total() const {
  double t = 0;
  for (double s : seconds)
    t += s;
  return t;
}

Limit LaunchCost::binding() const {
  unsigned best = 0;
  for (unsigned i = 1; i < kNumLimits; ++i)
    if (seconds[i] > seconds[best])
      best = i;
  return static_cast<Limit>(best);
}

LaunchCost &LaunchCost::operator+=(const LaunchCost &other) {
  for (unsigned i = 0; i < kNumLimits; ++i)
    seconds[i] += other.seconds[i];
  waves += other.waves;
  return *this;
}

int64_t otc::residentBlocks(const DeviceModel &d, int64_t threads,
                            int64_t sharedBytes) {
  int64_t byThreads = d.maxThreadsPerSm / std::max<int64_t>(threads, 1);
  int64_t blocks = std::min(d.maxBlocksPerSm, byThreads);
  if (sharedBytes > 0 && d.sharedPerSm > 0)
    blocks = std::min(blocks, d.sharedPerSm / (sharedBytes + (1 << 10)));
  return std::max<int64_t>(1, blocks);
}

LaunchCost otc::priceKernel(const DeviceModel &d, const KernelLaunch &k,
                            double flops) {
  LaunchCost c;
  c[Limit::Launch] = d.launchSeconds();
  if (k.blocks <= 0)
    return c;
  int64_t slots = d.sms * residentBlocks(d, k.threads, k.sharedBytes);
  c.waves = (k.blocks + slots - 1) / slots;
  double latency = k.steps * d.memoryLatency + k.cachedSteps * d.cacheLatency;
  // The full waves are alike; the tail holds the blocks left over.
  auto wave = [&](int64_t blocks, int64_t count) {
    if (count <= 0)
      return;
    double share = double(blocks) / double(k.blocks);
    double lanes = std::min(1.0, double(blocks) * double(k.threads) /
                                     double(d.sms * d.fp32LanesPerSm));
    double bandwidth = k.bytes * share / d.bandwidth;
    double compute = flops * share / (d.vectorRate * lanes);
    Limit limit = Limit::Bandwidth;
    double seconds = bandwidth;
    if (compute > seconds) {
      limit = Limit::Compute;
      seconds = compute;
    }
    if (latency > seconds) {
      limit = Limit::Latency;
      seconds = latency;
    }
    c[limit] += count * seconds;
  };
  int64_t tail = k.blocks - (c.waves - 1) * slots;
  wave(slots, c.waves - 1);
  wave(tail, 1);
  return c;
}

LaunchCost otc::priceRoofline(const DeviceModel &d, double workSeconds,
                              double bytes) {
  LaunchCost c;
  c[Limit::Launch] = d.launchSeconds();
  double bandwidth = bytes / d.bandwidth;
  if (workSeconds >= bandwidth)
    c[Limit::Compute] = workSeconds;
  else
    c[Limit::Bandwidth] = bandwidth;
  return c;
}

double otc::gemmWaveEfficiency(const DeviceModel &d, int64_t m, int64_t n,
                               int64_t k, int64_t batch) {
  if (d.sms <= 0 || d.gemmTile <= 0)
    return 1.0;
  auto tilesOf = [&](int64_t x) { return (x + d.gemmTile - 1) / d.gemmTile; };
  int64_t tiles = tilesOf(m) * tilesOf(n) * std::max<int64_t>(batch, 1);
  if (tiles <= 0)
    return 1.0;
  int64_t maxSplit =
      std::max<int64_t>(1, k / std::max<int64_t>(d.gemmMinSplitK, 1));
  double best = 0;
  for (int64_t s = 1; s <= maxSplit; ++s) {
    int64_t units = tiles * s;
    int64_t waves = (units + d.sms - 1) / d.sms;
    best = std::max(best, double(units) / double(waves * d.sms));
  }
  return best;
}
