//===- Cost.cpp - FLOP and byte costs of otc ops and functions -------------===//
//
// FLOPs count multiply-adds as two operations and charge each elementwise
// result a small constant; they rank recomputation choices and feed the
// report, so they aim at proportions, not cycle counts.
//
//===----------------------------------------------------------------------===//

#include "passes/Cost.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"


using namespace mlir;
using namespace otc;


int64_t otc::opFlops(Operation *op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getFlops();
  return 0;
}

int64_t otc::functionFlops(func::FuncOp f) {
  int64_t flops = 0;
  f.walk([&](Operation *op) { flops += opFlops(op); });
  return flops;
}

int64_t otc::activationPeak(func::FuncOp f) {
  Block &body = f.getBody().front();
  DenseMap<Operation *, unsigned> pos;
  unsigned n = 0;
  for (Operation &op : body)
    pos[&op] = n++;
  // Difference array of live bytes over op positions.
  std::vector<int64_t> delta(n + 2, 0);
  auto lastUse = [&](Value v, unsigned from) {
    for (Operation *user : v.getUsers())
      from = std::max(from, pos[user]);
    return from;
  };
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults()) {
      // A reshape of a temporary it reads last takes that temporary's
      // bytes (the planner writes it in place), so it adds nothing.
      unsigned first = pos[&op];
      if (auto reshape = dyn_cast<ReshapeOp>(op))
        if (reshape.getInput().getDefiningOp() &&
            lastUse(reshape.getInput(), 0) == first)
          ++first;
      unsigned last = lastUse(r, pos[&op]);
      if (first > last)
        continue;
      delta[first] += byteSize(r);
      delta[last + 1] -= byteSize(r);
    }
  int64_t live = 0, peak = 0;
  for (unsigned i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}
