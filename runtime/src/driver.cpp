// The otcrt training driver: otcrt_main and the loop behind it. It fills the
// program's constants once, loads the initial parameters (or a checkpoint),
// feeds the INPUT slots from a fixed batch or from token shards, and runs
// each step as zero_grads, one micro_step per micro-batch and
// optimizer_step (through the backend, which may replay them as CUDA
// graphs; every per-step value lives in an arena slot written before the
// call, so a replay reads it), with the learning-rate schedule, the
// batch-size ramp, gradient-norm clipping, the non-finite policy,
// evaluation, checkpoints, log lines, JSONL and the trace around it, and a
// stop on SIGINT or SIGTERM after the step in flight (interrupt.h). The
// run's state is declared in run.h; a step's micro-batches (their inputs,
// micro-steps and losses, and the kernels' error record) live in
// micro_steps.cpp, its data-parallel collectives in data_parallel.cpp, its
// starting state (the device, the initial parameters, a resumed checkpoint)
// in run_start.cpp, and its evaluation, checkpoints and gradient dumps in
// run_outputs.cpp.
// Only otcrt_main prints errors and chooses exit codes; everything else
// returns a Status.
#include "driver.h"

#include "interrupt.h"
#include "otcrt/safetensors.h"
#include "run.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace otcrt {

/// --doc-mask and --doc-token against the feed: a mask that can stop at
/// document boundaries.
Status Run::chooseDocMask() {
  if (!opt_.docMask) {
    if (opt_.docToken >= 0)
      return Status::usage("--doc-token needs --doc-mask");
    return Status::ok();
  }
  if (!feed_.mask)
    return Status::error("--doc-mask: the model has no attention mask input "
                         "(an input named like attention_mask)");
  if (!queryKeyMask(feed_))
    return Status::error(
        std::string("--doc-mask: the attention mask '") + feed_.mask->name +
        "' is " + formatShape(slotShape(*feed_.mask)) +
        ", one value per token, which cannot stop attention at document "
        "boundaries: export the model with a [batch, 1, T, T] mask (README: "
        "packed documents)");
  return Status::ok();
}

/// The document token: --doc-token, else the one the train shards record.
Status Run::chooseDocToken() {
  if (!opt_.docMask)
    return Status::ok();
  docToken_ = opt_.docToken;
  if (docToken_ >= 0)
    return Status::ok();
  if (trainData_.docToken() == -2)
    return Status::error("--doc-mask: the --data shards record different "
                         "document tokens: give --doc-token ID");
  if (trainData_.docToken() < 0)
    return Status::error("--doc-mask: the --data shards record no document "
                         "token (otc-data --tokenizer records it): give "
                         "--doc-token ID");
  docToken_ = trainData_.docToken();
  return Status::ok();
}

Status Run::chooseMaskedLM() {
  if (opt_.mlmToken < 0)
    return Status::ok();
  if (!feed_.targets)
    return Status::error("--mlm: the model has no target input (its loss "
                         "takes none): masked-LM targets need one; name it "
                         "with --targets-input");
  const OtcIndexRange *tokens = feed_.tokensRange,
                      *targets = feed_.targetsRange;
  if (!tokens)
    return Status::error(std::string("--mlm: the values input '") +
                         feed_.tokens->name +
                         "' may hold are not known (it indexes no embedding "
                         "of the model), so no random token can be drawn");
  if (!targets || !(targets->flags & OTC_INDEX_IGNORE))
    return Status::error(
        std::string("--mlm: the loss over input '") + feed_.targets->name +
        "' ignores no index, and masked-LM targets mark the positions not "
        "chosen with it: compile with a loss that ignores one (Hugging "
        "Face's -100, --loss=cross_entropy:LOGITS:" +
        feed_.targets->name + ")");
  if (opt_.mlmToken >= tokens->bound)
    return Status::error("--mlm: mask token " + std::to_string(opt_.mlmToken) +
                         " is outside [0, " + std::to_string(tokens->bound) +
                         ") (" + tokens->what + ")");
  feed_.mlm.maskToken = opt_.mlmToken;
  feed_.mlm.prob = opt_.mlmProb;
  feed_.mlm.vocab = tokens->bound;
  feed_.mlm.keepToken = docToken_ >= 0 ? docToken_ : trainData_.docToken();
  feed_.mlm.ignoreIndex = targets->ignore_index;
  if (slots_.predictionRows) {
    if (countedFeedSlot() != feed_.targets)
      return Status::error(
          std::string("--mlm: the program computes its loss at the rows of "
                      "input '") +
          slots_.predictionRows->name +
          "', chosen from the counted "
          "targets of input '" +
          (countInputOf(prog_) ? countInputOf(prog_) : "") +
          "', not those of input '" + feed_.targets->name + "' --mlm fills");
    feed_.mlm.maxChosen = slots_.predictionRows->shape[1];
    // A share that chooses more than the program's positions on average
    // leaves most windows' extra choices unmasked: said once.
    const double expected = opt_.mlmProb * static_cast<double>(feed_.seqLen);
    if (expected > static_cast<double>(feed_.mlm.maxChosen))
      std::fprintf(stderr,
                   "otc train: warning: --mlm chooses %.3g of %" PRId64
                   " positions a window on average, more than the %" PRId64
                   " the program computes the loss at (otc-compile "
                   "--sparse-prediction): most windows keep %" PRId64
                   " of theirs, the others left unmasked\n",
                   expected, feed_.seqLen, feed_.mlm.maxChosen,
                   feed_.mlm.maxChosen);
  }
  return Status::ok();
}

