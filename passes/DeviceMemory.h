//===- DeviceMemory.h - device memory outside the planned arena -*- C++ -*-===//
//
// What a training program's process holds on the device besides the arena
// that otc-plan-buffers lays out, so that a planned total peak can be set
// against a measured one (nvidia-smi's figure per process): the buffers the
// cuda runtime and its libraries allocate for themselves (`libraries`: the
// cuBLASLt workspace, cuDNN's SDPA workspaces, the attention kernels'
// scratch) and the CUDA context with the libraries' handles (`context`, an
// estimate). The cpu target holds neither. plan.json's `total_peak`, the
// peak --remat=auto and --fit hold to a budget, is the arena plus both.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_DEVICEMEMORY_H
#define OTC_PASSES_DEVICEMEMORY_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otc {

/// One buffer a runtime or library allocates outside the arena.
struct OutsideBuffer {
  /// A short name ("gemm_workspace", "cudnn_sdpa_backward").
  std::string name;
  int64_t bytes = 0;
  /// Where the figure comes from.
  std::string basis;
};

/// The device memory of a program outside its arena.
struct OutsideArena {
  /// The cuBLASLt workspace (plan.json's `workspace`), one of `buffers`.
  int64_t gemmWorkspace = 0;
  /// Every buffer the runtime and its libraries allocate.
  std::vector<OutsideBuffer> buffers;
  /// The CUDA context and the libraries' handles (estimate), and its basis.
  int64_t context = 0;
  std::string contextBasis;

  /// The bytes of `buffers`.
  int64_t libraries() const;
  int64_t total() const { return libraries() + context; }
};

/// The memory outside the arena of a planned module (after otc-plan-buffers)
/// for the target of its configuration, as its folder in targets/ counts it:
/// cuda's buffers and context, or none (the cpu target, a target not
/// registered, or a module without a configuration).
OutsideArena memoryOutsideArena(mlir::ModuleOp planned);

/// The planned total peak of a planned module: its arena plus its memory
/// outside the arena (plan.json's `total_peak`); failure when it has no
/// arena.
mlir::FailureOr<int64_t> plannedTotalPeak(mlir::ModuleOp planned);

} // namespace otc

#endif // OTC_PASSES_DEVICEMEMORY_H
