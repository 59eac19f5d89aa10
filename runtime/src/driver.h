// Internal interface of the otcrt training driver, split out of otcrt_main so
// the unit tests can exercise flag parsing, program validation and whole
// training runs (with a hand-written fake program) without spawning
// processes. Nothing here prints or exits; otcrt_main does that. The driver
// itself is spread over files by concern: options.cpp (command line),
// program.cpp (descriptor checks and slot helpers), data.cpp (token shards),
// checkpoint.cpp, schedule.cpp, metrics.cpp (log lines, JSONL),
// trace.cpp (Chrome trace), driver.cpp (the loop), micro_steps.cpp (a
// step's micro-batches) and interrupt.cpp (SIGINT and SIGTERM).
#ifndef OTCRT_DRIVER_H
#define OTCRT_DRIVER_H

#include "backend.h"
#include "world.h"
#include "otcrt/abi.h"
#include "otcrt/status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace otcrt {

/// Parsed command line of a `train` program.
struct TrainOptions {
  // Inputs.
  std::string batchPath;               ///< --batch
  std::vector<std::string> dataGlobs;  ///< --data (repeatable glob)
  std::vector<std::string> valGlobs;   ///< --val-data (repeatable glob)
  std::string tokensInput;             ///< --tokens-input
  std::string targetsInput;            ///< --targets-input
  bool shuffle = true;                 ///< --no-shuffle clears it
  bool docMask = false;                ///< --doc-mask
  int64_t docToken = -1;               ///< --doc-token (-1: the shards')
  int64_t mlmToken = -1;               ///< --mlm ID (-1: next-token targets)
  double mlmProb = 0.15;               ///< --mlm ID:P
  int64_t valEvery = 0;                ///< --val-every (0: only at the end)
  int64_t valBatches = 20;             ///< --val-batches (micro-batches)
  std::string initPath;                ///< --init (empty: <exe dir>/init.safetensors)
  std::string dumpGradsPath;           ///< --dump-grads
  // Optimization.
  int64_t steps = 1;                   ///< --steps (total, resumed runs included)
  double lr = 1e-3;                    ///< --lr (peak)
  std::string lrSchedule = "constant"; ///< --lr-schedule constant|cosine
  int64_t warmupSteps = 0;             ///< --warmup
  double minLr = 0;                    ///< --min-lr (cosine floor)
  int64_t decaySteps = 0;              ///< --lr-decay-steps (0: --steps)
  double gradClip = 0;                 ///< --grad-clip (0: off)
  /// --collective-timeout: seconds a rank waits for the others before it
  /// ends the run (0: forever).
  double collectiveTimeout = 600;
  bool skipNonfinite = false;          ///< --skip-nonfinite
  int64_t batchStartTokens = 0;        ///< --batch-start-tokens (0: no ramp)
  int64_t batchRampTokens = 0;         ///< --batch-ramp-tokens
  uint64_t seed = 0;                   ///< --seed
  // Checkpoints.
  std::string saveDir;                 ///< --save
  int64_t saveEvery = 0;               ///< --save-every
  int64_t keep = 3;                    ///< --keep
  std::string resumeDir;               ///< --resume
  // Output.
  int64_t logEvery = 1;                ///< --log-every
  bool quiet = false;                  ///< --quiet
  std::string jsonlPath;               ///< --log-jsonl
  std::string tracePath;               ///< --trace
  bool traceSync = false;              ///< --trace-sync
  // Sampling (decode_step, a program compiled with --generate).
  int64_t generate = 0;                ///< --generate N (0: training)
  std::vector<int64_t> promptIds;      ///< --prompt-ids A,B,...
  double temperature = 1.0;            ///< --temperature (0: greedy)
  int64_t topK = 0;                    ///< --top-k (0: all)
  double topP = 1.0;                   ///< --top-p
  int64_t samples = 1;                 ///< --samples (rows printed)
  // Execution.
  bool cudaGraphs = true;              ///< --no-cuda-graphs clears it
  double peakTflops = 0;               ///< --peak-tflops (0: the backend's)
  bool help = false;                   ///< --help / -h
};

/// Parses the arguments after argv[0]. Accepts "--flag value" and
/// "--flag=value". Returns a usage Status on unknown flags, missing or
/// malformed values, inconsistent combinations, or neither --batch nor --data
/// (unless help was requested).
Status parseTrainArgs(const std::vector<std::string> &args, TrainOptions &out);

/// Returns the --help text for a program invoked as \p argv0.
std::string trainUsage(const std::string &argv0);

/// Returns "<directory of the running executable>/<file>", using
/// /proc/self/exe, or \p file alone when that cannot be resolved.
std::string pathNextToExecutable(const std::string &file);

/// The peak FLOP/s a step's MFU is quoted against: \p peakTflops (train
/// --peak-tflops) when positive, else the device's at the precision of
/// \p program's products (Backend::peakFlops); 0: none (MFU n/a).
double mfuPeakFlops(double peakTflops, const Backend &backend,
                    const OtcProgram &program);

/// Returns pathNextToExecutable("init.safetensors").
std::string defaultInitPath();

/// Checks a program descriptor against ABI versions 1 to 5 (slots, index
/// ranges) and \p backendName.
/// \p needOptimizer requires LR and STEP slots (not needed for --dump-grads).
Status validateProgram(const OtcProgram *program, const char *backendName,
                       bool needOptimizer);

/// The value written into the RNG slot for micro-batch \p micro of the
/// 1-based optimizer step \p step: a non-negative int64 mixed from all three.
int64_t rngValue(uint64_t seed, int64_t step, int64_t micro);

/// BF16 values (the upper halves of float32s, little-endian) widened to
/// float32 bytes.
std::vector<uint8_t> widenBf16(const std::vector<uint8_t> &bf16);
/// Float32 bytes rounded to BF16 (nearest even, otcrt_float_to_bf16), in
/// place: \p bytes keeps half its size.
void narrowToBf16(std::vector<uint8_t> &bytes);

/// Runs a validated program according to \p options (initPath must be set),
/// writing progress lines to \p log, as rank \p world.rank of a
/// data-parallel run (world.h; its collectives already joined). Returns
/// the Status to exit with; a run that a SIGINT or SIGTERM stopped after
/// a step (and its checkpoint) returns ok and sets \p stoppedBy to the
/// signal (0 otherwise).
Status runTraining(const TrainOptions &options, const OtcProgram *program,
                   Backend &backend, std::FILE *log,
                   const World &world = World{}, int *stoppedBy = nullptr);

} // namespace otcrt

#endif // OTCRT_DRIVER_H