const std::vector<uint8_t> &Run::maskFor(const std::vector<uint8_t> &tokens) {
  if (docToken_ >= 0)
    fillMask(feed_, tokens.data(), docToken_, maskBuf_);
  return maskBuf_;
}

void Run::countTokens() {
  int64_t tokens = tokensPerMicroStepOf(prog_, slots_.inputs);
  tokenUnits_ = tokens > 0;
  tokensPerMicro_ = tokenUnits_ ? tokens : prog_.micro_batch;
}

Status Run::prepareInputs() {
  if (!opt_.batchPath.empty()) {
    if (opt_.docMask || opt_.docToken >= 0)
      return Status::usage("--doc-mask and --doc-token need --data");
    Status s = batches_.open(opt_.batchPath, prog_, slots_.inputs, world_.size);
    if (s)
      s = batches_.select(0, world_.rank, batch_);
    if (!s)
      return s;
    countTokens();
    return Status::ok();
  }
  Status s = chooseTokenFeed(slots_.inputs, opt_.tokensInput, opt_.targetsInput,
                             feed_);
  if (!s)
    return s;
  // Next-token targets are the inputs shifted by one: a model whose
  // attention sees the keys after a query sees each token it is asked to
  // predict, and its loss falls with nothing learned.
  if (feed_.targets && bidirectionalOf(prog_) && opt_.mlmToken < 0)
    return Status::error(
        std::string("--data: the targets of input '") + feed_.targets->name +
        "' would be the next tokens of input '" + feed_.tokens->name +
        "', and the model's attention is bidirectional (a self-attention "
        "that is not causal, as an encoder's): it sees each token it is "
        "asked to predict; train it with masked-LM targets: --mlm "
        "MASK_ID (the tokenizer's mask token), or --batch files that hold "
        "them");
  if (s = chooseDocMask(); !s)
    return s;
  feed_.tokensRange = indexRangeOf(prog_, *feed_.tokens);
  if (feed_.targets)
    feed_.targetsRange = indexRangeOf(prog_, *feed_.targets);
  const bool nextTokens = feed_.targets && opt_.mlmToken < 0;
  int64_t T = feed_.seqLen, window = T + (nextTokens ? 1 : 0);
  if (s = trainData_.open(opt_.dataGlobs, window, T, "--data"); !s)
    return s;
  if (s = chooseDocToken(); !s)
    return s;
  if (s = chooseMaskedLM(); !s)
    return s;
  if (slots_.predictionRows && !feed_.mlm.on())
    return Status::error(
        "--data: the program computes its loss at " +
        std::to_string(slots_.predictionRows->shape[1]) +
        " positions per sequence (otc-compile --sparse-prediction), a "
        "masked LM's: train it with --mlm MASK_ID (masked-LM targets), or "
        "--batch files whose targets count at most that many per sequence");
  // A mask the same for every micro-batch is made once: masked-LM windows
  // are seen whole, both ways.
  if (feed_.mask && (!queryKeyMask(feed_) || feed_.mlm.on()))
    maskBuf_ = onesFor(*feed_.mask);
  else if (feed_.mask && docToken_ < 0)
    fillMask(feed_, std::vector<uint8_t>(feed_.tokens->nbytes).data(), -1,
             maskBuf_);
  loader_ = std::make_unique<TokenLoader>(trainData_, feed_, opt_.seed, opt_.shuffle);
  if (!opt_.valGlobs.empty()) {
    if (s = valData_.open(opt_.valGlobs, window, T, "--val-data"); !s)
      return s;
    valLoader_ = std::make_unique<TokenLoader>(valData_, feed_, 0, false);
  }
  countTokens();
  // Shards too small for the batch would feed one step (or one evaluation
  // micro-batch) the same windows more than once.
  const int64_t ranks = world_.size;
  std::string batch =
      "micro-batch " + std::to_string(prog_.micro_batch) + " x grad-accum " +
      std::to_string(prog_.grad_accum) +
      (ranks > 1 ? " x " + std::to_string(ranks) + " ranks" : std::string());
  if (s = checkDataCovers(trainData_, "--data", "one step",
                          ranks * prog_.grad_accum * prog_.micro_batch, T,
                          batch);
      !s)
    return s;
  if (valLoader_)
    if (s = checkDataCovers(valData_, "--val-data",
                            "one evaluation micro-batch", prog_.micro_batch, T,
                            "micro-batch " + std::to_string(prog_.micro_batch));
        !s)
      return s;
  return Status::ok();
}

