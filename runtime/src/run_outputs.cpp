// A training run's outputs besides its steps (run.h): evaluation on the
// validation shards (cut short by a SIGINT or SIGTERM), checkpoints (every rank
// of a sharded optimizer takes part; rank 0 writes) and the gradient dump of
// --dump-grads.
#include "run.h"

#include "interrupt.h"
#include "otcrt/safetensors.h"

#include <cinttypes>
#include <limits>

namespace otcrt {

Status Run::evaluate(int64_t step) {
  if (!valLoader_ || lastEval_ == step)
    return Status::ok();
  lastEval_ = step;
  TraceSpan span(tracer_, "evaluation", "eval");
  int64_t batches = std::min(opt_.valBatches,
                             std::max<int64_t>(1, valData_.numWindows() /
                                                      prog_.micro_batch));
  valLoader_->rewind();
  // The loss alone (version 8); an older program's micro_step also adds
  // into the gradient slots, which the next step's zero_grads clears.
  ArenaFunction fn = evalStepOf(prog_);
  StepFunction which = StepFunction::EvalStep;
  if (!fn) {
    fn = prog_.micro_step;
    which = StepFunction::MicroStep;
  }
  // Where no refresh_params keeps them, zero_grads rounds the BF16 working
  // copies from the masters: after an update they are the last step's.
  if (!refreshParamsOf(prog_))
    if (Status s = runStep(StepFunction::ZeroGrads, prog_.zero_grads); !s)
      return s;
  ProgressBar bar("eval", batches);
  // Each micro-batch weighs its counted targets when the loss is a mean
  // over them (masked-LM windows count different numbers), else 1.
  double sum = 0, weight = 0;
  for (int64_t i = 0; i < batches; ++i) {
    // A SIGINT or SIGTERM cuts the evaluation short (no loss reported); the
    // run then stops.
    if (stopSignal())
      return Status::ok();
    if (Status s = feedMicro(i, valLoader_.get()); !s)
      return s;
    if (slots_.rng) {
      int64_t r = rngValue(state_.seed, 0, i);
      if (Status s = backend_.upload(arena_.arena, slots_.rng->offset, &r, sizeof(r)); !s)
        return s;
    }
    if (Status s = runStep(which, fn); !s)
      return s;
    float micro = 0;
    if (Status s = finishMicro(" (evaluation at step " + std::to_string(step) +
                                   ", micro-batch " + std::to_string(i) + ")",
                               micro);
        !s)
      return s;
    const double count = fedCount(), w = count < 0 ? 1.0 : count;
    if (w > 0) { // a micro-batch with nothing counted has no loss (0 / 0)
      sum += w * micro;
      weight += w;
    }
    bar.update(i + 1);
  }
  double loss =
      weight > 0 ? sum / weight : std::numeric_limits<double>::quiet_NaN();
  if (!opt_.quiet)
    std::fprintf(log_, "val loss %.6f at step %" PRId64 " (%" PRId64
                       " micro-batches)\n",
                 loss, step, batches);
  jsonl_.write({{"event", jsonString("val")},
                {"step", std::to_string(step)},
                {"val_loss", jsonNumber(loss)},
                {"micro_batches", std::to_string(batches)}});
  return Status::ok();
}

Status Run::save() {
  if (opt_.saveDir.empty() || lastSaved_ == state_.step)
    return Status::ok();
  TraceSpan span(tracer_, "checkpoint", "checkpoint");
  // ZeRO-1: every rank takes part in gathering the moments; rank 0 writes.
  ShardedMoments moments;
  if (shards_) {
    if (Status s = gatherMoments(moments); !s)
      return s;
    // The steps read the BF16 copies alone: the FP32 parameters' other
    // parts are gathered now (into the arena; sharded masters went into the
    // image above).
    if (!shards_->steps_read_params && !shards_->masters_sharded)
      if (Status s = gatherShards(shards_->param_offset, 4, "the parameters");
          !s)
        return s;
  }
  if (!world_.isRoot()) {
    lastSaved_ = state_.step;
    return Status::ok();
  }
  std::string written;
  Status s =
      saveCheckpoint(opt_.saveDir, opt_.keep, slots_, backend_, arena_.arena,
                     state_, bufferCrcs_, prog_.model ? prog_.model : "",
                     written, shards_ ? &moments : nullptr);
  if (!s)
    return s;
  lastSaved_ = state_.step;
  lastSavedPath_ = written;
  if (!opt_.quiet)
    std::fprintf(log_, "saved %s\n", written.c_str());
  jsonl_.write({{"event", jsonString("save")},
                {"step", std::to_string(state_.step)},
                {"path", jsonString(written)}});
  return Status::ok();
}

Status Run::dumpGrads() {
  double loss = 0;
  bool finite = true;
  std::string why;
  if (Status s = forwardBackward(1, prog_.grad_accum, loader_.get(), loss, finite, why); !s)
    return s;
  if (queuesMicroSteps()) {
    if (Status s = backend_.synchronize(); !s)
      return s;
    if (Status s = settleLosses(1, loss, finite, why); !s)
      return s;
  }
  if (!finite)
    return Status::error(why);
  // ZeRO-1: each rank holds its part of the sum; rank 0 gathers them all.
  if (shards_)
    if (Status s = gatherShards(shards_->grad_offset,
                                shards_->grad_dtype == OTC_BF16 ? 2 : 4,
                                "the gradients");
        !s)
      return s;
  // The whole batch's gradient, the same on every rank: rank 0 writes it.
  if (!world_.isRoot())
    return Status::ok();
  TensorFile out;
  float lossF = static_cast<float>(loss);
  out.add("loss", StDType::F32, {}, &lossF);
  std::vector<uint8_t> bytes;
  for (const OtcSlot *slot : slots_.grads) {
    bytes.resize(static_cast<size_t>(slot->nbytes));
    Status s = backend_.download(arena_.arena, slot->offset, bytes.data(), slot->nbytes);
    if (!s)
      return s;
    if (slot->dtype == OTC_BF16)
      bytes = widenBf16(bytes);
    out.add(std::string("grad/") + slot->name, StDType::F32, slotShape(*slot),
            bytes.data());
  }
  // With --data, the micro-batches fed (the tokens and targets the loader
  // made; this rank's, rank 0's), so that a reference can compute the same
  // loss.
  if (loader_) {
    auto feedAll = [&](const OtcSlot *slot,
                       const std::vector<std::vector<uint8_t>> &parts) {
      std::vector<uint8_t> all;
      for (int64_t k = 0; k < prog_.grad_accum; ++k)
        all.insert(all.end(), parts[k].begin(), parts[k].end());
      std::vector<int64_t> shape = slotShape(*slot);
      shape[0] *= prog_.grad_accum;
      StDType dtype;
      toStDType(slot->dtype, dtype);
      out.add(std::string("input/") + slot->name, dtype, shape, all.data());
    };
    feedAll(feed_.tokens, stepTok_);
    if (feed_.targets)
      feedAll(feed_.targets, stepTgt_);
  }
  // The random keys, so that a reference can replay the same masks.
  for (size_t k = 0; k < rngKeys_.size(); ++k)
    out.add("rng_key/" + std::to_string(k), StDType::I64, {}, &rngKeys_[k]);
  if (Status s = writeSafetensors(opt_.dumpGradsPath, out); !s)
    return s;
  if (!opt_.quiet)
    std::fprintf(log_, "wrote %s | loss %.6f | %zu gradients\n",
                 opt_.dumpGradsPath.c_str(), loss, slots_.grads.size());
  return Status::ok();
}

} // namespace otcrt
