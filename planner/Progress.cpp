//===- Progress.cpp - progress lines for long compile phases ---------------===//

#include "planner/Progress.h"

#include "llvm/Support/raw_ostream.h"

using namespace otc;

static ProgressMode gMode = ProgressMode::Never;
static std::string gTool;

void otc::setProgressMode(ProgressMode mode, llvm::StringRef tool) {
  gMode = mode;
  gTool = tool.str();
}

Progress::Progress(llvm::StringRef what, size_t total, llvm::StringRef unit)
    : what(what.str()), unit(unit.str()), total(total),
      start(std::chrono::steady_clock::now()), lastLine(start) {}

void Progress::update(size_t done) {
  if (gMode == ProgressMode::Never)
    return;
  auto now = std::chrono::steady_clock::now();
  auto seconds = [](auto d) {
    return std::chrono::duration<double>(d).count();
  };
  bool due = gMode == ProgressMode::Always
                 ? !printed || done == total || seconds(now - lastLine) >= 1.0
                 : seconds(now - start) >= kProgressDelaySeconds &&
                       (!printed || done == total ||
                        seconds(now - lastLine) >= 1.0);
  if (!due)
    return;
  llvm::errs() << gTool << ": " << what << ": " << done << "/" << total << " "
               << unit << "\n";
  printed = true;
  lastLine = now;
}