/// Runs one of the program's step functions through the backend, printing
/// the backend's warning when a graph capture fails.
Status Run::runStep(StepFunction which, ArenaFunction fn) {
  std::string warning;
  Status s = backend_.runStep(which, fn, arena_.arena, warning);
  if (!warning.empty())
    std::fprintf(stderr, "otc train: warning: %s\n", warning.c_str());
  return s;
}

Status Run::trainStep(int64_t step) {
  TraceSpan stepSpan(tracer_, "step " + std::to_string(step), "step");
  auto start = std::chrono::steady_clock::now();
  int64_t micros = loader_ ? ramp_.microsAt(state_.tokensSeen) : prog_.grad_accum;
  double loss = 0;
  bool finite = true;
  std::string why;
  if (Status s = forwardBackward(step, micros, loader_.get(), loss, finite, why); !s)
    return s;
  double norm = 0;
  const bool onDevice = slots_.gradFactor != nullptr;
  if (Status s = gradientNormAndFactor(step, micros, norm, finite, why); !s)
    return s;
  // A non-finite loss is known here; a non-finite norm (on the device) only
  // once the step's work is done: its update is skipped there.
  if (!finite && !opt_.skipNonfinite)
    return Status::error(why + "; stopping (--skip-nonfinite skips such steps)");
  double lr = schedule_.at(step);
  if (finite)
    if (Status s = applyUpdate(lr); !s)
      return s;
  if (Status s = backend_.synchronize(); !s)
    return s;
  if (queuesMicroSteps()) {
    if (Status s = settleLosses(step, loss, finite, why); !s)
      return s;
    if (!finite && !opt_.skipNonfinite)
      return Status::error(why +
                           "; stopping (--skip-nonfinite skips such steps)");
  }
  if (onDevice) {
    if (!shards_)
      norm = *normHost_;
    if (!std::isfinite(norm) && finite) {
      finite = false;
      why = std::string("gradient norm is ") + nonfiniteName(norm) +
            " at step " + std::to_string(step);
      if (!opt_.skipNonfinite)
        return Status::error(why +
                             "; stopping (--skip-nonfinite skips such steps)");
    }
  }
  if (finite) {
    ++state_.updates;
  } else {
    ++state_.skipped;
    ++skippedThisRun_;
    std::fprintf(log_, "step %" PRId64 ": %s; update skipped (%" PRId64
                       " skipped so far)\n",
                 step, why.c_str(), state_.skipped);
  }
  state_.step = step;
  if (loader_) {
    state_.tokensSeen += micros * tokensPerMicro_ * world_.size;
    state_.dataEpoch = loader_->epoch();
    state_.dataCursor = loader_->cursor();
  }
  lastLoss_ = loss;

  reportStep(step, micros, loss, lr, norm, finite, start);
  return Status::ok();
}

