// A training step's micro-batches (run.h): their inputs uploaded (from a
// fixed batch, or read from the token shards for the whole step first,
// which weighs each micro-batch by its counted targets), micro_step run for
// each, and their losses. With the gradient factor on the device a step's
// micro-steps are queued without a wait, each loss copied to a list that
// the factor checks and the host reads once the step is done
// (queuesMicroSteps, settleLosses); otherwise each micro-step is waited
// for, its loss read and the kernels' error record checked.
#include "kernel_status.h"
#include "run.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace otcrt {

/// Waits for a micro-step, stops on a data error a kernel recorded (named
/// with \p where) and reads the micro-batch's loss.
Status Run::finishMicro(const std::string &where, float &loss) {
  Status s = backend_.synchronize();
  if (s)
    s = readKernelError(otcrt_stream(), where);
  if (s)
    s = backend_.download(arena_.arena, slots_.loss->offset, &loss,
                          sizeof(loss));
  return s;
}

Status Run::uploadPredictionRows(const uint8_t *targets,
                                 const std::string &where) {
  const OtcSlot *rows = slots_.predictionRows;
  const OtcSlot *counted = countedFeedSlot();
  for (const InputData &in : batch_)
    if (std::strcmp(in.slot->name, countInputOf(prog_)) == 0)
      counted = in.slot;
  if (Status s = predictionRows(*counted, targets, prog_.micro_batch,
                                prog_.count_ignore_index, rows->shape[1], where,
                                rowsBuf_);
      !s)
    return s;
  return backend_.upload(arena_.arena, rows->offset, rowsBuf_.data(),
                         rows->nbytes);
}

Status Run::feedMicro(int64_t k, TokenLoader *loader) {
  if (!loader) {
    for (const InputData &in : batch_) {
      const uint8_t *bytes = in.bytes.data() + k * in.slot->nbytes;
      Status s = backend_.upload(arena_.arena, in.slot->offset, bytes,
                                 in.slot->nbytes);
      if (s && slots_.predictionRows &&
          std::strcmp(in.slot->name, countInputOf(prog_)) == 0)
        s = uploadPredictionRows(bytes,
                                 "--batch, micro-batch " + std::to_string(k));
      if (!s)
        return s;
    }
    return Status::ok();
  }
  Status s = loader->next(prog_.micro_batch, tokBuf_, tgtBuf_);
  if (s)
    s = backend_.upload(arena_.arena, feed_.tokens->offset, tokBuf_.data(),
                        feed_.tokens->nbytes);
  if (s && feed_.targets)
    s = backend_.upload(arena_.arena, feed_.targets->offset, tgtBuf_.data(),
                        feed_.targets->nbytes);
  if (s && slots_.predictionRows)
    s = uploadPredictionRows(tgtBuf_.data(), "--val-data");
  if (s && feed_.mask)
    s = backend_.upload(arena_.arena, feed_.mask->offset,
                        maskFor(tokBuf_).data(), feed_.mask->nbytes);
  return s;
}

/// The step's micro-batches of this rank: every rank reads the whole
/// global batch's windows in the same order (one cursor for all) and keeps
/// its own part.
Status Run::prefetchStep(int64_t micros, TokenLoader *loader) {
  stepTok_.resize(static_cast<size_t>(micros));
  stepTgt_.resize(static_cast<size_t>(micros));
  std::vector<uint8_t> skipTok, skipTgt;
  for (int r = 0; r < world_.size; ++r)
    for (int64_t k = 0; k < micros; ++k) {
      bool own = r == world_.rank;
      if (Status s = loader->next(prog_.micro_batch, own ? stepTok_[k] : skipTok,
                                  own ? stepTgt_[k] : skipTgt);
          !s)
        return s;
    }
  return Status::ok();
}

/// Per micro-batch of the step, the entries of the program's count_input
/// that are not its ignore index; empty when the program has none.
std::vector<double> Run::microCounts(int64_t micros) const {
  const char *name = countInputOf(prog_);
  if (!name)
    return {};
  const OtcSlot *slot = nullptr;
  const std::vector<uint8_t> *whole = nullptr;
  const std::vector<std::vector<uint8_t>> *parts = nullptr;
  if (!loader_) {
    for (const InputData &in : batch_)
      if (std::strcmp(in.slot->name, name) == 0) {
        slot = in.slot;
        whole = &in.bytes;
      }
  } else if ((slot = countedFeedSlot())) {
    parts = slot == feed_.targets ? &stepTgt_ : &stepTok_;
  }
  if (!slot)
    return {};
  std::vector<double> counts;
  for (int64_t k = 0; k < micros; ++k)
    counts.push_back(countedEntries(
        *slot, parts ? (*parts)[k].data() : whole->data() + k * slot->nbytes));
  return counts;
}

double Run::countedEntries(const OtcSlot &slot, const uint8_t *bytes) const {
  int64_t n = slot.nbytes / (slot.dtype == OTC_I64 ? 8 : 4), c = 0;
  for (int64_t i = 0; i < n; ++i)
    c += intAt(slot, bytes, i) != prog_.count_ignore_index;
  return static_cast<double>(c);
}

