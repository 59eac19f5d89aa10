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
/// `progress`, when given, hears (candidates measured, candidates) as the
/// measuring goes.
mlir::FailureOr<std::vector<RematCandidate>>
rematFrontier(mlir::ModuleOp module,
              llvm::function_ref<void(size_t, size_t)> progress = nullptr);

/// Bytes of the state that lives through a step: parameters, inputs,
/// gradients and the two Adam moments of every trained parameter.
int64_t persistentBytes(mlir::func::FuncOp step);

/// Reads "12GiB", "500MB", "1.5 GiB" or a byte count.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace otc

#endif // OTC_PASSES_REMAT_H
