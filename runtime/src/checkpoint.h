// Checkpoints of the train driver. A save writes ROOT/step-NNNNNNNN/ with
// state.safetensors (master weights "param/<name>", AdamW moments
// "adam_m/<name>" and "adam_v/<name>", and the counters in the metadata:
// step, applied updates, seed, tokens seen, data position) and
// model.safetensors (every trained initializer under its ONNX name, F32),
// each written to a temporary file, fsynced and renamed into place; then it
// flips the symlink ROOT/latest to the new directory (again by rename) and
// prunes all but the last K step directories. ROOT/model.safetensors and
// ROOT/state.safetensors are symlinks through latest. A run killed at any
// point of a save leaves latest on the previous complete checkpoint.
//
// The BUFFER slots (initializers that are not trained: a LoRA run's frozen
// base model) are no step's output (otc-compile checks that no step writes
// one), so their values are always the initial parameters'. A checkpoint
// keeps only what trains: for the buffers, the metadata's "buffers" =
// "init" says they come from the initial parameters, and
// "buffer_crc32/<name>" holds each one's CRC-32 (eight lower-case hex
// digits) of its bytes as they sit in the arena (a BF16 buffer after its
// rounding), summed as the initial parameters were uploaded. --resume loads
// them from the initial parameters a fresh start would read (--init), and
// checks each against its CRC. A checkpoint saved before this (no "buffers"
// key) holds their bytes as "buffer/<name>" tensors, which still load.
#ifndef OTCRT_CHECKPOINT_H
#define OTCRT_CHECKPOINT_H

#include "backend.h"
#include "program.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace otcrt {

/// The counters a resumed run continues from.
struct TrainState {
  int64_t step = 0;    ///< optimizer steps done
  int64_t updates = 0; ///< steps whose update was applied (AdamW's t)
  int64_t skipped = 0; ///< steps skipped as non-finite
  uint64_t seed = 0;
  int64_t tokensSeen = 0; ///< training tokens consumed
  int64_t dataEpoch = 0, dataCursor = 0;
  uint64_t dataFingerprint = 0; ///< of the --data shards (0: --batch)
};

/// ZeRO-1 (OtcOptimizerShards): the AdamW moments of every parameter as
/// host images of the whole groups (ranks x elements floats each, every
/// rank's part gathered), which a checkpoint stores per parameter like
/// unsharded moments, so that it loads at any world size.
struct ShardedMoments {
  const OtcOptimizerShards *shards = nullptr;
  std::vector<float> m, v;
  /// With the masters sharded too (OtcOptimizerShards::masters_sharded):
  /// the FP32 parameters' image, which the checkpoint's "param/" tensors and
  /// its weights file come from (and loading fills) instead of the arena.
  std::vector<float> params;
};

/// The BUFFER slots' CRC-32s (otcrt::crc32 of their bytes in the arena),
/// by slot name.
using BufferChecksums = std::map<std::string, uint32_t>;

/// What a loaded checkpoint says of the BUFFER slots.
struct CheckpointBuffers {
  /// Whether they come from the initial parameters ("buffers" = "init"):
  /// the caller loads them from there and checks them against \p crc (see
  /// checkInitialBuffers). Otherwise (a checkpoint saved before) they were
  /// loaded from its "buffer/" tensors, whose CRC-32s \p crc holds.
  bool fromInit = false;
  BufferChecksums crc;
  /// The state file read (for messages).
  std::string path;
};

/// Writes a checkpoint of the arena's PARAM/ADAM slots and \p state under
/// \p root as described above, keeping the last \p keep; \p buffers holds
/// every BUFFER slot's CRC-32. \p model names the ONNX file (metadata).
/// Sets \p written to the step directory.
Status saveCheckpoint(const std::string &root, int64_t keep,
                      const ProgramSlots &slots, Backend &backend,
                      const char *arena, const TrainState &state,
                      const BufferChecksums &buffers, const std::string &model,
                      std::string &written,
                      const ShardedMoments *moments = nullptr);

/// Loads the checkpoint in \p dir (a step directory, or a save root whose
/// latest is used) into the arena and \p state, and what it says of the
/// buffers into \p buffers; with \p moments, the moments go into its
/// images instead (sized by the caller), whichever world size saved them.
/// Sets \p from to the directory read.
Status loadCheckpoint(const std::string &dir, const ProgramSlots &slots,
                      Backend &backend, char *arena, TrainState &state,
                      std::string &from, CheckpointBuffers &buffers,
                      ShardedMoments *moments = nullptr);

/// Checks the buffers a resume loaded from the initial parameters (\p
/// loaded: their CRC-32s; \p sources: the file each came from) against
/// the checkpoint's \p saved: an error naming the first buffer that
/// differs, both files and both CRCs. \p dir is --resume's.
Status checkInitialBuffers(const ProgramSlots &slots,
                           const CheckpointBuffers &saved,
                           const BufferChecksums &loaded,
                           const std::map<std::string, std::string> &sources,
                           const std::string &dir);

/// Writes \p bytes to \p path atomically: a temporary file in the same
/// directory, fsync, rename, fsync of the directory. With the environment
/// variable OTC_TEST_SAVE_PAUSE=N, the N-th call (1-based, per process)
/// prints "otc train: paused before rename of PATH" to stderr and sleeps
/// before the rename, so tests can kill a run mid-save.
Status writeFileAtomic(const std::string &path,
                       const std::vector<uint8_t> &bytes);
/// The same for a file written as \p pieces, one after another (a
/// safetensors header, then each tensor's data where it is: no image of
/// the whole file is made).
Status
writeFileAtomic(const std::string &path,
                const std::vector<std::pair<const uint8_t *, size_t>> &pieces);
/// The same for a file written as \p header, then \p count pieces that
/// \p piece gives one at a time (its bytes need live only until the next
/// call: a tensor downloaded from the arena into one staging buffer). With
/// \p finalHeader, the header is written again, over the first, from what
/// it gives once every piece is written (the same size: checksums of the
/// pieces summed as they went).
Status writeFileAtomic(
    const std::string &path, const std::vector<uint8_t> &header, size_t count,
    const std::function<Status(size_t, const uint8_t *&, size_t &)> &piece,
    const std::function<Status(std::vector<uint8_t> &)> &finalHeader = nullptr);

} // namespace otcrt

#endif // OTCRT_CHECKPOINT_H
