// A training run's starting state (run.h): the device and the arena, the
// initial parameters and buffers read a batch at a time into it (inputs.h),
// and the state of a checkpoint given to --resume, whose buffers come from
// the initial parameters and are checked against its CRC-32s.
#include "run.h"

#include "otcrt/safetensors.h"

#include <algorithm>
#include <cstring>

namespace otcrt {

Status Run::setUpDevice() {
  backend_.selectDevice(world_.localRank);
  // Sampling touches the parameters and the caches alone.
  backend_.allocateLazily(opt_.generate > 0);
  Status s = backend_.init();
  if (s)
    s = backend_.allocate(prog_.arena_bytes, &arena_.arena);
  if (s && !backend_.allocatesZeroed())
    s = backend_.zero(arena_.arena, 0, prog_.arena_bytes);
  if (s && slots_.gradFactor) {
    normHost_ = static_cast<double *>(backend_.hostBuffer(sizeof(double)));
    if (!normHost_)
      s = Status::error("cannot allocate host memory for the gradient norm");
  }
  if (s && queuesMicroSteps()) {
    // A step's micro-batch losses, on the device and where they arrive.
    const int64_t bytes = static_cast<int64_t>(sizeof(float)) *
                          std::max<int64_t>(prog_.grad_accum, 1);
    s = backend_.allocate(bytes, &losses_.arena);
    if (s) {
      lossesHost_ =
          static_cast<float *>(backend_.hostBuffer(static_cast<size_t>(bytes)));
      if (!lossesHost_)
        s = Status::error("cannot allocate host memory for the losses");
    }
  }
  return s;
}

Status Run::uploadInitialParams(InitialTensors &init,
                                const std::vector<const OtcSlot *> &initial) {
  // Sharded masters (ZeRO-1): the parameters go through an image of the
  // whole group, of which this rank uploads its part.
  const bool mastersSharded =
      shards_ && shards_->masters_sharded &&
      std::any_of(initial.begin(), initial.end(), [](const OtcSlot *slot) {
        return slot->kind == OTC_SLOT_PARAM;
      });
  std::vector<float> masters;
  if (mastersSharded)
    masters.assign(static_cast<size_t>(world_.size * shards_->elements), 0.0f);
  // Checkpoints keep each buffer's CRC-32 in place of its bytes, summed
  // here, once, from the bytes the arena gets.
  const bool sumBuffers = !opt_.saveDir.empty() || !opt_.resumeDir.empty();
  // Each tensor read, uploaded and freed a batch at a time: the weights are
  // never all in host memory at once, nor held twice.
  Status s = forEachInitialTensor(
      init, initial, [&](const OtcSlot &slot, Tensor &tensor) {
        std::vector<uint8_t> &data = tensor.data;
        // A BF16 buffer from F32 initial values: rounded here, in place.
        if (slot.dtype == OTC_BF16 && tensor.dtype == StDType::F32)
          narrowToBf16(data);
        const uint8_t *bytes = data.data();
        if (sumBuffers && slot.kind == OTC_SLOT_BUFFER)
          bufferCrcs_[slot.name] =
              crc32(bytes, static_cast<size_t>(slot.nbytes));
        if (mastersSharded && slot.kind == OTC_SLOT_PARAM) {
          std::memcpy(masters.data() +
                          (slot.offset - shards_->param_offset) / 4,
                      bytes, static_cast<size_t>(slot.nbytes));
          return Status::ok();
        }
        return backend_.upload(arena_.arena, slot.offset, bytes, slot.nbytes);
      });
  if (!s)
    return s;
  if (mastersSharded)
    if (Status u =
            backend_.upload(arena_.arena, shards_->param_offset,
                            masters.data() + world_.rank * shards_->elements,
                            shards_->elements * 4);
        !u)
      return u;
  return Status::ok();
}

Status Run::resumeFrom(std::string &from) {
  const bool mastersSharded = shards_ && shards_->masters_sharded;
  uint64_t fingerprint = state_.dataFingerprint;
  ShardedMoments moments;
  if (shards_) {
    moments.shards = shards_;
    moments.m.assign(static_cast<size_t>(world_.size * shards_->elements),
                     0.0f);
    moments.v = moments.m;
    if (mastersSharded)
      moments.params = moments.m;
  }
  CheckpointBuffers buffers;
  if (Status s =
          loadCheckpoint(opt_.resumeDir, slots_, backend_, arena_.arena, state_,
                         from, buffers, shards_ ? &moments : nullptr);
      !s)
    return s;
  if (buffers.fromInit) {
    if (Status s = resumeBuffers(buffers); !s)
      return s;
  } else {
    bufferCrcs_ = buffers.crc; // loaded from the checkpoint's tensors
  }
  // ZeRO-1: this rank's part of the moments (and of sharded masters),
  // whatever world size saved.
  std::vector<std::pair<std::vector<float> *, int64_t>> parts;
  if (shards_)
    parts = {{&moments.m, shards_->m_offset}, {&moments.v, shards_->v_offset}};
  if (mastersSharded)
    parts.push_back({&moments.params, shards_->param_offset});
  for (auto [image, offset] : parts)
    if (Status s =
            backend_.upload(arena_.arena, offset,
                            image->data() + world_.rank * shards_->elements,
                            shards_->elements * 4);
        !s)
      return s;
  if (state_.dataFingerprint != fingerprint)
    return Status::error(from + ": the checkpoint was trained on other data "
                                "(different --data shards, sizes or mode: "
                                "next-token or --mlm targets, another mask "
                                "token or share)");
  if (loader_) {
    // The checkpoint's seed rules: the shuffle order must not change.
    loader_ = std::make_unique<TokenLoader>(trainData_, feed_, state_.seed,
                                            opt_.shuffle);
    loader_->seek(state_.dataEpoch, state_.dataCursor);
  }
  lastSaved_ = state_.step;
  lastSavedPath_ = from;
  return Status::ok();
}

Status Run::resumeBuffers(const CheckpointBuffers &saved) {
  if (slots_.buffers.empty())
    return Status::ok();
  InitialTensors init;
  if (Status s = loadInitialBuffers(opt_.initPath, slots_.buffers,
                                    defaultInitPath(), init);
      !s)
    return Status::error(
        "cannot resume (--resume " + opt_.resumeDir +
        "): the checkpoint keeps only what trains, and resuming needs the "
        "initial parameters it was started from (--init PATH) for its " +
        std::to_string(slots_.buffers.size()) +
        " buffer(s), the initializers not trained: " + s.message());
  if (Status s = uploadInitialParams(init, slots_.buffers); !s)
    return s;
  return checkInitialBuffers(slots_, saved, bufferCrcs_, init.source,
                             opt_.resumeDir);
}

} // namespace otcrt
