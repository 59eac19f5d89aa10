// Validation of the OtcProgram descriptor against ABI versions 1 to 12, the
// slot helpers declared in program.h, and the small pure functions of the
// driver interface (RNG keys, BF16 widening and rounding, paths next to the
// executable).
#include "program.h"

#include "driver.h"

#include "otcrt/bf16.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace otcrt {

ProgramSlots::ProgramSlots(const OtcProgram &program) {
  for (int32_t i = 0; i < program.num_slots; ++i) {
    const OtcSlot &slot = program.slots[i];
    switch (slot.kind) {
    case OTC_SLOT_PARAM:
      params.push_back(&slot);
      paramValues += slot.nbytes / 4;
      break;
    case OTC_SLOT_GRAD: grads.push_back(&slot); break;
    case OTC_SLOT_ADAM_M: adamM.push_back(&slot); break;
    case OTC_SLOT_ADAM_V: adamV.push_back(&slot); break;
    case OTC_SLOT_INPUT:
      if (const char *rows = predictionRowsOf(program);
          rows && std::strcmp(rows, slot.name) == 0)
        predictionRows = &slot;
      else
        inputs.push_back(&slot);
      break;
    case OTC_SLOT_LOSS: loss = &slot; break;
    case OTC_SLOT_LR: lr = &slot; break;
    case OTC_SLOT_STEP: step = &slot; break;
    case OTC_SLOT_RNG: rng = &slot; break;
    case OTC_SLOT_GRAD_SCALE: gradScale = &slot; break;
    case OTC_SLOT_GRAD_FACTOR: gradFactor = &slot; break;
    case OTC_SLOT_BUFFER:
      buffers.push_back(&slot);
      bufferValues += slot.nbytes / (slot.dtype == OTC_BF16 ? 2 : 4);
      break;
    case OTC_SLOT_DECODE_TOKENS: decodeTokens = &slot; break;
    case OTC_SLOT_DECODE_POSITION: decodePosition = &slot; break;
    case OTC_SLOT_KV_CACHE: kvCaches.push_back(&slot); break;
    case OTC_SLOT_LOGITS: logits = &slot; break;
    default: break;
    }
  }
}

ArenaFunction initConstantsOf(const OtcProgram &program) {
  return program.abi_version >= 2 ? program.init_constants : nullptr;
}

ArenaFunction refreshParamsOf(const OtcProgram &program) {
  return program.abi_version >= 3 ? program.refresh_params : nullptr;
}

ArenaFunction evalStepOf(const OtcProgram &program) {
  return program.abi_version >= 8 ? program.eval_step : nullptr;
}

ArenaFunction decodeStepOf(const OtcProgram &program) {
  return program.abi_version >= 9 ? program.decode_step : nullptr;
}

int32_t precisionOf(const OtcProgram &program) {
  return program.abi_version >= 11 ? program.precision : -1;
}

bool bidirectionalOf(const OtcProgram &program) {
  return program.abi_version >= 12 && program.bidirectional != 0;
}

int64_t microStepFlopsOf(const OtcProgram &program) {
  return program.abi_version >= 11 ? program.micro_step_flops : 0;
}

int64_t tokensPerMicroStepOf(const OtcProgram &program,
                             const std::vector<const OtcSlot *> &inputs) {
  if (program.abi_version >= 11)
    return program.tokens_per_micro_step;
  for (const OtcSlot *slot : inputs)
    if (isIntegerSlot(*slot) && slot->rank >= 2)
      return slot->shape[0] * slot->shape[1];
  return 0;
}

const char *countInputOf(const OtcProgram &program) {
  return program.abi_version >= 3 && program.count_input &&
                 *program.count_input
             ? program.count_input
             : nullptr;
}

const char *predictionRowsOf(const OtcProgram &program) {
  return program.abi_version >= 13 && program.prediction_rows &&
                 *program.prediction_rows
             ? program.prediction_rows
             : nullptr;
}

