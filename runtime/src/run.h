// The train driver's run (driver.cpp): the state one training run shares
// across its step loop (driver.cpp), a step's micro-batches
// (micro_steps.cpp), its data-parallel collectives (data_parallel.cpp) and
// its evaluation, checkpoints and gradient dumps (run_outputs.cpp). Private
// to the runtime.
#ifndef OTCRT_RUN_H
#define OTCRT_RUN_H

#include "backend.h"
#include "batches.h"
#include "checkpoint.h"
#include "communicator.h"
#include "data.h"
#include "driver.h"
#include "inputs.h"
#include "metrics.h"
#include "program.h"
#include "schedule.h"
#include "trace.h"
#include "world.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace otcrt {

/// Frees the arena on every exit path.
struct ArenaGuard {
  Backend &backend;
  char *arena = nullptr;
  explicit ArenaGuard(Backend &b) : backend(b) {}
  ~ArenaGuard() { backend.release(arena); }
};

/// Data parallelism overlapped with the backward (ABI version 7): the
/// gradient buckets of a step's last micro-batch, each summed over the ranks
/// from the moment micro_step finishes it (otcrt_gradients_ready) and
/// waited for after the last micro-step. On the cpu the hook starts the host
/// collectives' non-blocking all-reduce (MPI's, or the TCP communicator's
/// thread); on a GPU (GradientCommunicator::sumsBucketsOnDevice) it
/// queues NCCL's on a communication stream behind the bucket's kernels, and
/// the micro-step runs as StepFunction::LastMicroStep, which joins them. A
/// bucket the hooks did not start is summed after, blocking.
class BucketSums {
public:
  explicit BucketSums(std::vector<std::vector<OtcrtRange>> buckets)
      : buckets_(std::move(buckets)) {}
  bool empty() const { return buckets_.empty(); }

  /// Takes the hooks of the next micro-step, whose gradients are the
  /// step's last (each rank's multiplied by \p preMul first).
  Status arm(char *arena, double preMul, GradientCommunicator &gradients,
             HostCollectives &host, Tracer &tracer);
  /// Starts bucket \p k (from the hook).
  void ready(int32_t k);
  /// Waits for the buckets started and sums the others; disarms.
  Status finish();

private:
  void readyOnHost(int32_t k);
  void readyOnDevice(int32_t k);

  std::vector<std::vector<OtcrtRange>> buckets_;
  char *arena_ = nullptr;
  double preMul_ = 1;
  GradientCommunicator *gradients_ = nullptr;
  HostCollectives *host_ = nullptr;
  Tracer *tracer_ = nullptr;
  std::vector<bool> started_;
  std::vector<double> startUs_;
  /// Device sums: the buckets the last micro-step that called its hooks
  /// started, which a replay of its graph (no hook called, none started)
  /// starts again.
  std::vector<bool> startedByGraph_;
  /// BF16 ranges are summed in float: the widened copies, and where each
  /// goes back.
  std::vector<std::vector<float>> wide_;
  std::vector<std::pair<uint16_t *, size_t>> narrow_;
  Status status_ = Status::ok();
};

/// The factor of a step's gradients: the ramp's \p scale, and clip / norm
/// more when \p norm (already scaled) passes \p clip (0: no clipping).
inline double gradientFactor(double scale, double norm, double clip) {
  return clip > 0 && norm > clip ? scale * (clip / norm) : scale;
}

/// "NaN" or "infinite".
inline const char *nonfiniteName(double v) { return std::isnan(v) ? "NaN" : "infinite"; }

/// One training run: the state shared by the step, eval and save helpers.
class Run {
public:
  Run(const TrainOptions &o, const OtcProgram &p, Backend &b, std::FILE *log,
      const World &world)
      : opt_(o), prog_(p), backend_(b), log_(log), world_(world),
        slots_(p), arena_(b), gradRanges_(gradientRanges(slots_.grads)) {}

