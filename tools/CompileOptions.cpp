//===- CompileOptions.cpp - otc-compile's command line --------------------===//
//
// The options of otc-compile (tools/CompileOptions.h), in the order
// --help lists them.
//
//===----------------------------------------------------------------------===//

#include "tools/CompileOptions.h"

#include "passes/Pipeline.h"

namespace otc::compile_options {


cl::OptionCategory cat("otc-compile options");
cl::opt<std::string> modelPath(cl::Positional, cl::desc("MODEL.onnx"),
                                      cl::Required, cl::cat(cat));
cl::opt<std::string> outDir("o", cl::desc("Output directory"),
                                   cl::value_desc("DIR"), cl::cat(cat));
cl::opt<std::string> target("target", cl::desc("cpu or cuda"),
                                   cl::init("cpu"), cl::cat(cat));
cl::list<std::string>
    dims("dim", cl::desc("Bind a symbolic dimension: NAME=VALUE"),
         cl::value_desc("NAME=VALUE"), cl::cat(cat));
cl::opt<int64_t>
    microBatch("micro-batch",
               cl::desc("Bind the leading symbolic dimension of the inputs"),
               cl::init(0), cl::cat(cat));
cl::opt<int64_t> gradAccum("grad-accum",
                                  cl::desc("Micro-batches per optimizer step"),
                                  cl::init(1), cl::cat(cat));
cl::opt<int64_t> worldSize(
    "world-size",
    cl::desc("Data-parallel ranks the plan and its prediction are for "
             "(mpirun -np N out/train): the step adds the gradients' "
             "all-reduce on the device's link, tokens/s count every rank's, "
             "--fit splits --global-batch-tokens over the ranks (default 1; "
             "the program itself runs on any number of ranks)"),
    cl::init(1), cl::cat(cat));
cl::opt<bool> shardOptimizer(
    "shard-optimizer",
    cl::desc("ZeRO-1 over --world-size ranks: each rank keeps 1/N of the "
             "AdamW moments and updates 1/N of the parameters (gradients "
             "reduce-scattered, parameters all-gathered); the program then "
             "runs on exactly N ranks"),
    cl::cat(cat));
cl::opt<std::string> remat("remat",
                                  cl::desc("none|full|selective|auto"),
                                  cl::init("none"), cl::cat(cat));
cl::opt<std::string> memoryBudget("memory-budget",
                                         cl::desc("Budget for --remat=auto"),
                                         cl::cat(cat));
cl::alias memoryAlias("memory", cl::desc("Alias for --memory-budget"),
                             cl::aliasopt(memoryBudget), cl::cat(cat));
cl::opt<std::string> precision(
    "precision",
    cl::desc("fp32|bf16|fp8 (fp8: bf16, and the GEMMs the step-time model "
             "predicts faster in FP8 multiply per-tensor scaled E4M3/E5M2 "
             "operands; on a device without FP8 GEMMs it falls back to bf16, "
             "saying so once)"),
    cl::init("fp32"), cl::cat(cat));
cl::opt<std::string> fp8Gemms(
    "fp8-gemms",
    cl::desc("With --precision=fp8: auto (the step-time model picks the GEMMs "
             "that pay in FP8; a device without FP8 GEMMs falls back to bf16) "
             "or all (every GEMM that can run FP8 does; on the cpu, emulated "
             "by rounding the operands to FP8: the numerics without a GPU)"),
    cl::init("auto"), cl::cat(cat));
cl::opt<bool> fp32GradAccum("fp32-grad-accum",
                                   cl::desc("Accumulate gradients in FP32"),
                                   cl::cat(cat));
cl::opt<std::string> lossName(
    "loss",
    cl::desc("The loss: a graph output (default: the single scalar float "
             "output), or one to append: "
             "cross_entropy:LOGITS:TARGETS[:ignore=N] (mean over the targets "
             "not equal to N, default -100; TARGETS a new int64 input) or "
             "mse:OUTPUT:TARGET (TARGET a new float32 input), either "
             "followed by +C*OUTPUT terms, scalar outputs added C times (a "
             "router's aux_loss)"),
    cl::value_desc("LOSS"), cl::cat(cat));
cl::opt<std::string> freeze("freeze",
                                   cl::desc("Initializers not trained (regex)"),
                                   cl::cat(cat));
cl::opt<std::string> trainRegex(
    "train",
    cl::desc("Float initializers trained even where the import rules make "
             "them constants: a single element, non-finite values, an "
             "additive mask, a tied copy (regex)"),
    cl::value_desc("REGEX"), cl::cat(cat));
cl::opt<double> weightDecay("weight-decay",
                                   cl::desc("AdamW weight decay"),
                                   cl::init(0.0), cl::cat(cat));
cl::opt<bool>
    noFuse("no-fuse",
           cl::desc("Keep attention, norms, GELU/SiLU and the loss as the "
                    "exported ops (otc-fuse-patterns off)"),
           cl::cat(cat));
cl::opt<bool> noFuseElementwise(
    "no-fuse-elementwise",
    cl::desc("One kernel per elementwise op (otc-fuse-elementwise off)"),
    cl::cat(cat));
cl::opt<bool> noFuseLossGrad(
    "no-fuse-loss-grad",
    cl::desc("The cross-entropy and its gradient as two calls, the logits "
             "read three times (otc-fuse-loss-grad off)"),
    cl::cat(cat));
cl::opt<bool> noGemmSums(
    "no-gemm-sums",
    cl::desc("A bias's gradient summed by a kernel of its own, not by its "
             "weight's gradient GEMM (otc-fuse-gemm-sums off)"),
    cl::cat(cat));
cl::opt<bool> noPackAttention(
    "no-pack-attention",
    cl::desc("Attention reads q, k and v as copies sliced from a fused QKV "
             "projection, and its gradients are concatenated back "
             "(otc-pack-attention off)"),
    cl::cat(cat));
cl::opt<bool> noChunkedLoss(
    "no-chunked-loss",
    cl::desc("The LM head's logits as one [rows, vocabulary] buffer "
             "(otc-chunk-loss off)"),
    cl::cat(cat));
cl::opt<int64_t> lossChunkRows(
    "loss-chunk-rows",
    cl::desc("Rows per chunk of the LM head and its loss (default: the "
             "smallest chunk whose call is predicted within 3% of the "
             "fastest chunking's, the whole head included)"),
    cl::init(0), cl::cat(cat));
cl::opt<bool> noGroupParams(
    "no-group-params",
    cl::desc("One AdamW kernel per parameter (otc-group-params off)"),
    cl::cat(cat));
cl::opt<bool> generate(
    "generate",
    cl::desc("Also compile decode_step, for `train --generate N "
             "--prompt-ids A,B,...`: one position at a time, the keys and "
             "values of earlier positions cached in the arena"),
    cl::cat(cat));
cl::opt<std::string> sparsePrediction(
    "sparse-prediction",
    cl::desc("A masked LM's loss at K positions per sequence alone: the "
             "head and the ops before it that only the loss reads and that "
             "treat each position apart run on the K positions `train "
             "--mlm` chooses (at most K per sequence; BERT's "
             "max_predictions_per_seq, Hugging Face's sparse_prediction); "
             "auto: BERT's share 0.15 of the T positions, its mean plus four "
             "standard deviations (T = 512: 110)"),
    cl::value_desc("K|auto"), cl::cat(cat));
cl::opt<bool> fusionRemarks(
    "fusion-remarks",
    cl::desc("Say why each almost-matching chain was not fused"),
    cl::cat(cat));
cl::opt<bool>
    fit("fit", cl::desc("Plan every micro-batch x recompute policy that makes "
                        "--global-batch-tokens, print the fastest that fit "
                        "--memory-budget (then build the pick with -o DIR)"),
        cl::cat(cat));
cl::opt<int64_t> globalBatchTokens(
    "global-batch-tokens",
    cl::desc("--fit: tokens per optimizer step (micro-batch x sequence x "
             "gradient accumulation)"),
    cl::init(0), cl::cat(cat));
cl::opt<bool> report("report", cl::desc("Print the memory/FLOP report"),
                            cl::cat(cat));
cl::opt<std::string>
    device("device",
           cl::desc("Device the step time is predicted for (h100, h200, cpu; "
                    "default: h100 for --target=cuda, cpu for --target=cpu)"),
           cl::value_desc("NAME"), cl::cat(cat));
cl::opt<bool>
    planOnly("plan-only",
             cl::desc("Write plan.json and report.html only: no program, no "
                      "initial parameters (for sizing models)"),
             cl::cat(cat));
cl::opt<bool>
    timing("timing",
           cl::desc("Print the wall time of each phase to stderr"),
           cl::cat(cat));
cl::opt<bool> progress(
    "progress",
    cl::desc("Print the progress of long phases to stderr from their start "
             "(without it, once a phase has run over 3 s)"),
    cl::cat(cat));
/// The --compile-to phases: import, the pipeline's phases (passes/Pipeline.h),
/// and emit, as "import, fold-shapes, ..., emit".
const std::string &phaseList() {
  static const std::string list = [] {
    std::string l = "import";
    for (unsigned p = static_cast<unsigned>(otc::kFirstPhase);
         p <= static_cast<unsigned>(otc::kLastPhase); ++p)
      l += ", " + otc::phaseName(static_cast<otc::Phase>(p)).str();
    return l + ", emit";
  }();
  return list;
}
static const std::string compileToHelp =
    "Stop after PHASE and print the IR: " + phaseList();
cl::opt<std::string> compileTo("compile-to", cl::desc(compileToHelp),
                                      cl::value_desc("PHASE"), cl::cat(cat));

} // namespace otc::compile_options