const char *slotKindName(int32_t kind) {
  switch (kind) {
  case OTC_SLOT_PARAM: return "PARAM";
  case OTC_SLOT_GRAD: return "GRAD";
  case OTC_SLOT_ADAM_M: return "ADAM_M";
  case OTC_SLOT_ADAM_V: return "ADAM_V";
  case OTC_SLOT_INPUT: return "INPUT";
  case OTC_SLOT_LOSS: return "LOSS";
  case OTC_SLOT_LR: return "LR";
  case OTC_SLOT_STEP: return "STEP";
  case OTC_SLOT_RNG: return "RNG";
  case OTC_SLOT_GRAD_SCALE: return "GRAD_SCALE";
  case OTC_SLOT_BUFFER: return "BUFFER";
  case OTC_SLOT_GRAD_FACTOR: return "GRAD_FACTOR";
  case OTC_SLOT_DECODE_TOKENS: return "DECODE_TOKENS";
  case OTC_SLOT_DECODE_POSITION: return "DECODE_POSITION";
  case OTC_SLOT_KV_CACHE: return "KV_CACHE";
  case OTC_SLOT_LOGITS: return "LOGITS";
  default: return "?";
  }
}

bool toStDType(int32_t dtype, StDType &out) {
  switch (dtype) {
  case OTC_F32: out = StDType::F32; return true;
  case OTC_I64: out = StDType::I64; return true;
  case OTC_BOOL: out = StDType::BOOL; return true;
  case OTC_F64: out = StDType::F64; return true;
  case OTC_I32: out = StDType::I32; return true;
  case OTC_BF16: out = StDType::BF16; return true;
  default: return false;
  }
}

std::vector<int64_t> slotShape(const OtcSlot &slot) {
  std::vector<int64_t> shape;
  for (int32_t i = 0; i < slot.rank; ++i)
    shape.push_back(slot.shape[i]);
  return shape;
}

std::string slotLabel(const OtcSlot &slot) {
  std::string label = slotKindName(slot.kind);
  if (slot.name && *slot.name)
    label += std::string(" slot '") + slot.name + "'";
  else
    label += " slot";
  return label;
}

bool isIntegerSlot(const OtcSlot &slot) {
  return slot.dtype == OTC_I64 || slot.dtype == OTC_I32;
}

const OtcIndexRange *indexRangeOf(const OtcProgram &program,
                                  const OtcSlot &slot) {
  // A test hook: the GPU tests turn the host's checks off to reach the
  // kernels' own (the error record).
  static const bool off = std::getenv("OTC_TEST_NO_INDEX_CHECK") != nullptr;
  if (off || program.abi_version < 3 || !program.index_ranges)
    return nullptr;
  for (int32_t i = 0; i < program.num_index_ranges; ++i) {
    const OtcIndexRange &r = program.index_ranges[i];
    if (&program.slots[r.slot] == &slot)
      return &r;
  }
  return nullptr;
}

std::string indexRangeText(const OtcIndexRange &range) {
  std::string text = "[" +
                     std::to_string(range.flags & OTC_INDEX_NEGATIVE ? -range.bound : 0) +
                     ", " + std::to_string(range.bound) + ")";
  if (range.flags & OTC_INDEX_IGNORE)
    text += " or " + std::to_string(range.ignore_index);
  return text;
}

int64_t intAt(const OtcSlot &slot, const uint8_t *bytes, int64_t i) {
  if (slot.dtype == OTC_I64) {
    int64_t v;
    std::memcpy(&v, bytes + i * 8, 8);
    return v;
  }
  int32_t w;
  std::memcpy(&w, bytes + i * 4, 4);
  return w;
}

bool findBadIndex(const OtcIndexRange &range, const OtcSlot &slot,
                  const uint8_t *bytes, int64_t count, int64_t &index,
                  int64_t &value) {
  const int64_t low = range.flags & OTC_INDEX_NEGATIVE ? -range.bound : 0;
  const bool ignore = range.flags & OTC_INDEX_IGNORE;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = intAt(slot, bytes, i);
    if ((v < low || v >= range.bound) && !(ignore && v == range.ignore_index)) {
      index = i;
      value = v;
      return true;
    }
  }
  return false;
}

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double mfuPeakFlops(double peakTflops, const Backend &backend,
                    const OtcProgram &program) {
  if (peakTflops > 0)
    return peakTflops * 1e12;
  return backend.peakFlops(precisionOf(program));
}

