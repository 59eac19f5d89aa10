//===- otc-compile.cpp - the otc driver
//------------------------------------===//
//
// otc-compile MODEL.onnx -o DIR [options]: imports the model (appending the
// loss that --loss names to a graph that ends before one: AppendLoss.h),
// folds its shape computations, differentiates it, builds the training loop,
// plans every buffer into one arena, emits the program for the chosen target
// and builds DIR/train with the host compiler (cpu) or nvcc (cuda). Also writes
// DIR/plan.json (with the step time predicted for --device) and
// DIR/init.safetensors (the initial parameters): every file goes to
// DIR.tmp-PID first and moves into DIR once the build has succeeded, so that
// a build that fails or is interrupted leaves DIR as it was
// (StagedOutput.h). `--compile-to=PHASE` stops after a phase and prints the
// IR; `--mlir-print-ir-after-all` prints it after every pass. The passes and
// their order come from passes/Pipeline.h; --remat=auto and --fit choose
// through the searches of planner/. `main` runs the steps of one Compile in
// order.
//
//===----------------------------------------------------------------------===//

#include "codegen/Codegen.h"
#include "codegen/Target.h"
#include "frontend/AppendLoss.h"
#include "frontend/OnnxImporter.h"
#include "ir/Config.h"
#include "ir/NameRegex.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TargetRegistry.h"
#include "passes/Cost.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "passes/Remat.h"
#include "perf/DeviceModel.h"
#include "perf/Fp8Cost.h"
#include "perf/Plan.h"
#include "perf/StepTime.h"
#include "planner/FitPlanner.h"
#include "planner/Progress.h"
#include "planner/RematSearch.h"
#include "report/Report.h"
#include "targets/Targets.h"
#include "tools/BuildProgram.h"
#include "tools/CompileOptions.h"
#include "tools/ErrorLine.h"
#include "tools/ImportRecords.h"
#include "tools/InitialParams.h"
#include "tools/PlanReport.h"
#include "tools/StagedOutput.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace mlir;
namespace cl = llvm::cl;
using namespace otc::compile_options;

/// Set once an error diagnostic has been printed: the failure it causes is
/// not reported a second time.
static bool diagnosed = false;

/// Prints `otc-compile: error: msg` (unless a diagnostic already said what
/// went wrong) and returns the exit code.
static int fail(const llvm::Twine &msg) {
  if (!diagnosed)
    llvm::errs() << "otc-compile: error: " << msg << "\n";
  return 1;
}

/// Prints the first error diagnostic as the one line `otc-compile: error:
/// WHERE: MESSAGE`, WHERE naming the ONNX node, value or graph (or
/// file:line:col); later errors and attached notes add nothing. A warning
/// is one line `otc-compile: warning: ...`, each text once (--fit runs the
/// passes once per candidate micro-batch).
static LogicalResult printError(Diagnostic &diag) {
  if (diag.getSeverity() == DiagnosticSeverity::Warning) {
    static llvm::StringSet<> warned;
    std::string line = otc::errorLine(diag);
    if (warned.insert(line).second)
      llvm::errs() << "otc-compile: warning: " << line << "\n";
    return success();
  }
  if (diag.getSeverity() != DiagnosticSeverity::Error)
    return failure();
  if (diagnosed)
    return success();
  diagnosed = true;
  llvm::errs() << "otc-compile: error: " << otc::errorLine(diag) << "\n";
  return success();
}

namespace {

/// Returned by a step of Compile to go on to the next one.
constexpr int kGoOn = -1;

/// One run of otc-compile, in the order its steps run: the options checked,
/// the --fit search (which may pick the micro-batch, accumulation and
/// policy), the import, the pipeline phase by phase (--remat=auto searched
/// before the recompute phase), the plan's summary, then plan.json and
/// report.html, the program's source, its initial parameters and its build.
/// Each step returns kGoOn or the exit code to stop with.
class Compile {
public:
  explicit Compile(const char *argv0) : argv0(argv0) {}

