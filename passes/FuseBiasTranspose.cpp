//===- FuseBiasTranspose.cpp - a bias added across a layout round trip ----===//
//
// Part of otc-fuse-patterns (populateFusionPatterns). Exporters add a
// convolution's bias in the convolution's own layout: a patch embedding
// computed as a GEMM ([B, HW, C]) goes to [B, C, H, W] for its bias
// [1, C, 1, 1] and straight back ([B, HW, C]) for the tokens (ViT's form):
//
//   transpose(reshape(add(reshape(transpose(y, p)), b)), p^-1)
//     -> add(y, reshape(b))
//
// The bias is added where its axes sit in y's layout, so neither transpose
// is left (two copies of the activation each way, forward and backward), the
// add can join the GEMM's epilogue and its gradient is a column sum of the
// GEMM's own layout instead of a reduction over [B, H, W].
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

namespace {

/// The axis of `to` that holds axis `axis` of `from` when one is a reshape
/// of the other: the same size after the same number of elements.
std::optional<int64_t> sameAxis(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                                int64_t axis) {
  int64_t before = 1;
  for (int64_t i = 0; i < axis; ++i)
    before *= from[i];
  int64_t prefix = 1;
  for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
    if (prefix == before && to[j] == from[axis])
      return j;
    prefix *= to[j];
  }
  return std::nullopt;
}

struct BiasThroughTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern<TransposeOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp back,
                                PatternRewriter &rewriter) const override {
    // Back to y's layout: transpose(reshape?(add)).
    Value added = back.getInput();
    auto reshapeBack = added.getDefiningOp<ReshapeOp>();
    if (reshapeBack) {
      if (!reshapeBack.getResult().hasOneUse())
        return failure();
      added = reshapeBack.getInput();
    }
    auto add = added.getDefiningOp<AddOp>();
    if (!add || !add.getResult().hasOneUse())
      return failure();
    // One addend is y's transpose (through a reshape), the other the bias.
    for (bool lhs : {true, false}) {
      Value x = lhs ? add.getLhs() : add.getRhs();
      Value bias = lhs ? add.getRhs() : add.getLhs();
      if (succeeded(rewrite(back, reshapeBack, add, x, bias, rewriter)))
        return success();
    }
    return failure();
  }

  LogicalResult rewrite(TransposeOp back, ReshapeOp reshapeBack, AddOp add,
                        Value x, Value bias, PatternRewriter &rewriter) const {
    Value t = x;
    auto reshape = x.getDefiningOp<ReshapeOp>();
    if (reshape) {
      if (!x.hasOneUse())
        return failure();
      t = reshape.getInput();
    }
    auto there = t.getDefiningOp<TransposeOp>();
    if (!there || !t.hasOneUse())
      return failure();
    Value y = there.getInput();
    ArrayRef<int64_t> p = there.getPermutation(), q = back.getPermutation();
    ArrayRef<int64_t> xs = shapeOf(x), ts = shapeOf(t);
    // The round trip: the reshape undone, the permutation inverted, y's
    // type back; the add no wider than x.
    if (p.size() != q.size() || shapeOf(add) != xs ||
        (reshapeBack ? shapeOf(reshapeBack) != ts : reshape != nullptr) ||
        back.getType() != y.getType())
      return failure();
    for (size_t i = 0; i < p.size(); ++i)
      if (q[p[i]] != static_cast<int64_t>(i))
        return failure();
    // Each axis of the bias that is not 1 spans a whole axis of x that is
    // an axis of t, hence of y; in y they keep their order.
    ArrayRef<int64_t> bs = shapeOf(bias);
    const int64_t offset =
        static_cast<int64_t>(xs.size()) - static_cast<int64_t>(bs.size());
    if (offset < 0)
      return failure();
    SmallVector<int64_t> shape(shapeOf(y).size(), 1);
    int64_t last = -1;
    for (int64_t i = 0; i < static_cast<int64_t>(bs.size()); ++i) {
      if (bs[i] == 1)
        continue;
      std::optional<int64_t> j = sameAxis(xs, ts, i + offset);
      if (bs[i] != xs[i + offset] || !j || p[*j] <= last)
        return failure();
      last = p[*j];
      shape[last] = bs[i];
    }
    rewriter.setInsertionPoint(back);
    Value b = rewriter.create<ReshapeOp>(
        bias.getLoc(), withShape(bias.getType(), shape), bias);
    Value sum = rewriter.create<AddOp>(add.getLoc(), y.getType(), y, b);
    replaceChainOutput(rewriter, back.getResult(), sum);
    return success();
  }
};

} // namespace

void fuse::populateBiasTransposeFusion(RewritePatternSet &patterns) {
  patterns.add<BiasThroughTransposes>(patterns.getContext());
}
