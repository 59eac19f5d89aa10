// Helpers over the OtcProgram descriptor shared by the driver's files: the
// slot table sorted by kind, slot shapes and labels, dtype mapping to
// safetensors, and the SplitMix64 mixer every seeded choice of the runtime
// (dropout keys, data shuffling) is derived from.
#ifndef OTCRT_PROGRAM_H
#define OTCRT_PROGRAM_H

#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "otcrt/safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otcrt {

/// The slots of a validated program, by kind, in table order.
struct ProgramSlots {
  const OtcSlot *loss = nullptr, *lr = nullptr, *step = nullptr,
                *rng = nullptr, *gradScale = nullptr, *gradFactor = nullptr;
  std::vector<const OtcSlot *> params, grads, adamM, adamV, inputs, buffers;
  /// decode_step's (version 9): the ids and the position it reads, the
  /// logits it writes, the caches it keeps.
  const OtcSlot *decodeTokens = nullptr, *decodePosition = nullptr,
                *logits = nullptr;
  std::vector<const OtcSlot *> kvCaches;
  /// Version 13's prediction_rows: the runtime fills it from the targets
  /// (never a --batch file), so it is not among `inputs`. Null: none.
  const OtcSlot *predictionRows = nullptr;
  int64_t paramValues = 0;  ///< elements over all PARAM slots
  int64_t bufferValues = 0; ///< elements over all BUFFER slots

  explicit ProgramSlots(const OtcProgram &program);
};

/// One of the program's functions over the arena.
using ArenaFunction = void (*)(char *arena);
/// The program's init_constants: null for a version 1 descriptor, which has
/// no such field, and where the program has none.
ArenaFunction initConstantsOf(const OtcProgram &program);
/// The program's count_input: null for a descriptor before version 3 or
/// without one (every micro-batch weighs the same).
const char *countInputOf(const OtcProgram &program);
/// The program's refresh_params: null before version 3 or where the steps
/// refresh the working copies themselves.
ArenaFunction refreshParamsOf(const OtcProgram &program);
/// The program's eval_step: null before version 8 or where it has none
/// (evaluation then runs micro_step).
ArenaFunction evalStepOf(const OtcProgram &program);
/// The program's decode_step: null before version 9 or where it has none
/// (compiled without --generate).
ArenaFunction decodeStepOf(const OtcProgram &program);
/// The precision of the program's products (OtcPrecision, version 11);
/// -1 before version 11 (unknown).
int32_t precisionOf(const OtcProgram &program);
/// The model FLOPs of one micro_step (version 11); 0 before (unknown).
int64_t microStepFlopsOf(const OtcProgram &program);
/// Whether a fused self-attention of the program is not causal (version
/// 12's `bidirectional`; false before).
bool bidirectionalOf(const OtcProgram &program);
/// The tokens one micro_step reads, 0 when it counts samples: the
/// descriptor's from version 11 on (otc-compile's one count), before it the
/// same rule over \p inputs (the INPUT slots, in table order): B x T of the
/// first integer one of rank 2 or more.
int64_t tokensPerMicroStepOf(const OtcProgram &program,
                             const std::vector<const OtcSlot *> &inputs);
/// The program's ZeRO-1 groups: null before version 6 or when its
/// optimizer is not sharded.
const OtcOptimizerShards *shardsOf(const OtcProgram &program);
/// The program's gradient buckets (version 7), each its ranges; empty
/// before version 7 or without buckets.
std::vector<std::vector<OtcrtRange>> gradientBucketsOf(const OtcProgram &program);
/// The program's prediction_rows: null before version 13 or where its
/// loss is computed at every position.
const char *predictionRowsOf(const OtcProgram &program);
/// "PARAM", "GRAD", ... for an OtcSlotKind.
const char *slotKindName(int32_t kind);
/// Maps an OtcDType to the safetensors dtype with the same bytes.
bool toStDType(int32_t dtype, StDType &out);
/// The shape of \p slot as a vector.
std::vector<int64_t> slotShape(const OtcSlot &slot);
/// "PARAM slot 'w'" style label for messages.
std::string slotLabel(const OtcSlot &slot);
/// True for I64 and I32 slots.
bool isIntegerSlot(const OtcSlot &slot);
/// The index range of \p slot (validated program), or null when it has none
/// (a version 1 or 2 descriptor has none) or the environment variable
/// OTC_TEST_NO_INDEX_CHECK is set (a test hook: the values then reach the
/// kernels unchecked).
const OtcIndexRange *indexRangeOf(const OtcProgram &program, const OtcSlot &slot);
/// "[0, 64)", "[-64, 64)", plus " or -100" when ignore_index is valid.
std::string indexRangeText(const OtcIndexRange &range);
/// Element \p i of integer values (I64 or I32, as \p slot) at \p bytes.
int64_t intAt(const OtcSlot &slot, const uint8_t *bytes, int64_t i);
/// The first of \p count integer values (I64 or I32, as \p slot) at
/// \p bytes that \p range rejects: its position in \p index and value in
/// \p value; false when all are valid.
bool findBadIndex(const OtcIndexRange &range, const OtcSlot &slot,
                  const uint8_t *bytes, int64_t count, int64_t &index,
                  int64_t &value);
/// One round of the SplitMix64 output function.
uint64_t splitMix64(uint64_t x);

} // namespace otcrt

#endif // OTCRT_PROGRAM_H