  int run() {
    for (int (Compile::*step)() :
         {&Compile::checkOptions, &Compile::readLossAndDims, &Compile::fitIfAsked,
          &Compile::importModel, &Compile::runPipeline, &Compile::summarize,
          &Compile::writePlanOnly, &Compile::emitAndBuild})
      if (int rc = (this->*step)(); rc != kGoOn)
        return rc;
    return 0;
  }

private:
  int checkOptions();
  int readLossAndDims();
  int fitIfAsked();
  int importModel();
  int runPipeline();
  bool runPhase(otc::Phase phase);
  int chooseRemat();
  int summarize();
  int writePlanOnly();
  int emitAndBuild();
  bool writeReports();
  bool writeInitialValues(const std::string &path);
  std::string trainedCounts() const;
  std::string writeFile(llvm::StringRef name, llvm::StringRef text);
  int printIR();
  otc::ConfigParts configParts() const;
  /// --timing: one line per phase, as it ends.
  void timed(llvm::StringRef phase);

  const char *argv0;
  std::string err;
  const otc::Target *emitTarget = nullptr;
  std::optional<int64_t> budget;
  /// --remat=auto found no candidate under the budget: the plan is the
  /// smallest one, for summarize's explanation.
  bool autoMissed = false;
  std::string deviceName;
  const otc::DeviceModel *deviceModel = nullptr;
  otc::ImportOptions importOpts;
  /// --loss: a graph output, or a loss appended after import.
  std::optional<otc::LossSpec> appended;
  std::string lossOutput;
  std::chrono::steady_clock::time_point t0, phaseStart;

  MLIRContext context;
  std::optional<ScopedDiagnosticHandler> errorHandler;
  OwningOpRef<ModuleOp> module;
  std::vector<otc::InitializerData> initializers;
  /// What the import made constant or joined, for the banner and plan.json.
  otc::ImportRecords records;
  /// The micro-batch as bound, and the tokens of one micro-step.
  int64_t mb = 0, tokensPerMicroStep = 0;
  /// --sparse-prediction: K, otc::kAutoPredictPositions, or 0 (none).
  int64_t predictPositions = 0;

  otc::PipelineOptions pipeline;
  otc::PlanInfo info;
  std::vector<otc::RematCandidate> frontier;
  int64_t persistent = 0;
  std::optional<otc::PlanSummary> summary;
  std::optional<otc::StepTime> stepTime;
  /// Where the output folder's files are written until the build has
  /// succeeded (with -o).
  std::optional<otc::StagedOutput> stage;
};

} // namespace

