//===- TargetRegistry.h - the targets a tool knows -------------*- C++ -*-===//
//
// One entry per target (cpu, cuda), filled by the target's own folder
// (targets/<t>/) when a tool starts (targets/Targets.h: registerAllTargets)
// and read by every layer for the part whose type it owns: the
// configuration's verifier (ir/) the names of targets and devices, the
// memory accounting (passes/DeviceMemory.h) the memory a program holds
// outside its arena, the emitter (codegen/Target.h) how a program is
// printed and built, the step-time model (perf/DeviceModel.h) the devices
// and (perf/GridLaunch.h) the launches, which the target attaches to the
// ops as external interface models when the dialects load.
// The registry lives here, below them all, and holds those parts as
// pointers to types it does not know; nothing in ir/, passes/, codegen/ or
// perf/ names a target.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_TARGETREGISTRY_H
#define OTC_IR_TARGETREGISTRY_H

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace otc {

class Target;        // codegen/Target.h
struct DeviceModel;  // perf/DeviceModel.h
struct OutsideArena; // passes/DeviceMemory.h

/// One device model a target's programs are predicted on.
struct TargetDevice {
  /// The `--device` name.
  std::string name;
  const DeviceModel *model = nullptr;
};

/// One target as the layers see it.
struct TargetEntry {
  /// The `--target` name.
  std::string name;
  /// Its device models, the default (`--device` not given) first.
  std::vector<TargetDevice> devices;
  /// How its programs are emitted and built.
  const Target *emitter = nullptr;
  /// Fills the device memory a planned program holds outside its arena;
  /// null: none (the cpu target).
  void (*memoryOutsideArena)(mlir::ModuleOp planned,
                             OutsideArena &result) = nullptr;
  /// Attaches the target's external interface models to the ops of
  /// `dialect` (its machine model: what a GPU target launches for each op,
  /// perf/GridLaunch.h); called by the otc dialects as they load
  /// (attachTargetInterfaces), so every context has them. Null: none (the
  /// cpu target, whose launches the roofline prices). One target per
  /// interface: a second GPU target would key its models by device.
  void (*attachInterfaces)(mlir::Dialect &dialect) = nullptr;
  /// Whether its runtime sums a data-parallel run's gradient buckets while
  /// the backward goes on (ir/GradientBuckets.h; the cpu target: MPI's
  /// non-blocking all-reduce started from micro_step's hooks; cuda: NCCL's
  /// on a communication stream, queued from the same hooks). Otherwise
  /// the sum follows the backward, all of it exposed.
  bool overlapsGradientSum = false;

  llvm::StringRef defaultDevice() const {
    return devices.empty() ? llvm::StringRef() : devices.front().name;
  }
  /// The device called `name` among this target's, or null.
  const TargetDevice *device(llvm::StringRef name) const;
};

/// Adds `entry`, or replaces the entry of the same name.
void registerTarget(TargetEntry entry);

/// The target called `name`, or null.
const TargetEntry *lookupTargetEntry(llvm::StringRef name);

/// Every registered target, in registration order.
llvm::ArrayRef<TargetEntry> registeredTargets();

/// Lets every registered target attach its interface models to the ops of
/// `dialect` (TargetEntry::attachInterfaces): what OtcDialect and
/// OtckDialect call from their initialize. Targets registered after a
/// context loaded the dialects attach nothing to it: tools register the
/// targets first (targets/Targets.h).
void attachTargetInterfaces(mlir::Dialect &dialect);

/// Their names ("cpu, cuda"), or "none registered" for an error line.
std::string registeredTargetNames();

/// The names of every target's devices ("cpu, h100, h200").
std::string registeredDeviceNames();

} // namespace otc

#endif // OTC_IR_TARGETREGISTRY_H
