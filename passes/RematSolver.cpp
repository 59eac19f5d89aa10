//===- RematSolver.cpp - the one solver of --remat=auto --------------------===//
//
// Chooses the recomputation of `auto` for a memory budget. Each candidate of
// the recompute frontier is planned through the rest of the pipeline, the
// same passes otc-compile then runs, and measured as plan.json reports the
// result: the arena plus the target's workspace. Both otc-remat
// (policy=auto) and the driver choose through solveAutoRemat, so they agree
// for one budget.
//
//===----------------------------------------------------------------------===//

#include "ir/OtckDialect.h"
#include "passes/Progress.h"
#include "passes/Remat.h"

#include "mlir/Pass/PassManager.h"

#include <tuple>

using namespace mlir;
using namespace otc;

std::string otc::rematBlockString(ArrayRef<RematChoice> choice) {
  std::string s;
  for (RematChoice c : choice)
    s += c == RematChoice::Full        ? 'f'
         : c == RematChoice::Selective ? 's'
                                       : 'n';
  return s;
}

FailureOr<int64_t> otc::plannedPeak(ModuleOp module,
                                    ArrayRef<RematChoice> choice,
                                    const BackEndOptions &backEnd,
                                    const PlannedCost *cost, double *seconds) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PipelineOptions o;
  o.rematPolicy = "auto";
  o.rematBlocks = rematBlockString(choice);
  o.backEnd = backEnd;
  PassManager pm(module.getContext());
  addPhases(pm, Phase::Remat, kLastPhase, o);
  if (failed(pm.run(*copy)))
    return module.emitError("planning the recomputation candidate '")
           << o.rematBlocks << "' failed";
  auto arena = (*copy)->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("the planned candidate has no arena size");
  if (cost && seconds) {
    std::optional<double> s = (*cost)(*copy);
    if (!s)
      return module.emitError("costing the recomputation candidate '")
             << o.rematBlocks << "' failed";
    *seconds = *s;
  }
  return arena.getInt() + workspaceBytes(backEnd.cuda);
}

FailureOr<AutoRematResult>
otc::solveAutoRemat(ModuleOp module, int64_t budget,
                    const BackEndOptions &backEnd,
                    ArrayRef<RematCandidate> frontier,
                    const PlannedCost *cost) {
  AutoRematResult r;
  r.smallestPeak = INT64_MAX;
  const RematCandidate *best = nullptr;
  double bestSeconds = 0;
  Progress progress("planning recomputation", frontier.size(), "candidates");
  for (const RematCandidate &c : frontier) {
    progress.update(&c - frontier.data());
    double seconds = 0;
    FailureOr<int64_t> peak =
        plannedPeak(module, c.choice, backEnd, cost, &seconds);
    if (failed(peak))
      return failure();
    r.smallestPeak = std::min(r.smallestPeak, *peak);
    if (*peak > budget)
      continue;
    // The objective first (the cost when given), then FLOPs, then the peak.
    auto key = [&](double s, const RematCandidate &x, int64_t p) {
      return std::make_tuple(cost ? s : 0.0, x.outcome.recomputeFlops, p);
    };
    if (!best || key(seconds, c, *peak) < key(bestSeconds, *best, r.peak)) {
      best = &c;
      r.peak = *peak;
      bestSeconds = seconds;
    }
  }
  progress.update(frontier.size());
  if (best) {
    r.choice = best->choice;
    if (cost)
      r.seconds = bestSeconds;
  }
  return r;
}
