//===- FuseReductions.cpp - sums over leading axes as library calls --------===//
//
// A bias's gradient is a sum over every axis but the last. As a generated
// kernel that is one thread per column walking all rows (a few thousand
// threads for millions of elements), and under BF16 it first widens the
// whole tensor into an FP32 copy. This pass turns it into otc.column_sum,
// which the runtime's kernel library computes many threads per column,
// reading BF16 directly. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace otc {
#define GEN_PASS_DEF_FUSEREDUCTIONS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// Whether `op` sums its input over exactly the axes before the last.
static bool sumsLeadingAxes(ReduceSumOp op) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getResult().getType());
  if (in.getRank() < 2 || !in.hasStaticShape() ||
      !out.getElementType().isF32())
    return false;
  ArrayRef<int64_t> axes = op.getAxes();
  if (static_cast<int64_t>(axes.size()) != in.getRank() - 1)
    return false;
  for (auto [i, a] : llvm::enumerate(axes))
    if (a != static_cast<int64_t>(i))
      return false;
  return true;
}

struct FuseReductionsPass
    : public otc::impl::FuseReductionsBase<FuseReductionsPass> {
  using FuseReductionsBase::FuseReductionsBase;

  void runOnOperation() override {
    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp op) {
      if (sumsLeadingAxes(op))
        sums.push_back(op);
    });
    for (ReduceSumOp op : sums) {
      OpBuilder b(op);
      Value input = op.getInput();
      // Read a BF16 tensor widened only for this sum as it is.
      auto widen = input.getDefiningOp<CastOp>();
      if (widen && getElementTypeOrSelf(widen.getInput().getType()).isBF16())
        input = widen.getInput();
      auto in = cast<RankedTensorType>(input.getType());
      auto out = cast<RankedTensorType>(op.getResult().getType());
      auto type = RankedTensorType::get({in.getShape().back()},
                                        out.getElementType());
      Value sum = b.create<ColumnSumOp>(op.getLoc(), type, input);
      if (type != out)
        sum = b.create<ReshapeOp>(op.getLoc(), out, sum);
      op.getResult().replaceAllUsesWith(sum);
      op.erase();
      if (widen && widen->use_empty())
        widen.erase();
    }
  }
};

} // namespace
