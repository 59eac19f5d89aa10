//===- Targets.cpp - the list of targets ----------------------------------===//

#include "targets/Targets.h"

namespace otc {
void registerCpuTarget();  // targets/cpu/Register.cpp
void registerCudaTarget(); // targets/cuda/Register.cpp
} // namespace otc

void otc::registerAllTargets() {
  static const bool once = [] {
    registerCpuTarget();
    registerCudaTarget();
    return true;
  }();
  (void)once;
}
