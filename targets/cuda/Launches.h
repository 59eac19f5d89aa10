//===- Launches.h - what the cuda target launches --------------*- C++ -*-===//
//
// The cuda target's machine model: how its programs and its runtime launch
// kernels (grids, blocks, the loop of one thread), which calls cuDNN runs,
// read from the launch sites of runtime/cuda/ and the constants of
// runtime/include/otcrt/launch_config.h. The emitter (Emitter.cpp) prints
// generated kernels' launches from it, and the step-time model reads it
// through GridLaunchOpInterface (perf/GridLaunch.h), whose models this
// target attaches to the ops when the dialects load (attachLaunchModels).
// A figure of the device (SMs, L1, threads per SM) comes from the device
// model the prediction is for (Devices.cpp), never from a constant here.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TARGETS_CUDA_LAUNCHES_H
#define OTC_TARGETS_CUDA_LAUNCHES_H

#include "ir/OtckDialect.h"
#include "perf/DeviceModel.h"
#include "perf/GridLaunch.h"

#include "mlir/IR/Dialect.h"

namespace otc::cuda {

/// Threads per block of a generated kernel, and the most blocks it is
/// launched with (a grid-stride loop takes the items beyond): the emitted
/// OTC_LAUNCH.
constexpr int64_t kGeneratedBlock = 256;
constexpr int64_t kGeneratedMaxBlocks = 4096;

/// The launch of generated kernel `k`: blocks of kGeneratedBlock threads, as
/// many as its work items need (the elements of a chain, each item
/// otherwise) up to kGeneratedMaxBlocks, counting only the blocks that get
/// work; each thread takes every (blocks x threads)-th unit of work (a
/// vector of a vectorized chain, else an item), each unit the item's steps
/// (codegen/KernelBodies.h: workItemSteps). Bytes are left to the caller.
KernelLaunch generatedLaunch(otck::KernelOp k);

/// The runtime's gradient norm (sum_squares.cu: otcrt_grad_factor) over
/// gradient slots of `elementsByWidth`: one grid of partial sums of
/// squares per element width, then one block adding the partials
/// (DeviceModel::gradientNormLaunches).
void gradientNormLaunches(
    const DeviceModel &device,
    llvm::ArrayRef<std::pair<int64_t, int64_t>> elementsByWidth,
    llvm::SmallVectorImpl<KernelLaunch> &launches);

/// Whether a call of `op` (otc.attention or otc.attention_grad) runs on
/// cuDNN's SDPA rather than the kernel library's own kernels: BF16 storage,
/// no dropout, no soft cap, no mask gradient, a head size that is a
/// multiple of 8 up to 256 and a mask, if any, a key padding (key_padding:
/// given as lengths, with a sliding window or not) or contiguous along the
/// keys, and either broadcast over the queries (it is written out) or with
/// rows 16-byte aligned
/// (runtime/cuda/attention_dispatch.cpp and attention_cudnn.cpp).
bool attentionRunsOnCudnn(mlir::Operation *op);

/// Whether a call of `op` gives cuDNN its key padding as per-sequence
/// lengths (key_padding on a call cuDNN runs): no mask tensor is read or
/// written, 2 x b int32 lengths are (runtime/cuda/attention.h, keyLengths).
bool attentionKeyPaddingAsLengths(mlir::Operation *op);

/// The elements of the mask a call of `op` writes out before cuDNN's SDPA
/// reads it: [b|1, h, t, s], rows padded to 8 elements, for a mask
/// broadcast over the queries (a key padding), whose bias cuDNN takes with
/// a full query dimension (runtime/cuda/attention.h, maskOverQueries); 0
/// when it reads the mask as it is, takes it as lengths or does not run
/// the call.
int64_t attentionMaskWrittenOut(mlir::Operation *op);

/// Attaches the GridLaunchOpInterface models of `dialect`'s ops: every
/// library call of the otc dialect (LibraryLaunches.cpp), otck.kernel
/// (generatedLaunch). The cuda entry's TargetEntry::attachInterfaces.
void attachLaunchModels(mlir::Dialect &dialect);

} // namespace otc::cuda

#endif // OTC_TARGETS_CUDA_LAUNCHES_H
