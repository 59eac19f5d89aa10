//===- Liveness.h - live ranges of planned buffers ----------------*- C++ -*-===//
//
// The live ranges of a function's temporary buffers after lowering, which
// otc-plan-buffers packs into the arena, and the check that a plan never
// puts two buffers live at once on the same bytes. Planning, plan.json and
// the report share them.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_LIVENESS_H
#define OTC_PASSES_LIVENESS_H

#include "ir/OtckDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

namespace otc {

/// A temporary buffer with its live range [first, last] in op positions of
/// its function. A buffer written in place over a dying input starts one op
/// after the kernel that writes it (its bytes are the input's until then).
struct BufferInterval {
  otck::BufferOp buffer;
  unsigned first, last;
  int64_t size;
};

/// Live ranges of the temporaries of `f` (after lowering), by first use.
llvm::SmallVector<BufferInterval> temporaryLiveRanges(mlir::func::FuncOp f);

/// Checks that no two buffers that are live at the same time overlap in the
/// arena. Emits an error at the first offending buffer.
mlir::LogicalResult verifyBufferPlan(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_PASSES_LIVENESS_H