int Compile::checkOptions() {
  emitTarget = otc::lookupTarget(target);
  if (!emitTarget)
    return fail("--target must be one of " + otc::registeredTargetNames() +
                ", got '" + target + "'");
  if (compileTo.empty() && outDir.empty() && !fit)
    return fail("no output directory: pass -o DIR");
  if (!outDir.empty())
    stage.emplace(outDir);
  if (!compileTo.empty() && compileTo != "import" && compileTo != "emit" &&
      !otc::parsePhase(compileTo))
    return fail("unknown --compile-to phase '" + compileTo + "' (" +
                phaseList() + ")");
  if (gradAccum < 1)
    return fail("--grad-accum must be >= 1");
  if (worldSize < 1)
    return fail("--world-size must be >= 1");
  if (shardOptimizer && worldSize < 2)
    return fail("--shard-optimizer shards over the data-parallel ranks: it "
                "needs --world-size N with N >= 2");
  if (shardOptimizer && noGroupParams)
    return fail("--shard-optimizer shards the parameter groups: it cannot be "
                "used with --no-group-params");
  if (lossChunkRows < 0)
    return fail("--loss-chunk-rows must be >= 0 (0: the default size)");
  if (sparsePrediction == "auto")
    predictPositions = otc::kAutoPredictPositions;
  else if (!sparsePrediction.empty() &&
           (llvm::StringRef(sparsePrediction)
                .getAsInteger(10, predictPositions) ||
            predictPositions < 1))
    return fail("--sparse-prediction must be auto or K >= 1 (the positions "
                "per sequence whose loss is computed), not '" +
                sparsePrediction + "'");
  if (predictPositions && generate)
    return fail("--sparse-prediction and --generate are exclusive (sampling "
                "needs the logits of every position)");
  if (remat != "none" && remat != "full" && remat != "selective" &&
      remat != "auto")
    return fail("--remat must be none, full, selective or auto");
  if (!memoryBudget.empty()) {
    budget = otc::parseByteSize(memoryBudget);
    if (!budget)
      return fail("cannot read --memory-budget '" + memoryBudget +
                  "' (e.g. 12GiB, 500MB, 1048576)");
  }
  if (remat == "auto" && !budget)
    return fail("--remat=auto needs --memory-budget=SIZE");
  if (precision != "fp32" && precision != "bf16" && precision != "fp8")
    return fail("--precision must be fp32, bf16 or fp8");
  if (fp8Gemms != "auto" && fp8Gemms != "all")
    return fail("--fp8-gemms must be auto or all");
  if (fp8Gemms.getNumOccurrences() && precision != "fp8")
    return fail("--fp8-gemms needs --precision=fp8");
  const bool allFp8 = fp8Gemms == "all";
  deviceName =
      device.empty() ? otc::defaultDevice(target).str() : device.getValue();
  deviceModel = otc::lookupDevice(deviceName);
  if (!deviceModel)
    return fail("unknown --device '" + deviceName +
                "' (known: " + otc::knownDeviceNames() + ")");
  if (precision == "fp8" && !(deviceModel->fp8Gemm.rate > 0) && !allFp8) {
    llvm::errs() << "otc-compile: warning: device '" << deviceName
                 << "' has no FP8 GEMMs: --precision=fp8 falls back to bf16 "
                    "(--fp8-gemms=all emulates them by rounding the operands "
                    "to FP8)\n";
    precision = std::string("bf16");
  }
  if (!otc::lookupTargetEntry(target)->device(deviceName))
    for (const otc::TargetEntry &owner : otc::registeredTargets())
      if (owner.device(deviceName))
        return fail("--device=" + deviceName + " runs " + owner.name +
                    " programs, not --target=" + target);
  otc::setProgressMode(progress ? otc::ProgressMode::Always
                                : otc::ProgressMode::Slow,
                       "otc-compile");
  phaseStart = std::chrono::steady_clock::now();
  return kGoOn;
}

/// The configuration the flags give (its micro-batch set after import).
otc::ConfigParts Compile::configParts() const {
  otc::ConfigParts p;
  p.gradAccum = gradAccum;
  p.worldSize = worldSize;
  p.shardOptimizer = shardOptimizer;
  p.precision = precision;
  p.fp32GradAccum = precision != "fp32" && fp32GradAccum;
  p.weightDecay = weightDecay;
  p.target = target;
  p.device = deviceName;
  return p;
}

void Compile::timed(llvm::StringRef phase) {
  auto now = std::chrono::steady_clock::now();
  if (timing)
    llvm::errs() << llvm::format(
        "otc-compile: time: %-22s %8.3f s\n", phase.str().c_str(),
        std::chrono::duration<double>(now - phaseStart).count());
  phaseStart = now;
}

