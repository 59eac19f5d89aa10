//===- Progress.h - progress lines for long compile phases ------*- C++ -*-===//
//
// Counted progress of the loops that can run for seconds on large models
// (measuring and planning recomputation candidates): once a loop has run
// longer than a few seconds, one line on stderr at most every second, e.g.
// `otc-compile: planning recomputation: 12/40 candidates`. Off unless a tool
// turns it on (otc-compile does; otc-opt and the tests stay quiet). The
// searches of planner/ report through it; a pass reports nothing itself (the
// recompute frontier takes a callback).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PLANNER_PROGRESS_H
#define OTC_PLANNER_PROGRESS_H

#include "llvm/ADT/StringRef.h"

#include <chrono>
#include <cstddef>
#include <string>

namespace otc {

/// When progress lines are printed.
enum class ProgressMode {
  Never,
  /// Once a loop has run longer than kProgressDelaySeconds.
  Slow,
  /// From the first step of every loop (for logs and tests).
  Always,
};

/// How long a loop runs before Slow mode reports it.
constexpr double kProgressDelaySeconds = 3.0;

/// Sets when progress is printed and the tool name that starts each line.
void setProgressMode(ProgressMode mode, llvm::StringRef tool);

/// One loop's progress: `what` names the work, `unit` what it counts.
class Progress {
public:
  Progress(llvm::StringRef what, size_t total, llvm::StringRef unit);
  /// Reports that `done` of the total are done (printed when due).
  void update(size_t done);

private:
  std::string what, unit;
  size_t total;
  std::chrono::steady_clock::time_point start, lastLine;
  bool printed = false;
};

} // namespace otc

#endif // OTC_PLANNER_PROGRESS_H