const OtcSlot *Run::countedFeedSlot() const {
  const char *name = countInputOf(prog_);
  if (!name)
    return nullptr;
  for (const OtcSlot *slot : {feed_.targets, feed_.tokens})
    if (slot && std::strcmp(slot->name, name) == 0)
      return slot;
  return nullptr;
}

double Run::fedCount() const {
  const OtcSlot *slot = countedFeedSlot();
  if (!slot)
    return -1;
  return countedEntries(*slot,
                        (slot == feed_.targets ? tgtBuf_ : tokBuf_).data());
}

/// The test hook OTC_TEST_COLLECTIVES_ALONE: the gradients' sum of a
/// data-parallel run in a run of one rank (the GPU tests: NCCL over a
/// communicator of one GPU must give the same bits), overlapped where the
/// device sums the buckets.
static bool collectivesAlone() {
  static const bool alone =
      std::getenv("OTC_TEST_COLLECTIVES_ALONE") != nullptr;
  return alone;
}

bool Run::queuesMicroSteps() const {
  return slots_.gradFactor && !shards_ && world_.size == 1 &&
         !collectivesAlone();
}

Status Run::settleLosses(int64_t step, double &loss, bool &finite,
                         std::string &why) {
  if (Status s = readKernelError(otcrt_stream(),
                                 " (step " + std::to_string(step) + ")");
      !s)
    return s;
  double sum = 0;
  for (size_t i = 0; i < queued_.size(); ++i) {
    const float micro = lossesHost_[i];
    if (!std::isfinite(micro) && finite) {
      finite = false;
      why = std::string("loss is ") + nonfiniteName(micro) + " at step " +
            std::to_string(step) + ", micro-batch " +
            std::to_string(queued_[i].first);
    }
    sum += queued_[i].second * micro;
  }
  loss = sum;
  return Status::ok();
}

// Each micro-batch's weight in the step's gradient and loss: its share of
// the step's counted targets (over every rank's micro-batches) when the loss
// is a mean over them (so that any split gives the whole batch's gradient),
// else 1 / (micros x ranks). `total` 0: nothing is counted.
Status Run::microWeights(int64_t micros, std::vector<double> &counts,
                         double &total, std::vector<double> &weights) {
  counts = microCounts(micros);
  total = 0;
  for (double c : counts)
    total += c;
  if (Status s = host_.sum(&total, 1); !s)
    return s;
  weights.assign(static_cast<size_t>(micros),
                 1.0 / static_cast<double>(micros * world_.size));
  if (total > 0)
    for (int64_t k = 0; k < micros; ++k)
      weights[k] = counts[k] / total;
  return Status::ok();
}

// Micro-batch k's inputs (its prefetched tokens, targets and mask, or the
// --batch file's), its weight where the program scales by one, and its
// dropout key.
Status Run::loadMicroStep(int64_t step, int64_t micros, int64_t k,
                          TokenLoader *loader, double weight) {
  {
    TraceSpan load(tracer_, "load batch", "data");
    Status s = Status::ok();
    if (!loader) {
      s = feedMicro(k, nullptr);
    } else {
      s = backend_.upload(arena_.arena, feed_.tokens->offset,
                          stepTok_[k].data(), feed_.tokens->nbytes);
      if (s && feed_.targets)
        s = backend_.upload(arena_.arena, feed_.targets->offset,
                            stepTgt_[k].data(), feed_.targets->nbytes);
      if (s && slots_.predictionRows)
        s = uploadPredictionRows(stepTgt_[k].data(),
                                 "--data, step " + std::to_string(step) +
                                     ", micro-batch " + std::to_string(k));
      if (s && feed_.mask)
        s = backend_.upload(arena_.arena, feed_.mask->offset,
                            maskFor(stepTok_[k]).data(), feed_.mask->nbytes);
    }
    if (s && slots_.gradScale) {
      float w = static_cast<float>(weight);
      s = backend_.upload(arena_.arena, slots_.gradScale->offset, &w,
                          sizeof(w));
    }
    if (!s)
      return s;
  }
  if (slots_.rng) {
    // Keyed by the micro-batch's place in the global batch.
    int64_t r = rngValue(state_.seed, step, world_.rank * micros + k);
    rngKeys_.push_back(r);
    if (Status s = backend_.upload(arena_.arena, slots_.rng->offset, &r,
                                   sizeof(r));
        !s)
      return s;
  }
  return Status::ok();
}

