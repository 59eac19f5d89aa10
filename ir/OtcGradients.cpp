//===- OtcGradients.cpp - reverse-mode rules of the otc ops ----------------===//
//
// One `buildGradients` per differentiable op. Each builds, at the builder's
// insertion point, the gradients of its operands from those of its results.
// Broadcast operands receive the gradient summed back to their own shape.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace otc;

static bool isFloat(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

Value otc::sumToShape(OpBuilder &b, Location loc, Value grad, Value operand) {
  ArrayRef<int64_t> target = shapeOf(operand);
  ArrayRef<int64_t> gs = shapeOf(grad);
  if (gs == target)
    return grad;
  SmallVector<int64_t> axes = broadcastAxes(target, gs);
  SmallVector<int64_t> kept(gs);
  for (int64_t a : axes)
    kept[a] = 1;
  Value sum = b.create<ReduceSumOp>(loc, withShape(grad.getType(), kept), grad,
                                    axes, /*keep_dims=*/true);
  if (ArrayRef<int64_t>(kept) == target)
    return sum;
  return b.create<ReshapeOp>(loc, withShape(grad.getType(), target), sum);
}

/// `a * b` with the broadcast result type.
static Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  auto shape = broadcastShapes(shapeOf(x), shapeOf(y));
  return b.create<MulOp>(loc, withShape(x.getType(), *shape), x, y);
}

static Value div(OpBuilder &b, Location loc, Value x, Value y) {
  auto shape = broadcastShapes(shapeOf(x), shapeOf(y));
  return b.create<DivOp>(loc, withShape(x.getType(), *shape), x, y);
}

