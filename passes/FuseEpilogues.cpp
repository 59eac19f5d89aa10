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
#include "mlir/IR/Builders.h"

namespace otc {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The other input of `k` when `k` is one otc.add of `t` and that input
/// (either order) into one output; null otherwise.
static Value addendOf(otck::KernelOp k, Value t) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()) ||
      k.getOutputs().size() != 1)
    return nullptr;
  auto add = dyn_cast<AddOp>(body.front());
  if (!add || add.getResult() != body.getTerminator()->getOperand(0))
    return nullptr;
  auto inputOf = [&](Value v) -> Value {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body ? k.getInputs()[arg.getArgNumber()]
                                          : Value();
  };
  Value a = inputOf(add.getLhs()), b = inputOf(add.getRhs());
  return a == t ? b : b == t ? a : Value();
}

/// Whether `v` is a buffer's own bytes, seen through no view.
static bool plainBuffer(Value v) {
  return otck::storageOf(v) == v &&
         llvm::none_of(v.getUsers(),
                       [](Operation *u) { return isa<otck::ViewOp>(u); });
}

struct FuseEpiloguesPass
    : public otc::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  using FuseEpiloguesBase::FuseEpiloguesBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      SmallVector<otck::GemmOp> gemms(f.getBody().getOps<otck::GemmOp>());
      for (otck::GemmOp g : gemms)
        if (!fuseBias(g))
          fuseAccumulation(g);
    }
  }

  /// The one kernel after `g` that reads its temporary result `t`, if `t`
  /// has no other reader.
  static otck::KernelOp soleReader(otck::GemmOp g, Value t) {
    otck::KernelOp reader;
    for (Operation *user : t.getUsers()) {
      if (user == g.getOperation())
        continue;
      auto k = dyn_cast<otck::KernelOp>(user);
      if (!k || reader || k->getBlock() != g->getBlock() ||
          !g->isBeforeInBlock(k))
        return nullptr;
      reader = k;
    }
    return reader;
  }

  /// y = product + bias ([N], either order) becomes the GEMM's bias
  /// epilogue writing y. Only GEMMs whose result has the operands' element
  /// type (the library has no bias form for a BF16 product into FP32).
  bool fuseBias(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    auto tt = cast<MemRefType>(t.getType());
    if (!tmp || tmp.getSlot() || g.getAccumulate() || g.getBias() ||
        tt.getElementType() != g.getLhs().getType().getElementType() ||
        tt.getRank() < 2)
      return false;
    otck::KernelOp k = soleReader(g, t);
    Value bias = k ? addendOf(k, t) : Value();
    if (!bias || bias == t || k.getOutputs()[0].getType() != t.getType())
      return false;
    Value out = k.getOutputs()[0];
    auto bt = cast<MemRefType>(bias.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != tt.getShape().back() ||
        bt.getElementType() != tt.getElementType())
      return false;
    if (!plainBuffer(out))
      return false;
    // The GEMM writes y where it stands: nothing in between may touch y or
    // write the bias; y is none of the GEMM's operands.
    for (Value v : {g.getLhs(), g.getRhs()})
      if (otck::storageOf(v) == out)
        return false;
    // Only the readers and writers of y and of the bias's bytes can be in
    // the way: those between the GEMM and the add.
    Value biasStorage = otck::storageOf(bias);
    Block *block = g->getBlock();
    auto between = [&](Operation *u) {
      Operation *op = block->findAncestorOpInBlock(*u);
      return op && g->isBeforeInBlock(op) && op->isBeforeInBlock(k);
    };
    bool blocked = false;
    otck::forEachByteUser(out, [&](Operation *u) {
      blocked |= between(u);
    });
    otck::forEachByteUser(biasStorage, [&](Operation *u) {
      Operation *op = block->findAncestorOpInBlock(*u);
      if (blocked || !between(u))
        return;
      if (auto other = dyn_cast<otck::KernelOp>(op))
        for (Value o : other.getOutputs())
          blocked |= otck::storageOf(o) == biasStorage;
      if (auto other = dyn_cast<otck::GemmOp>(op))
        blocked |= otck::storageOf(other.getOut()) == biasStorage;
      if (auto c = dyn_cast<otck::CopyOp>(op))
        blocked |= otck::storageOf(c.getTarget()) == biasStorage;
    });
    if (blocked)
      return false;
    // A buffer declared after the GEMM (next to the add) moves up to it: a
    // copy before the GEMM replaces it (moving an op would renumber the
    // whole block for the next isBeforeInBlock; inserting one does not).
    for (Value v : {out, bias})
      if (Operation *def = v.getDefiningOp(); def && g->isBeforeInBlock(def)) {
        OpBuilder b(g);
        Operation *copy = b.clone(*def);
        def->replaceAllUsesWith(copy);
        def->erase();
        if (v == out)
          out = copy->getResult(0);
        else
          bias = copy->getResult(0);
      }
    g.getOutMutable().assign(out);
    g.getBiasMutable().assign(bias);
    k.erase();
    if (t.use_empty())
      tmp.erase();
    return true;
  }

  void fuseAccumulation(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot() || g.getAccumulate())
      return;
    // acc = acc + t, written over acc, by the temporary's only reader.
    otck::KernelOp add = soleReader(g, t);
    Value acc = add ? addendOf(add, t) : Value();
    if (!acc || add.getOutputs()[0] != acc || acc.getType() != t.getType() ||
        !plainBuffer(acc))
      return;
    // The GEMM reads acc's value where it stands: nothing in between may
    // read or write it; nor may the GEMM's operands be acc.
    if (otck::storageOf(g.getLhs()) == acc ||
        otck::storageOf(g.getRhs()) == acc)
      return;
    Block *block = g->getBlock();
    for (Operation *u : acc.getUsers())
      if (Operation *op = block->findAncestorOpInBlock(*u);
          op && g->isBeforeInBlock(op) && op->isBeforeInBlock(add))
        return;
    g.getOutMutable().assign(acc);
    g.setAccumulate(true);
    add.erase();
    if (t.use_empty())
      tmp.erase();
  }
};

} // namespace
