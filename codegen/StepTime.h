//===- StepTime.h - predicted time of a planned training step ---*- C++ -*-===//
//
// A roofline over the planned otck program: every launch the emitted program
// makes (generated kernel, library call, GEMM, memset, copy) takes
//   max(FLOPs / rate, bytes / bandwidth) + launch
// on a device of codegen/DeviceModel.h. FLOPs come from the cost interface
// of the ops a kernel computes (2·M·N·K·batch for a GEMM); bytes are those
// its buffers read and write (an op's own count, CostOpInterface's
// getBytesRead/getBytesWritten, when the kernel holds one op; the kernel's
// input and output buffers for a fused chain, whose intermediates stay in
// registers). Each launch carries the name `train --trace` gives its span
// (codegen/Launches.h), so a measured trace can be set against it.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_STEPTIME_H
#define OTC_CODEGEN_STEPTIME_H

#include "codegen/DeviceModel.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace otc {

/// One launch of the program and its predicted time.
struct LaunchTime {
  /// The function it belongs to: "zero_grads", "micro_step" or
  /// "optimizer_step".
  std::string function;
  /// Its trace name ("memset", "copy" for those, which are not traced).
  std::string name;
  /// What it is, for the shares: "gemm", "attention", "layer_norm",
  /// "rms_norm", "cross_entropy", "elementwise", "reduction", "loss",
  /// "data_movement", "optimizer", "memset", "copy", or the op's name.
  std::string kind;
  double flops = 0, bytes = 0;
  /// Predicted seconds, launch included.
  double seconds = 0;
  bool traced = true;
};

/// The launches of one step that share a function and a trace name.
struct LaunchTotal {
  std::string function, name, kind;
  /// Calls per optimizer step (a micro-step's count grad-accum times).
  int64_t calls = 0;
  /// Per optimizer step.
  double flops = 0, bytes = 0, seconds = 0;
  bool traced = true;
};

/// The prediction for one planned program on one device.
struct StepTime {
  const DeviceModel *device = nullptr;
  /// The launch cost charged per launch (graph replay where the target's
  /// runtime replays graphs).
  double launchSeconds = 0;
  int64_t gradAccum = 1;
  /// Every launch, in program order, function by function.
  std::vector<LaunchTime> launches;
  /// Seconds of one call of each function, and of one optimizer step:
  /// zero_grads + grad-accum x micro_step + optimizer_step.
  double zeroGrads = 0, microStep = 0, optimizerStep = 0, step = 0;
  /// Launches per optimizer step.
  int64_t launchesPerStep = 0;
  /// Seconds per optimizer step by kind, largest first (ties by name).
  std::vector<std::pair<std::string, double>> byKind;
  /// Launches grouped by function and trace name, largest first.
  std::vector<LaunchTotal> byName;
};

/// Predicts the step of a planned module (after otc-plan-buffers) on
/// `device`. Fails with an error at an op it cannot cost.
mlir::FailureOr<StepTime> predictStepTime(mlir::ModuleOp module,
                                          const DeviceModel &device,
                                          int64_t gradAccum);

} // namespace otc

#endif // OTC_CODEGEN_STEPTIME_H
