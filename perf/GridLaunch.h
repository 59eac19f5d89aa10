//===- GridLaunch.h - the launches a GPU target makes -----------*- C++ -*-===//
//
// One kernel launch as a target's runtime makes it (KernelLaunch), and the
// interface through which a target that launches grids says what it
// launches for each op (GridLaunchInterface.td). perf/LaunchModel.h prices
// a launch; the targets (targets/cuda/) describe them.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PERF_GRIDLAUNCH_H
#define OTC_PERF_GRIDLAUNCH_H

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace otc {

struct DeviceModel; // perf/DeviceModel.h

/// One kernel launch as its launch configuration makes it, what the step-time
/// prediction (perf/LaunchModel.h) prices: a grid of `blocks` blocks of
/// `threads` threads, the dependent steps of its longest thread (iterations
/// of its loops, each waiting for a load served by memory, `steps`, or by
/// the SM's L1 cache, `cachedSteps`: data its block has just read or that
/// all its threads read), and the bytes it moves to and from memory.
struct KernelLaunch {
  /// What the kernel does ("rows", "column sums"), for people.
  std::string what;
  int64_t blocks = 1, threads = 1;
  int64_t steps = 1, cachedSteps = 0;
  double bytes = 0;
  /// Dynamic shared memory of one block: it bounds the blocks an SM holds.
  int64_t sharedBytes = 0;
};

} // namespace otc

#include "perf/GridLaunchInterface.h.inc"

#endif // OTC_PERF_GRIDLAUNCH_H
