//===- FitPlanner.cpp - the fastest configuration that fits ---------------===//
//
// Compiles each candidate (micro-batch x recomputation policy; gradient
// accumulation makes up the global batch) through the same pipeline as a
// build, up to buffer planning, so that its peak is the one a build would
// plan, and predicts its step with the device model. The model file is read
// once; each micro-batch is imported, folded, fused and differentiated once,
// and each policy plans a copy of that. Peaks grow with the micro-batch, so
// a policy stops at its first micro-batch that does not fit.
//
//===----------------------------------------------------------------------===//

#include "perf/Plan.h"
#include "planner/FitPlanner.h"

#include <limits>

#include "perf/StepTime.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Cost.h"
#include "passes/DeviceMemory.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace otc;

/// The state every step keeps for the parameters, from a plan's summary.
static void setState(FitCandidate &c, const PlanSummary &summary) {
  c.paramsCount = summary.paramsCount;
  c.weights = summary.params;
  c.grads = summary.grads;
  c.optimizer = summary.masterParams + summary.optimizer;
  c.moments = summary.optimizer;
  c.frozen = summary.buffers;
}

int64_t otc::tokensPerMicroStep(func::FuncOp forward, StringRef targets) {
  auto tokensOf = [&](unsigned i) -> int64_t {
    auto t = dyn_cast<RankedTensorType>(forward.getArgumentTypes()[i]);
    return t && isa<IntegerType>(t.getElementType()) && t.getRank() >= 2
               ? t.getDimSize(0) * t.getDimSize(1)
               : 0;
  };
  for (unsigned i = 0; i < forward.getNumArguments() && !targets.empty(); ++i)
    if (auto name = forward.getArgAttrOfType<StringAttr>(i, attrs::kInput);
        name && name.getValue() == targets && tokensOf(i))
      return tokensOf(i);
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, attrs::kInput))
      if (int64_t n = tokensOf(i))
        return n;
  return 0;
}

/// Runs the phases `first`..`last` on `module`.
static bool runPhases(ModuleOp module, Phase first, Phase last,
                      const PipelineOptions &options) {
  PassManager pm(module.getContext());
  addPhases(pm, first, last, options);
  return succeeded(pm.run(module));
}

/// The imported module of one micro-batch under its configuration,
/// differentiated: what the candidates of every recomputation policy at
/// that micro-batch share. Null when the pipeline fails (the reason went to
/// the context's diagnostics).
static OwningOpRef<ModuleOp> differentiated(OwningOpRef<ModuleOp> module,
                                            const FitRequest &request,
                                            int64_t microBatch,
                                            int64_t gradAccum,
                                            double &flops) {
  PipelineOptions options = request.pipeline;
  options.fusionRemarks = false;
  ConfigParts parts = request.config;
  parts.microBatch = microBatch;
  parts.gradAccum = gradAccum;
  ConfigAttr config = makeConfig(module->getContext(), parts,
                                 [&] { return module->emitError(); });
  if (!config)
    return nullptr;
  setConfig(*module, config);
  if (!runPhases(*module, kFirstPhase, Phase::Differentiate, options))
    return nullptr;
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  flops = step ? static_cast<double>(functionFlops(step)) : 0;
  return module;
}

/// Plans one candidate from its micro-batch's differentiated module (whose
/// step computes `before` FLOPs); false when the pipeline fails.
static bool measure(ModuleOp differentiatedModule, double before,
                    const FitRequest &request, FitCandidate &c) {
  OwningOpRef<ModuleOp> module = differentiatedModule.clone();
  if (ConfigAttr config = getConfig(*module);
      config && config.getShardOptimizer() != c.sharded) {
    ConfigParts parts = partsOf(config);
    parts.shardOptimizer = c.sharded;
    ConfigAttr changed = makeConfig(module->getContext(), parts,
                                    [&] { return module->emitError(); });
    if (!changed)
      return false;
    setConfig(*module, changed);
  }
  PipelineOptions options = request.pipeline;
  options.rematPolicy = c.remat;
  options.fusionRemarks = false;
  if (!runPhases(*module, Phase::Remat, Phase::Remat, options))
    return false;
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  double after = step ? static_cast<double>(functionFlops(step)) : 0;
  c.recomputeShare = before > 0 ? (after - before) / before : 0;
  if (!runPhases(*module, Phase::MixedPrecision, kLastPhase, options))
    return false;
  FailureOr<int64_t> peak = plannedTotalPeak(*module);
  if (failed(peak))
    return false;
  c.totalPeak = *peak;
  FailureOr<PlanSummary> summary = summarizePlan(*module, PlanInfo());
  if (failed(summary))
    return false;
  setState(c, *summary);
  FailureOr<StepTime> time = predictStepTime(*module);
  if (failed(time) || time->step <= 0)
    return false;
  c.stepSeconds = time->step;
  c.tokensPerSecond =
      static_cast<double>(request.globalBatchTokens) / time->step;
  c.fits = c.totalPeak <= request.memoryBytes;
  return true;
}

