//===- PlanReport.cpp - otc-compile's report.html --------------------------===//

#include "tools/PlanReport.h"
#include "report/Report.h"

using namespace otc;

void otc::writePlanReportHtml(llvm::raw_ostream &os, mlir::ModuleOp planned,
                              const PlanReportInputs &in) {
  const PlanSummary &summary = *in.summary;
  const PlanInfo &info = *in.info;
  const StepTime &stepTime = *in.stepTime;
  // The frontier's candidates, and the compiled plan's own point from its
  // plan.
  std::vector<FrontierPoint> points;
  for (const RematCandidate &c : in.frontier)
    points.push_back({c.outcome.peakBytes - in.persistent,
                      c.outcome.recomputeFlops, rematBlockString(c.choice),
                      false});
  if (!points.empty())
    points.push_back({summary.activationsPeak, info.recomputeFlops,
                      "compiled plan (" +
                          (info.rematBlocks.empty() ? std::string("none")
                                                    : info.rematBlocks) +
                          ")",
                      true});
  std::vector<std::string> lines = {
      "model: " + in.modelPath,
      "target " + in.target + ", micro-batch " + std::to_string(in.microBatch) +
          " x grad-accum " + std::to_string(in.gradAccum) + ", remat " +
          in.remat,
      "parameters trained: " + std::to_string(summary.paramsCount),
      "arena " + formatBytes(summary.arena) + ", lower bound " +
          formatBytes(summary.lowerBound) + ", outside the arena " +
          formatBytes(summary.libraries) + " of libraries and " +
          formatBytes(summary.context) + " of context, total peak " +
          formatBytes(summary.totalPeak),
      "activation peak " + formatBytes(summary.activationsPeak) +
          ", recompute FLOPs per step " +
          std::to_string(summary.recomputeFlops)};
  // The predicted step, each function once (a micro-step stands for the
  // grad-accum it repeats).
  std::vector<StepSegment> segments;
  for (const LaunchTime &l : stepTime.launches)
    segments.push_back(
        {l.function == "micro_step" && in.gradAccum > 1
             ? "micro_step (1 of " + std::to_string(in.gradAccum) + ")"
             : l.function,
         l.name, l.kind, l.seconds, limitName(l.cost.binding()).str()});
  lines.push_back("predicted on " + in.device + ": " +
                  std::to_string(stepTime.step * 1e3) + " ms per step (" +
                  std::to_string(stepTime.launchesPerStep) + " launches)");
  writeReportHtml(os, "otc memory report", memoryTimeline(planned, in.gradAccum),
                  points, lines, segments);
}
