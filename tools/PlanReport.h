//===- PlanReport.h - otc-compile's report.html ----------------*- C++ -*-===//
//
// What report.html shows of a compiled plan: memory over one step, the
// recompute frontier (its candidates and the plan's own point), a few lines
// on the compile and the predicted step launch by launch.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_PLANREPORT_H
#define OTC_TOOLS_PLANREPORT_H

#include "perf/Plan.h"
#include "perf/StepTime.h"
#include "planner/RematSearch.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otc {

/// The compile a report describes.
struct PlanReportInputs {
  std::string modelPath, target, remat, device;
  int64_t microBatch = 0, gradAccum = 1;
  const PlanSummary *summary = nullptr;
  const PlanInfo *info = nullptr;
  const StepTime *stepTime = nullptr;
  /// --remat=auto's candidates, measured on the differentiated step (FP32,
  /// unfused, unplanned), and the bytes every step keeps, which their
  /// activation peaks leave out.
  llvm::ArrayRef<RematCandidate> frontier;
  int64_t persistent = 0;
};

/// Writes report.html of the planned module.
void writePlanReportHtml(llvm::raw_ostream &os, mlir::ModuleOp planned,
                         const PlanReportInputs &in);

} // namespace otc

#endif // OTC_TOOLS_PLANREPORT_H
