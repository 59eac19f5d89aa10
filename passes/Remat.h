//===- Remat.h - recomputation analysis and rewriting ------------*- C++ -*-===//
//
// The pieces of otc-remat that the driver and tests use: the block structure
// of a train step and the rewrite that recomputes chosen forward values.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_REMAT_H
#define OTC_PASSES_REMAT_H

#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
  /// How many blocks repeat one pattern (the transformer layers).
  unsigned repeatedBlocks = 0;
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

/// The recompute frontier of a module with @train_step: Pareto-optimal
/// per-block choices, each measured exactly, from least to most memory.
mlir::FailureOr<std::vector<RematCandidate>>
rematFrontier(mlir::ModuleOp module);

/// Bytes of the state that lives through a step: parameters, inputs,
/// gradients and the two Adam moments of every trained parameter.
int64_t persistentBytes(mlir::func::FuncOp step);

/// Reads "12GiB", "500MB", "1.5 GiB" or a byte count.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace otc

#endif // OTC_PASSES_REMAT_H