/// The step's gradient norm (after the ramp's scaling) and the factor
/// AdamW applies (the ramp's scaling and clipping): computed on the device
/// where the program has a GRAD_FACTOR slot (the norm read after the step),
/// else read back here and the gradients scaled in place; a norm that is
/// not finite sets \p finite and \p why.
Status Run::gradientNormAndFactor(int64_t step, int64_t micros, double &norm,
                                  bool &finite, std::string &why) {
  // Every step: the global norm of the gradients (after the ramp's scaling)
  // in one pass over them, which is also the check that none is NaN or
  // infinite; then the ramp's scaling and clipping as one factor. The ramp
  // (fewer micro-batches than compiled) scales the mean of the micro-batch
  // gradients up, unless the program weighs them itself. A program with a
  // GRAD_FACTOR slot gets the factor on the device, where AdamW reads it
  // (and skips the update when the norm is not finite): nothing waits for
  // the norm, which is read once the step's work is done. Otherwise the
  // norm is read back and the gradients are scaled in place.
  double scale = slots_.gradScale ? 1.0
                                  : static_cast<double>(prog_.grad_accum) /
                                        static_cast<double>(micros);
  const bool onDevice = slots_.gradFactor != nullptr;
  if (shards_) {
    // ZeRO-1: each rank holds its part of the summed gradients; the norm is
    // the ranks' sums of squares added up, the factor the same on all.
    TraceSpan span(tracer_, "gradient norm", "optimizer");
    if (Status s = shardedFactor(scale, norm); !s)
      return s;
  } else if (onDevice) {
    // Timed as a kernel (device marks on a GPU), as the prediction names it.
    tracer_.kernelBegin("gradient norm");
    // The losses of micro-steps that did not wait are checked there too.
    Status s = gradFactor(gradRanges_, arena_.arena, slots_.gradFactor->offset,
                          scale, opt_.gradClip,
                          reinterpret_cast<const float *>(losses_.arena),
                          static_cast<int32_t>(queued_.size()), normHost_);
    tracer_.kernelEnd();
    if (!s)
      return s;
  } else {
    {
      TraceSpan span(tracer_, "gradient norm", "optimizer");
      if (Status s = gradientNorm(gradRanges_, arena_.arena, norm); !s)
        return s;
    }
    norm *= scale;
    if (!std::isfinite(norm) && finite) {
      finite = false;
      why = std::string("gradient norm is ") + nonfiniteName(norm) +
            " at step " + std::to_string(step);
    }
    double factor = finite ? gradientFactor(scale, norm, opt_.gradClip) : scale;
    if (finite && factor != 1.0) {
      TraceSpan span(tracer_, "gradient scaling", "optimizer");
      if (Status s = scaleGradients(gradRanges_, arena_.arena, factor); !s)
        return s;
    }
  }
  return Status::ok();
}

/// The update at learning rate \p lr: LR and STEP uploaded, optimizer_step,
/// and with ZeRO-1 the ranks' parts gathered.
Status Run::applyUpdate(double lr) {
  TraceSpan span(tracer_, "optimizer_step", "optimizer");
  float lrF = static_cast<float>(lr);
  float stepF = static_cast<float>(state_.updates + 1);
  Status s =
      backend_.upload(arena_.arena, slots_.lr->offset, &lrF, sizeof(lrF));
  if (s)
    s = backend_.upload(arena_.arena, slots_.step->offset, &stepF,
                        sizeof(stepF));
  if (!s)
    return s;
  if (s = runStep(StepFunction::OptimizerStep, prog_.optimizer_step); !s)
    return s;
  // ZeRO-1: every rank updated its part of the parameters (and of their
  // BF16 copies); each gets the others'.
  if (shards_) {
    TraceSpan gather(tracer_, "parameter all-gather", "communication");
    if (shards_->steps_read_params)
      if (s = gatherShards(shards_->param_offset, 4, "the parameters"); !s)
        return s;
    if (shards_->copy_offset >= 0)
      if (s = gatherShards(shards_->copy_offset, 2, "the parameters"); !s)
        return s;
  }
  return Status::ok();
}