/// Appends the gradients of the two operands of a binary op, null for an
/// operand that is not a float.
static LogicalResult binaryGrads(Operation *op, Value dl, Value dr,
                                 SmallVectorImpl<Value> &out) {
  out.push_back(isFloat(op->getOperand(0)) ? dl : Value());
  out.push_back(isFloat(op->getOperand(1)) ? dr : Value());
  return success();
}

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  Value dl = sumToShape(b, getLoc(), g, getLhs());
  Value dr = sumToShape(b, getLoc(), g, getRhs());
  return binaryGrads(*this, dl, dr, out);
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  Value dl = sumToShape(b, getLoc(), g, getLhs());
  Value neg = b.create<NegOp>(getLoc(), g);
  Value dr = sumToShape(b, getLoc(), neg, getRhs());
  return binaryGrads(*this, dl, dr, out);
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  Location loc = getLoc();
  // Built in operand order so the IR is the same with every compiler.
  Value dl = sumToShape(b, loc, mul(b, loc, g, getRhs()), getLhs());
  Value dr = sumToShape(b, loc, mul(b, loc, g, getLhs()), getRhs());
  return binaryGrads(*this, dl, dr, out);
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  // d(l/r)/dl = 1/r, d(l/r)/dr = -(l/r)/r.
  Value g = rg[0];
  Location loc = getLoc();
  Value dl = sumToShape(b, loc, div(b, loc, g, getRhs()), getLhs());
  Value gy = div(b, loc, mul(b, loc, g, getResult()), getRhs());
  Value dr = sumToShape(b, loc, b.create<NegOp>(loc, gy), getRhs());
  return binaryGrads(*this, dl, dr, out);
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  out.push_back(b.create<NegOp>(getLoc(), rg[0]));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  out.push_back(b.create<MulOp>(getLoc(), getType(), rg[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  out.push_back(b.create<DivOp>(getLoc(), getType(), rg[0], getInput()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(
      b.create<TanhGradOp>(getLoc(), getType(), rg[0], getResult()));
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(b.create<ReluGradOp>(getLoc(), getType(), rg[0], getInput()));
  return success();
}

LogicalResult MatMulOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &out) {
  // With op(X) = X or X^T: d op(A) = G op(B)^T and d op(B) = op(A)^T G.
  // Transposed operands take the transpose of those, which folds into the
  // flags of one matmul each.
  Value g = rg[0], a = getLhs(), bb = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Location loc = getLoc();
  ArrayRef<int64_t> gs = shapeOf(g);
  SmallVector<int64_t> batch(gs.drop_back(2));
  auto make = [&](Value x, Value y, bool tx, bool ty, ArrayRef<int64_t> like) {
    SmallVector<int64_t> shape(batch);
    shape.push_back(like[like.size() - 2]);
    shape.push_back(like[like.size() - 1]);
    auto mm = b.create<MatMulOp>(loc, withShape(g.getType(), shape), x, y);
    if (tx)
      mm.setTransposeLhs(true);
    if (ty)
      mm.setTransposeRhs(true);
    return mm.getResult();
  };
  Value da = ta ? make(bb, g, tb, true, shapeOf(a)) : make(g, bb, false, !tb, shapeOf(a));
  // A matrix shared by every batch entry (a weight against [B, T, K]
  // activations) gets its gradient from one product over the flattened
  // batch, not a [B, K, N] stack of products summed afterwards.
  if (shapeOf(bb).size() == 2 && shapeOf(a).size() > 2 && !ta) {
    ArrayRef<int64_t> as = shapeOf(a);
    int64_t rows = numElements(as.drop_back());
    Value a2 = b.create<ReshapeOp>(
        loc, withShape(a.getType(), {rows, as.back()}), a);
    Value g2 = b.create<ReshapeOp>(
        loc, withShape(g.getType(), {rows, gs.back()}), g);
    batch.clear();
    Value db = tb ? make(g2, a2, true, false, shapeOf(bb))
                  : make(a2, g2, true, false, shapeOf(bb));
    out.push_back(sumToShape(b, loc, da, a));
    out.push_back(db);
    return success();
  }
  Value db = tb ? make(g, a, true, ta, shapeOf(bb)) : make(a, g, !ta, false, shapeOf(bb));
  out.push_back(sumToShape(b, loc, da, a));
  out.push_back(sumToShape(b, loc, db, bb));
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.push_back(b.create<TransposeOp>(getLoc(), getInput().getType(), rg[0],
                                      inverse));
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(b.create<ReshapeOp>(getLoc(), getInput().getType(), rg[0]));
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(sumToShape(b, getLoc(), rg[0], getInput()));
  return success();
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  ArrayRef<int64_t> in = shapeOf(getInput());
  if (!getKeepDims()) {
    SmallVector<int64_t> kept(in);
    for (int64_t a : getAxes())
      kept[a] = 1;
    g = b.create<ReshapeOp>(getLoc(), withShape(g.getType(), kept), g);
  }
  out.push_back(
      b.create<BroadcastOp>(getLoc(), getInput().getType(), g).getResult());
  return success();
}

LogicalResult DropoutOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  out.push_back(b.create<DropoutGradOp>(getLoc(), getInput().getType(), rg[0],
                                        getMask(), getRatioAttr()));
  out.push_back(Value());
  return success();
}

LogicalResult
SoftmaxCrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &out) {
  out.push_back(b.create<SoftmaxCrossEntropyGradOp>(
      getLoc(), getLogits().getType(), rg[0], getLogits(), getLabels(),
      getReductionAttr(), getIgnoreIndexAttr()));
  out.push_back(Value());
  return success();
}

/// A 0-d constant of `like`'s element type.
static Value scalar(OpBuilder &b, Location loc, Value like, double v) {
  auto t = RankedTensorType::get({}, getElementTypeOrSelf(like.getType()));
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), v)));
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  // d sqrt(x) = 1 / (2 sqrt(x)).
  Location loc = getLoc();
  Value q = b.create<DivOp>(loc, getType(), rg[0], getResult());
  out.push_back(mul(b, loc, q, scalar(b, loc, q, 0.5)));
  return success();
}