int Compile::readLossAndDims() {
  for (const std::string &d : dims)
    if (!importOpts.bindDim(d))
      return fail("bad --dim '" + d + "': expected NAME=VALUE with VALUE > 0");
  importOpts.train = trainRegex;
  lossOutput = lossName;
  if (!lossName.empty()) {
    std::optional<otc::LossSpec> spec = otc::parseLossSpec(lossName, err);
    if (!spec)
      return fail(err);
    if (spec->kind != otc::LossSpec::Kind::Output) {
      appended = *spec;
      lossOutput = otc::kAppendedLossName;
    }
  }
  // The pipeline's options (passes/Pipeline.h); --fit takes them too.
  pipeline.fuse = !noFuse;
  pipeline.fusionRemarks = fusionRemarks;
  pipeline.sparsePrediction = predictPositions;
  pipeline.lossName = lossOutput;
  pipeline.freeze = freeze;
  pipeline.backEnd.fuseElementwise = !noFuseElementwise;
  pipeline.backEnd.fuseLossGrad = !noFuseLossGrad;
  pipeline.backEnd.packAttention = !noPackAttention;
  pipeline.backEnd.fuseGemmSums = !noGemmSums;
  // Under fp8 on a device with FP8 GEMMs the LM head stays three GEMMs,
  // which can run FP8 (the chunked loss's products are BF16), unless a
  // chunk is asked for.
  bool fp8Head = precision == "fp8" && deviceModel->fp8Gemm.rate > 0 &&
                 !lossChunkRows.getNumOccurrences();
  pipeline.backEnd.chunkedLoss = !noChunkedLoss && !fp8Head;
  pipeline.backEnd.lossChunkRows = lossChunkRows;
  // The LM head's chunk chosen by its predicted time on the device.
  pipeline.backEnd.priceLossChunk = [model = deviceModel](Operation *op) {
    return otc::priceLibraryCall(*model, *op).seconds;
  };
  // Under fp8, the GEMMs that pay in FP8 on the device (every one that can
  // with --fp8-gemms=all).
  if (fp8Gemms != "all") {
    pipeline.backEnd.fp8Pays.product =
        [model = deviceModel](const otc::Fp8GemmShape &s, bool fp8) {
          return otc::gemmProductSeconds(*model, s.m, s.n, s.k, fp8);
        };
    pipeline.backEnd.fp8Pays.quantize = [model = deviceModel](int64_t elements,
                                                              int layouts) {
      return otc::fp8QuantizeCost(*model, elements, layouts).total();
    };
  }
  pipeline.backEnd.groupParams = !noGroupParams;
  pipeline.backEnd.generate = generate;
  return kGoOn;
}

/// --fit: search, print, and go on to build the pick when -o is given.
int Compile::fitIfAsked() {
  if (fit) {
    if (globalBatchTokens <= 0)
      return fail("--fit needs --global-batch-tokens=N (tokens per step; "
                  "samples for a model without token ids)");
    if (!budget)
      return fail("--fit needs --memory-budget=SIZE (or --memory=SIZE)");
    if (microBatch.getNumOccurrences() || gradAccum.getNumOccurrences() ||
        remat.getNumOccurrences())
      return fail("--fit chooses --micro-batch, --grad-accum and --remat "
                  "itself: leave them out");
    MLIRContext fitContext;
    fitContext.loadDialect<otc::OtcDialect, otc::otck::OtckDialect,
                           func::FuncDialect>();
    ScopedDiagnosticHandler fitErrors(&fitContext, printError);
    otc::FitRequest request;
    request.modelPath = modelPath;
    request.import = importOpts;
    request.globalBatchTokens = globalBatchTokens;
    request.memoryBytes = *budget;
    request.pipeline = pipeline;
    request.appendedLoss = appended;
    request.config = configParts();
    std::optional<size_t> pick;
    auto candidates = otc::planFit(fitContext, request, pick, err);
    if (!candidates)
      return fail(err);
    otc::printFit(*candidates, pick, request, llvm::outs());
    if (!pick)
      return fail("no configuration fits --memory-budget " + memoryBudget);
    if (outDir.empty())
      return 0;
    const otc::FitCandidate &c = (*candidates)[*pick];
    microBatch = c.microBatch;
    gradAccum = c.gradAccum;
    remat = c.remat;
    shardOptimizer = c.sharded;
    importOpts.microBatch = c.microBatch;
  }
  if (microBatch.getNumOccurrences()) {
    if (microBatch <= 0)
      return fail("--micro-batch must be > 0");
    importOpts.microBatch = microBatch;
  }
  return kGoOn;
}

