//===- FuseLossGrad.cpp - the loss and its gradient in one library call ---===//
//
// After differentiation, otc.cross_entropy's result is read by the loss's
// return and its lse by otc.cross_entropy_grad alone, which runs as soon as
// the backward pass starts with a seed known from the outset. Computing both
// in one call reads the [rows, classes] logits once instead of three times
// (GPT-2: 50,257 classes, most of the loss's time) and keeps no lse between
// them. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"

namespace otc {
#define GEN_PASS_DEF_FUSELOSSGRAD
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The forward op whose gradient `grad` is, when the two may become one
/// call: the same logits, labels and options, the lse read by `grad` alone.
static CrossEntropyOp forwardOf(CrossEntropyGradOp grad) {
  auto fwd = grad.getLse().getDefiningOp<CrossEntropyOp>();
  if (!fwd || !grad.getLse().hasOneUse() ||
      fwd.getLogits() != grad.getLogits() ||
      fwd.getLabels() != grad.getLabels() ||
      fwd.getReduction() != grad.getReduction() ||
      fwd.getIgnoreIndex() != grad.getIgnoreIndex() ||
      fwd->getBlock() != grad->getBlock())
    return nullptr;
  return fwd;
}

struct FuseLossGradPass
    : public otc::impl::FuseLossGradBase<FuseLossGradPass> {
  using FuseLossGradBase::FuseLossGradBase;

  void runOnOperation() override {
    SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp op) { grads.push_back(op); });
    for (CrossEntropyGradOp grad : grads) {
      CrossEntropyOp fwd = forwardOf(grad);
      if (!fwd)
        continue;
      // The seed must exist where the loss is computed: a value from before
      // it, or a constant, which moves up.
      Value seed = grad.getGrad();
      DominanceInfo dom(fwd->getParentOp());
      if (!dom.properlyDominates(seed, fwd)) {
        Operation *def = seed.getDefiningOp();
        if (!def || !matchPattern(seed, m_Constant()))
          continue;
        def->moveBefore(fwd);
      }
      OpBuilder b(fwd);
      auto fused = b.create<CrossEntropyWithGradOp>(
          fwd.getLoc(), grad.getType(), fwd.getLoss().getType(),
          fwd.getLse().getType(), seed, fwd.getLogits(), fwd.getLabels(),
          fwd.getReductionAttr(), fwd.getIgnoreIndexAttr());
      grad.getResult().replaceAllUsesWith(fused.getDlogits());
      fwd.getLoss().replaceAllUsesWith(fused.getLoss());
      grad.erase();
      fwd.erase();
    }
  }
};

} // namespace
