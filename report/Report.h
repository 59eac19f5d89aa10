//===- Report.h - pictures of a training step's memory -----------*- C++ -*-===//
//
// The self-contained HTML page written next to plan.json: the memory of one
// training step over time, the predicted step as a timeline of its launches
// and the recompute frontier, as inline SVG.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_REPORT_REPORT_H
#define OTC_REPORT_REPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace otc {

/// One point of the memory timeline: bytes live after an op.
struct TimelinePoint {
  int64_t bytes;
  /// Which function the op belongs to ("micro_step 1", "optimizer_step").
  std::string phase;
};

/// Bytes live at each op of one optimizer step of a planned module: the
/// persistent slots plus the temporaries live at that op, through
/// zero_grads, `gradAccum` micro-steps and optimizer_step.
std::vector<TimelinePoint> memoryTimeline(mlir::ModuleOp planned,
                                          int64_t gradAccum);

/// A point of the recompute frontier.
struct FrontierPoint {
  int64_t activationBytes;
  int64_t recomputeFlops;
  std::string label;
  bool chosen = false;
};

/// One launch of the predicted step, in program order: zero_grads, each
/// micro-step, optimizer_step.
struct StepSegment {
  std::string function, name, kind;
  double seconds = 0;
  /// What binds it: "bandwidth", "compute", "latency" or "launch".
  std::string limit;
};

/// Writes the HTML page: a title, the memory timeline, the predicted step
/// as a timeline of its launches (when `step` is not empty), the frontier
/// (when not empty) and `summary` lines.
void writeReportHtml(llvm::raw_ostream &os, llvm::StringRef title,
                     const std::vector<TimelinePoint> &timeline,
                     const std::vector<FrontierPoint> &frontier,
                     const std::vector<std::string> &summary,
                     const std::vector<StepSegment> &step = {});

} // namespace otc

#endif // OTC_REPORT_REPORT_H
