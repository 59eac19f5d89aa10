//===- FuseEpilogues.cpp - GEMMs accumulate into their target --------------===//
//
// A weight gradient is a GEMM into a temporary that one kernel then adds to
// the gradient slot. The GEMM libraries add into their output themselves
// (beta = 1), so the GEMM writes the slot with `accumulate` and the
// temporary and the add kernel go away. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace otc {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// Whether `op` reads or writes the bytes of `buffer`.
static bool touches(Operation *op, Value buffer) {
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()) && otck::storageOf(v) == buffer)
      return true;
  return false;
}

/// The accumulator when `k` is `acc = acc + t` (either order) of one type,
/// written over `acc`; null otherwise.
static Value accumulatorOf(otck::KernelOp k, Value t) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()) ||
      k.getOutputs().size() != 1)
    return nullptr;
  auto add = dyn_cast<AddOp>(body.front());
  if (!add || add.getResult() != body.getTerminator()->getOperand(0))
    return nullptr;
  Value out = k.getOutputs()[0];
  if (out.getType() != t.getType())
    return nullptr;
  auto inputOf = [&](Value v) -> Value {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body ? k.getInputs()[arg.getArgNumber()]
                                          : Value();
  };
  Value a = inputOf(add.getLhs()), b = inputOf(add.getRhs());
  if (a == out && b == t)
    return out;
  if (b == out && a == t)
    return out;
  return nullptr;
}

struct FuseEpiloguesPass
    : public otc::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  using FuseEpiloguesBase::FuseEpiloguesBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      SmallVector<otck::GemmOp> gemms(f.getBody().getOps<otck::GemmOp>());
      for (otck::GemmOp g : gemms)
        fuseAccumulation(g);
    }
  }

  void fuseAccumulation(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot() || g.getAccumulate())
      return;
    // The temporary's only reader: one kernel after the GEMM.
    otck::KernelOp add;
    for (Operation *user : t.getUsers()) {
      if (user == g.getOperation())
        continue;
      auto k = dyn_cast<otck::KernelOp>(user);
      if (!k || add || k->getBlock() != g->getBlock() ||
          !g->isBeforeInBlock(k))
        return;
      add = k;
    }
    if (!add)
      return;
    Value acc = accumulatorOf(add, t);
    if (!acc || otck::storageOf(acc) != acc ||
        llvm::any_of(acc.getUsers(),
                     [](Operation *u) { return isa<otck::ViewOp>(u); }))
      return;
    // The GEMM reads acc's value where it stands: nothing in between may
    // read or write it; nor may the GEMM's operands be acc.
    if (otck::storageOf(g.getLhs()) == acc ||
        otck::storageOf(g.getRhs()) == acc)
      return;
    for (Operation *op = g->getNextNode(); op != add.getOperation();
         op = op->getNextNode())
      if (touches(op, acc))
        return;
    g.getOutMutable().assign(acc);
    g.setAccumulate(true);
    add.erase();
    if (t.use_empty())
      tmp.erase();
  }
};

} // namespace
