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

#include <limits>
#include <set>

namespace otc {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The greedy order of the ops of a block (terminator excluded). The ready
/// ops sit in a set ordered by (gain, position); an op's gain changes only
/// when one of its operands comes down to its own last uses, and only then
/// is it computed again, so each step costs a logarithm, not a scan. An op
/// computed from constants alone (the loss gradient's seed, a mask) runs
/// last among the ready ones, when something waits on it: run early, its
/// result would stay live until then for no gain.
class GreedyOrder {
public:
  explicit GreedyOrder(Block &body) {
    for (Operation &op : body.without_terminator()) {
      index[&op] = ops.size();
      ops.push_back(&op);
    }
    countUses();
  }

  SmallVector<Operation *> run() {
    for (unsigned i = 0; i < ops.size(); ++i)
      if (waiting[i] == 0)
        makeReady(i);
    SmallVector<Operation *> order;
    while (!ready.empty()) {
      unsigned best = ready.begin()->second;
      ready.erase(ready.begin());
      isReady[best] = false;
      Operation *op = ops[best];
      order.push_back(op);
      consumeOperands(op);
      for (Value r : op->getResults())
        for (Operation *u : r.getUsers())
          if (auto it = index.find(u);
              it != index.end() && --waiting[it->second] == 0)
            makeReady(it->second);
    }
    assert(order.size() == ops.size() && "the body is not in SSA order");
    return order;
  }

private:
  /// Users left per value (the terminator counts: returned values stay),
  /// the most uses any one op makes of it, and the operands of each op not
  /// yet computed.
  void countUses() {
    waiting.assign(ops.size(), 0);
    lazy.assign(ops.size(), false);
    gain.assign(ops.size(), 0);
    isReady.assign(ops.size(), false);
    for (Operation *op : ops) {
      for (Value r : op->getResults()) {
        llvm::SmallDenseMap<Operation *, unsigned> perUser;
        unsigned n = 0, most = 0;
        for (OpOperand &use : r.getUses()) {
          ++n;
          most = std::max(most, ++perUser[use.getOwner()]);
        }
        usersLeft[r] = n;
        mostUsesByOne[r] = most;
      }
      unsigned w = 0;
      bool fromConstants = true;
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (d && index.count(d)) {
          ++w;
          fromConstants = fromConstants && lazy[index[d]];
        } else if (!d) {
          fromConstants = false; // an argument: an input or a parameter
        }
      }
      waiting[index[op]] = w;
      lazy[index[op]] = fromConstants;
    }
  }

  /// The key of ready op `i` in `ready`: the largest gain first, ops from
  /// constants alone after every other.
  std::pair<int64_t, unsigned> keyOf(unsigned i) const {
    return {lazy[i] ? std::numeric_limits<int64_t>::max() : -gain[i], i};
  }

  /// Bytes freed net of bytes allocated if `op` ran now. A result the step
  /// returns (a parameter's gradient) allocates nothing here: it is written
  /// into its slot, which exists whenever it is computed, so an op that
  /// makes one (an expert's weight gradient, gigabytes) is not put off to
  /// the end, keeping its operands live.
  int64_t gainOf(Operation *op) {
    int64_t g = 0;
    for (Value r : op->getResults())
      if (!isReturned(r))
        g -= byteSize(r);
    llvm::SmallDenseMap<Value, unsigned> uses;
    for (Value v : op->getOperands())
      ++uses[v];
    for (auto [v, n] : uses)
      if (v.getDefiningOp() && index.count(v.getDefiningOp()) &&
          usersLeft[v] == n)
        g += byteSize(v);
    return g;
  }

  void makeReady(unsigned i) {
    gain[i] = gainOf(ops[i]);
    isReady[i] = true;
    ready.insert(keyOf(i));
  }

  /// `op` has run: one user fewer for each of its operands, and a ready
  /// reader whose uses are now all that is left of a value frees it: its
  /// gain goes up.
  void consumeOperands(Operation *op) {
    llvm::SmallDenseSet<Value> changed;
    for (Value v : op->getOperands())
      if (usersLeft.count(v)) {
        --usersLeft[v];
        changed.insert(v);
      }
    for (Value v : changed) {
      if (usersLeft[v] > mostUsesByOne[v])
        continue;
      for (Operation *u : v.getUsers()) {
        auto it = index.find(u);
        if (it == index.end() || !isReady[it->second])
          continue;
        int64_t g = gainOf(u);
        if (g == gain[it->second])
          continue;
        ready.erase(keyOf(it->second));
        gain[it->second] = g;
        ready.insert(keyOf(it->second));
      }
    }
  }

  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> index;
  DenseMap<Value, unsigned> usersLeft, mostUsesByOne;
  std::vector<unsigned> waiting;
  /// Ops computed from constants alone (transitively; no argument read).
  std::vector<bool> lazy;
  /// Ready ops by the largest gain, then the earliest position.
  std::set<std::pair<int64_t, unsigned>> ready;
  std::vector<int64_t> gain;
  std::vector<bool> isReady;
};

static SmallVector<Operation *> greedyOrder(Block &body) {
  return GreedyOrder(body).run();
}

struct SchedulePass : public otc::impl::ScheduleBase<SchedulePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = requireTrainStep(module);
    if (!step)
      return signalPassFailure();
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
