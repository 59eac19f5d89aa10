//===- StepTime.h - predicted time of a planned training step ---*- C++ -*-===//
//
// Prices every launch the emitted program makes (generated kernel, library
// call, GEMM, memset, copy) on a device of perf/DeviceModel.h and adds
// them up. On a GPU a kernel is priced by what its launch does
// (perf/LaunchModel.h: its grid's waves, its threads' serial steps, its
// bytes, plus the launch overhead), from the launches the target's machine
// model describes for a generated kernel or a library call
// (GridLaunchOpInterface, perf/GridLaunch.h); GEMMs by their
// measured curve with their wave quantization, attention by its measured
// rate, memsets and copies by their bytes. On the cpu every launch takes
//   max(FLOPs / rate, bytes / bandwidth) + launch.
// FLOPs come from the cost interface of the ops a kernel computes
// (2·M·N·K·batch for a GEMM); bytes are those its buffers read and write
// (an op's own count, CostOpInterface's getBytesRead/getBytesWritten, when
// the kernel holds one op; the kernel's input and output buffers for a
// fused chain, whose intermediates stay in registers; the sum of its
// kernels' for a library call on a GPU). Each launch carries the name
// `train --trace` gives its span (codegen/Launches.h), so a measured trace
// can be set against it, and the limit that binds it.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_STEPTIME_H
#define OTC_CODEGEN_STEPTIME_H

#include "perf/DeviceModel.h"
#include "perf/LaunchModel.h"

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
  /// The seconds by limit (their sum is `seconds`).
  LaunchCost cost;
  /// The kernels it launches, priced by their grid (a generated kernel's
  /// one, a library call's in order; none for GEMMs, attention, memsets,
  /// copies and every launch on the cpu), with their bytes, and each one's
  /// cost.
  std::vector<std::pair<KernelLaunch, LaunchCost>> kernels;
  /// Kernel launches it makes (a library call may make several).
  int64_t launches = 1;
};

/// The launches of one step that share a function and a trace name.
struct LaunchTotal {
  std::string function, name, kind;
  /// Calls per optimizer step (a micro-step's count grad-accum times).
  int64_t calls = 0;
  /// Per optimizer step.
  double flops = 0, bytes = 0, seconds = 0;
  bool traced = true;
  /// Per optimizer step, by limit; its binding limit is the largest.
  LaunchCost cost;
  /// The kernels of one call (the first), as LaunchTime's.
  std::vector<std::pair<KernelLaunch, LaunchCost>> kernels;
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
  /// zero_grads + grad-accum x micro_step + all-reduce + optimizer_step.
  double zeroGrads = 0, microStep = 0, optimizerStep = 0, step = 0;
  /// Data-parallel ranks (the configuration's world_size), the bytes of
  /// the gradient slots the ranks sum, and the seconds of that ring
  /// all-reduce on the device's link (0 on one rank). It runs after the
  /// last micro-step's backward and before the optimizer step, none of it
  /// hidden: the step waits for all of it.
  int64_t worldSize = 1;
  double gradientBytes = 0, allReduce = 0;
  /// ZeRO-1 (the configuration's shard_optimizer): the gradients are
  /// reduce-scattered instead (`reduceScatter` seconds) and the updated
  /// parameters, `gatherBytes` of them (FP32 and their BF16 copies),
  /// all-gathered after the optimizer step (`allGather`); `allReduce` is
  /// then the two together, the time the step waits for the link.
  bool shardOptimizer = false;
  double reduceScatter = 0, allGather = 0, gatherBytes = 0;
  /// Data parallelism overlapped with the backward (ir/GradientBuckets.h):
  /// each bucket's bytes and all-reduce seconds (`allReduce` is then their
  /// sum). `exposed`: the seconds the step waits for the link, the part
  /// the last micro-step's backward does not hide (`allReduce` when nothing
  /// overlaps); the step adds it.
  std::vector<double> bucketBytes, bucketSeconds;
  double exposed = 0;
  /// Launches per optimizer step.
  int64_t launchesPerStep = 0;
  /// Seconds per optimizer step by kind, largest first (ties by name).
  std::vector<std::pair<std::string, double>> byKind;
  /// Seconds per optimizer step by the limit that set them.
  LaunchCost byLimit;
  /// Launches grouped by function and trace name, largest first.
  std::vector<LaunchTotal> byName;
};

/// Predicts the step of a planned module (after otc-plan-buffers) on the
/// device model and with the grad-accum of its configuration (ir/Config.h).
/// Fails with an error at an op it cannot cost, or without a configuration.
mlir::FailureOr<StepTime> predictStepTime(mlir::ModuleOp module);

/// The predicted time of one library call (an op of LibraryCallOpInterface,
/// at the tensor or the buffer level) on `device`, as the step prices it:
/// its kernels by their grids, its GEMMs on the device's curves (function
/// and name left empty).
LaunchTime priceLibraryCall(const DeviceModel &device, mlir::Operation &op);

} // namespace otc

#endif // OTC_CODEGEN_STEPTIME_H
