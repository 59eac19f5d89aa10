//===- Schedule.cpp - an op order that lowers the activation peak ----------===//
//
// Reorders @train_step (all otc ops are pure, so any topological order is
// correct) by greedy list scheduling: among the ops whose operands are
// ready, run the one that frees the most bytes net of what it allocates,
// the earliest in the current order on ties. The new order is kept only if
// its activation peak is lower than the current one's.
//
//===----------------------------------------------------------------------===//

#include "passes/Cost.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace otc {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The greedy order of the ops of `body` (terminator excluded).
static SmallVector<Operation *> greedyOrder(Block &body) {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> index;
  for (Operation &op : body.without_terminator()) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  // Users left per value (the terminator counts: returned values stay).
  DenseMap<Value, unsigned> usersLeft;
  DenseMap<Operation *, unsigned> waiting; // operands not yet computed
  for (Operation *op : ops) {
    for (Value r : op->getResults())
      usersLeft[r] = std::distance(r.getUses().begin(), r.getUses().end());
    unsigned w = 0;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp(); d && index.count(d))
        ++w;
    waiting[op] = w;
  }
  std::vector<bool> ready(ops.size(), false), done(ops.size(), false);
  for (Operation *op : ops)
    if (waiting[op] == 0)
      ready[index[op]] = true;
  SmallVector<Operation *> order;
  while (order.size() < ops.size()) {
    int best = -1;
    int64_t bestGain = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ready[i] || done[i])
        continue;
      Operation *op = ops[i];
      int64_t gain = 0;
      for (Value r : op->getResults())
        gain -= byteSize(r);
      llvm::SmallDenseMap<Value, unsigned> uses;
      for (Value v : op->getOperands())
        ++uses[v];
      for (auto [v, n] : uses)
        if (v.getDefiningOp() && index.count(v.getDefiningOp()) &&
            usersLeft[v] == n)
          gain += byteSize(v);
      if (best < 0 || gain > bestGain) {
        best = i;
        bestGain = gain;
      }
    }
    Operation *op = ops[best];
    done[best] = true;
    order.push_back(op);
    for (Value v : op->getOperands())
      if (usersLeft.count(v))
        --usersLeft[v];
    for (Value r : op->getResults())
      for (Operation *u : r.getUsers())
        if (index.count(u) && --waiting[u] == 0)
          ready[index[u]] = true;
  }
  return order;
}

struct SchedulePass : public otc::impl::ScheduleBase<SchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step) {
      module.emitError("no @train_step: run --otc-differentiate first");
      return signalPassFailure();
    }
    Block &body = step.getBody().front();
    int64_t before = activationPeak(step);
    SmallVector<Operation *> original;
    for (Operation &op : body.without_terminator())
      original.push_back(&op);
    auto apply = [&](ArrayRef<Operation *> order) {
      Operation *term = body.getTerminator();
      for (Operation *op : order)
        op->moveBefore(term);
    };
    apply(greedyOrder(body));
    int64_t after = activationPeak(step);
    if (after > before)
      apply(original);
    Builder b(module.getContext());
    module->setAttr("otc.schedule",
                    b.getDictionaryAttr(
                        {b.getNamedAttr("peak_before", b.getI64IntegerAttr(before)),
                         b.getNamedAttr("peak_after",
                                        b.getI64IntegerAttr(std::min(before, after)))}));
  }
};

} // namespace
