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
#include "llvm/ADT/StringSet.h"

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

/// Which blocks of `module`'s @train_step have fused activations that
/// `selective` recomputes (empty when it has no blocks).
static SmallVector<bool> selectiveBlocks(ModuleOp module) {
  SmallVector<bool> has;
  if (auto step = module.lookupSymbol<func::FuncOp>("train_step"))
    if (FailureOr<RematAnalysis> a = analyzeTrainStep(step); succeeded(a))
      for (const RematBlock &b : a->blocks)
        has.push_back(!b.selectiveOps.empty());
  return has;
}

/// `choice` with `selective` for every `none` block that `selective`
/// changes, or none when no block changes. The frontier orders candidates by
/// recompute FLOPs, and the search steps through it by memory, taking more
/// memory as never slower. The fused activations break that: `selective`
/// recomputes each from the input its product keeps, inside the backward's
/// elementwise kernel, which spares the forward a write and the step an
/// activation, so on a device it is often both faster and smaller than
/// keeping them (its FLOPs are tiny).
static std::optional<SmallVector<RematChoice>>
selectiveVariant(ArrayRef<RematChoice> choice, ArrayRef<bool> selective) {
  if (selective.size() != choice.size())
    return std::nullopt;
  SmallVector<RematChoice> variant(choice);
  bool differs = false;
  for (auto [c, s] : llvm::zip(variant, selective))
    if (c == RematChoice::None && s) {
      c = RematChoice::Selective;
      differs = true;
    }
  if (!differs)
    return std::nullopt;
  return variant;
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
  auto noteSmallest = [&](int64_t peak, ArrayRef<RematChoice> choice) {
    if (peak < r.smallestPeak) {
      r.smallestPeak = peak;
      r.smallest.emplace(choice.begin(), choice.end());
    }
  };
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
    noteSmallest(*peak, frontier[i].choice);
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

  // The candidates to choose from: every planned one that fits, and, when
  // there is a cost, the variant of each with `selective` in place of
  // `none` (selectiveVariant).
  struct Option {
    SmallVector<RematChoice> choice;
    int64_t flops, peak;
    double seconds;
  };
  std::vector<Option> options;
  for (size_t i = 0; i < frontier.size(); ++i) {
    auto it = planned.find(i);
    if (it != planned.end() && it->second.peak <= budget)
      options.push_back({frontier[i].choice, frontier[i].outcome.recomputeFlops,
                         it->second.peak, it->second.seconds});
  }
  if (cost) {
    SmallVector<bool> selective = selectiveBlocks(module);
    llvm::StringSet<> seen;
    for (auto &p : planned)
      seen.insert(rematBlockString(frontier[p.first].choice));
    for (size_t i = 0, n = options.size(); i < n; ++i) {
      std::optional<SmallVector<RematChoice>> variant =
          selectiveVariant(options[i].choice, selective);
      if (!variant || !seen.insert(rematBlockString(*variant)).second)
        continue;
      double seconds = 0;
      FailureOr<int64_t> peak =
          plannedPeak(module, *variant, backEnd, cost, &seconds);
      if (failed(peak))
        return failure();
      noteSmallest(*peak, *variant);
      if (*peak <= budget)
        options.push_back({*variant, options[i].flops, *peak, seconds});
    }
  }
  // The objective first (the cost when given), then FLOPs, then the peak.
  auto key = [&](const Option &o) {
    return std::make_tuple(cost ? o.seconds : 0.0, o.flops, o.peak);
  };
  const Option *best = nullptr;
  for (const Option &o : options)
    if (!best || key(o) < key(*best))
      best = &o;
  if (best) {
    r.choice = best->choice;
    r.peak = best->peak;
    if (cost)
      r.seconds = best->seconds;
  }
  return r;
}