std::optional<std::vector<FitCandidate>>
otc::planFit(MLIRContext &context, FitRequest &request,
             std::optional<size_t> &pick, std::string &err) {
  // The file is read and parsed once; each micro-batch imports from it.
  std::unique_ptr<LoadedOnnxModel> model = loadOnnxModel(request.modelPath, err);
  if (!model)
    return std::nullopt;
  auto import = [&](int64_t mb) {
    ImportOptions opts = request.import;
    opts.microBatch = mb;
    OwningOpRef<ModuleOp> m = importOnnxModel(context, *model, opts, err);
    if (m && request.appendedLoss &&
        !appendLoss(*m, *request.appendedLoss, err))
      m = nullptr;
    return m;
  };
  OwningOpRef<ModuleOp> one = import(1);
  if (!one)
    return std::nullopt;
  // Tokens of one sample; a model without token ids (a vision model)
  // counts samples.
  auto fwd = one->lookupSymbol<func::FuncOp>("forward");
  int64_t perSample =
      fwd ? tokensPerMicroStep(fwd, request.appendedLoss
                                        ? request.appendedLoss->targets
                                        : std::string())
          : 0;
  request.unit = perSample > 0 ? "tokens" : "samples";
  perSample = std::max<int64_t>(perSample, 1);
  if (request.globalBatchTokens % perSample) {
    err = "--global-batch-tokens " + std::to_string(request.globalBatchTokens) +
          " is not a whole number of samples of " +
          std::to_string(perSample) + " tokens";
    return std::nullopt;
  }
  // Each rank's share of the batch (world_size ranks run the same plan).
  int64_t ranks = std::max<int64_t>(request.config.worldSize, 1);
  if ((request.globalBatchTokens / perSample) % ranks) {
    err = "--global-batch-tokens " + std::to_string(request.globalBatchTokens) +
          " is " + std::to_string(request.globalBatchTokens / perSample) +
          " samples, which " + std::to_string(ranks) +
          " ranks cannot share evenly";
    return std::nullopt;
  }
  int64_t samples = request.globalBatchTokens / perSample / ranks;

  static const char *const policies[] = {"none", "selective", "full"};
  // Over several ranks the optimizer is planned sharded (ZeRO-1) and not,
  // unless --shard-optimizer asked for it.
  std::vector<bool> shardings = {request.config.shardOptimizer};
  if (ranks > 1 && !request.config.shardOptimizer)
    shardings.push_back(true);
  std::vector<FitCandidate> all;
  bool stopped[3][2] = {{false, false}, {false, false}, {false, false}};
  auto allStopped = [&] {
    for (int p = 0; p < 3; ++p)
      for (size_t z = 0; z < shardings.size(); ++z)
        if (!stopped[p][z])
          return false;
    return true;
  };
  for (int64_t mb = 1; mb <= samples; mb *= 2) {
    if (samples % mb)
      continue;
    if (allStopped())
      break;
    OwningOpRef<ModuleOp> imported = mb == 1 ? std::move(one) : import(mb);
    // A batch the export fixed and that no larger micro-batch re-binds:
    // the candidates so far are the ones there are.
    if (!imported && mb > 1 && err.find("cannot re-bind it") != std::string::npos) {
      llvm::errs() << "otc-compile: fit: the export fixed the batch, which "
                      "micro-batch "
                   << mb << " cannot re-bind: larger micro-batches are left out\n";
      err.clear();
      break;
    }
    // A micro-batch the export cannot take when micro-batch 1 imported (a
    // tensor over the importer's size limit: a mixture of experts' gathered
    // weights before otc.expert_matmul replaces them): the larger ones
    // cannot either.
    if (!imported && mb > 1) {
      llvm::errs() << "otc-compile: fit: micro-batch " << mb
                   << " does not import (" << err
                   << "): larger micro-batches are left out\n";
      err.clear();
      break;
    }
    if (!imported)
      return std::nullopt;
    // Folding, fusion and differentiation once per micro-batch; the
    // policies' candidates start from copies.
    double flops = 0;
    OwningOpRef<ModuleOp> base =
        differentiated(std::move(imported), request, mb, samples / mb, flops);
    if (!base)
      continue;
    for (int p = 0; p < 3; ++p)
      for (size_t z = 0; z < shardings.size(); ++z) {
        if (stopped[p][z])
          continue;
        FitCandidate c;
        c.microBatch = mb;
        c.gradAccum = samples / mb;
        c.remat = policies[p];
        c.sharded = shardings[z];
        if (!measure(*base, flops, request, c))
          continue;
        llvm::errs() << "otc-compile: fit: micro-batch " << mb << " x "
                     << c.gradAccum << ", remat " << c.remat
                     << (c.sharded ? ", optimizer sharded" : "") << ": peak "
                     << formatBytes(c.totalPeak) << ", "
                     << llvm::format("%.0f", c.tokensPerSecond) << " "
                     << request.unit << "/s predicted\n";
        // A larger micro-batch only needs more memory under this policy.
        stopped[p][z] = !c.fits;
        all.push_back(c);
      }
  }
  if (all.empty()) {
    err = "no candidate configuration could be planned";
    return std::nullopt;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    FitCandidate &c = all[i];
    c.pareto = true;
    for (size_t j = 0; j < all.size(); ++j) {
      const FitCandidate &o = all[j];
      bool noWorse = o.tokensPerSecond >= c.tokensPerSecond &&
                     o.totalPeak <= c.totalPeak;
      bool better = o.tokensPerSecond > c.tokensPerSecond ||
                    o.totalPeak < c.totalPeak;
      // Of equal rows (a policy that recomputes nothing more here), the
      // first planned, the simpler policy, stands for them.
      if (noWorse && (better || j < i)) {
        c.pareto = false;
        break;
      }
    }
  }
  pick.reset();
  for (size_t i = 0; i < all.size(); ++i) {
    const FitCandidate &c = all[i];
    if (!c.fits)
      continue;
    if (!pick || c.tokensPerSecond > all[*pick].tokensPerSecond ||
        (c.tokensPerSecond == all[*pick].tokensPerSecond &&
         c.totalPeak < all[*pick].totalPeak))
      pick = i;
  }
  return all;
}