/// The step's line (every --log-every steps), JSONL record and memory
/// counter.
void Run::reportStep(int64_t step, int64_t micros, double loss, double lr,
                     double norm, bool finite,
                     std::chrono::steady_clock::time_point start) {
  StepReport r;
  r.step = step;
  r.totalSteps = opt_.steps;
  r.loss = loss;
  r.lr = lr;
  r.gradNorm = norm;
  r.ms = std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
             .count();
  r.micros = micros;
  r.tokens = micros * tokensPerMicro_ * world_.size;
  r.tokenUnits = tokenUnits_;
  r.flops = static_cast<double>(microStepFlopsOf(prog_)) *
            static_cast<double>(micros);
  r.peakFlops = peakFlops_;
  r.memoryBytes = backend_.memoryInUse();
  r.skipped = !finite;
  // The mean wall time of this run's steps so far (evaluations and
  // checkpoints included) times the steps left.
  if (step < opt_.steps)
    r.etaSeconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - loopStarted_)
                       .count() /
                   static_cast<double>(step - firstStep_ + 1) *
                   static_cast<double>(opt_.steps - step);
  if (!opt_.quiet &&
      (step == 1 || step == opt_.steps || step % opt_.logEvery == 0)) {
    std::fprintf(log_, "%s\n", formatStepLine(r, width_).c_str());
    std::fflush(log_);
  }
  jsonl_.writeStep(r);
  if (r.memoryBytes >= 0)
    tracer_.counter("memory", "bytes", static_cast<double>(r.memoryBytes));
}

Status Run::execute() {
  const bool resume = !opt_.resumeDir.empty();
  if (shards_ && world_.size != shards_->ranks)
    return Status::error(
        "this program shards its optimizer over " +
        std::to_string(shards_->ranks) + " ranks (otc-compile --world-size " +
        std::to_string(shards_->ranks) + " --shard-optimizer), but " +
        (world_.size == 1 ? std::string("it runs alone")
                          : std::to_string(world_.size) + " ranks run it") +
        ": start it with mpirun -np " + std::to_string(shards_->ranks) +
        " (or torchrun --nproc-per-node " + std::to_string(shards_->ranks) +
        " --no-python)");
  InitialTensors init;
  // Parameters and buffers alike come from the initial parameters.
  std::vector<const OtcSlot *> initial = slots_.params;
  initial.insert(initial.end(), slots_.buffers.begin(), slots_.buffers.end());
  if (!resume)
    if (Status s = loadInitialParams(opt_.initPath, slots_.params,
                                     slots_.buffers, defaultInitPath(), init);
        !s)
      return s;
  if (opt_.generate == 0)
    if (Status s = prepareInputs(); !s)
      return s;
  if (Status s = setUpDevice(); !s)
    return s;
  if (!resume)
    if (Status s = uploadInitialParams(init, initial); !s)
      return s;
  init = InitialTensors();
  state_.seed = opt_.seed;
  state_.dataFingerprint = loader_ ? trainData_.fingerprint() : 0;
  if (loader_ && feed_.mlm.on()) {
    // Masked-LM targets are another mode: a resume must keep its settings.
    uint64_t probBits;
    std::memcpy(&probBits, &feed_.mlm.prob, 8);
    state_.dataFingerprint =
        splitMix64(state_.dataFingerprint ^
                   splitMix64(static_cast<uint64_t>(feed_.mlm.maskToken) ^
                              probBits)) >>
        11; // as TokenDataset::fingerprint: exact as a double
  }

  std::string from;
  if (resume)
    if (Status s = resumeFrom(from); !s)
      return s;
  // Constants once, after the parameters and buffers (which the values
  // computed from buffers read) are loaded; loading covers only slots of
  // the table, never the constants' bytes.
  if (ArenaFunction initConstants = initConstantsOf(prog_)) {
    initConstants(arena_.arena);
    if (Status s = backend_.synchronize(); !s)
      return s;
  }
  // The BF16 working copies from the parameters just loaded (with sharded
  // masters each rank rounds its part, and the ranks gather the copies).
  if (ArenaFunction refresh = refreshParamsOf(prog_)) {
    refresh(arena_.arena);
    if (Status s = backend_.synchronize(); !s)
      return s;
    if (shards_ && shards_->masters_sharded)
      if (Status s = gatherShards(shards_->copy_offset, 2, "the parameters");
          !s)
        return s;
  }
  if (opt_.generate)
    return generate();
  announce();
  if (!opt_.dumpGradsPath.empty())
    return dumpGrads();
  announceData(resume, from);
  if (Status s = configureLoop(resume); !s)
    return s;
  return trainLoop(from);
}

