//===- Cpu.h - the cpu target's parts --------------------------*- C++ -*-===//
//
// What targets/cpu/ registers (Register.cpp): its emitter (Emitter.cpp) and
// its device model (Devices.cpp). The cpu runtime holds no device memory
// outside the arena.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TARGETS_CPU_CPU_H
#define OTC_TARGETS_CPU_CPU_H

#include "codegen/Target.h"
#include "perf/DeviceModel.h"

#include "llvm/ADT/ArrayRef.h"

namespace otc::cpu {

const Target &emitter();
/// Its device models, the default first.
llvm::ArrayRef<DeviceModel> devices();

} // namespace otc::cpu

#endif // OTC_TARGETS_CPU_CPU_H
