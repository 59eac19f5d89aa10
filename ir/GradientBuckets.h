//===- GradientBuckets.h - gradients reduced as the backward ends them -*- C++ -*-===//
//
// Data parallelism overlapped with the backward: the gradient slots of
// @micro_step grouped into buckets in the order the backward finishes them
// (each slot's last byte user), so that the runtime can start summing a
// bucket over the ranks while the backward goes on. Read by the emitter
// (the otcrt_gradients_ready hooks and the program's bucket table) and by the
// step-time model (the part of the sum the backward hides).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_GRADIENTBUCKETS_H
#define OTC_IR_GRADIENTBUCKETS_H

#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

namespace otc {

/// Gradient slots whose last writer has run: their sum over the ranks can
/// start after `after`, an op of @micro_step's body.
struct GradientBucket {
  mlir::Operation *after = nullptr;
  llvm::SmallVector<otck::BufferOp> slots;
  int64_t bytes = 0;
};

/// The buckets of `microStep`'s "grad:" slots (planned buffers): the slots
/// sorted by their last byte user in the body (a "group:grad" buffer's
/// users count for all of them), a bucket closed after the slot that brings
/// it to at least `minBytes`, the last one after the last slot. Empty when
/// the function names no gradient slot.
llvm::SmallVector<GradientBucket> gradientBuckets(mlir::func::FuncOp microStep,
                                                  int64_t minBytes);

/// The bucket size otc uses: an eighth of the gradients, at least 64 KiB.
int64_t gradientBucketBytes(int64_t gradientBytes);

/// The buckets of a planned program: those of its @micro_step at
/// gradientBucketBytes when its configuration has several ranks, the
/// optimizer not sharded (ZeRO-1 reduce-scatters the whole group after the
/// backward), on a target whose runtime overlaps the sum (TargetEntry::
/// overlapsGradientSum); else none.
llvm::SmallVector<GradientBucket> programGradientBuckets(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_IR_GRADIENTBUCKETS_H
