//===- Register.cpp - the cuda target's entry in the registry -------------===//

#include "ir/TargetRegistry.h"
#include "targets/cuda/Cuda.h"
#include "targets/cuda/Launches.h"

namespace otc {
void registerCudaTarget();
} // namespace otc

void otc::registerCudaTarget() {
  TargetEntry entry;
  entry.name = "cuda";
  for (const DeviceModel &d : cuda::devices())
    entry.devices.push_back({d.name.str(), &d});
  entry.emitter = &cuda::emitter();
  entry.memoryOutsideArena = &cuda::memoryOutsideArena;
  entry.attachInterfaces = &cuda::attachLaunchModels;
  // NCCL's all-reduce of each bucket queued on a communication stream
  // behind the bucket's kernels (runtime/cuda/backend.cpp).
  entry.overlapsGradientSum = true;
  registerTarget(std::move(entry));
}