// The ranks' weighted gradients summed (the overlapped buckets' rest, the
// sharded reduce-scatter or one all-reduce), then the loss and the
// non-finite verdict, the same on every rank. Without a GRAD_SCALE slot
// (one micro-batch a step) each rank's is weighted (`preMul`) in the sum.
Status Run::sumAcrossRanks(int64_t step, bool armed, double preMul,
                           double &sum, bool &finite, std::string &why) {
  if (armed) {
    TraceSpan span(tracer_, "gradient all-reduce, the rest", "communication");
    HostCollectives::Waiting wait(host_, "the gradients' sum");
    if (Status s = buckets_.finish(); !s)
      return s;
  } else if (shards_) {
    // ZeRO-1: each rank receives the sum of its part alone.
    TraceSpan span(tracer_, "gradient reduce-scatter", "communication");
    HostCollectives::Waiting wait(host_, "the gradients' sum");
    if (Status s = gradients_.reduceScatterGradients(
            arena_.arena, shards_->grad_offset, shards_->elements,
            shards_->grad_dtype == OTC_BF16, preMul);
        !s)
      return s;
  } else {
    TraceSpan span(tracer_, "gradient all-reduce", "communication");
    HostCollectives::Waiting wait(host_, "the gradients' sum");
    if (Status s = gradients_.sumGradients(arena_.arena, gradRanges_, preMul);
        !s)
      return s;
  }
  double shared[2] = {sum, finite ? 0.0 : 1.0};
  if (Status s = host_.sum(shared, 2); !s)
    return s;
  sum = shared[0];
  if (finite && shared[1] > 0) {
    finite = false;
    why = "the loss is not finite on another rank at step " +
          std::to_string(step);
  }
  return Status::ok();
}

Status Run::forwardBackward(int64_t step, int64_t micros, TokenLoader *loader,
                            double &loss, bool &finite, std::string &why) {
  if (Status s = runStep(StepFunction::ZeroGrads, prog_.zero_grads); !s)
    return s;
  rngKeys_.clear();
  queued_.clear();
  if (loader) {
    TraceSpan load(tracer_, "load batch", "data");
    if (Status s = prefetchStep(micros, loader); !s)
      return s;
  } else if (batches_.count() > 1) {
    // The step's global batch of the --batch files (step s: batch s - 1).
    TraceSpan load(tracer_, "load batch", "data");
    if (Status s = batches_.select(step - 1, world_.rank, batch_); !s)
      return s;
  }
  std::vector<double> counts, weights;
  double total = 0;
  if (Status s = microWeights(micros, counts, total, weights); !s)
    return s;
  double sum = 0;
  finite = true;
  // Overlapped: the last micro-batch that runs sums its buckets as its
  // backward finishes them.
  const double preMul = slots_.gradScale ? 1.0 : weights[0];
  const bool alone = collectivesAlone();
  const bool overlap =
      (world_.size > 1 || (alone && gradients_.sumsBucketsOnDevice())) &&
      !shards_ && !buckets_.empty() && gradients_.overlapsGradientSum();
  int64_t lastRun = -1;
  for (int64_t k = 0; k < micros; ++k)
    if (!(total > 0 && counts[k] == 0))
      lastRun = k;
  bool armed = false;
  for (int64_t k = 0; k < micros; ++k) {
    // A micro-batch with nothing counted adds nothing to the step.
    if (total > 0 && counts[k] == 0)
      continue;
    TraceSpan span(tracer_, "micro-step " + std::to_string(k), "micro-step",
                   "\"step\": " + std::to_string(step));
    if (Status s = loadMicroStep(step, micros, k, loader, weights[k]); !s)
      return s;
    if (overlap && k == lastRun) {
      if (Status s =
              buckets_.arm(arena_.arena, preMul, gradients_, host_, tracer_);
          !s)
        return s;
      armed = true;
    }
    // Sums queued on the device make the last micro-step a step function
    // (a graph) of its own.
    const StepFunction which = armed && gradients_.sumsBucketsOnDevice()
                                   ? StepFunction::LastMicroStep
                                   : StepFunction::MicroStep;
    if (Status s = runStep(which, prog_.micro_step); !s)
      return s;
    if (queuesMicroSteps()) {
      // No wait: the loss joins the step's list on the device, which the
      // gradient factor checks and the host reads once the step is done.
      if (Status s =
              backend_.copy(losses_.arena + sizeof(float) * queued_.size(),
                            arena_.arena + slots_.loss->offset, sizeof(float));
          !s)
        return s;
      queued_.emplace_back(k, weights[k]);
      continue;
    }
    float micro = 0;
    if (Status s = finishMicro(" (step " + std::to_string(step) +
                                   ", micro-batch " + std::to_string(k) + ")",
                               micro);
        !s)
      return s;
    if (!std::isfinite(micro) && finite) {
      finite = false;
      why = std::string("loss is ") + nonfiniteName(micro) + " at step " +
            std::to_string(step) + ", micro-batch " + std::to_string(k);
    }
    sum += weights[k] * micro;
  }
  if (!queued_.empty())
    if (Status s = backend_.downloadAsync(
            losses_.arena, lossesHost_,
            static_cast<int64_t>(sizeof(float) * queued_.size()));
        !s)
      return s;
  if (world_.size > 1 || alone)
    if (Status s = sumAcrossRanks(step, armed, preMul, sum, finite, why); !s)
      return s;
  loss = sum;
  return Status::ok();
}

} // namespace otcrt
