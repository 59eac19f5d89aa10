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

bool otc::isReturned(Value v) {
  return llvm::any_of(v.getUsers(), [](Operation *u) {
    return u->hasTrait<OpTrait::IsTerminator>();
  });
}

int64_t otc::activationPeak(func::FuncOp f) {
  Block &body = f.getBody().front();
  DenseMap<Operation *, unsigned> pos;
  unsigned n = 0;
  for (Operation &op : body)
    pos[&op] = n++;
  // Difference array of live bytes over op positions.
  std::vector<int64_t> delta(n + 2, 0);
  // A reshape is a view of its input's bytes (otc-lower-to-buffers): it adds
  // none, and its reads keep the viewed value alive.
  DenseMap<Value, Value> storage;
  DenseMap<Value, unsigned> last;
  for (Operation &op : body) {
    for (Value v : op.getOperands()) {
      Value s = storage.lookup(v);
      s = s ? s : v;
      last[s] = std::max(last.lookup(s), pos[&op]);
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op)) {
      Value s = storage.lookup(reshape.getInput());
      storage[reshape.getResult()] = s ? s : reshape.getInput();
    }
  }
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults()) {
      if (isa<ReshapeOp>(op) || isReturned(r))
        continue;
      unsigned first = pos[&op];
      unsigned end = std::max(first, last.lookup(r));
      delta[first] += byteSize(r);
      delta[end + 1] -= byteSize(r);
    }
  int64_t live = 0, peak = 0;
  for (unsigned i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}
