//===- Cuda.h - the cuda target's parts ------------------------*- C++ -*-===//
//
// What targets/cuda/ registers (Register.cpp): its emitter (Emitter.cpp),
// its device models (Devices.cpp), the device memory its runtime and
// libraries hold outside the arena (Memory.cpp), and its machine model,
// what it launches for each op (Launches.h: LibraryLaunches.cpp,
// GeneratedLaunches.cpp, Attention.cpp), attached to the ops.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TARGETS_CUDA_CUDA_H
#define OTC_TARGETS_CUDA_CUDA_H

#include "codegen/Target.h"
#include "passes/DeviceMemory.h"
#include "perf/DeviceModel.h"

#include "llvm/ADT/ArrayRef.h"

namespace otc::cuda {

const Target &emitter();
/// Its device models, the default first.
llvm::ArrayRef<DeviceModel> devices();
/// The memory outside the arena of a planned program (DeviceMemory.h).
void memoryOutsideArena(mlir::ModuleOp planned, OutsideArena &result);

} // namespace otc::cuda

#endif // OTC_TARGETS_CUDA_CUDA_H