LogicalResult ReciprocalOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &out) {
  // d (1/x) = -1/x^2 = -y^2.
  Location loc = getLoc();
  Value gy = b.create<MulOp>(loc, getType(), rg[0], getResult());
  Value gyy = b.create<MulOp>(loc, getType(), gy, getResult());
  out.push_back(b.create<NegOp>(loc, gyy));
  return success();
}

LogicalResult ErfOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  // d erf(x) = 2/sqrt(pi) e^(-x^2).
  Location loc = getLoc();
  Value x = getInput();
  Value xx = b.create<MulOp>(loc, getType(), x, x);
  Value e = b.create<ExpOp>(loc, b.create<NegOp>(loc, xx));
  Value scaled = mul(b, loc, e, scalar(b, loc, x, 1.1283791670955126));
  out.push_back(b.create<MulOp>(loc, getType(), rg[0], scaled));
  return success();
}

LogicalResult CosOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  // d cos(x) = -sin(x).
  Location loc = getLoc();
  Value s = b.create<SinOp>(loc, getInput());
  out.push_back(b.create<NegOp>(loc, b.create<MulOp>(loc, getType(), rg[0], s)));
  return success();
}

LogicalResult SinOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  // d sin(x) = cos(x).
  Location loc = getLoc();
  Value c = b.create<CosOp>(loc, getInput());
  out.push_back(b.create<MulOp>(loc, getType(), rg[0], c));
  return success();
}

LogicalResult SigmoidOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  // d sigmoid(x) = y (1 - y).
  Location loc = getLoc();
  Value y = getResult();
  auto shape = shapeOf(y);
  Value oneMinus = b.create<SubOp>(loc, withShape(y.getType(), shape),
                                   scalar(b, loc, y, 1.0), y);
  Value d = b.create<MulOp>(loc, getType(), y, oneMinus);
  out.push_back(b.create<MulOp>(loc, getType(), rg[0], d));
  return success();
}

LogicalResult PowOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &out) {
  // d(l^r)/dl = r l^(r-1); d(l^r)/dr = l^r ln l.
  Value g = rg[0], l = getLhs(), r = getRhs();
  Location loc = getLoc();
  auto rm1Shape = shapeOf(r);
  Value rm1 = b.create<SubOp>(loc, withShape(r.getType(), rm1Shape), r,
                              scalar(b, loc, r, 1.0));
  auto pshape = broadcastShapes(shapeOf(l), rm1Shape);
  Value p = b.create<PowOp>(loc, withShape(l.getType(), *pshape), l, rm1);
  Value dl = sumToShape(b, loc, mul(b, loc, mul(b, loc, g, r), p), l);
  Value logl = b.create<LogOp>(loc, l);
  Value dr = sumToShape(b, loc, mul(b, loc, mul(b, loc, g, getResult()), logl),
                        r);
  return binaryGrads(*this, dl, dr, out);
}

