//===- Targets.h - registering the targets --------------------*- C++ -*-===//
//
// Every target otc compiles for has a folder here, holding all that differs
// between targets above the runtime:
//   <t>/Emitter.cpp   how a program is printed and built (codegen/Target.h)
//   <t>/Devices.cpp   the device models its time is predicted on
//                     (perf/DeviceModel.h)
//   <t>/Memory.cpp    what its runtime holds on the device outside the arena
//                     (passes/DeviceMemory.h), where it holds anything
//   <t>/Launches.h    a GPU target's machine model: what its runtime launches
//                     for each op, attached to the ops as GridLaunchOpInterface
//                     models (perf/GridLaunch.h) when the dialects load
//   <t>/Register.cpp  its entry in ir/TargetRegistry.h
// and its runtime is runtime/<t>/. A new target is a new folder and one
// line in Targets.cpp; a new device of a target (another GPU) is a model in
// its Devices.cpp (its SMs, L1 and rates, which the launch models read)
// plus its nvcc architecture.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TARGETS_TARGETS_H
#define OTC_TARGETS_TARGETS_H

namespace otc {

/// Registers every target (cpu, cuda) in ir/TargetRegistry.h. Each tool
/// calls it before it reads or builds a configuration; calling it again
/// does nothing.
void registerAllTargets();

} // namespace otc

#endif // OTC_TARGETS_TARGETS_H
