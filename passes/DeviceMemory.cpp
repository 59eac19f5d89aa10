//===- DeviceMemory.cpp - device memory outside the planned arena ---------===//
//
// The accounting of DeviceMemory.h: the sum of the buffers, and the target
// of the module's configuration asked for them (each target's own
// targets/<t>/Memory.cpp, through ir/TargetRegistry.h).
//
//===----------------------------------------------------------------------===//

#include "passes/DeviceMemory.h"
#include "ir/Config.h"
#include "ir/OtckDialect.h"
#include "ir/TargetRegistry.h"

using namespace mlir;
using namespace otc;

int64_t OutsideArena::libraries() const {
  int64_t n = 0;
  for (const OutsideBuffer &b : buffers)
    n += b.bytes;
  return n;
}

OutsideArena otc::memoryOutsideArena(ModuleOp planned) {
  OutsideArena r;
  ConfigAttr config = getConfig(planned);
  if (!config)
    return r;
  const TargetEntry *target = lookupTargetEntry(config.getTarget());
  if (target && target->memoryOutsideArena)
    target->memoryOutsideArena(planned, r);
  return r;
}

FailureOr<int64_t> otc::plannedTotalPeak(ModuleOp planned) {
  auto arena = planned->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return failure();
  return arena.getInt() + memoryOutsideArena(planned).total();
}