int Compile::printIR() {
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}

/// The import, what it made constant or joined, the bound micro-batch and
/// the configuration set on the module.
int Compile::importModel() {
  context.loadDialect<otc::OtcDialect, otc::otck::OtckDialect,
                      func::FuncDialect>();
  errorHandler.emplace(&context, printError);
  t0 = std::chrono::steady_clock::now();
  // Initial values only for a program built (init.safetensors): a plan
  // or an IR dump imports without holding the weights.
  bool building = compileTo.empty() && !planOnly;
  importOpts.deferValues = building;
  module = otc::importOnnxModel(context, modelPath, importOpts, err,
                                building ? &initializers : nullptr);
  if (!module)
    return fail(err);
  if (appended && !otc::appendLoss(*module, *appended, err))
    return fail(err);
  timed("import");
  records = otc::readImportRecords(*module, freeze, importOpts.microBatch);
  // The leading dimension of the inputs: the micro-batch, as bound.
  mb = importOpts.microBatch.value_or(0);
  if (!mb)
    for (auto f : module->getOps<func::FuncOp>())
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (f.getArgAttr(i, otc::attrs::kInput))
          if (auto t = dyn_cast<RankedTensorType>(f.getArgumentTypes()[i]))
            if (t.getRank() > 0 && !mb)
              mb = t.getDimSize(0);
  // The compile's configuration, set once on the module: every pass, the
  // planner, the emitter and plan.json read it from there (ir/Config.h).
  otc::ConfigParts parts = configParts();
  parts.microBatch = mb > 0 ? mb : 1;
  otc::ConfigAttr config = otc::makeConfig(
      &context, parts, [&] { return module->emitError("otc-compile: "); });
  if (!config)
    return fail("invalid configuration");
  otc::setConfig(*module, config);
  if (compileTo == "import")
    return printIR();
  // Tokens per micro-step, the one count of them: B x T of the appended
  // loss's integer targets when they are [B, T, ...] (the tokens the loss
  // is over: an encoder-decoder's decoder tokens, whatever its inputs), else
  // of the first integer graph input of rank 2 or more; none (0: a step
  // counts samples) without one. plan.json's throughput reads it, and the
  // program's descriptor gives it to the runtime's (train's tok/s).
  if (auto fwd = module->lookupSymbol<func::FuncOp>("forward"))
    tokensPerMicroStep = otc::tokensPerMicroStep(
        fwd, appended ? appended->targets : std::string());
  return kGoOn;
}

/// One phase of the pipeline, with the MLIR pass-manager flags applied.
bool Compile::runPhase(otc::Phase phase) {
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return false;
  otc::addPhases(pm, phase, phase, pipeline);
  // --fusion-remarks: why each almost-matching chain was not fused.
  std::optional<ScopedDiagnosticHandler> remarks;
  if (phase == otc::Phase::Fuse && fusionRemarks)
    remarks.emplace(&context, [](Diagnostic &d) {
      if (d.getSeverity() != DiagnosticSeverity::Remark)
        return failure();
      llvm::errs() << "otc-compile: remark: " << d.getLocation() << ": "
                   << d.str() << "\n";
      return success();
    });
  return succeeded(pm.run(*module));
}

