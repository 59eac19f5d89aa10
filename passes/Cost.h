//===- Cost.h - FLOP and byte costs of otc ops and functions -----*- C++ -*-===//
//
// The cost model that recomputation, the report and plan.json use: FLOPs of
// one op (CostOpInterface) and of a function, and the activation peak of a
// tensor-level function under its current op order. Byte sizes are
// ir/TypeBytes.h.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_COST_H
#define OTC_PASSES_COST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

namespace otc {

/// Floating-point operations of one execution of `op`: 2·M·N·K per matrix
/// product, a per-element count for the other ops.
int64_t opFlops(mlir::Operation *op);

/// FLOPs of one call of `f`: opFlops of every op in it, nested ops included.
int64_t functionFlops(mlir::func::FuncOp f);

/// Whether the function returns `v` (a parameter's gradient, the loss: it
/// lives in its slot whenever it is computed).
bool isReturned(mlir::Value v);

/// The most bytes of op results live at once in `f` (arguments excluded),
/// in the function's op order: a value lives from its op to its last use;
/// returned values are not counted (persistentBytes counts them).
int64_t activationPeak(mlir::func::FuncOp f);

} // namespace otc

#endif // OTC_PASSES_COST_H
