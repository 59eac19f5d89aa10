// Per-step schedules of the train driver, pure functions of the step and the
// tokens seen so far so a resumed run follows them exactly: the learning rate
// (linear warmup, then constant or cosine decay to a floor) and the
// batch-size ramp (micro-batches per step grow with the tokens trained on).
#ifndef OTCRT_SCHEDULE_H
#define OTCRT_SCHEDULE_H

#include <cstdint>
#include <string>

namespace otcrt {

/// Learning-rate schedule over \p totalSteps 1-based steps.
struct LrSchedule {
  double peak = 1e-3;
  double floor = 0;
  int64_t warmup = 0;
  int64_t totalSteps = 1;
  bool cosine = false;

  /// The learning rate of step \p step (1-based): peak * step / warmup during
  /// warmup, then peak (constant) or a cosine from peak to floor reached at
  /// totalSteps.
  double at(int64_t step) const;
};

/// Batch-size ramp: micro-batches per step as a function of tokens seen.
struct BatchRamp {
  int64_t tokensPerMicro = 1; ///< micro-batch rows x T
  int64_t fullMicros = 1;     ///< the compiled grad_accum
  int64_t startTokens = 0;    ///< 0: no ramp
  int64_t rampTokens = 0;

  /// Micro-batches for the next step after \p tokensSeen training tokens:
  /// the global batch grows linearly from startTokens to the full one over
  /// the first rampTokens tokens, rounded up to whole micro-batches, within
  /// [1, fullMicros].
  int64_t microsAt(int64_t tokensSeen) const;
};

} // namespace otcrt

#endif // OTCRT_SCHEDULE_H