/// Before the recompute phase: what the step costs without recomputation
/// and the frontier of what recomputation trades (for the report); with
/// --remat=auto, the one solver (planner/RematSearch.h) plans every
/// candidate through the rest of this pipeline and otc-remat then applies
/// its choice.
int Compile::chooseRemat() {
  func::FuncOp step = otc::requireTrainStep(*module);
  if (!step)
    return fail("the pipeline made no @train_step");
  info.microStepFlops = otc::functionFlops(step);
  // A fused self-attention (as many keys as queries) that is not causal
  // and hides nothing by position (no mask, or a key padding alone) sees
  // the keys after a query: next-token targets are visible to it. A mask
  // of any other kind may be causal at run time (a packed documents'
  // query-by-key mask): not counted.
  bool bidirectional = false;
  module->walk([&](otc::AttentionOp a) {
    otc::AttentionSizes s = otc::attentionSizes(a);
    bidirectional = bidirectional || (!a.getCausal() && s.t == s.s &&
                                      (!a.getMask() || a.getKeyPadding()));
  });
  // What the program's descriptor tells the runtime's throughput report,
  // and whether its attention is bidirectional.
  Builder b(&context);
  module->getOperation()->setAttr(
      otc::attrs::kMicroStep,
      b.getDictionaryAttr(
          {b.getNamedAttr("flops", b.getI64IntegerAttr(info.microStepFlops)),
           b.getNamedAttr("tokens", b.getI64IntegerAttr(tokensPerMicroStep)),
           b.getNamedAttr("bidirectional", b.getBoolAttr(bidirectional))}));
  info.experts =
      otc::expertExchange(module->lookupSymbol<func::FuncOp>("forward"),
                          precision != "fp32" ? 2 : 4);
  if (compileTo.empty() || remat == "auto") {
    std::optional<otc::Progress> measuring;
    FailureOr<std::vector<otc::RematCandidate>> f = otc::rematFrontier(
        *module, [&](size_t done, size_t total) {
          if (!measuring)
            measuring.emplace("measuring recomputation candidates", total,
                              "candidates");
          measuring->update(done);
        });
    if (failed(f))
      return fail("measuring the recompute frontier failed");
    frontier = std::move(*f);
  }
  timed("recompute frontier");
  persistent = otc::persistentBytes(step);
  if (remat != "auto")
    return kGoOn;
  // Candidates ranked by their predicted step on the device.
  otc::PlannedCost predicted = [&](ModuleOp planned) -> std::optional<double> {
    FailureOr<otc::StepTime> t = otc::predictStepTime(planned);
    if (failed(t))
      return std::nullopt;
    return t->step;
  };
  FailureOr<otc::AutoRematResult> r = otc::solveAutoRemat(
      *module, *budget, pipeline.backEnd, frontier, &predicted);
  if (failed(r))
    return fail("planning a recomputation candidate failed");
  if (!r->choice && !r->smallest)
    return fail("no recomputation plan fits --memory-budget " + memoryBudget);
  // None fits: the smallest is planned, and summarize says why it is over
  // and what would fit.
  autoMissed = !r->choice;
  pipeline.rematBlocks =
      otc::rematBlockString(r->choice ? *r->choice : *r->smallest);
  timed("recompute auto");
  return kGoOn;
}

/// The pipeline (passes/Pipeline.h), phase by phase; the driver measures
/// before recomputation and stops where --compile-to says.
int Compile::runPipeline() {
  pipeline.rematPolicy = remat;
  for (unsigned p = static_cast<unsigned>(otc::kFirstPhase);
       p <= static_cast<unsigned>(otc::kLastPhase); ++p) {
    auto phase = static_cast<otc::Phase>(p);
    if (phase == otc::Phase::Remat)
      if (int rc = chooseRemat(); rc != kGoOn)
        return rc;
    if (!runPhase(phase))
      return fail(otc::phaseFailure(phase));
    timed(otc::phaseName(phase));
    if (phase == otc::Phase::Remat)
      otc::readPassRecords(*module, remat, info);
    if (phase == otc::Phase::TrainingLoop)
      if (auto opt = module->lookupSymbol<func::FuncOp>("optimizer_step"))
        info.optimizerFlops = otc::functionFlops(opt);
    if (compileTo == otc::phaseName(phase))
      return printIR();
  }
  return kGoOn;
}