void Run::announce() {
  if (!opt_.quiet)
    std::fprintf(log_,
                 "otc train: %s | target %s | %zu params (%" PRId64
                 " values)%s | micro-batch %d x %d | arena %" PRId64 " bytes\n",
                 prog_.model ? prog_.model : "?", prog_.target,
                 slots_.params.size(), slots_.paramValues,
                 slots_.buffers.empty()
                     ? ""
                     : (" + " + std::to_string(slots_.buffers.size()) +
                        " buffers (" + std::to_string(slots_.bufferValues) +
                        " values, not trained)")
                           .c_str(),
                 prog_.micro_batch, prog_.grad_accum, prog_.arena_bytes);
  if (!opt_.quiet && world_.size > 1) {
    // Over TCP, where the ranks met.
    std::string how = world_.launcher;
    if (world_.transport == World::Transport::Tcp)
      how += ", TCP via " + world_.masterAddr + ":" +
             std::to_string(world_.masterPort);
    std::fprintf(log_,
                 "data parallel: %d ranks (%s), global batch %d x %d x %d "
                 "micro-batches | rank 0 logs\n",
                 world_.size, how.c_str(), world_.size, prog_.micro_batch,
                 prog_.grad_accum);
  }
  // Graphs replay what was captured, so a trace, which needs the hooks of
  // each kernel, runs eagerly.
  bool graphs = opt_.cudaGraphs && opt_.tracePath.empty();
  if (backend_.useGraphs(graphs) && !opt_.quiet)
    std::fprintf(log_, "cuda graphs: %s\n",
                 graphs ? "on (step functions captured after their first run)"
                 : opt_.cudaGraphs ? "off (--trace runs eagerly)"
                                   : "off (--no-cuda-graphs)");
}

void Run::announceData(bool resume, const std::string &from) {
  if (!opt_.quiet && loader_)
    std::fprintf(log_,
                 "data: %zu shard(s), %" PRId64 " tokens, %" PRId64
                 " windows of %" PRId64 " | %s\n",
                 trainData_.numShards(), trainData_.numTokens(),
                 trainData_.numWindows(),
                 feed_.seqLen + (feed_.targets && !feed_.mlm.on() ? 1 : 0),
                 opt_.shuffle ? "shuffled" : "in order");
  if (!opt_.quiet && loader_ && feed_.mlm.on())
    std::fprintf(
        log_,
        "data: masked-LM targets for input '%s': %.3g of the "
        "positions%s chosen, as token %" PRId64
        " (80%%), a random one (10%%) or kept; %" PRId64 " elsewhere\n",
        feed_.targets->name, feed_.mlm.prob,
        feed_.mlm.keepToken >= 0
            ? (" (not token " + std::to_string(feed_.mlm.keepToken) + ")")
                  .c_str()
            : "",
        feed_.mlm.maskToken, feed_.mlm.ignoreIndex);
  if (!opt_.quiet && loader_ && feed_.mlm.maxChosen > 0)
    std::fprintf(
        log_,
        "data: the loss at %" PRId64 " positions per sequence "
        "(--sparse-prediction): a window with more chosen keeps %" PRId64
        " of them, drawn uniformly\n",
        feed_.mlm.maxChosen, feed_.mlm.maxChosen);
  if (!opt_.quiet && !loader_ && batches_.count() > 1)
    std::fprintf(log_,
                 "batches: %" PRId64 " global batches in %zu file(s), in "
                 "order (an epoch every %" PRId64 " steps)\n",
                 batches_.count(), batches_.files(), batches_.count());
  if (!opt_.quiet && loader_ && feed_.mask &&
      (!queryKeyMask(feed_) || feed_.mlm.on()))
    std::fprintf(
        log_, "data: input '%s' fed all ones (the windows hold no padding)\n",
        feed_.mask->name);
  else if (!opt_.quiet && loader_ && feed_.mask && docToken_ < 0)
    std::fprintf(log_,
                 "data: input '%s' fed causal masks (the windows hold no "
                 "padding)\n",
                 feed_.mask->name);
  else if (!opt_.quiet && loader_ && feed_.mask)
    std::fprintf(log_,
                 "data: input '%s' fed causal masks that stop at document "
                 "boundaries (token %" PRId64 " starts a document)\n",
                 feed_.mask->name, docToken_);
  if (resume && !opt_.quiet)
    std::fprintf(log_, "resumed from %s at step %" PRId64 "\n", from.c_str(),
                 state_.step);
}

