// A training run's data-parallel collectives beyond the blocking gradient
// sum (run.h): the gradient buckets summed while the backward goes on (ABI
// version 7, otcrt_gradients_ready), and ZeRO-1's gathers, norm and moment
// images (ABI version 6).
#include "run.h"

#include "otcrt/bf16.h"

#include <algorithm>
#include <cmath>

namespace otcrt {
namespace {

/// The buckets whose hooks the running micro-step serves (null: none).
BucketSums *armedBuckets = nullptr;

} // namespace

Status BucketSums::arm(char *arena, double preMul,
                       GradientCommunicator &gradients, HostCollectives &host,
                       Tracer &tracer) {
  arena_ = arena;
  preMul_ = preMul;
  gradients_ = &gradients;
  host_ = &host;
  tracer_ = &tracer;
  started_.assign(buckets_.size(), false);
  startUs_.assign(buckets_.size(), 0.0);
  wide_.clear();
  narrow_.clear();
  status_ = Status::ok();
  if (gradients.sumsBucketsOnDevice())
    if (Status s = gradients.setBucketPreMul(preMul); !s)
      return s;
  armedBuckets = this;
  return Status::ok();
}

void BucketSums::ready(int32_t k) {
  if (k < 0 || k >= static_cast<int32_t>(buckets_.size()))
    return;
  // Device sums: bucket 0's hook (the hooks come in bucket order) begins a
  // run of the body. A graph capture that fails runs it again, eagerly,
  // and what the failed capture queued never runs.
  if (k == 0 && gradients_->sumsBucketsOnDevice()) {
    started_.assign(buckets_.size(), false);
    status_ = Status::ok();
  }
  if (started_[k] || !status_)
    return;
  started_[k] = true;
  if (gradients_->sumsBucketsOnDevice())
    readyOnDevice(k);
  else
    readyOnHost(k);
}

void BucketSums::readyOnDevice(int32_t k) {
  // Timed on the device: two marks on the communication stream.
  size_t marks[2];
  const bool traced = tracer_->deviceMarks();
  if (traced) {
    marks[0] = tracer_->reserveMark();
    marks[1] = tracer_->reserveMark();
  }
  status_ =
      gradients_->startBucketSum(arena_, buckets_[k], traced ? marks : nullptr);
  if (traced && status_)
    tracer_->markedSpan("gradient all-reduce, bucket " + std::to_string(k) +
                            " (overlapped)",
                        "communication", marks[0], marks[1]);
}

void BucketSums::readyOnHost(int32_t k) {
  startUs_[k] = tracer_->active() ? tracer_->now() : 0.0;
  const float f = static_cast<float>(preMul_);
  for (const OtcrtRange &r : buckets_[k]) {
    float *values = nullptr;
    if (!r.bf16) {
      values = reinterpret_cast<float *>(arena_ + r.offset);
      if (preMul_ != 1.0)
        for (int64_t i = 0; i < r.count; ++i)
          values[i] *= f;
    } else {
      auto *p = reinterpret_cast<uint16_t *>(arena_ + r.offset);
      wide_.emplace_back(static_cast<size_t>(r.count));
      for (int64_t i = 0; i < r.count; ++i)
        wide_.back()[i] = otcrt_bf16_to_float(p[i]) * f;
      narrow_.push_back({p, wide_.size() - 1});
      values = wide_.back().data();
    }
    if (Status s = host_->startSum(values, r.count); !s) {
      status_ = s;
      return;
    }
  }
}

Status BucketSums::finish() {
  armedBuckets = nullptr;
  Status s = status_;
  if (!s)
    return s;
  if (gradients_->sumsBucketsOnDevice()) {
    // The sums are queued (and joined) on the device. A replayed graph
    // called no hook, so started none: it queued the sums its capture did.
    const bool hooked =
        std::find(started_.begin(), started_.end(), true) != started_.end();
    if (!hooked && !startedByGraph_.empty())
      started_ = startedByGraph_;
    else
      startedByGraph_ = started_;
  } else {
    if (s = host_->waitSums(); !s)
      return s;
    for (auto [p, w] : narrow_)
      for (size_t i = 0; i < wide_[w].size(); ++i)
        p[i] = otcrt_float_to_bf16(wide_[w][i]);
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    if (started_[k]) {
      if (tracer_->active() && !gradients_->sumsBucketsOnDevice())
        tracer_->complete("gradient all-reduce, bucket " + std::to_string(k) +
                              " (overlapped)",
                          "communication", startUs_[k]);
      continue;
    }
    if (Status b = gradients_->sumGradients(arena_, buckets_[k], preMul_); !b)
      return b;
  }
  return Status::ok();
}

/// ZeRO-1: gathers the group at \p offset (\p elementBytes a value) from
/// the ranks, each rank's part from that rank.
Status Run::gatherShards(int64_t offset, int64_t elementBytes,
                         const char *what) {
  HostCollectives::Waiting wait(host_, what);
  return gradients_.allGather(arena_.arena, offset,
                              shards_->elements * elementBytes);
}

/// ZeRO-1: the step's gradient norm from every rank's part of the summed
/// gradients, and AdamW's factor from it (clipping and the ramp's \p scale,
/// NaN when the norm is not finite) written to the GRAD_FACTOR slot.
Status Run::shardedFactor(double scale, double &norm) {
  OtcrtRange mine;
  const int64_t element = shards_->grad_dtype == OTC_BF16 ? 2 : 4;
  mine.offset = shards_->grad_offset +
                world_.rank * shards_->elements * element;
  mine.count = shards_->elements;
  mine.bf16 = shards_->grad_dtype == OTC_BF16;
  mine.reserved = 0;
  double sum = 0;
  if (otcrt_sum_squares(arena_.arena, 1, &mine, &sum, otcrt_stream()) != 0)
    return Status::error("the gradient norm (otcrt_sum_squares) failed");
  {
    HostCollectives::Waiting wait(host_, "the gradient norm");
    if (Status s = host_.sum(&sum, 1); !s)
      return s;
  }
  norm = scale * std::sqrt(sum);
  float factor = std::isfinite(norm)
                     ? static_cast<float>(gradientFactor(scale, norm, opt_.gradClip))
                     : NAN;
  return backend_.upload(arena_.arena, slots_.gradFactor->offset, &factor,
                         sizeof(factor));
}

/// ZeRO-1: every rank's part of the AdamW moments, gathered into host
/// images of the whole groups on every rank (a collective).
Status Run::gatherMoments(ShardedMoments &moments) {
  moments.shards = shards_;
  const int64_t n = shards_->elements;
  std::vector<std::pair<std::vector<float> *, int64_t>> images = {
      {&moments.m, shards_->m_offset}, {&moments.v, shards_->v_offset}};
  // Sharded masters: their image too.
  if (shards_->masters_sharded)
    images.push_back({&moments.params, shards_->param_offset});
  for (auto [image, offset] : images) {
    image->assign(static_cast<size_t>(world_.size * n), 0.0f);
    if (Status s = backend_.download(arena_.arena, offset,
                                     image->data() + world_.rank * n, n * 4);
        !s)
      return s;
    HostCollectives::Waiting wait(host_, "the moments of a checkpoint");
    if (Status s = host_.allGatherBytes(image->data(), n * 4); !s)
      return s;
  }
  return Status::ok();
}

} // namespace otcrt

extern "C" void otcrt_gradients_ready(int32_t bucket) {
  if (otcrt::armedBuckets)
    otcrt::armedBuckets->ready(bucket);
}
