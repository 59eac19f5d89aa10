// `train --generate N --prompt-ids A,B,...` (ABI version 9): ids drawn one
// position at a time by the program's decode_step, which caches each
// attention's keys and values in the arena (its KV_CACHE slots), so that a
// position costs one row of the forward instead of the whole sequence.
// Every row of the micro-batch starts with the prompt and draws its own
// ids; the draw is otc-run --generate's (the largest logit at temperature
// 0, else top-k and top-p over softmax(logits / T)), and row 0 uses its
// random numbers, so that both print the same ids for a seed. A sequence
// longer than the model's T positions restarts the caches from its last
// T / 2 ids whenever they are full (otc-run slides a window of the last T
// ids at every id instead; both agree up to T ids).
#include "run.h"

#include "otcrt/sampling.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <numeric>

namespace otcrt {

Status Run::generationLength(int64_t &T) {
  const OtcSlot &tokens = *slots_.decodeTokens, &logits = *slots_.logits;
  const int64_t B = prog_.micro_batch, V = logits.shape[1];
  // The sequence length: the token input's, which the caches hold.
  T = 0;
  const OtcIndexRange *range = nullptr;
  for (const OtcSlot *in : slots_.inputs)
    if (std::strcmp(in->name, tokens.name) == 0 && in->rank == 2) {
      T = in->shape[1];
      range = indexRangeOf(prog_, *in);
    }
  if (T == 0)
    return Status::error(std::string("decode_step's tokens '") + tokens.name +
                         "' are no [batch, sequence] input of the program");
  int64_t bound = range ? range->bound : V;
  for (int64_t id : opt_.promptIds)
    if (id >= bound)
      return Status::usage("--prompt-ids: id " + std::to_string(id) +
                           " is outside the vocabulary of " +
                           std::to_string(bound));
  if (opt_.samples > B)
    return Status::usage("--samples " + std::to_string(opt_.samples) +
                         " exceeds the micro-batch of " + std::to_string(B) +
                         " rows (otc-compile --micro-batch)");
  return Status::ok();
}

Status Run::clearKvCaches() {
  for (const OtcSlot *cache : slots_.kvCaches)
    if (Status s = backend_.zero(arena_.arena, cache->offset, cache->nbytes);
        !s)
      return s;
  return Status::ok();
}

Status Run::decodePosition(ArenaFunction decode,
                           const std::vector<std::vector<int64_t>> &ids,
                           int64_t next, int64_t position) {
  const OtcSlot &tokens = *slots_.decodeTokens;
  std::vector<uint8_t> tokenBytes(static_cast<size_t>(tokens.nbytes));
  for (size_t r = 0; r < ids.size(); ++r) {
    int64_t id = ids[r][next];
    if (tokens.dtype == OTC_I64)
      std::memcpy(tokenBytes.data() + 8 * r, &id, 8);
    else {
      int32_t narrow = static_cast<int32_t>(id);
      std::memcpy(tokenBytes.data() + 4 * r, &narrow, 4);
    }
  }
  if (Status s = backend_.upload(arena_.arena, tokens.offset, tokenBytes.data(),
                                 tokens.nbytes);
      !s)
    return s;
  if (Status s = backend_.upload(arena_.arena, slots_.decodePosition->offset,
                                 &position, sizeof(position));
      !s)
    return s;
  return runStep(StepFunction::DecodeStep, decode);
}

Status Run::generate() {
  ArenaFunction decode = decodeStepOf(prog_);
  if (!decode)
    return Status::usage("this program has no decode_step: compile the model "
                         "with otc-compile --generate to sample from it");
  const OtcSlot &logits = *slots_.logits;
  const int64_t B = prog_.micro_batch, V = logits.shape[1];
  int64_t T = 0;
  if (Status s = generationLength(T); !s)
    return s;
  const std::vector<int64_t> &prompt = opt_.promptIds;
  const int64_t promptLen = static_cast<int64_t>(prompt.size());

  if (!opt_.tracePath.empty())
    if (Status s = tracer_.open(opt_.tracePath, &backend_, opt_.traceSync); !s)
      return s;
  const DrawRule rule{opt_.temperature, opt_.topK, opt_.topP};
  std::vector<std::vector<int64_t>> ids(static_cast<size_t>(B), prompt);
  std::vector<float> rowLogits(static_cast<size_t>(B * V));
  // ids[start] is at position 0 of the caches; ids[next] goes in next.
  int64_t start = promptLen >= T ? promptLen - T / 2 : 0, next = start;
  int64_t positions = 0, restarts = 0;
  auto started = std::chrono::steady_clock::now();
  if (Status s = clearKvCaches(); !s)
    return s;
  for (int64_t made = 0; made < opt_.generate;) {
    if (next - start == T) {
      // The caches are full: again from the last T / 2 ids.
      start = next = next - T / 2;
      ++restarts;
      if (Status s = clearKvCaches(); !s)
        return s;
    }
    if (Status s = decodePosition(decode, ids, next, next - start); !s)
      return s;
    ++positions;
    // The ids known fill the caches; at the last one, the position's
    // logits give the next id.
    if (++next < static_cast<int64_t>(ids[0].size()))
      continue;
    if (Status s = backend_.download(arena_.arena, logits.offset,
                                     rowLogits.data(), logits.nbytes);
        !s)
      return s;
    uint64_t n = static_cast<uint64_t>(made++);
    for (int64_t r = 0; r < B; ++r) {
      uint64_t seed = r == 0 ? opt_.seed : splitMix64(opt_.seed + r);
      ids[r].push_back(drawId(rowLogits.data() + r * V, V, rule,
                              drawUniform(seed, n)));
    }
  }
  if (Status s = backend_.synchronize(); !s)
    return s;
  tracer_.close();
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  printGenerated(ids, seconds, positions, restarts, T);
  return Status::ok();
}

void Run::printGenerated(const std::vector<std::vector<int64_t>> &ids,
                         double seconds, int64_t positions, int64_t restarts,
                         int64_t T) {
  for (int64_t r = 0; r < opt_.samples; ++r) {
    for (size_t i = 0; i < ids[r].size(); ++i)
      std::fprintf(log_, "%s%" PRId64, i ? " " : "", ids[r][i]);
    std::fprintf(log_, "\n");
  }
  if (!opt_.quiet)
    std::fprintf(stderr,
                 "generated %" PRId64 " ids x %" PRId64 " rows in %.3f s "
                 "(%" PRId64 " positions, %.1f ms each%s)\n",
                 opt_.generate, static_cast<int64_t>(prog_.micro_batch),
                 seconds, positions,
                 1e3 * seconds / std::max<int64_t>(positions, 1),
                 restarts ? (", the context restarted from its last " +
                             std::to_string(T / 2) + " ids " +
                             std::to_string(restarts) + " times")
                                .c_str()
                          : "");
}

} // namespace otcrt