Status Run::configureLoop(bool resume) {
  schedule_.peak = opt_.lr;
  schedule_.floor = opt_.minLr;
  schedule_.warmup = opt_.warmupSteps;
  schedule_.totalSteps = opt_.decaySteps ? opt_.decaySteps : opt_.steps;
  schedule_.cosine = opt_.lrSchedule == "cosine";
  ramp_.tokensPerMicro = tokensPerMicro_ * world_.size;
  ramp_.fullMicros = prog_.grad_accum;
  ramp_.startTokens = opt_.batchStartTokens;
  ramp_.rampTokens = opt_.batchRampTokens;
  peakFlops_ = mfuPeakFlops(opt_.peakTflops, backend_, prog_);
  if (!opt_.jsonlPath.empty())
    if (Status s = jsonl_.open(opt_.jsonlPath, resume, started_); !s)
      return s;
  if (!opt_.tracePath.empty())
    if (Status s = tracer_.open(opt_.tracePath, &backend_, opt_.traceSync); !s)
      return s;
  width_ =
      std::max<int>(4, static_cast<int>(std::to_string(opt_.steps).size()));
  return Status::ok();
}

Status Run::trainLoop(const std::string &from) {
  if (state_.step >= opt_.steps) {
    // Nothing to train: say so rather than report a loss no step computed.
    if (world_.isRoot())
      std::fprintf(log_,
                   "%s is at step %" PRId64 ", which --steps %" PRId64
                   " does not exceed: nothing to train\n",
                   from.c_str(), state_.step, opt_.steps);
    tracer_.close();
    return Status::ok();
  }
  firstStep_ = state_.step + 1;
  loopStarted_ = std::chrono::steady_clock::now();
  // From here a SIGINT or SIGTERM stops the run after the step in flight,
  // with a checkpoint; a second one ends it at once.
  InterruptScope interrupts(world_.isRoot());
  bool stop = false;
  Status s = Status::ok();
  for (int64_t step = state_.step + 1; step <= opt_.steps; ++step) {
    if (s = trainStep(step); !s)
      return s;
    if (s = checkStop(stop); !s)
      return s;
    if (stop)
      return stopAfter(step);
    // The same on every rank: they vote again after either.
    const bool evalDue = opt_.valEvery && step % opt_.valEvery == 0;
    const bool saveDue = opt_.saveEvery && step % opt_.saveEvery == 0;
    if (evalDue)
      if (s = evaluate(step); !s)
        return s;
    if (saveDue)
      if (s = save(); !s)
        return s;
    if (evalDue || saveDue) {
      if (s = checkStop(stop); !s)
        return s;
      if (stop)
        return stopAfter(step);
    }
  }
  const int64_t ran = opt_.steps - firstStep_ + 1;
  if (skippedThisRun_ == ran)
    return Status::error("every step of the run (" + std::to_string(ran) +
                         ") had a non-finite loss or gradient and was skipped: "
                         "no update was applied");
  if (s = evaluate(state_.step); !s)
    return s;
  // A signal during the last evaluation cut it short.
  if (s = checkStop(stop); !s)
    return s;
  if (stop)
    return stopAfter(state_.step);
  if (s = save(); !s)
    return s;
  tracer_.close();
  if (world_.isRoot())
    std::fprintf(log_, "final loss %.6f\n", lastLoss_);
  return Status::ok();
}

