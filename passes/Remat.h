//===- Remat.h - recomputation analysis and rewriting ------------*- C++ -*-===//
//
// The pieces of otc-remat that the driver and tests use: the block structure
// of a train step and the rewrite that recomputes chosen forward values.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_REMAT_H
#define OTC_PASSES_REMAT_H

#include "ir/OtcDialect.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"

namespace otc {

/// A group of forward ops recomputed together under `full`.
struct RematBlock {
  /// Data-dependent forward ops, in order.
  llvm::SmallVector<mlir::Operation *> ops;
  /// The value the block starts from (kept under `full`); null for the first.
  mlir::Value input;
  /// What `selective` recomputes: the attention core (scores to
  /// probabilities) where attention is not fused, and the fused activations
  /// (GELU, SiLU), whose inputs the products keep anyway.
  llvm::SmallVector<mlir::Operation *> selectiveOps;
};

/// The structure of @train_step that recomputation decides over.
struct RematAnalysis {
  mlir::func::FuncOp step;
  /// The ops the loss depends on, in order.
  llvm::SmallVector<mlir::Operation *> forward;
  /// Forward values the backward reads.
  llvm::DenseSet<mlir::Value> saved;
  llvm::SmallVector<RematBlock> blocks;
};

mlir::FailureOr<RematAnalysis> analyzeTrainStep(mlir::func::FuncOp step);

/// Makes the backward of `step` recompute the values in `recompute` (forward
/// op results) from the others; returns the FLOPs of the clones.
int64_t applyRecompute(mlir::func::FuncOp step,
                       const llvm::DenseSet<mlir::Value> &recompute,
                       llvm::SmallVectorImpl<mlir::Operation *> *clonedOps =
                           nullptr);

/// What one block does under recomputation.
enum class RematChoice { None, Selective, Full };

/// One letter per block: n(one), s(elective), f(ull), as otc-remat's
/// `blocks` option and the `otc.remat` attribute spell a choice.
std::string rematBlockString(llvm::ArrayRef<RematChoice> choice);

/// The result of a recomputation choice, measured on a copy of the module.
struct RematOutcome {
  int64_t recomputeFlops = 0;
  /// Persistent state plus the activation peak of the rewritten step.
  int64_t peakBytes = 0;
};

/// Applies `choice` (one per block of analyzeTrainStep) to a copy of
/// `module` and measures it.
mlir::FailureOr<RematOutcome> evaluateRemat(mlir::ModuleOp module,
                                            llvm::ArrayRef<RematChoice> choice);

/// A per-block choice with its exact outcome.
struct RematCandidate {
  llvm::SmallVector<RematChoice> choice;
  RematOutcome outcome;
};

/// The most candidates the recompute frontier of a step of `stepOps` ops
/// keeps: measuring one costs a pass over the step, so a longer Pareto front
/// (models of hundreds of blocks) is thinned to about kFrontierWork /
/// stepOps candidates, evenly spaced, and never to fewer than kMinFrontier.
constexpr size_t kFrontierWork = 2000000;
constexpr size_t kMinFrontier = 32;
size_t maxFrontier(size_t stepOps);

/// The recompute frontier of a module with @train_step: Pareto-optimal
/// per-block choices (at most maxFrontier of them, plus the two ends), each
/// measured exactly, from least to most memory.
mlir::FailureOr<std::vector<RematCandidate>>
rematFrontier(mlir::ModuleOp module);

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
/// the build plans, so the budget is never exceeded.
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

/// Bytes of the state that lives through a step: parameters, inputs,
/// gradients and the two Adam moments of every trained parameter.
int64_t persistentBytes(mlir::func::FuncOp step);

/// Reads "12GiB", "500MB", "1.5 GiB" or a byte count.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace otc

#endif // OTC_PASSES_REMAT_H
