// What the train driver reports about a run: the per-step line (step, loss,
// learning rate, gradient norm, time, tokens/s, MFU, memory, ETA), the JSONL
// log (one object per step, evaluation, checkpoint and stop, each with its
// time), and a progress bar for long phases on a terminal.
#ifndef OTCRT_METRICS_H
#define OTCRT_METRICS_H

#include "otcrt/status.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace otcrt {

/// Figures of one optimizer step.
struct StepReport {
  int64_t step = 0, totalSteps = 0;
  double loss = 0;
  double lr = 0;
  double gradNorm = -1;   ///< < 0: not computed
  double ms = 0;
  int64_t micros = 0;     ///< micro-batches this step
  int64_t tokens = 0;     ///< tokens (or samples) this step
  bool tokenUnits = true; ///< tokens, else samples
  double flops = 0;       ///< model FLOPs of this step (0: unknown)
  double peakFlops = 0;   ///< device peak FLOP/s (0: unknown)
  int64_t memoryBytes = -1;
  bool skipped = false;
  double etaSeconds = -1; ///< until the last step (< 0: none left)
};

/// "12.3 MiB" style size.
std::string formatBytes(int64_t bytes);

/// A duration for the ETA: "42s", "3m05s", "1h02m" (rounded to seconds,
/// then minutes from an hour on).
std::string formatDuration(double seconds);

/// The human-readable step line (no newline). Starts with
/// "step %*d/%d | loss %.6f | lr %.2e"; \p width pads the step number;
/// ends with the ETA ("| eta 3m05s") while steps are left.
std::string formatStepLine(const StepReport &r, int width);

/// An append-only JSON-lines log; a no-op when not opened. Every record
/// ends with "time" (seconds since the Unix epoch, UTC, to the
/// millisecond) and "elapsed_s" (seconds since the run started).
class JsonlLog {
public:
  ~JsonlLog();
  /// Opens \p path, appending when \p append (a resumed run); \p started
  /// is when the run started.
  Status open(const std::string &path, bool append,
              std::chrono::steady_clock::time_point started);
  /// Writes one object built from \p fields (already JSON-encoded values),
  /// with the time fields.
  void write(const std::vector<std::pair<std::string, std::string>> &fields);
  /// The fields of a step report.
  void writeStep(const StepReport &r);

private:
  std::FILE *file_ = nullptr;
  std::chrono::steady_clock::time_point started_;
};

/// JSON encodings of values for JsonlLog::write.
std::string jsonNumber(double v);
std::string jsonString(const std::string &s);

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
public:
  ProgressBar(std::string label, int64_t total);
  ~ProgressBar();
  /// Redraws with \p done of total finished.
  void update(int64_t done);

private:
  std::string label_;
  int64_t total_;
  bool active_;
};

} // namespace otcrt

#endif // OTCRT_METRICS_H