void otc::printFit(const std::vector<FitCandidate> &candidates,
                   std::optional<size_t> pick, const FitRequest &request,
                   llvm::raw_ostream &os) {
  os << "fit on " << request.config.device;
  if (request.config.worldSize > 1)
    os << " x " << request.config.worldSize << " ranks";
  os << " for " << request.globalBatchTokens << " " << request.unit
     << " per step"
     << (request.unit == "samples" ? " (the model has no token ids)" : "")
     << " within " << formatBytes(request.memoryBytes)
     << (request.config.worldSize > 1 ? " per rank" : "") << " ("
     << candidates.size()
     << " configurations planned; the Pareto-best, fastest first):\n";
  const bool ranks = request.config.worldSize > 1;
  os << "  micro-batch grad-accum remat       total peak    step ms "
     << llvm::format("%12s", (request.unit + "/s").c_str()) << " recompute"
     << (ranks ? "  optimizer" : "") << "\n";
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].pareto)
      order.push_back(i);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return candidates[a].tokensPerSecond > candidates[b].tokensPerSecond;
  });
  for (size_t i : order) {
    const FitCandidate &c = candidates[i];
    os << llvm::format("  %11lld %10lld %-9s %12s %10.3f %12.0f %8.1f%%  %s%s\n",
                       static_cast<long long>(c.microBatch),
                       static_cast<long long>(c.gradAccum), c.remat.c_str(),
                       formatBytes(c.totalPeak).c_str(), c.stepSeconds * 1e3,
                       c.tokensPerSecond, 100.0 * c.recomputeShare,
                       !ranks ? "" : c.sharded ? "sharded    " : "whole      ",
                       pick && *pick == i ? "<- pick"
                       : c.fits           ? ""
                                          : "(does not fit)");
  }
  if (pick) {
    const FitCandidate &c = candidates[*pick];
    os << "pick: --micro-batch " << c.microBatch << " --grad-accum "
       << c.gradAccum << " --remat=" << c.remat;
    if (request.config.worldSize > 1)
      os << " --world-size " << request.config.worldSize;
    if (c.sharded)
      os << " --shard-optimizer";
    os << " (predicted " << llvm::format("%.0f", c.tokensPerSecond) << " "
       << request.unit << "/s, planned peak " << formatBytes(c.totalPeak)
       << ")\n";
  } else {
    os << "no configuration fits " << formatBytes(request.memoryBytes) << "\n";
    explainNoFit(candidates, request, os);
  }
}