  Status execute();
  /// --generate: ids drawn one position at a time by decode_step from the
  /// parameters loaded (generate.cpp).
  Status generate();
  /// generate's parts: the sequence length T the caches hold (the token
  /// input's), with the prompt and --samples checked; the caches zeroed;
  /// decode_step run on ids[r][next] of each row at cache `position`; the
  /// ids printed, with a summary line unless --quiet.
  Status generationLength(int64_t &T);
  Status clearKvCaches();
  Status decodePosition(ArenaFunction decode,
                        const std::vector<std::vector<int64_t>> &ids,
                        int64_t next, int64_t position);
  void printGenerated(const std::vector<std::vector<int64_t>> &ids,
                      double seconds, int64_t positions, int64_t restarts,
                      int64_t T);
  /// The signal that stopped the run before its last step (SIGINT,
  /// SIGTERM; the ranks agree on it), 0 when it was not stopped.
  int stoppedBy() const { return stoppedBy_; }

private:
  Status prepareInputs();
  /// tokensPerMicro_ and tokenUnits_ from the descriptor (tokens, else the
  /// micro-batch's samples).
  void countTokens();
  /// The device, the arena (zeroed) and the host buffers.
  Status setUpDevice();
  /// The initial parameters and buffers into the arena (with sharded
  /// masters, this rank's part of them).
  Status uploadInitialParams(InitialTensors &init,
                             const std::vector<const OtcSlot *> &initial);
  /// The state of --resume's checkpoint (\p from names it).
  Status resumeFrom(std::string &from);
  /// The buffers of a checkpoint that keeps their CRC-32s alone (\p
  /// saved): loaded from the initial parameters (--init, as a fresh start
  /// reads them) and checked against the checkpoint's CRCs.
  Status resumeBuffers(const CheckpointBuffers &saved);
  /// The run's first lines: the program, the ranks, CUDA graphs (chosen
  /// here).
  void announce();
  /// The data's lines, and where a resumed run starts.
  void announceData(bool resume, const std::string &from);
  /// The schedules, the rates MFU is reported against, the JSONL log and
  /// the trace.
  Status configureLoop(bool resume);
  /// The steps, evaluations and checkpoints, then the final ones.
  Status trainLoop(const std::string &from);
  Status runStep(StepFunction which, ArenaFunction fn);
  Status finishMicro(const std::string &where, float &loss);
  /// Whether a step's micro-steps are queued back to back, each one's loss
  /// copied to a list on the device (losses_) instead of read at once: a
  /// program whose gradient factor is computed on the device, where the
  /// factor also checks those losses and the kernels' error record, so a
  /// bad micro-batch skips the update before the host knows of it. One
  /// rank, unsharded: the ranks' sums read each loss before the update.
  bool queuesMicroSteps() const;
  /// After the step's synchronization: the kernels' error record, then the
  /// queued micro-steps' losses (the step's \p loss, and whether each is
  /// finite, as forwardBackward reports them when it waits). Every caller
  /// of forwardBackward calls it when queuesMicroSteps().
  Status settleLosses(int64_t step, double &loss, bool &finite,
                      std::string &why);
  Status feedMicro(int64_t k, TokenLoader *loader);
  /// A program with prediction_rows (otc-compile --sparse-prediction): the
  /// rows of the micro-batch whose count input's bytes are \p targets,
  /// uploaded; an error names \p where when a sequence counts too many.
  Status uploadPredictionRows(const uint8_t *targets, const std::string &where);
  Status prefetchStep(int64_t micros, TokenLoader *loader);
  std::vector<double> microCounts(int64_t micros) const;
  /// The entries of \p bytes (of \p slot) that are not the program's
  /// count_ignore_index.
  double countedEntries(const OtcSlot &slot, const uint8_t *bytes) const;
  /// The fed input (targets or tokens) that is the program's count input,
  /// or null.
  const OtcSlot *countedFeedSlot() const;
  /// Those of the micro-batch feedMicro last loaded from a loader, in its
  /// count input; -1 when the program counts none of the fed inputs.
  double fedCount() const;
  Status forwardBackward(int64_t step, int64_t micros, TokenLoader *loader,
                         double &loss, bool &finite, std::string &why);
  /// forwardBackward's parts: the micro-batches' weights, one micro-batch's
  /// inputs, and the ranks' sum of the gradients and losses.
  Status microWeights(int64_t micros, std::vector<double> &counts,
                      double &total, std::vector<double> &weights);
  Status loadMicroStep(int64_t step, int64_t micros, int64_t k,
                       TokenLoader *loader, double weight);
  Status sumAcrossRanks(int64_t step, bool armed, double preMul, double &sum,
                        bool &finite, std::string &why);
  Status trainStep(int64_t step);
  /// trainStep's parts: the gradient norm and AdamW's factor, the update,
  /// and the step's report (driver.cpp).
  Status gradientNormAndFactor(int64_t step, int64_t micros, double &norm,
                               bool &finite, std::string &why);
  Status applyUpdate(double lr);
  void reportStep(int64_t step, int64_t micros, double loss, double lr,
                  double norm, bool finite,
                  std::chrono::steady_clock::time_point start);
  /// Whether a SIGINT or SIGTERM asks the run to stop (stoppedBy_), on this
  /// rank or another: the ranks agree, so that all stop after the same step
  /// and take part in its checkpoint.
  Status checkStop(bool &stop);
  /// Ends a stopped run after \p step: its checkpoint where --save says
  /// (or a line that nothing was saved), a line naming the signal, and the
  /// JSONL record.
  Status stopAfter(int64_t step);
  Status evaluate(int64_t step);
  Status save();
  Status dumpGrads();
  Status gatherShards(int64_t offset, int64_t elementBytes, const char *what);
  Status shardedFactor(double scale, double &norm);
  Status gatherMoments(ShardedMoments &moments);

