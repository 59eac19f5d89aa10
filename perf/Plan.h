//===- Plan.h - the figures of a plan: plan.json and the report ----*- C++ -*-===//
//
// What a planned module holds, for people and tools: the memory by kind
// (weights, gradients, optimizer state, activations, the arena and what the
// libraries and the context hold outside it), the FLOPs, the recomputation,
// the initializers the import did not train, and the predicted step
// (perf/StepTime.h). summarizePlan reads them from the module and its
// #otc.config; writePlanJson writes plan.json; printPlanReport the --report
// table.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PERF_PLAN_H
#define OTC_PERF_PLAN_H

#include "passes/DeviceMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace otc {

struct StepTime;

/// What expert parallelism would exchange (perf/Experts.cpp): per
/// micro-step, the rows each mixture-of-experts layer dispatches to its
/// experts' ranks and combines back, forward (the backward sends their
/// gradients as many bytes again).
struct ExpertExchange {
  /// Experts per layer, layers, expert products, rows of each (tokens x
  /// top-k), and the expert weights' elements.
  int64_t experts = 0, layers = 0, products = 0, rows = 0, expertParams = 0;
  /// Bytes of the rows into the layers' first products and out of their
  /// last ones, summed over the layers.
  int64_t dispatchBytes = 0, combineBytes = 0;
};

/// The exchange of `forward`'s otc.expert_matmul ops with activations of
/// `elementBytes` bytes; nothing without expert products.
std::optional<ExpertExchange> expertExchange(mlir::func::FuncOp forward,
                                             int64_t elementBytes);

/// What plan.json reports beyond what the planned module holds (its
/// configuration: target, precision, micro-batch, grad-accum).
struct PlanInfo {
  /// Recomputation: the policy, its per-block choice, the forward values the
  /// backward keeps and those it recomputes (by ONNX node).
  /// The fused ops by kind (otc-fuse-patterns), or nothing with --no-fuse.
  std::optional<std::vector<std::pair<std::string, int64_t>>> fusedOps;
  std::string rematPolicy = "none";
  std::string rematBlocks;
  std::vector<std::string> saved, recomputed;
  /// FLOPs of forward + backward of one micro-step without recomputation,
  /// and of what recomputation adds to one micro-step.
  int64_t microStepFlops = 0, recomputeFlops = 0;
  /// FLOPs of one optimizer step (@optimizer_step before lowering).
  int64_t optimizerFlops = 0;
  /// Samples and tokens per optimizer step (tokens: elements of the first
  /// integer input, 0 when there is none).
  int64_t samplesPerStep = 0, tokensPerStep = 0;
  /// Float initializers the import did not make parameters, with why, and
  /// those joined to another one ("transpose of X", "copy of X").
  std::vector<std::pair<std::string, std::string>> untrained, tied, split;
  /// Parameters of the exported module that the exporter removed (the
  /// dynamo exporter's graph signature), name -> why.
  std::vector<std::pair<std::string, std::string>> removed;
  /// A mixture of experts' exchange under expert parallelism.
  std::optional<ExpertExchange> experts;
};

/// Fills `info`'s fused ops and recomputation (policy `remat`) from what
/// otc-fuse-patterns and otc-remat recorded on `module` (attrs::kFused,
/// attrs::kRemat).
void readPassRecords(mlir::ModuleOp module, llvm::StringRef remat,
                     PlanInfo &info);

/// The figures of a plan, from the planned module and PlanInfo.
struct PlanSummary {
  /// The module's configuration (ir/Config.h): what the plan is for.
  std::string target, precision;
  bool fp32GradAccum = false;
  int64_t microBatch = 0, gradAccum = 1;
  /// The ranks the AdamW moments are sharded over (1: not sharded).
  int64_t shardRanks = 1;
  /// `params`: the weights the steps read (the BF16 working copy under
  /// mixed precision); `masterParams`: the FP32 masters (mixed precision);
  /// `constants`: the persistent constants, filled once at load;
  /// `buffers`: the FP32 initializers that are not trained; `kvCache`:
  /// the keys and values decode_step caches (--generate).
  int64_t paramsCount = 0, params = 0, masterParams = 0, grads = 0,
          optimizer = 0, inputs = 0, constants = 0, buffers = 0, kvCache = 0;
  /// Under precision fp8: the trained weights' FP8 copies, made once per
  /// optimizer step (otc-fp8-copies' "fp8_copy:" slots).
  int64_t fp8WeightCopies = 0;
  /// The values of the buffers (frozen parameters, FP32 or BF16 alone,
  /// and untrained tables): no gradient, master or moments.
  int64_t bufferValues = 0;
  /// `workspace`: the GEMM workspace; `libraries`: every buffer the
  /// runtime and its libraries hold outside the arena (the GEMM workspace
  /// included), `context`: the CUDA context and library handles
  /// (passes/DeviceMemory.h); `totalPeak`: arena + libraries + context.
  int64_t activationsPeak = 0, workspace = 0, arena = 0, lowerBound = 0,
          totalPeak = 0, libraries = 0, context = 0;
  /// The buffers of `libraries`, and the basis of `context`.
  OutsideArena outside;
  int64_t modelFlops = 0, recomputeFlops = 0, optimizerFlops = 0;
  /// Under precision fp8: the GEMMs of the steps (otck.gemm) and those
  /// that run FP8 (ir/Fp8.h), each by its trace name, M x N x K and its
  /// operands' formats ("e4m3,e5m2").
  struct Fp8Gemm {
    std::string name, formats;
    int64_t m = 0, n = 0, k = 0;
  };
  int64_t gemms = 0;
  std::vector<Fp8Gemm> fp8Gemms;
  /// GEMMs that also sum an operand (a bias's gradient, otc-fuse-gemm-sums).
  int64_t gemmSums = 0;
  /// Attention calls of @micro_step (forward, recomputed forward and
  /// backward) whose mask is a key padding (`key_padding`: per-sequence
  /// lengths on cuDNN).
  int64_t keyPaddingAttentions = 0;
  /// otc-sparse-prediction: the loss at `positions` of the `of` positions
  /// of a sequence, `ops` ops cut to them (positions 0: every position).
  struct Prediction {
    int64_t positions = 0, of = 0, ops = 0;
  } prediction;
};

/// The figures of a planned module under its configuration (an error when
/// it has none).
mlir::FailureOr<PlanSummary> summarizePlan(mlir::ModuleOp module,
                                           const PlanInfo &info);

/// Writes plan.json for a planned module, with the predicted step time
/// (`time`) when `time` is given.
mlir::LogicalResult writePlanJson(const PlanSummary &summary,
                                  const PlanInfo &info, llvm::raw_ostream &os,
                                  const StepTime *time = nullptr);

/// A byte count for people: "512 B", "1.50 KiB", "7.62 GiB".
std::string formatBytes(double bytes);

/// Prints the memory and FLOP report as a table, and the predicted step
/// with its ten slowest kernels when `time` is given.
void printPlanReport(const PlanSummary &summary, const PlanInfo &info,
                     llvm::raw_ostream &os, const StepTime *time = nullptr);

} // namespace otc

#endif // OTC_PERF_PLAN_H
