//===- FuseReductions.cpp - leading-axis sums as library calls ------------===//
//
// A bias's gradient is a sum over every axis but the last. As a generated
// kernel that is one thread per column walking all rows (a few thousand
// threads for millions of elements), and under BF16 it first widens the
// whole tensor into an FP32 copy. This pass turns it into otc.column_sum,
// which the runtime's kernel library computes many threads per column,
// reading BF16 directly. Likewise an embedding's gradient (otc.gather_grad)
// computed in FP32 only to be rounded to BF16 reads and writes BF16: the
// library sums in FP32 either way. See Passes.td for the contract.
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

/// k when `op` sums its input over exactly its first k axes, 0 < k <
/// rank (a bias's gradient: every axis but the last; a broadcast table's,
/// e.g. learned positions added to every sequence: the batch axes); 0
/// otherwise.
static int64_t leadingAxesSummed(ReduceSumOp op) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getResult().getType());
  if (in.getRank() < 2 || !in.hasStaticShape() ||
      !out.getElementType().isF32())
    return 0;
  ArrayRef<int64_t> axes = op.getAxes();
  if (axes.empty() || static_cast<int64_t>(axes.size()) >= in.getRank())
    return 0;
  for (auto [i, a] : llvm::enumerate(axes))
    if (a != static_cast<int64_t>(i))
      return 0;
  return static_cast<int64_t>(axes.size());
}

struct FuseReductionsPass
    : public otc::impl::FuseReductionsBase<FuseReductionsPass> {
  using FuseReductionsBase::FuseReductionsBase;

  void runOnOperation() override {
    // An embedding's gradient only rounded to BF16 reads and writes BF16.
    SmallVector<CastOp> rounds;
    getOperation().walk([&](CastOp op) { rounds.push_back(op); });
    for (CastOp op : rounds)
      narrowGatherGrad(op);

    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp op) {
      if (leadingAxesSummed(op))
        sums.push_back(op);
    });
    for (ReduceSumOp op : sums) {
      int64_t k = leadingAxesSummed(op);
      OpBuilder b(op);
      Value input = op.getInput();
      // Read a BF16 tensor widened only for this sum as it is.
      auto widen = input.getDefiningOp<CastOp>();
      if (widen && getElementTypeOrSelf(widen.getInput().getType()).isBF16())
        input = widen.getInput();
      auto in = cast<RankedTensorType>(input.getType());
      auto out = cast<RankedTensorType>(op.getResult().getType());
      // Rows: the summed axes; columns: the rest (a view when k < rank - 1).
      int64_t rows = 1, cols = 1;
      for (auto [d, size] : llvm::enumerate(in.getShape()))
        (static_cast<int64_t>(d) < k ? rows : cols) *= size;
      if (k != in.getRank() - 1)
        input = b.create<ReshapeOp>(
            op.getLoc(),
            RankedTensorType::get({rows, cols}, in.getElementType()), input);
      auto type = RankedTensorType::get({cols}, out.getElementType());
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
