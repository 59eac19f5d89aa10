//===- FuseReductions.cpp - leading-axis sums as library calls ------------===//
//
// A bias's gradient is a sum over every axis but the last. As a generated
// kernel that is one thread per column walking all rows (a few thousand
// threads for millions of elements), and under BF16 it first widens the
// whole tensor into an FP32 copy. This pass turns it into otc.column_sum,
// which the runtime's kernel library computes many threads per column,
// reading BF16 directly. Likewise an embedding's gradient (otc.gather_grad)
// computed in FP32 only to be rounded to BF16 reads and writes BF16, and an
// expert product (otc.expert_matmul) only rounded to BF16 writes BF16: the
// library sums in FP32 and rounds once either way. See Passes.td for the
// contract.
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

/// Results below this many make a generated sum a few long serial loops
/// (one work item per result)...
constexpr int64_t kFewResults = 16384;
/// ...when each sums at least this many elements.
constexpr int64_t kLongSum = 1024;

/// The order of `op`'s input axes that puts the summed ones first, when
/// `op` becomes a column sum (the identity when they lead); none otherwise.
/// Sums over exactly the leading axes always do (a bias's gradient: every
/// axis but the last; a broadcast table's, e.g. learned positions added to
/// every sequence: the batch axes). Any other sum does when a generated
/// kernel would be a few long serial loops: few results, each of many
/// elements (Whisper's Conv1d bias gradient, [B, C, T] over B and T: 768
/// loops of 48,000; CLIP's logit_scale, a [256, 256] sum to one value):
/// the input transposed (a copy) then summed by many threads a column.
static std::optional<SmallVector<int64_t>> columnSumOrder(ReduceSumOp op) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto out = cast<RankedTensorType>(op.getResult().getType());
  const int64_t rank = in.getRank();
  if (rank < 1 || !in.hasStaticShape() || !out.getElementType().isF32())
    return std::nullopt;
  ArrayRef<int64_t> axes = op.getAxes();
  if (axes.empty())
    return std::nullopt;
  SmallVector<int64_t> order(axes);
  llvm::sort(order);
  if (std::adjacent_find(order.begin(), order.end()) != order.end())
    return std::nullopt;
  int64_t results = 1, summed = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(order, d))
      summed *= in.getDimSize(d);
    else {
      results *= in.getDimSize(d);
      order.push_back(d);
    }
  }
  bool leading = true;
  for (auto [i, a] : llvm::enumerate(axes))
    leading &= a == static_cast<int64_t>(i);
  if (leading && static_cast<int64_t>(axes.size()) < rank)
    return order;
  if (results >= kFewResults || summed < kLongSum)
    return std::nullopt;
  return order;
}

/// An expert product of BF16 operands whose FP32 result only `round`
/// reads, rounding it to BF16, stores BF16 itself (the kernel rounds each
/// FP32 sum once as it stores it: the same bits): the product takes the
/// cast's type and the cast goes. False where it does not apply.
static bool narrowExpertMatmul(CastOp round) {
  auto product = round.getInput().getDefiningOp<ExpertMatmulOp>();
  if (!product || !round.getInput().hasOneUse() ||
      !getElementTypeOrSelf(round.getType()).isBF16() ||
      !getElementTypeOrSelf(product.getType()).isF32() ||
      !getElementTypeOrSelf(product.getX().getType()).isBF16())
    return false;
  product.getResult().setType(cast<RankedTensorType>(round.getType()));
  round.getResult().replaceAllUsesWith(product.getResult());
  round.erase();
  return true;
}

struct FuseReductionsPass
    : public otc::impl::FuseReductionsBase<FuseReductionsPass> {
  using FuseReductionsBase::FuseReductionsBase;

  void runOnOperation() override {
    // An embedding's gradient only rounded to BF16 reads and writes BF16;
    // an expert product only rounded to BF16 writes BF16.
    SmallVector<CastOp> rounds;
    getOperation().walk([&](CastOp op) { rounds.push_back(op); });
    for (CastOp op : rounds)
      if (!narrowExpertMatmul(op))
        narrowGatherGrad(op);

    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp op) {
      if (columnSumOrder(op))
        sums.push_back(op);
    });
    for (ReduceSumOp op : sums) {
      SmallVector<int64_t> order = *columnSumOrder(op);
      const int64_t k = static_cast<int64_t>(op.getAxes().size());
      OpBuilder b(op);
      Value input = op.getInput();
      // Read a BF16 tensor widened only for this sum as it is.
      auto widen = input.getDefiningOp<CastOp>();
      if (widen && getElementTypeOrSelf(widen.getInput().getType()).isBF16())
        input = widen.getInput();
      auto in = cast<RankedTensorType>(input.getType());
      auto out = cast<RankedTensorType>(op.getResult().getType());
      // The summed axes first.
      if (!llvm::equal(order, llvm::seq<int64_t>(0, in.getRank()))) {
        SmallVector<int64_t> moved;
        for (int64_t d : order)
          moved.push_back(in.getDimSize(d));
        in = RankedTensorType::get(moved, in.getElementType());
        input = b.create<TransposeOp>(op.getLoc(), in, input,
                                      b.getDenseI64ArrayAttr(order));
      }
      // Rows: the summed axes; columns: the rest, or one column when every
      // axis is summed (a view unless already [rows, cols]).
      int64_t rows = 1, cols = 1;
      for (auto [d, size] : llvm::enumerate(in.getShape()))
        (static_cast<int64_t>(d) < k ? rows : cols) *= size;
      if (k != in.getRank() - 1 || k == in.getRank())
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
