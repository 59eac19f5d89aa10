//===- Experts.cpp - the exchange expert parallelism would need ----------===//
//
// A mixture of experts trains with every expert's weights on every rank
// (data parallelism replicates them; ZeRO-1 shards only their moments).
// Expert parallelism would place each expert on one rank and move the rows
// instead: before a layer's first expert product each row goes to the rank
// of its expert (dispatch), after the last one its result comes back
// (combine), and the backward sends the gradients of both the other way.
// This counts those rows from the forward's otc.expert_matmul ops, so that
// plan.json names the all-to-alls before otc has them.
//
//===----------------------------------------------------------------------===//

#include "perf/Plan.h"
#include "ir/OtcDialect.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace otc;

namespace {

int64_t leadingDim(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() > 0 ? t.getDimSize(0) : -1;
}

/// Whether `from` reaches an expert product (other than `self`) through
/// values of `rows` leading rows: backwards through operands when `up`,
/// else forwards through users. Rows leave the experts' permuted order
/// where the leading dimension changes (the top-k's repeat, the sum over
/// the picks), so the walk stays inside one layer.
bool reachesProduct(Value from, int64_t rows, Operation *self, bool up) {
  SmallVector<Value> work = {from};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second || leadingDim(v) != rows)
      continue;
    if (up) {
      Operation *def = v.getDefiningOp();
      if (!def)
        continue;
      if (isa<ExpertMatmulOp>(def) && def != self)
        return true;
      for (Value o : def->getOperands())
        work.push_back(o);
    } else {
      for (Operation *user : v.getUsers()) {
        if (isa<ExpertMatmulOp>(user) && user != self)
          return true;
        for (Value r : user->getResults())
          work.push_back(r);
      }
    }
  }
  return false;
}

} // namespace

std::optional<ExpertExchange> otc::expertExchange(func::FuncOp forward,
                                                  int64_t elementBytes) {
  if (!forward)
    return std::nullopt;
  ExpertExchange e;
  llvm::DenseSet<Value> weights;
  forward.walk([&](ExpertMatmulOp op) {
    int64_t rows = leadingDim(op.getX());
    auto x = cast<RankedTensorType>(op.getX().getType());
    auto y = cast<RankedTensorType>(op.getResult().getType());
    auto w = cast<RankedTensorType>(op.getW().getType());
    e.experts = std::max(e.experts, w.getDimSize(0));
    e.rows = std::max(e.rows, rows);
    if (weights.insert(op.getW()).second)
      e.expertParams += w.getNumElements();
    ++e.products;
    if (!reachesProduct(op.getX(), rows, op, /*up=*/true)) {
      ++e.layers;
      e.dispatchBytes += rows * x.getDimSize(1) * elementBytes;
    }
    if (!reachesProduct(op.getResult(), rows, op, /*up=*/false))
      e.combineBytes += rows * y.getDimSize(1) * elementBytes;
  });
  if (!e.products)
    return std::nullopt;
  return e;
}