std::string pathNextToExecutable(const std::string &file) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return file;
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  if (slash == std::string::npos)
    return file;
  return exe.substr(0, slash + 1) + file;
}

std::string defaultInitPath() {
  return pathNextToExecutable("init.safetensors");
}

namespace {

Status invalid(const std::string &what) {
  return Status::error("invalid program descriptor: " + what);
}

/// The descriptor's version, target, sizes and functions.
Status checkHeader(const OtcProgram *program, const char *backendName) {
  if (!program)
    return invalid("null program");
  if (program->abi_version < 1 || program->abi_version > OTC_ABI_VERSION)
    return invalid("abi_version is " + std::to_string(program->abi_version) +
                   ", this runtime implements versions 1 to " +
                   std::to_string(OTC_ABI_VERSION));
  if (!program->target || std::strcmp(program->target, backendName) != 0)
    return invalid(std::string("compiled for target '") +
                   (program->target ? program->target : "(null)") +
                   "' but linked with the '" + backendName + "' runtime");
  if (program->arena_bytes < 0)
    return invalid("negative arena_bytes");
  if (program->micro_batch < 1 || program->grad_accum < 1)
    return invalid("micro_batch and grad_accum must be positive (got " +
                   std::to_string(program->micro_batch) + " and " +
                   std::to_string(program->grad_accum) + ")");
  if (program->num_slots < 0 || (program->num_slots > 0 && !program->slots))
    return invalid("bad slot table");
  if (!program->zero_grads || !program->micro_step || !program->optimizer_step)
    return invalid("missing zero_grads, micro_step or optimizer_step");
  if (program->abi_version >= 11 && program->precision != OTC_PRECISION_FP32 &&
      program->precision != OTC_PRECISION_BF16)
    return invalid("precision is " + std::to_string(program->precision) +
                   ", not OTC_PRECISION_FP32 or OTC_PRECISION_BF16");
  if (program->abi_version >= 11 &&
      (program->tokens_per_micro_step < 0 || program->micro_step_flops < 0))
    return invalid("negative tokens_per_micro_step or micro_step_flops");
  if (program->abi_version >= 12 && program->bidirectional != 0 &&
      program->bidirectional != 1)
    return invalid("bidirectional is " +
                   std::to_string(program->bidirectional) + ", not 0 or 1");
  return Status::ok();
}

/// Slot i: its name, kind (up to \p lastKind), type, shape and place in the
/// arena; counted in \p counts by kind.
Status checkSlot(const OtcProgram &program, int32_t i, int32_t lastKind,
                 int *counts) {
  const OtcSlot &slot = program.slots[i];
  std::string where = "slot " + std::to_string(i);
  if (!slot.name)
    return invalid(where + " has a null name");
  if (slot.kind < OTC_SLOT_PARAM || slot.kind > lastKind)
    return invalid(where + " has unknown kind " + std::to_string(slot.kind));
  where = slotLabel(slot);
  StDType st;
  if (!toStDType(slot.dtype, st))
    return invalid(where + " has unknown dtype " + std::to_string(slot.dtype));
  if (slot.rank < 0 || (slot.rank > 0 && !slot.shape))
    return invalid(where + " has a bad rank or shape");
  int64_t numel = 1;
  for (int32_t d = 0; d < slot.rank; ++d) {
    if (slot.shape[d] < 0)
      return invalid(where + " has a negative dimension");
    numel *= slot.shape[d];
  }
  if (slot.nbytes != numel * static_cast<int64_t>(dtypeSize(st)))
    return invalid(where + ": nbytes " + std::to_string(slot.nbytes) +
                   " does not match " + dtypeName(st) + " " +
                   formatShape(slotShape(slot)));
  // ZeRO-1 with sharded masters: a PARAM slot is a place in the whole
  // parameter group, not arena bytes (checked below).
  const OtcOptimizerShards *sharded = shardsOf(program);
  bool imageSlot =
      sharded && sharded->masters_sharded && slot.kind == OTC_SLOT_PARAM;
  if (!imageSlot &&
      (slot.offset < 0 || slot.offset + slot.nbytes > program.arena_bytes))
    return invalid(where + " [" + std::to_string(slot.offset) + ", " +
                   std::to_string(slot.offset + slot.nbytes) +
                   ") lies outside the arena of " +
                   std::to_string(program.arena_bytes) + " bytes");
  ++counts[slot.kind];
  switch (slot.kind) {
  case OTC_SLOT_PARAM:
  case OTC_SLOT_ADAM_M:
  case OTC_SLOT_ADAM_V:
    if (slot.dtype != OTC_F32 || !*slot.name)
      return invalid(where + " must be a named F32 tensor");
    break;
  case OTC_SLOT_BUFFER:
    if (program.abi_version >= 10
            ? (slot.dtype != OTC_F32 && slot.dtype != OTC_BF16) || !*slot.name
            : slot.dtype != OTC_F32 || !*slot.name)
      return invalid(where + (program.abi_version >= 10
                                  ? " must be a named F32 or BF16 tensor"
                                  : " must be a named F32 tensor"));
    break;
  case OTC_SLOT_GRAD:
    if ((slot.dtype != OTC_F32 && slot.dtype != OTC_BF16) || !*slot.name)
      return invalid(where + " must be a named F32 or BF16 tensor");
    break;
  case OTC_SLOT_INPUT:
    if (!*slot.name || slot.rank < 1 || slot.shape[0] != program.micro_batch)
      return invalid(where + " must be named and have leading dimension " +
                     std::to_string(program.micro_batch) + " (micro_batch)");
    break;
  case OTC_SLOT_LOSS:
  case OTC_SLOT_LR:
  case OTC_SLOT_STEP:
  case OTC_SLOT_GRAD_SCALE:
  case OTC_SLOT_GRAD_FACTOR:
    if (slot.dtype != OTC_F32 || numel != 1)
      return invalid(where + " must be an F32 scalar");
    break;
  case OTC_SLOT_RNG:
    if (slot.dtype != OTC_I64 || numel != 1)
      return invalid(where + " must be an I64 scalar");
    break;
  case OTC_SLOT_DECODE_TOKENS:
    if (!isIntegerSlot(slot) || slot.rank != 2 ||
        slot.shape[0] != program.micro_batch || slot.shape[1] != 1)
      return invalid(where + " must be integers [" +
                     std::to_string(program.micro_batch) + ", 1]");
    break;
  case OTC_SLOT_DECODE_POSITION:
    if (slot.dtype != OTC_I64 || numel != 1)
      return invalid(where + " must be one I64");
    break;
  case OTC_SLOT_KV_CACHE:
    if ((slot.dtype != OTC_F32 && slot.dtype != OTC_BF16) || slot.rank < 1 ||
        slot.shape[0] != program.micro_batch)
      return invalid(where + " must be F32 or BF16 with leading dimension " +
                     std::to_string(program.micro_batch) + " (micro_batch)");
    break;
  case OTC_SLOT_LOGITS:
    if (slot.dtype != OTC_F32 || slot.rank != 2 ||
        slot.shape[0] != program.micro_batch || slot.shape[1] < 1)
      return invalid(where + " must be F32 [" +
                     std::to_string(program.micro_batch) + ", V]");
    break;
  }
  return Status::ok();
}

/// Version 13's prediction_rows: an int64 INPUT slot [micro_batch, K] whose
/// rows are chosen from count_input's [micro_batch, T] targets, K < T.
static Status checkPredictionRows(const OtcProgram *program) {
  const char *name = predictionRowsOf(*program);
  if (!name)
    return Status::ok();
  const OtcSlot *rows = nullptr, *targets = nullptr;
  const char *counted = countInputOf(*program);
  for (int32_t i = 0; i < program->num_slots; ++i) {
    const OtcSlot &s = program->slots[i];
    if (s.kind == OTC_SLOT_INPUT && std::strcmp(s.name, name) == 0)
      rows = &s;
    if (s.kind == OTC_SLOT_INPUT && counted &&
        std::strcmp(s.name, counted) == 0)
      targets = &s;
  }
  if (!rows || rows->dtype != OTC_I64 || rows->rank != 2 ||
      rows->shape[0] != program->micro_batch)
    return invalid(std::string("prediction_rows '") + name +
                   "' is not an I64 INPUT slot [micro_batch, K]");
  if (!targets)
    return invalid("prediction_rows needs count_input, the targets its rows "
                   "are chosen from");
  const int64_t T = targets->nbytes / (targets->dtype == OTC_I64 ? 8 : 4) /
                    program->micro_batch;
  if (T * program->micro_batch * (targets->dtype == OTC_I64 ? 8 : 4) !=
          targets->nbytes ||
      rows->shape[1] < 1 || rows->shape[1] > T)
    return invalid(std::string("prediction_rows '") + name + "' keeps " +
                   std::to_string(rows->shape[1]) +
                   " positions of sequences of " + std::to_string(T));
  return Status::ok();
}

/// How many slots of each kind, and count_input's slot.
Status checkSlotCounts(const OtcProgram *program, const int *counts,
                       bool needOptimizer) {
  if (counts[OTC_SLOT_LOSS] != 1)
    return invalid("expected exactly one LOSS slot, found " +
                   std::to_string(counts[OTC_SLOT_LOSS]));
  for (int kind : {OTC_SLOT_LR, OTC_SLOT_STEP, OTC_SLOT_RNG,
                   OTC_SLOT_GRAD_SCALE, OTC_SLOT_GRAD_FACTOR})
    if (counts[kind] > 1)
      return invalid(std::string("more than one ") + slotKindName(kind) +
                     " slot");
  if (needOptimizer && (counts[OTC_SLOT_LR] != 1 || counts[OTC_SLOT_STEP] != 1))
    return invalid("training needs an LR and a STEP slot");
  if (needOptimizer && program->abi_version >= 5 &&
      counts[OTC_SLOT_GRAD_FACTOR] != 1)
    return invalid("training a version 5 program needs a GRAD_FACTOR slot");
  if (const char *name = countInputOf(*program)) {
    if (program->grad_accum > 1 && counts[OTC_SLOT_GRAD_SCALE] != 1)
      return invalid("weighing micro-batches by count_input needs a GRAD_SCALE "
                     "slot");
    bool found = false;
    for (int32_t i = 0; i < program->num_slots; ++i)
      found |= program->slots[i].kind == OTC_SLOT_INPUT &&
               std::strcmp(program->slots[i].name, name) == 0 &&
               isIntegerSlot(program->slots[i]);
    if (!found)
      return invalid(std::string("count_input '") + name +
                     "' is not an integer INPUT slot");
  }
  if (Status s = checkPredictionRows(program); !s)
    return s;
  // Version 9: decode_step reads one DECODE_TOKENS and DECODE_POSITION
  // and writes one LOGITS.
  bool decodes = decodeStepOf(*program) != nullptr;
  for (int kind : {OTC_SLOT_DECODE_TOKENS, OTC_SLOT_DECODE_POSITION,
                   OTC_SLOT_LOGITS})
    if (counts[kind] != (decodes ? 1 : 0))
      return invalid(std::string(decodes ? "decode_step needs one " : "") +
                     slotKindName(kind) + " slot" +
                     (decodes ? "" : " without decode_step") + ", found " +
                     std::to_string(counts[kind]));
  return Status::ok();
}

/// The index ranges (version 3): one per integer INPUT slot at most.
Status checkIndexRanges(const OtcProgram *program) {
  if (program->abi_version >= 3) {
    if (program->num_index_ranges < 0 ||
        (program->num_index_ranges > 0 && !program->index_ranges))
      return invalid("bad index range table");
    std::vector<bool> seen(static_cast<size_t>(program->num_slots), false);
    for (int32_t i = 0; i < program->num_index_ranges; ++i) {
      const OtcIndexRange &r = program->index_ranges[i];
      std::string where = "index range " + std::to_string(i);
      if (r.slot < 0 || r.slot >= program->num_slots)
        return invalid(where + " names slot " + std::to_string(r.slot) +
                       ", outside the table");
      const OtcSlot &slot = program->slots[r.slot];
      if (slot.kind != OTC_SLOT_INPUT || !isIntegerSlot(slot))
        return invalid(where + " is on " + slotLabel(slot) +
                       ", not an integer INPUT slot");
      if (r.bound < 1 || seen[r.slot] || !r.what)
        return invalid(
            where + " (" + slotLabel(slot) +
            ") has a bound below 1, no description or a second range");
      seen[r.slot] = true;
    }
  }
  return Status::ok();
}

/// The gradient buckets (version 7).
Status checkBucketRanges(const OtcProgram *program) {
  if (program->abi_version >= 7) {
    // The buckets: numbered from 0 without a gap, in table order, inside
    // the arena.
    if (program->num_bucket_ranges < 0 ||
        (program->num_bucket_ranges > 0 && !program->bucket_ranges))
      return invalid("bad bucket range table");
    int32_t last = -1;
    for (int32_t i = 0; i < program->num_bucket_ranges; ++i) {
      const OtcBucketRange &r = program->bucket_ranges[i];
      std::string where = "bucket range " + std::to_string(i);
      if (r.bucket != last && r.bucket != last + 1)
        return invalid(where + " is of bucket " + std::to_string(r.bucket) +
                       " after bucket " + std::to_string(last));
      last = r.bucket;
      if ((r.bf16 != 0 && r.bf16 != 1) || r.offset < 0 || r.count < 0 ||
          r.offset + r.count * (r.bf16 ? 2 : 4) > program->arena_bytes)
        return invalid(where + " lies outside the arena or has a bad type");
    }
  }
  return Status::ok();
}

/// ZeRO-1's groups (version 6).
Status checkShards(const OtcProgram *program, const int *counts) {
  if (const OtcOptimizerShards *sh = shardsOf(*program)) {
    // ZeRO-1: the groups within the arena, every PARAM slot inside the
    // parameter group, no per-parameter moments.
    if (sh->ranks < 2 || sh->elements < 1 ||
        (sh->grad_dtype != OTC_F32 && sh->grad_dtype != OTC_BF16))
      return invalid("shards: bad ranks, elements or gradient type");
    if ((sh->steps_read_params != 0 && sh->steps_read_params != 1) ||
        (!sh->steps_read_params && sh->copy_offset < 0))
      return invalid("shards: steps that read no FP32 parameters need BF16 "
                     "copies");
    if ((sh->masters_sharded != 0 && sh->masters_sharded != 1) ||
        (sh->masters_sharded && sh->steps_read_params))
      return invalid("shards: sharded masters need steps that read only the "
                     "BF16 copies");
    const int64_t whole = sh->ranks * sh->elements;
    struct Group {
      const char *what;
      int64_t offset, bytes;
    };
    const Group groups[] = {{"parameter group", sh->param_offset,
                             (sh->masters_sharded ? sh->elements : whole) * 4},
                            {"gradient group", sh->grad_offset,
                             whole * (sh->grad_dtype == OTC_BF16 ? 2 : 4)},
                            {"copy group", sh->copy_offset, whole * 2},
                            {"first moments", sh->m_offset, sh->elements * 4},
                            {"second moments", sh->v_offset, sh->elements * 4}};
    for (const Group &g : groups) {
      if (g.offset == -1 && std::strcmp(g.what, "copy group") == 0)
        continue;
      if (g.offset < 0 || g.offset + g.bytes > program->arena_bytes)
        return invalid(std::string("shards: the ") + g.what +
                       " lies outside the arena");
    }
    for (int32_t i = 0; i < program->num_slots; ++i) {
      const OtcSlot &slot = program->slots[i];
      if (slot.kind == OTC_SLOT_ADAM_M || slot.kind == OTC_SLOT_ADAM_V)
        return invalid("shards: " + slotLabel(slot) +
                       " exists, but the moments are sharded");
      if (slot.kind == OTC_SLOT_PARAM &&
          (slot.offset < sh->param_offset ||
           slot.offset + slot.nbytes > sh->param_offset + whole * 4 ||
           (slot.offset - sh->param_offset) % 4 != 0))
        return invalid("shards: " + slotLabel(slot) +
                       " lies outside the parameter group");
    }
    if (counts[OTC_SLOT_GRAD_FACTOR] != 1)
      return invalid("shards: a sharded optimizer needs a GRAD_FACTOR slot");
  }
  return Status::ok();
}

} // namespace

