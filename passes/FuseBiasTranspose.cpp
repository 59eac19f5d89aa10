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
// Elementwise ops of the sum alone (an activation: Whisper's Conv1d is
// gelu(conv(x) + b) in [B, C, T], then permuted to [B, T, C]) move with it,
// and without reshapes the transpose back may be any permutation q: the
// chain becomes one transpose by the composition (none when it is the
// identity):
//
//   transpose(f(add(transpose(y, p), b)), q) -> transpose(f(add(y, b')), p.q)
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "mlir/IR/IRMapping.h"
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

  /// Whether `op` applies elementwise to `v` alone: an elementwise op of
  /// v's type whose other operands are scalar constants.
  static bool appliesTo(Operation *op, Value v) {
    if (!op->hasTrait<OpTrait::OtcElementwise>() || op->getNumResults() != 1 ||
        op->getResult(0).getType() != v.getType())
      return false;
    return llvm::all_of(op->getOperands(), [&](Value o) {
      return o == v || (o.getDefiningOp<ConstantOp>() &&
                        cast<ShapedType>(o.getType()).getRank() == 0);
    });
  }

  LogicalResult matchAndRewrite(TransposeOp back,
                                PatternRewriter &rewriter) const override {
    // Back to y's layout: transpose(reshape?(f(add))), f elementwise ops
    // each read once (innermost last).
    Value added = back.getInput();
    auto reshapeBack = added.getDefiningOp<ReshapeOp>();
    if (reshapeBack) {
      if (!reshapeBack.getResult().hasOneUse())
        return failure();
      added = reshapeBack.getInput();
    }
    SmallVector<std::pair<Operation *, Value>> after;
    while (Operation *op = added.getDefiningOp()) {
      if (isa<AddOp>(op) || !added.hasOneUse())
        break;
      Value in;
      for (Value o : op->getOperands())
        if (!o.getDefiningOp<ConstantOp>())
          in = o;
      if (!in || !appliesTo(op, in))
        return failure();
      after.emplace_back(op, in);
      added = in;
    }
    auto add = added.getDefiningOp<AddOp>();
    if (!add || !add.getResult().hasOneUse())
      return failure();
    // One addend is y's transpose (through a reshape), the other the bias.
    for (bool lhs : {true, false}) {
      Value x = lhs ? add.getLhs() : add.getRhs();
      Value bias = lhs ? add.getRhs() : add.getLhs();
      if (succeeded(rewrite(back, reshapeBack, after, add, x, bias, rewriter)))
        return success();
    }
    return failure();
  }

  LogicalResult rewrite(TransposeOp back, ReshapeOp reshapeBack,
                        ArrayRef<std::pair<Operation *, Value>> after,
                        AddOp add, Value x, Value bias,
                        PatternRewriter &rewriter) const {
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
    // The round trip: the reshape undone and the permutation inverted, or,
    // without reshapes, any permutation back (composed with p); the add no
    // wider than x.
    if (p.size() != q.size() || shapeOf(add) != xs ||
        (reshapeBack ? shapeOf(reshapeBack) != ts : reshape != nullptr))
      return failure();
    SmallVector<int64_t> composed;
    for (int64_t i : q)
      composed.push_back(p[i]);
    const bool identity =
        llvm::equal(composed, llvm::seq<int64_t>(0, composed.size()));
    if (reshapeBack && (!identity || back.getType() != y.getType()))
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
    // The elementwise ops in turn (innermost first), in y's layout.
    for (auto [op, in] : llvm::reverse(after)) {
      IRMapping map;
      map.map(in, sum);
      Operation *moved = rewriter.clone(*op, map);
      moved->getResult(0).setType(y.getType());
      sum = moved->getResult(0);
    }
    if (!identity)
      sum = rewriter.create<TransposeOp>(back.getLoc(), back.getType(), sum,
                                         composed);
    replaceChainOutput(rewriter, back.getResult(), sum);
    return success();
  }
};

} // namespace

void fuse::populateBiasTransposeFusion(RewritePatternSet &patterns) {
  patterns.add<BiasThroughTransposes>(patterns.getContext());
}
