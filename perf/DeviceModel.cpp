//===- DeviceModel.cpp - the devices of the registered targets ------------===//
//
// Each target's device models live in its folder (targets/<t>/Devices.cpp)
// and are found through ir/TargetRegistry.h; this file looks them up and
// prices a GEMM on a rate's curve.
//
//===----------------------------------------------------------------------===//

#include "perf/DeviceModel.h"
#include "ir/TargetRegistry.h"

using namespace otc;

const DeviceModel *otc::lookupDevice(llvm::StringRef name) {
  for (const TargetEntry &t : registeredTargets())
    if (const TargetDevice *d = t.device(name))
      return d->model;
  return nullptr;
}

std::string otc::knownDeviceNames() { return registeredDeviceNames(); }

double otc::gemmSeconds(const GemmRate &r, double flops, int64_t k,
                        double efficiency, double epilogueScale) {
  if (flops <= 0)
    return 0;
  double depth = double(k) / (double(k) + r.depthKnee * epilogueScale);
  return flops / (r.rate * depth * efficiency) + r.fixedSeconds;
}

double otc::allReduceSeconds(const DeviceModel &d, double bytes,
                             int64_t ranks) {
  return ringSeconds(d, bytes, ranks, 2);
}

double otc::ringSeconds(const DeviceModel &d, double bytes, int64_t ranks,
                        int passes) {
  if (ranks <= 1 || bytes <= 0)
    return 0;
  double n = double(ranks);
  return d.collectiveLatency +
         passes * (n - 1.0) / n * bytes / d.allReduceBusBandwidth;
}

double otc::gemmEpilogueScale(bool bf16Curve, double bytesPerElement) {
  return bytesPerElement / (bf16Curve ? 2.0 : 4.0);
}