Status validateProgram(const OtcProgram *program, const char *backendName,
                       bool needOptimizer) {
  if (Status s = checkHeader(program, backendName); !s)
    return s;
  const int32_t lastKind = program->abi_version >= 9   ? OTC_SLOT_LOGITS
                           : program->abi_version >= 5 ? OTC_SLOT_GRAD_FACTOR
                           : program->abi_version >= 3 ? OTC_SLOT_BUFFER
                                                       : OTC_SLOT_RNG;
  int counts[OTC_SLOT_LOGITS + 1] = {};
  for (int32_t i = 0; i < program->num_slots; ++i)
    if (Status s = checkSlot(*program, i, lastKind, counts); !s)
      return s;
  if (Status s = checkSlotCounts(program, counts, needOptimizer); !s)
    return s;
  if (Status s = checkIndexRanges(program); !s)
    return s;
  if (Status s = checkBucketRanges(program); !s)
    return s;
  return checkShards(program, counts);
}

const OtcOptimizerShards *shardsOf(const OtcProgram &program) {
  return program.abi_version >= 6 ? program.shards : nullptr;
}

std::vector<std::vector<OtcrtRange>> gradientBucketsOf(const OtcProgram &program) {
  std::vector<std::vector<OtcrtRange>> buckets;
  if (program.abi_version < 7)
    return buckets;
  for (int32_t i = 0; i < program.num_bucket_ranges; ++i) {
    const OtcBucketRange &r = program.bucket_ranges[i];
    if (r.bucket >= static_cast<int32_t>(buckets.size()))
      buckets.resize(static_cast<size_t>(r.bucket) + 1);
    OtcrtRange range;
    range.offset = r.offset;
    range.count = r.count;
    range.bf16 = r.bf16;
    range.reserved = 0;
    buckets[r.bucket].push_back(range);
  }
  return buckets;
}

std::vector<uint8_t> widenBf16(const std::vector<uint8_t> &bf16) {
  std::vector<uint8_t> out(bf16.size() * 2);
  for (size_t i = 0; i + 1 < bf16.size(); i += 2) {
    uint32_t bits = uint32_t(bf16[i] | (bf16[i + 1] << 8)) << 16;
    std::memcpy(&out[i * 2], &bits, 4);
  }
  return out;
}

void narrowToBf16(std::vector<uint8_t> &bytes) {
  const size_t n = bytes.size() / 4;
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    uint16_t h = otcrt_float_to_bf16(f);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  bytes.resize(2 * n);
}

int64_t rngValue(uint64_t seed, int64_t step, int64_t micro) {
  uint64_t x = splitMix64(seed);
  x = splitMix64(x ^ static_cast<uint64_t>(step));
  x = splitMix64(x ^ static_cast<uint64_t>(micro));
  // 53 bits: exact in a double, so the float64 reference interpreter can
  // replay the same dropout masks from a dumped key.
  return static_cast<int64_t>(x >> 11);
}

} // namespace otcrt
