//===- Pipeline.h - the otc pass pipeline, assembled once --------*- C++ -*-===//
//
// The compiler's phases after import, in order, and the one function that
// adds the passes of a range of them to a pass manager. otc-compile runs the
// phases through it (stopping where --compile-to says), and --remat=auto
// plans each recomputation candidate through the same back end, so that
// what it measures is what the driver then builds.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_PIPELINE_H
#define OTC_PASSES_PIPELINE_H

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace otc {

/// The phases after import, in pipeline order. Each adds at most one pass.
enum class Phase {
  FoldShapes,
  Fuse,
  Differentiate,
  Remat,
  MixedPrecision,
  FuseReductions,
  Schedule,
  TrainingLoop,
  Buffers,
  FuseEpilogues,
  FuseElementwise,
  Plan,
};

/// The first and last phase.
constexpr Phase kFirstPhase = Phase::FoldShapes;
constexpr Phase kLastPhase = Phase::Plan;

/// The name of `phase` as --compile-to spells it ("fold-shapes", ...).
llvm::StringRef phaseName(Phase phase);

/// The phase named `name`, if any.
std::optional<Phase> parsePhase(llvm::StringRef name);

/// What the driver says when `phase` fails ("differentiation failed").
llvm::StringRef phaseFailure(Phase phase);

/// The switches of the phases after recomputation (the facts they depend
/// on, precision, grad-accum, AdamW, target, are the module's configuration,
/// ir/Config.h). The recomputation solver plans its candidates with these.
struct BackEndOptions {
  /// otc-fuse-elementwise runs (off: --no-fuse-elementwise).
  bool fuseElementwise = true;
  /// otc-fuse-gemm-sums runs (off: --no-gemm-sums).
  bool fuseGemmSums = true;
  /// otc-group-params runs (off: --no-group-params).
  bool groupParams = true;
  /// otc-pack-attention runs (off: --no-pack-attention).
  bool packAttention = true;
  /// otc-fuse-loss-grad runs (off: --no-fuse-loss-grad).
  bool fuseLossGrad = true;
  /// otc-chunk-loss runs after it (off: --no-chunked-loss), with chunks of
  /// this many rows (0: its default size).
  bool chunkedLoss = true;
  int64_t lossChunkRows = 0;
  /// The predicted seconds of an otc.linear_cross_entropy_with_grad on the
  /// compile's device (the driver's step-time model); with it, otc-chunk-
  /// loss chooses the chunk by price (Passes.td).
  LossChunkPricer priceLossChunk;
  /// Under precision fp8, whether a GEMM pays in FP8 on the compile's
  /// device (the driver's step-time model); without it otc-fp8-gemms marks
  /// every GEMM that can run FP8 (otc-compile --fp8-gemms=all).
  Fp8GemmPricer fp8Pays;
  /// otc-fp8-copies makes the parameters' FP8 copies once per optimizer
  /// step, in @zero_grads (off: in every micro-step, as temporaries).
  bool fp8StepWeights = true;
  /// otc-training-loop also builds @decode_step (--generate).
  bool generate = false;
};

/// The options of every phase.
struct PipelineOptions {
  /// otc-fuse-patterns runs (off: --no-fuse), with remarks or without.
  bool fuse = true;
  bool fusionRemarks = false;
  /// otc-sparse-prediction after it: the loss at this many positions per
  /// sequence (0: every position, no pass; kAutoPredictPositions: the
  /// pass's choice).
  int64_t sparsePrediction = 0;
  /// otc-differentiate: the loss output and the frozen initializers.
  std::string lossName, freeze;
  /// otc-remat: the policy and, for auto, the per-block choice searched
  /// above the pipeline (planner/RematSearch.h).
  std::string rematPolicy = "none", rematBlocks;
  BackEndOptions backEnd;
};

/// Adds the passes of the phases `first` through `last` to `pm`. Phases
/// that are off (fuse without `fuse`) add nothing; mixed precision does
/// nothing under a configuration of precision "fp32".
void addPhases(mlir::OpPassManager &pm, Phase first, Phase last,
               const PipelineOptions &options);

/// Adds the phases after recomputation: mixed-precision through plan.
void addBackEnd(mlir::OpPassManager &pm, const BackEndOptions &options);

} // namespace otc

#endif // OTC_PASSES_PIPELINE_H
