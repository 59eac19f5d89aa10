//===- FitPlanner.h - the fastest configuration that fits ---------*- C++ -*-===//
//
// `otc-compile MODEL --fit --global-batch-tokens=N --memory-budget=SIZE`:
// every micro-batch that divides the global batch (the rest is gradient
// accumulation) under each recomputation policy (and, over several ranks,
// with the optimizer sharded and not) is compiled through the
// whole pipeline up to buffer planning, its total peak read from the plan
// and its step predicted on the device (perf/StepTime.h); the table of
// the Pareto-best candidates (no other is both faster and smaller) and the
// pick, the fastest whose planned peak fits, are printed.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PLANNER_FITPLANNER_H
#define OTC_PLANNER_FITPLANNER_H

#include "perf/Plan.h"
#include "perf/DeviceModel.h"
#include "frontend/AppendLoss.h"
#include "frontend/OnnxImporter.h"
#include "ir/Config.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace otc {

/// What the planner searches and how it measures.
struct FitRequest {
  std::string modelPath;
  ImportOptions import;
  /// Tokens per optimizer step (micro-batch x tokens per sample x
  /// gradient accumulation), or samples for a model without token ids.
  int64_t globalBatchTokens = 0;
  /// What globalBatchTokens and the rates count, set by planFit: "tokens"
  /// (tokensPerMicroStep), or "samples" for a model without token ids (an
  /// image classifier).
  std::string unit = "tokens";
  /// The most bytes a candidate's planned total peak may take.
  int64_t memoryBytes = 0;
  /// Everything but micro-batch, accumulation and the recompute policy.
  PipelineOptions pipeline;
  /// The configuration each candidate is planned under (ir/Config.h), its
  /// micro-batch and grad-accum set per candidate.
  ConfigParts config;
  /// A loss appended to each import (`--loss=cross_entropy:...`/`mse:...`).
  std::optional<LossSpec> appendedLoss;
};

/// One compiled candidate.
struct FitCandidate {
  int64_t microBatch = 0, gradAccum = 0;
  std::string remat;
  /// ZeRO-1 (--shard-optimizer): tried beside the unsharded plan when the
  /// request has more than one rank.
  bool sharded = false;
  int64_t totalPeak = 0;
  double stepSeconds = 0, tokensPerSecond = 0;
  /// Recomputed FLOPs over the step's FLOPs without recomputation.
  double recomputeShare = 0;
  bool fits = false, pareto = false;
  /// Parameters trained, and the bytes of what every step keeps for them:
  /// the weights and their BF16 copies (`weights`), their gradients, and
  /// the FP32 masters with AdamW's moments (`optimizer`, of which the
  /// moments are `moments`).
  int64_t paramsCount = 0, weights = 0, grads = 0, optimizer = 0, moments = 0;
  /// The values of the parameters not trained (--freeze) and of the
  /// untrained tables: no gradient, master or moments.
  int64_t frozen = 0;
};

/// The tokens of `forward`'s micro-step: the elements of the first two
/// dimensions of the loss's integer `targets` input (a decoder's, for an
/// encoder-decoder model) when it has two or more, else of the first
/// integer input that has; 0 (a step counts samples) without one.
int64_t tokensPerMicroStep(mlir::func::FuncOp forward, llvm::StringRef targets);

/// The candidates (all of them, Pareto ones marked) and the pick, if any
/// fits; sets `request.unit`. Fails with a message in `err` when the model
/// cannot be planned at all or no micro-batch divides the global batch.
std::optional<std::vector<FitCandidate>> planFit(mlir::MLIRContext &context,
                                                 FitRequest &request,
                                                 std::optional<size_t> &pick,
                                                 std::string &err);

/// Prints the Pareto table and the pick; when nothing fits, why and what
/// would: the state every step keeps (weights, gradients, FP32 masters and
/// AdamW moments) against the budget, the most parameters that would fit
/// at these bytes per parameter, and over how many ranks the moments would
/// have to be sharded (ZeRO-1, --shard-optimizer), or that the optimizer's
/// state would go to the host.
void printFit(const std::vector<FitCandidate> &candidates,
              std::optional<size_t> pick, const FitRequest &request,
              llvm::raw_ostream &os);

/// Why no candidate fits and what would (printFit's lines when nothing
/// fits).
void explainNoFit(const std::vector<FitCandidate> &candidates,
                  const FitRequest &request, llvm::raw_ostream &os);

/// explainNoFit's lines for one planned module over `budget` bytes.
void explainOverBudget(const PlanSummary &summary, int64_t budget,
                       llvm::raw_ostream &os);

} // namespace otc

#endif // OTC_PLANNER_FITPLANNER_H