void otc::explainOverBudget(const PlanSummary &summary, int64_t budget,
                            llvm::raw_ostream &os) {
  FitCandidate planned;
  planned.totalPeak = summary.totalPeak;
  setState(planned, summary);
  FitRequest request;
  request.memoryBytes = budget;
  explainNoFit({planned}, request, os);
}

void otc::explainNoFit(const std::vector<FitCandidate> &candidates,
                       const FitRequest &request, llvm::raw_ostream &os) {
  if (candidates.empty())
    return;
  // The state is the same in every candidate; the rest (activations, the
  // arena's other buffers, the libraries and the context) is the least of
  // any candidate's.
  // (A sharded candidate keeps its rank's part of the moments: its rest is
  // its peak less its own state.) The state shown is an unsharded one's.
  const FitCandidate *whole = &candidates.front();
  for (const FitCandidate &c : candidates)
    if (!c.sharded) {
      whole = &c;
      break;
    }
  const FitCandidate &any = *whole;
  int64_t state = any.weights + any.grads + any.optimizer;
  int64_t rest = std::numeric_limits<int64_t>::max();
  for (const FitCandidate &c : candidates)
    rest = std::min(rest, c.totalPeak -
                              (c.weights + c.grads + c.optimizer + c.frozen));
  int64_t budget = request.memoryBytes;
  double perParam =
      any.paramsCount > 0 ? double(state) / double(any.paramsCount) : 0;
  os << "  the state every step keeps is " << formatBytes(state) << " for "
     << any.paramsCount << " parameters (" << llvm::format("%.1f", perParam)
     << " bytes each: weights " << formatBytes(any.weights) << ", gradients "
     << formatBytes(any.grads) << ", FP32 masters and AdamW moments "
     << formatBytes(any.optimizer) << ")";
  // Weights kept out of training (not a rotary table's few bytes): said
  // apart from the rest; without them, --freeze is the other way to fit.
  const bool freezing = any.frozen * 100 >= state;
  if (freezing)
    os << ", beside " << formatBytes(any.frozen)
       << " of weights not trained (--freeze, and untrained tables: no "
          "gradient or optimizer state)";
  os << "; the least the rest takes in any configuration planned "
        "(activations, other buffers, libraries, context) is "
     << formatBytes(rest) << "\n";
  // What the trained parameters' state has besides them: the weights not
  // trained and the rest.
  const int64_t besides = any.frozen + rest;
  if (perParam > 0 && budget > besides) {
    double most = double(budget - besides) / perParam;
    os << "  at these bytes per parameter, " << formatBytes(budget)
       << " holds about ";
    if (most >= 1e9)
      os << llvm::format("%.2f B", most / 1e9);
    else if (most >= 1e6)
      os << llvm::format("%.1f M", most / 1e6);
    else
      os << static_cast<int64_t>(most);
    os << " trained parameters with that rest (fewer layers, or a smaller "
          "vocabulary";
    // A full fine-tune: training a few of them is the other way.
    if (!freezing)
      os << "; or train fewer: --freeze=REGEX keeps the parameters it "
            "matches without gradient or optimizer state, e.g. all but "
            "LoRA adapters";
    os << ")\n";
  }
  // ZeRO-1 as otc does it shards the moments and, under mixed precision
  // (the steps read the BF16 copies), the FP32 masters.
  int64_t onDevice = any.weights + any.grads + besides;
  if (any.optimizer > 0 && budget > onDevice) {
    int64_t ranks =
        (any.optimizer + (budget - onDevice) - 1) / (budget - onDevice);
    os << "  with the " << (any.optimizer > any.moments ? "FP32 masters and " : "")
       << "AdamW moments sharded over " << ranks
       << " ranks (ZeRO-1: --world-size " << ranks
       << " --shard-optimizer) each holds "
       << formatBytes(onDevice + any.optimizer / ranks)
       << ", or with them on the host (not in otc), "
       << formatBytes(onDevice) << " on the GPU\n";
  } else {
    os << "  the weights and gradients with that rest take "
       << formatBytes(onDevice)
       << ": more than the budget even with the optimizer state elsewhere; "
          "the weights themselves would have to be sharded (FSDP, ZeRO-3)";
    if (besides > budget && freezing)
      os << " (the weights not trained and the rest alone take "
         << formatBytes(besides) << ")";
    os << "\n";
  }
}
