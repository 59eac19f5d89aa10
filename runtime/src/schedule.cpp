// The learning-rate schedule and the batch-size ramp (see schedule.h).
#include "schedule.h"

#include <algorithm>
#include <cmath>

namespace otcrt {

double LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step <= warmup)
    return peak * static_cast<double>(step) / static_cast<double>(warmup);
  if (!cosine)
    return peak;
  int64_t span = totalSteps - warmup;
  if (span <= 0)
    return peak;
  double progress = static_cast<double>(step - warmup) / static_cast<double>(span);
  progress = std::min(1.0, std::max(0.0, progress));
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

int64_t BatchRamp::microsAt(int64_t tokensSeen) const {
  if (startTokens <= 0 || rampTokens <= 0 || tokensSeen >= rampTokens)
    return fullMicros;
  double full = static_cast<double>(fullMicros * tokensPerMicro);
  double frac = static_cast<double>(tokensSeen) / static_cast<double>(rampTokens);
  double tokens = static_cast<double>(startTokens) +
                  (full - static_cast<double>(startTokens)) * frac;
  int64_t micros = static_cast<int64_t>(
      std::ceil(tokens / static_cast<double>(tokensPerMicro) - 1e-9));
  return std::min(fullMicros, std::max<int64_t>(1, micros));
}

} // namespace otcrt
