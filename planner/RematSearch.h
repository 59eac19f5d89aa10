//===- RematSearch.h - the search of --remat=auto ------------------*- C++ -*-===//
//
// --remat=auto's choice: each candidate of the recompute frontier
// (passes/Remat.h) planned through the rest of the pipeline, which this
// library runs on a copy per candidate; otc-compile and otc-plan choose
// through solveAutoRemat, then otc-remat applies the choice (its `blocks`).
// No pass builds a pipeline: the searches live here, above the passes.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PLANNER_REMATSEARCH_H
#define OTC_PLANNER_REMATSEARCH_H

#include "passes/Pipeline.h"
#include "passes/Remat.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <optional>

namespace otc {

/// The total peak the rest of the pipeline plans for `module` (with
/// @train_step, before recomputation) under `choice`: the choice and the back
/// end (addBackEnd) run on a copy, and the peak is its arena plus the target's
/// memory outside it, as plan.json's `total_peak` reports it.
/// A step cost of a planned module (after otc-plan-buffers) in seconds, or
/// none when it cannot be costed: otc-compile's predicted step time.
using PlannedCost = std::function<std::optional<double>(mlir::ModuleOp)>;

/// With `cost`, also writes the planned copy's cost to `seconds`.
mlir::FailureOr<int64_t> plannedPeak(mlir::ModuleOp module,
                                     llvm::ArrayRef<RematChoice> choice,
                                     const BackEndOptions &backEnd,
                                     const PlannedCost *cost = nullptr,
                                     double *seconds = nullptr);

/// What --remat=auto chooses for one budget.
struct AutoRematResult {
  /// The chosen per-block choice; none when no candidate fits.
  std::optional<llvm::SmallVector<RematChoice>> choice;
  /// The planned total peak of the choice.
  int64_t peak = 0;
  /// The smallest planned total peak of any candidate: the least budget
  /// that fits.
  int64_t smallestPeak = 0;
  /// The candidate of that peak (what a plan that fits no budget is made
  /// of, for the explanation of what would fit).
  std::optional<llvm::SmallVector<RematChoice>> smallest;
  /// The choice's cost, when the solver was given one.
  std::optional<double> seconds;
};

/// A frontier of at most kExhaustivePlans candidates, whose count times the
/// ops of the step is at most kExhaustivePlanWork, is planned candidate by
/// candidate; a longer one (models of hundreds of blocks, where planning one
/// costs as much as the whole back end) by a search of at most kSearchPlans
/// plans around the budget.
constexpr size_t kExhaustivePlans = 32;
constexpr size_t kExhaustivePlanWork = 64000;
constexpr unsigned kSearchPlans = 8;

/// The one solver of --remat=auto (otc-remat policy=auto and otc-compile):
/// among the candidates of `frontier` (rematFrontier of `module`) whose
/// planned total peak (plannedPeak) fits `budget`, the least `cost` when one
/// is given (otc-compile: the predicted step time on its device, so that
/// recomputing a memory-bound op costs its bytes, not its FLOPs), else the
/// least recompute FLOPs; the fewer FLOPs, then the smaller peak, on ties.
/// The candidates, their peaks and costs do not depend on the budget, so a
/// larger budget never costs more, and the peak of the choice is the peak
/// the build plans, so the budget is never exceeded. With a cost, each
/// planned candidate that fits is also planned with `selective` in place of
/// its `none` blocks (fused activations recomputed in the backward: tiny
/// FLOPs, often less time and memory than keeping them), and that variant
/// is one of the choices.
///
/// Past those limits only some candidates are planned: starting from the
/// one with the most measured memory that fits, it steps by the offset
/// between planned and measured peaks seen last until a candidate that fits
/// and its neighbour with more memory, which does not, are planned, and
/// chooses among the planned ones (so a larger budget is no longer
/// guaranteed to cost no more; the budget is still never exceeded). When
/// none of those fits, every candidate is planned, as below the limits, so
/// a budget that some candidate fits is never refused, and the smallest
/// peak is the least of all.
mlir::FailureOr<AutoRematResult>
solveAutoRemat(mlir::ModuleOp module, int64_t budget,
               const BackEndOptions &backEnd,
               llvm::ArrayRef<RematCandidate> frontier,
               const PlannedCost *cost = nullptr);

} // namespace otc

#endif // OTC_PLANNER_REMATSEARCH_H
