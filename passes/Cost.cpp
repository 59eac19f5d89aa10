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

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace otc;

static int64_t numel(Value v) {
  return numElements(cast<ShapedType>(v.getType()).getShape());
}

int64_t otc::valueBytes(Value v) {
  auto t = cast<ShapedType>(v.getType());
  return numElements(t.getShape()) * storageBytes(t.getElementType());
}

int64_t otc::opFlops(Operation *op) {
  return TypeSwitch<Operation *, int64_t>(op)
      .Case([](MatMulOp mm) {
        ArrayRef<int64_t> a = cast<ShapedType>(mm.getLhs().getType()).getShape();
        int64_t k = mm.getTransposeLhs() ? a[a.size() - 2] : a.back();
        return 2 * numel(mm.getResult()) * k;
      })
      .Case<ConstantOp, ReshapeOp, TransposeOp, BroadcastOp, SliceOp,
            SliceGradOp, ConcatOp, GatherOp, CastOp>([](auto) { return 0; })
      .Case<ReduceSumOp, ReduceMaxOp, GatherGradOp>(
          [](Operation *o) { return numel(o->getOperand(0)); })
      .Case<SoftmaxOp, LogSoftmaxOp, SoftmaxCrossEntropyOp>(
          [](Operation *o) { return 5 * numel(o->getOperand(0)); })
      .Case<SoftmaxGradOp, LogSoftmaxGradOp, SoftmaxCrossEntropyGradOp>(
          [](Operation *o) { return 5 * numel(o->getResult(0)); })
      .Case<ErfOp, TanhOp, ExpOp, LogOp, SigmoidOp, PowOp, SqrtOp>(
          [](Operation *o) { return 4 * numel(o->getResult(0)); })
      .Case<AdamWOp>([](AdamWOp o) { return 12 * numel(o.getParam()); })
      .Default([](Operation *o) -> int64_t {
        int64_t n = 0;
        for (Value r : o->getResults())
          n += numel(r);
        return n;
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
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults()) {
      unsigned last = pos[&op];
      for (Operation *user : r.getUsers())
        last = std::max(last, pos[user]);
      delta[pos[&op]] += valueBytes(r);
      delta[last + 1] -= valueBytes(r);
    }
  int64_t live = 0, peak = 0;
  for (unsigned i = 0; i < n; ++i) {
    live += delta[i];
    peak = std::max(peak, live);
  }
  return peak;
}
