// Internal interface of the otcrt training driver, split out of otcrt_main so
// the unit tests can exercise flag parsing, program validation and whole
// training runs (with a hand-written fake program) without spawning
// processes. Nothing here prints or exits; otcrt_main does that.
#ifndef OTCRT_DRIVER_H
#define OTCRT_DRIVER_H

#include "backend.h"
#include "otcrt/abi.h"
#include "otcrt/status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace otcrt {

/// Parsed command line of a `train` program.
struct TrainOptions {
  std::string batchPath;     ///< --batch
  std::string initPath;      ///< --init (empty: <exe dir>/init.safetensors)
  std::string dumpGradsPath; ///< --dump-grads
  int64_t steps = 1;         ///< --steps
  double lr = 1e-3;          ///< --lr
  uint64_t seed = 0;         ///< --seed
  int64_t logEvery = 1;      ///< --log-every
  bool quiet = false;        ///< --quiet
  bool help = false;         ///< --help / -h
  bool dataRequested = false; ///< --data (not supported yet)
};

/// The --data rejection line printed by otcrt_main (without "otc train: ").
extern const char *const kDataUnsupportedMessage;

/// Parses the arguments after argv[0]. Accepts "--flag value" and
/// "--flag=value". Returns a usage Status on unknown flags, missing or
/// malformed values, or a missing --batch (unless help/data was requested).
Status parseTrainArgs(const std::vector<std::string> &args, TrainOptions &out);

/// Returns the --help text for a program invoked as \p argv0.
std::string trainUsage(const std::string &argv0);

/// Returns "<directory of the running executable>/init.safetensors", using
/// /proc/self/exe, or "init.safetensors" when that cannot be resolved.
std::string defaultInitPath();

/// Checks a program descriptor against ABI version 1 and \p backendName.
/// \p needOptimizer requires LR and STEP slots (not needed for --dump-grads).
Status validateProgram(const OtcProgram *program, const char *backendName,
                       bool needOptimizer);

/// The value written into the RNG slot for micro-batch \p micro of the
/// 1-based optimizer step \p step: a non-negative int64 mixed from all three.
int64_t rngValue(uint64_t seed, int64_t step, int64_t micro);

/// BF16 values (the upper halves of float32s, little-endian) widened to
/// float32 bytes.
std::vector<uint8_t> widenBf16(const std::vector<uint8_t> &bf16);

/// Runs a validated program according to \p options (initPath must be set),
/// writing progress lines to \p log. Returns the Status to exit with.
Status runTraining(const TrainOptions &options, const OtcProgram *program,
                   Backend &backend, std::FILE *log);

} // namespace otcrt

#endif // OTCRT_DRIVER_H