LogicalResult SelectOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  Location loc = getLoc();
  out.push_back(Value());
  if (!isFloat(getResult())) {
    out.append({Value(), Value()});
    return success();
  }
  Value zero = scalar(b, loc, g, 0.0);
  Value dl = b.create<SelectOp>(loc, g.getType(), getCondition(), g, zero);
  Value dr = b.create<SelectOp>(loc, g.getType(), getCondition(), zero, g);
  out.push_back(sumToShape(b, loc, dl, getLhs()));
  out.push_back(sumToShape(b, loc, dr, getRhs()));
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput()) || !isFloat(getResult())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(b.create<CastOp>(getLoc(), getInput().getType(), rg[0]));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  // The gradient goes to the elements equal to the maximum, shared equally.
  Location loc = getLoc();
  Value x = getInput(), g = rg[0], y = getResult();
  ArrayRef<int64_t> in = shapeOf(x);
  SmallVector<int64_t> kept(in);
  for (int64_t a : getAxes())
    kept[a] = 1;
  Type keptType = withShape(y.getType(), kept);
  if (!getKeepDims()) {
    y = b.create<ReshapeOp>(loc, keptType, y);
    g = b.create<ReshapeOp>(loc, keptType, g);
  }
  Value isMax = b.create<CompareOp>(
      loc, RankedTensorType::get(in, b.getI1Type()), x, y, "eq");
  Value mask = b.create<CastOp>(loc, x.getType(), isMax);
  Value count = b.create<ReduceSumOp>(loc, keptType, mask, getAxes(),
                                      /*keep_dims=*/true);
  Value share = b.create<DivOp>(loc, keptType, g, count);
  out.push_back(b.create<MulOp>(loc, x.getType(), mask, share));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &out) {
  Value g = rg[0];
  int64_t axis = getAxis(), offset = 0;
  size_t rank = shapeOf(g).size();
  for (Value in : getInputs()) {
    if (!isFloat(in)) {
      out.push_back(Value());
    } else {
      SmallVector<int64_t> starts(rank, 0), strides(rank, 1);
      starts[axis] = offset;
      out.push_back(b.create<SliceOp>(getLoc(), in.getType(), g, starts,
                                      strides));
    }
    offset += shapeOf(in)[axis];
  }
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &out) {
  if (!isFloat(getInput())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(b.create<SliceGradOp>(getLoc(), getInput().getType(), rg[0],
                                      getStartsAttr(), getStridesAttr()));
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &out) {
  if (!isFloat(getData())) {
    out.append({Value(), Value()});
    return success();
  }
  // gather_grad reads int64 indices (the kernel library's type).
  Value indices = getIndices();
  auto it = cast<RankedTensorType>(indices.getType());
  if (!it.getElementType().isInteger(64))
    indices = b.create<CastOp>(getLoc(), it.clone(b.getI64Type()), indices);
  out.push_back(b.create<GatherGradOp>(getLoc(), getData().getType(), rg[0],
                                       indices, /*acc=*/Value(),
                                       getAxisAttr()));
  out.push_back(Value());
  return success();
}

// y = x W_e: dx = dy W_e^T (the same grouping, the experts' layout flag
// flipped) and each expert's dW its rows' x^T dy; the indices have none.
LogicalResult ExpertMatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                             SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value ids = getIds();
  auto dx = b.create<ExpertMatmulOp>(loc, getX().getType(), rg[0], ids, getW());
  dx.setTransposeRhs(!getTransposeRhs());
  auto dw = b.create<ExpertMatmulWgradOp>(loc, getW().getType(), rg[0], getX(),
                                          ids, /*acc=*/Value());
  dw.setTransposeRhs(getTransposeRhs());
  out.push_back(dx);
  out.push_back(Value());
  out.push_back(dw);
  return success();
}

// A sum into zeros (or `acc`) at the indices, as ScatterElements and
// ScatterND with run-time indices import: each summand's gradient is the
// result's gradient where it landed, `acc`'s the result's gradient.
LogicalResult GatherGradOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &out) {
  out.push_back(b.create<GatherOp>(getLoc(), getGrad().getType(), rg[0],
                                   getIndices(), getAxisAttr()));
  out.push_back(Value());
  if (getAcc())
    out.push_back(rg[0]);
  return success();
}

LogicalResult TriluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &out) {
  out.push_back(b.create<TriluOp>(getLoc(), getType(), rg[0], getUpperAttr(),
                                  getKAttr()));
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  out.push_back(b.create<SoftmaxGradOp>(getLoc(), getType(), rg[0],
                                        getResult(), getAxisAttr()));
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &out) {
  out.push_back(b.create<LogSoftmaxGradOp>(getLoc(), getType(), rg[0],
                                           getResult(), getAxisAttr()));
  return success();
}

LogicalResult NllLossOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  out.push_back(b.create<NllLossGradOp>(
      getLoc(), getInput().getType(), rg[0], getLabels(), getReductionAttr(),
      getIgnoreIndexAttr()));
  out.push_back(Value());
  return success();
}