/// The plan's figures (a budget is never exceeded) and the step predicted
/// on the device (perf/StepTime.h).
int Compile::summarize() {
  info.samplesPerStep = mb * gradAccum;
  info.tokensPerStep = tokensPerMicroStep * gradAccum;
  info.untrained = records.untrained;
  info.tied = records.tied;
  info.split = records.split;
  info.removed = records.removed;
  FailureOr<otc::PlanSummary> s = otc::summarizePlan(*module, info);
  if (failed(s))
    return fail("summarizing the plan failed");
  summary = *s;
  if (budget && summary->totalPeak > *budget) {
    // Why, and what would fit (as --fit says when nothing fits).
    std::string why;
    llvm::raw_string_ostream whyOs(why);
    otc::explainOverBudget(*summary, *budget, whyOs);
    int64_t state = summary->params + summary->grads + summary->masterParams +
                    summary->optimizer;
    if (autoMissed && state < *budget)
      whyOs << "  lower --micro-batch, or let --fit choose the micro-batch "
               "and accumulation\n";
    int rc =
        fail(autoMissed
                 ? "no recomputation plan fits --memory-budget " +
                       memoryBudget + " (" + std::to_string(*budget) +
                       " bytes); the smallest that fits is " +
                       otc::formatBytes(double(summary->totalPeak)) + " (" +
                       std::to_string(summary->totalPeak) +
                       " bytes) at micro-batch " + std::to_string(mb)
                 : "the planned peak of " + std::to_string(summary->totalPeak) +
                       " bytes exceeds --memory-budget " + memoryBudget + " (" +
                       std::to_string(*budget) + " bytes)");
    llvm::errs() << why;
    return rc;
  }
  FailureOr<otc::StepTime> t = otc::predictStepTime(*module);
  if (failed(t))
    return fail("predicting the step time failed");
  stepTime = *t;
  timed("summary");
  return kGoOn;
}

/// Writes `text` to `name` in the output directory's staging folder; its
/// path, or "" with `err` set.
std::string Compile::writeFile(llvm::StringRef name, llvm::StringRef text) {
  std::string path = stage->path(name, err);
  if (path.empty())
    return path;
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    err = "cannot write '" + path + "': " + ec.message();
    return std::string();
  }
  os << text;
  return path;
}

/// init.safetensors at `path` (tools/InitialParams.h), the tensors read
/// again counted under --timing. False with `err` set when it cannot.
bool Compile::writeInitialValues(const std::string &path) {
  // The initializers the program does not train: its BUFFER slots.
  std::vector<std::string> untrained;
  llvm::StringSet<> seen;
  module->walk([&](otc::otck::BufferOp buffer) {
    if (std::optional<StringRef> slot = buffer.getSlot())
      if (StringRef name = *slot;
          name.consume_front("buffer:") && seen.insert(name).second)
        untrained.push_back(name.str());
  });
  size_t reread = 0;
  if (!otc::writeInitialParams(path, initializers, untrained, reread, err))
    return false;
  if (timing)
    llvm::errs() << "otc-compile: initial parameters: " << initializers.size()
                 << " tensors, " << reread
                 << " read again from the model's external data\n";
  timed("initial parameters");
  return true;
}

/// plan.json, report.html and the --report table.
bool Compile::writeReports() {
  std::string planText;
  llvm::raw_string_ostream planOs(planText);
  if (failed(otc::writePlanJson(*summary, info, planOs, &*stepTime)))
    return false;
  if (writeFile("plan.json", planText).empty())
    return false;

  // The pictures: memory over one step and the recompute frontier, and the
  // predicted step (tools/PlanReport.h).
  otc::PlanReportInputs in;
  in.modelPath = modelPath;
  in.target = target;
  in.remat = remat;
  in.device = deviceModel->name.str();
  in.microBatch = mb;
  in.gradAccum = gradAccum;
  in.summary = &*summary;
  in.info = &info;
  in.stepTime = &*stepTime;
  in.frontier = frontier;
  in.persistent = persistent;
  std::string html;
  llvm::raw_string_ostream htmlOs(html);
  otc::writePlanReportHtml(htmlOs, *module, in);
  if (writeFile("report.html", html).empty())
    return false;
  if (report)
    otc::printPlanReport(*summary, info, llvm::outs(), &*stepTime);
  return true;
}

