//===- FuseHelpers.cpp - what the fusion recognizers share ----------------===//
//
// The helpers of passes/FusePatterns.h that every recognizer of
// otc-fuse-patterns reads: shapes and splat constants, products of
// factors, whether a value depends on a parameter, and the rewriter's side
// of a fusion (the chain's output replaced, what it leaves unread erased).
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "ir/Config.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

std::optional<double> fuse::splatValue(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!attr || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

bool fuse::near(double a, double b) {
  return std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b));
}

static void flattenInto(Value v, bool root, Product &p) {
  Operation *d = v.getDefiningOp();
  if (d && (root || v.hasOneUse())) {
    if (auto mul = dyn_cast<MulOp>(d)) {
      flattenInto(mul.getLhs(), false, p);
      flattenInto(mul.getRhs(), false, p);
      return;
    }
    if (auto div = dyn_cast<DivOp>(d)) {
      if (std::optional<double> c = splatValue(div.getRhs())) {
        p.constant /= *c;
        flattenInto(div.getLhs(), false, p);
        return;
      }
    }
  }
  if (std::optional<double> c = splatValue(v)) {
    p.constant *= *c;
    return;
  }
  p.leaves.push_back(v);
}

Product fuse::flattenProduct(Value root) {
  Product p;
  flattenInto(root, true, p);
  return p;
}

bool fuse::dependsOnParam(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (f && f.getArgAttr(arg.getArgNumber(), attrs::kParam))
        return true;
      continue;
    }
    llvm::append_range(work, x.getDefiningOp()->getOperands());
  }
  return false;
}

bool fuse::isUnread(Operation *op) {
  return isa_and_nonnull<OtcDialect>(op->getDialect()) && op->use_empty();
}

void fuse::eraseUnread(RewriterBase &rewriter, ArrayRef<Operation *> ops) {
  // An op is erased only when popped, and once erased it is never pushed
  // again (it had no reader left to be the producer of), so the set never
  // holds an erased op.
  llvm::SetVector<Operation *> work(ops.begin(), ops.end());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!isUnread(op))
      continue;
    SmallVector<Operation *> producers;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        producers.push_back(def);
    rewriter.eraseOp(op);
    work.insert(producers.begin(), producers.end());
  }
}

void fuse::replaceChainOutput(RewriterBase &rewriter, Value from, Value to) {
  Operation *op = from.getDefiningOp();
  rewriter.replaceAllUsesWith(from, to);
  eraseUnread(rewriter, {op});
}
