//===- Register.cpp - the cpu target's entry in the registry --------------===//

#include "targets/cpu/Cpu.h"
#include "ir/TargetRegistry.h"

namespace otc {
void registerCpuTarget();
} // namespace otc

void otc::registerCpuTarget() {
  TargetEntry entry;
  entry.name = "cpu";
  for (const DeviceModel &d : cpu::devices())
    entry.devices.push_back({d.name.str(), &d});
  entry.emitter = &cpu::emitter();

  entry.overlapsGradientSum = true;
  registerTarget(std::move(entry));
}