  const TrainOptions &opt_;
  const OtcProgram &prog_;
  Backend &backend_;
  std::FILE *log_;
  /// This rank's place in a data-parallel run (size 1 alone): it runs its
  /// part of each global batch, the micro-batches world.rank x micros ..
  /// (world.rank + 1) x micros - 1 of the step's world.size x micros.
  const World world_;
  HostCollectives &host_ = hostCollectives();
  /// The gradients' sums over the ranks (the library's: host or NCCL).
  GradientCommunicator &gradients_ = defaultGradientCommunicator();
  ProgramSlots slots_;
  /// ZeRO-1's groups (null: the optimizer is not sharded).
  const OtcOptimizerShards *shards_ = shardsOf(prog_);
  /// The gradient buckets summed while the backward goes on (none: the sum
  /// follows it).
  BucketSums buckets_{gradientBucketsOf(prog_)};
  ArenaGuard arena_;
  /// The losses of a step's queued micro-steps (queuesMicroSteps), on the
  /// device and in host memory after the step, with each one's micro-batch
  /// and weight.
  ArenaGuard losses_{backend_};
  float *lossesHost_ = nullptr;
  std::vector<std::pair<int64_t, double>> queued_;
  Tracer &tracer_ = processTracer();

  std::vector<InputData> batch_;
  /// --batch's files: batch_ holds the step's global batch of them.
  BatchFiles batches_;
  TokenDataset trainData_, valData_;
  TokenFeed feed_;
  std::unique_ptr<TokenLoader> loader_, valLoader_;
  std::vector<uint8_t> tokBuf_, tgtBuf_;
  /// The micro-batch's prediction rows (uploadPredictionRows).
  std::vector<int64_t> rowsBuf_;
  /// The attention mask (feed_.mask) uploaded with each micro-batch: ones
  /// or causal masks, the same for all, or (--doc-mask) each micro-batch's
  /// own (maskFor).
  std::vector<uint8_t> maskBuf_;
  /// --doc-mask: the token that starts every document; -1 otherwise.
  int64_t docToken_ = -1;
  Status chooseDocMask();
  Status chooseDocToken();
  /// --mlm: the feed's masked-LM settings, checked against the program.
  Status chooseMaskedLM();
  /// The attention mask for the micro-batch of token bytes \p tokens.
  const std::vector<uint8_t> &maskFor(const std::vector<uint8_t> &tokens);
  /// A step's micro-batches from the loader, read before its first
  /// micro-step (their counted targets weigh each one).
  std::vector<std::vector<uint8_t>> stepTok_, stepTgt_;
  std::vector<int64_t> rngKeys_;

  TrainState state_;
  /// Each BUFFER slot's CRC-32 as it sits in the arena (summed as the
  /// initial parameters are uploaded, or from a checkpoint's "buffer/"
  /// tensors), which every checkpoint records in place of its bytes. Filled
  /// where the run saves or resumes.
  BufferChecksums bufferCrcs_;
  LrSchedule schedule_;
  BatchRamp ramp_;
  int64_t tokensPerMicro_ = 0;
  bool tokenUnits_ = false;
  double peakFlops_ = 0;
  JsonlLog jsonl_;
  std::vector<OtcrtRange> gradRanges_;
  /// Where the device's gradient norm arrives (backend host memory).
  double *normHost_ = nullptr;
  int64_t lastSaved_ = -1, lastEval_ = -1;
  /// The directory of the latest checkpoint this run saved or resumed from.
  std::string lastSavedPath_;
  int stoppedBy_ = 0;
  /// When the run started (JSONL's elapsed_s), and when its first step
  /// (firstStep_) started (the ETA: the mean wall time of a step since).
  std::chrono::steady_clock::time_point started_ =
      std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point loopStarted_;
  int64_t firstStep_ = 1;
  int64_t skippedThisRun_ = 0;
  double lastLoss_ = 0;
  int width_ = 4;
};

} // namespace otcrt

#endif // OTCRT_RUN_H