/// `n` with its digits in groups of three ("3,407,872").
static std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-')
      out += ',';
    out += digits[i];
  }
  return out;
}

/// "N values trained, M not" of the plan (M: the frozen parameters and
/// untrained tables), for the summary lines.
std::string Compile::trainedCounts() const {
  std::string counts = grouped(summary->paramsCount) + " values trained, " +
                       grouped(summary->bufferValues) + " not";
  if (const auto &p = summary->prediction; p.positions)
    counts += "; the loss at " + std::to_string(p.positions) + " of " +
              std::to_string(p.of) + " positions, " + std::to_string(p.ops) +
              " ops before it there alone";
  return counts;
}

/// --plan-only: plan.json and report.html, nothing built.
int Compile::writePlanOnly() {
  if (!planOnly)
    return kGoOn;
  if (!writeReports() || !stage->publish(err))
    return fail(err);
  llvm::errs() << "otc-compile: wrote " << stage->finalPath("plan.json")
               << " and report.html (" << target << ", micro-batch " << mb
               << " x grad-accum " << gradAccum << "; arena "
               << otc::formatBytes(summary->arena) << ", total peak "
               << otc::formatBytes(summary->totalPeak) << "; "
               << trainedCounts() << ")\n";
  timed("reports");
  return 0;
}

/// The program's source, the reports, the initial parameters by ONNX
/// initializer name, and `train` built by the target's compile line.
int Compile::emitAndBuild() {
  otc::EmitOptions emitOpts;
  emitOpts.modelPath = modelPath;
  std::string source;
  llvm::raw_string_ostream sourceOs(source);
  if (failed(otc::emitProgram(*module, emitOpts, sourceOs)))
    return fail("code generation failed");
  timed("emit");
  if (compileTo == "emit") {
    llvm::outs() << source;
    return 0;
  }

  std::string srcPath = writeFile(emitTarget->sourceFile().str(), source);
  if (srcPath.empty())
    return fail(err);

  if (!writeReports())
    return fail(err);
  timed("reports");

  std::string initPath = stage->path("init.safetensors", err);
  if (initPath.empty() || !writeInitialValues(initPath))
    return fail(err);

  otc::BuildPaths paths;
  paths.source = srcPath;
  paths.runtimeLibDir = otc::runtimeLibDir(argv0);
  paths.arch = deviceModel->arch.str();
  paths.program = stage->path("train", err);
  if (paths.program.empty())
    return fail(err);
  llvm::Expected<std::vector<std::string>> cmd =
      emitTarget->buildCommand(paths);
  if (!cmd)
    return fail(llvm::toString(cmd.takeError()));
  if (!otc::runTool(*cmd, err)) {
    // Its source and messages are worth reading; the output folder keeps
    // its previous files.
    stage->keep();
    return fail(err + "; the failed build is in " + stage->dir() + ", " +
                outDir + " is unchanged");
  }
  // Every file of the output folder at once, now that the build succeeded.
  if (!stage->publish(err))
    return fail(err);
  timed("build");
  std::string trainPath = stage->finalPath("train");
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  llvm::errs() << "otc-compile: wrote " << trainPath << " (" << target
               << ", micro-batch " << mb << " x grad-accum " << gradAccum
               << "; " << trainedCounts() << ") in "
               << llvm::format("%.1f", secs) << " s\n";
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  otc::registerAllTargets();
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  // --help lists otc-compile's own options and MLIR's (--mlir-*), not the
  // hundreds of LLVM back-end options linked in with the libraries.
  for (auto &[name, option] : cl::getRegisteredOptions()) {
    bool ours = llvm::is_contained(option->Categories, &cat);
    if (!ours && !name.starts_with("mlir-") && name != "help" &&
        name != "version" && name != "color")
      option->setHiddenFlag(cl::ReallyHidden);
  }
  cl::ParseCommandLineOptions(argc, argv, "otc: ONNX training compiler\n");
  return Compile(argv[0]).run();
}
