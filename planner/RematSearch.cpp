//===- RematSearch.cpp - the one solver of --remat=auto -------------------===//
//
// Chooses the recomputation of `auto` for a memory budget. Each candidate of
// the recompute frontier is planned through the rest of the pipeline, the
// same passes otc-compile then runs, and measured as plan.json reports the
// result: the arena plus the target's memory outside it (DeviceMemory.h).
// otc-compile and otc-plan choose through solveAutoRemat, so they agree for
// one budget; otc-remat applies the choice.
//
//===----------------------------------------------------------------------===//

#include "ir/OtckDialect.h"
#include "passes/DeviceMemory.h"
#include "planner/Progress.h"
#include "planner/RematSearch.h"

#include "mlir/Pass/PassManager.h"

#include <tuple>

using namespace mlir;
using namespace otc;

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
  FailureOr<int64_t> peak = plannedTotalPeak(*copy);
  if (failed(peak))
    return module.emitError("the planned candidate has no arena size");
  if (cost && seconds) {
    std::optional<double> s = (*cost)(*copy);
    if (!s)
      return module.emitError("costing the recomputation candidate '")
             << o.rematBlocks << "' failed";
    *seconds = *s;
  }
  return *peak;
}

FailureOr<AutoRematResult>
otc::solveAutoRemat(ModuleOp module, int64_t budget,
                    const BackEndOptions &backEnd,
                    ArrayRef<RematCandidate> frontier,
                    const PlannedCost *cost) {
  AutoRematResult r;
  r.smallestPeak = INT64_MAX;
  // Planned peak and cost of each candidate planned so far.
  struct Planned {
    int64_t peak;
    double seconds;
  };
  DenseMap<size_t, Planned> planned;
  Progress progress("planning recomputation", frontier.size(), "candidates");
  auto plan = [&](size_t i) -> LogicalResult {
    if (planned.count(i))
      return success();
    progress.update(planned.size());
    double seconds = 0;
    FailureOr<int64_t> peak =
        plannedPeak(module, frontier[i].choice, backEnd, cost, &seconds);
    if (failed(peak))
      return failure();
    planned[i] = {*peak, seconds};
    r.smallestPeak = std::min(r.smallestPeak, *peak);
    return success();
  };

  size_t stepOps = 0;
  if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
    stepOps = step.getBody().front().getOperations().size();
  if (frontier.size() <= kExhaustivePlans &&
      frontier.size() * stepOps <= kExhaustivePlanWork) {
    for (size_t i = 0; i < frontier.size(); ++i)
      if (failed(plan(i)))
        return failure();
  } else {
    // Too many to plan each: the frontier runs from least to most measured
    // memory, and the planned peak follows the measured one up to an
    // offset. Plan the candidate with the most measured memory that the
    // offset seen last says fits, and step from there until a fitting one
    // and the one above it, which does not, are planned.
    // The candidate with the most measured memory whose measured peak plus
    // `offset` fits (the first when none does).
    auto lastFitting = [&](int64_t offset) -> size_t {
      size_t last = 0;
      for (size_t i = 0; i < frontier.size(); ++i)
        if (frontier[i].outcome.peakBytes + offset <= budget)
          last = i;
      return last;
    };
    size_t i = lastFitting(0);
    for (unsigned step = 0; step < kSearchPlans; ++step) {
      if (failed(plan(i)))
        return failure();
      int64_t offset = planned[i].peak - frontier[i].outcome.peakBytes;
      size_t next = lastFitting(offset);
      if (planned[i].peak <= budget) {
        if (i + 1 == frontier.size())
          break;
        next = std::max(next, i + 1);
      } else {
        if (i == 0)
          break;
        next = std::min(next, i - 1);
      }
      if (planned.count(next)) {
        // The boundary lies between two planned neighbours.
        if (planned[next].peak <= budget || next == 0)
          break;
        next = next - 1;
        if (planned.count(next))
          break;
      }
      i = next;
    }
    // Nothing found that fits: planned peaks need not follow measured ones
    // near the least memory, so every candidate is planned before saying
    // that none fits (and which is the smallest).
    if (llvm::none_of(planned, [&](auto &p) { return p.second.peak <= budget; }))
      for (size_t i = 0; i < frontier.size(); ++i)
        if (failed(plan(i)))
          return failure();
  }
  progress.update(frontier.size());

  const RematCandidate *best = nullptr;
  double bestSeconds = 0;
  for (size_t i = 0; i < frontier.size(); ++i) {
    auto it = planned.find(i);
    if (it == planned.end() || it->second.peak > budget)
      continue;
    const RematCandidate &c = frontier[i];
    auto [peak, seconds] = it->second;
    // The objective first (the cost when given), then FLOPs, then the peak.
    auto key = [&](double s, const RematCandidate &x, int64_t p) {
      return std::make_tuple(cost ? s : 0.0, x.outcome.recomputeFlops, p);
    };
    if (!best || key(seconds, c, peak) < key(bestSeconds, *best, r.peak)) {
      best = &c;
      r.peak = peak;
      bestSeconds = seconds;
    }
  }
  if (best) {
    r.choice = best->choice;
    if (cost)
      r.seconds = bestSeconds;
  }
  return r;
}