Status Run::checkStop(bool &stop) {
  const int local = stopSignal();
  // Counted over the ranks, SIGTERM before SIGINT: one code for all.
  double votes[2] = {local == SIGINT ? 1.0 : 0.0, local == SIGTERM ? 1.0 : 0.0};
  if (Status s = host_.sum(votes, 2); !s)
    return s;
  stoppedBy_ = votes[1] > 0 ? SIGTERM : votes[0] > 0 ? SIGINT : 0;
  stop = stoppedBy_ != 0;
  return Status::ok();
}

Status Run::stopAfter(int64_t step) {
  if (Status s = save(); !s)
    return s;
  tracer_.close();
  if (!world_.isRoot())
    return Status::ok();
  std::string line = std::string("stopped by ") + signalName(stoppedBy_) +
                     " after step " + std::to_string(step) + " of " +
                     std::to_string(opt_.steps) + ": ";
  if (opt_.saveDir.empty())
    line += "nothing saved (no --save DIR: with one, a stopped run saves its "
            "checkpoint there)";
  else
    line += "checkpoint " + lastSavedPath_ + " (continue with --resume " +
            opt_.saveDir + ")";
  std::fprintf(log_, "%s\n", line.c_str());
  std::fflush(log_);
  std::vector<std::pair<std::string, std::string>> record = {
      {"event", jsonString("stop")},
      {"step", std::to_string(step)},
      {"signal", jsonString(signalName(stoppedBy_))}};
  if (!opt_.saveDir.empty())
    record.push_back({"path", jsonString(lastSavedPath_)});
  jsonl_.write(record);
  return Status::ok();
}

Status runTraining(const TrainOptions &options, const OtcProgram *program,
                   Backend &backend, std::FILE *log, const World &world,
                   int *stoppedBy) {
  Status s = validateProgram(program, backend.name(), options.dumpGradsPath.empty());
  if (!s)
    return s;
  // Rank 0 alone logs, evaluates, saves, and writes the JSONL log and the
  // trace: the parameters and moments are the same on every rank.
  // --dump-grads runs on every rank (rank 0 writes).
  TrainOptions rankOptions = options;
  if (!world.isRoot()) {
    rankOptions.quiet = true;
    rankOptions.valGlobs.clear();
    // A sharded optimizer's ranks all take part in a save (rank 0 writes).
    if (!shardsOf(*program))
      rankOptions.saveDir.clear();
    rankOptions.jsonlPath.clear();
    rankOptions.tracePath.clear();
  }
  Run run(rankOptions, *program, backend, log, world);
  s = run.execute();
  if (stoppedBy)
    *stoppedBy = run.stoppedBy();
  return s;
}

} // namespace otcrt

extern "C" int otcrt_main(int argc, char **argv, const OtcProgram *program) {
  using namespace otcrt;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    args.emplace_back(argv[i]);
  // Each line reaches the log as it is printed, also in a file: a run that
  // is killed leaves its last lines.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  TrainOptions options;
  Status s = parseTrainArgs(args, options);
  if (s && options.help) {
    std::fputs(trainUsage(argc > 0 ? argv[0] : "train").c_str(), stdout);
    return 0;
  }
  // A rank of a data-parallel run (mpirun, torchrun, srun), or the only one.
  World world;
  if (s)
    s = worldFromEnvironment(world);
  if (s) {
    hostCollectives().setTimeout(options.collectiveTimeout);
    s = hostCollectives().init(world);
  }
  int stoppedBy = 0;
  if (s) {
    if (options.initPath.empty())
      options.initPath = defaultInitPath();
    s = runTraining(options, program, defaultBackend(), stdout, world,
                    &stoppedBy);
  }
  processTracer().close();
  std::fflush(stdout);
  if (!s) {
    if (world.size > 1) {
      // The other ranks wait in a collective: end them all, now.
      std::fprintf(stderr, "otc train: rank %d: error: %s\n", world.rank,
                   s.message().c_str());
      std::fflush(stderr);
      hostCollectives().abortAll(s.code());
    }
    std::fprintf(stderr, "otc train: error: %s\n", s.message().c_str());
    return s.code();
  }
  // Stopped by a signal, after its checkpoint: the shell's code for it.
  return stoppedBy ? 128 + stoppedBy : 0;
}
