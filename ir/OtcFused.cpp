//===- OtcFused.cpp - verifiers, gradients and costs of the fused ops -----===//
//
// Everything the ops of OtcFusedOps.td know about themselves besides their
// definition and library calls: the verifiers, the gradient rules (each
// builds one fused gradient op that reads only what the forward op saves),
// the FLOP counts of the cost interface and the operands and results that
// are FP32 statistics under mixed precision.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace otc;

static int64_t elementsOf(Value v) { return numElements(shapeOf(v)); }

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The sizes of an attention op or its gradient (`out` its output, which
/// gives the query heads of a packed one) read from its operand types.
/// Only meaningful once verifyAttention has accepted them.
template <typename OpTy> static AttentionSizes sizesOf(OpTy op, Value out) {
  ArrayRef<int64_t> q = shapeOf(op.getQ()), k = shapeOf(op.getK());
  StringRef layout = op.getLayout();
  if (layout == "bhtd")
    return {q[0], q[1], k[1], q[2], k[2], q[3], 0};
  if (layout == "bthd")
    return {q[0], q[2], k[2], q[1], k[1], q[3], 0};
  int64_t h = shapeOf(out)[2];
  return {q[0], h, (q[2] - h) / 2, q[1], q[1], q[3], q[2] * q[3]};
}

AttentionSizes otc::attentionSizes(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return sizesOf(a, a.getOutput());
  auto g = cast<AttentionGradOp>(op);
  return sizesOf(g, g.getOutput());
}

/// The checks attention and its gradient share: q [B, H, T, D], k and v
/// [B, Hk, S, D] (as the layout stores them) with Hk dividing H, causal
/// only for T == S, a mask that broadcasts to the scores, a key for
/// dropout; packed, one value [B, T, H + 2 Hk, D] as q, k and v and `out`
/// [B, T, H, D].
template <typename OpTy>
static LogicalResult verifyAttention(OpTy op, Value out) {
  StringRef layout = op.getLayout();
  if (layout != "bhtd" && layout != "bthd" && layout != "packed")
    return op.emitOpError(
               "layout must be \"bhtd\", \"bthd\" or \"packed\", got \"")
           << layout << "\"";
  ArrayRef<int64_t> qs = shapeOf(op.getQ()), ks = shapeOf(op.getK()),
                    vs = shapeOf(op.getV());
  if (qs.size() != 4 || ks.size() != 4 || vs.size() != 4)
    return op.emitOpError("expects q, k, v of rank 4 ([B, H, T, D]), got ")
           << formatShape(qs) << ", " << formatShape(ks) << ", "
           << formatShape(vs);
  if (layout == "packed") {
    if (op.getQ() != op.getK() || op.getQ() != op.getV())
      return op.emitOpError("packed attention takes one value as q, k and v");
    ArrayRef<int64_t> o = shapeOf(out);
    if (o.size() != 4 || o[0] != qs[0] || o[1] != qs[1] || o[3] != qs[3] ||
        o[2] <= 0 || qs[2] <= o[2] || (qs[2] - o[2]) % 2)
      return op.emitOpError("packed attention expects q, k and v [B, T, H + ")
             << "2 Hk, D] and an output [B, T, H, D], got " << formatShape(qs)
             << " and " << formatShape(o);
  }
  AttentionSizes a = sizesOf(op, out);
  if ((layout != "packed" && (ks != vs || ks[0] != qs[0] || ks[3] != qs[3])) ||
      a.hk <= 0 || a.h % a.hk)
    return op.emitOpError("expects k and v [B, Hk, S, D] with Hk dividing the ")
           << "query heads, got q " << formatShape(qs) << ", k "
           << formatShape(ks) << ", v " << formatShape(vs);
  // The attribute's accessor is unsigned: a negative window reads as huge.
  const int64_t window = static_cast<int64_t>(op.getWindow());
  if (window < 0)
    return op.emitOpError("window must be 0 (none) or positive; got ")
           << window;
  if ((op.getCausal() || window > 0) && a.t != a.s)
    return op.emitOpError(op.getCausal() ? "causal attention"
                                         : "a sliding window")
           << " needs as many keys as queries, got " << a.t << " and " << a.s;
  if (!(op.getSoftcap().convertToDouble() >= 0.0))
    return op.emitOpError("softcap must be 0 (none) or positive; got ")
           << op.getSoftcap().convertToDouble();
  SmallVector<int64_t> scores = {a.b, a.h, a.t, a.s};
  if (Value m = op.getMask()) {
    auto b = broadcastShapes(shapeOf(m), scores);
    if (!b || ArrayRef<int64_t>(*b) != ArrayRef<int64_t>(scores))
      return op.emitOpError("mask ")
             << formatShape(shapeOf(m)) << " does not broadcast to the scores "
             << formatShape(scores);
  }
  if (op.getKeyPadding()) {
    Value m = op.getMask();
    ArrayRef<int64_t> ms = m ? shapeOf(m) : ArrayRef<int64_t>();
    if (!m || ms.size() != 4 || ms[1] != 1 || ms[2] != 1 || ms[3] != a.s ||
        op.getMaskGrad())
      return op.emitOpError("key_padding needs a mask [B|1, 1, 1, S] "
                            "without mask_grad");
  }
  double p = op.getDropout().convertToDouble();
  if (!(p >= 0.0 && p < 1.0))
    return op.emitOpError("dropout must be in [0, 1), got ") << p;
  if (p > 0.0 && !op.getKey())
    return op.emitOpError("dropout needs a key");
  SmallVector<int64_t> lse = {a.b, a.h, a.t};
  if (shapeOf(op.getLse()) != ArrayRef<int64_t>(lse))
    return op.emitOpError("lse must be [B, H, T]");
  if (Value sinks = op.getSinks();
      sinks && (shapeOf(sinks) != ArrayRef<int64_t>{a.h} ||
                !getElementTypeOrSelf(sinks.getType()).isF32()))
    return op.emitOpError("sinks must be f32 [H] = [")
           << a.h << "], got " << sinks.getType();
  return success();
}

/// The output's type: q's, or a packed attention's [B, T, H, D] of q's
/// element type.
template <typename OpTy> static bool outputTyped(OpTy op, Value out) {
  if (!op.isPacked())
    return out.getType() == op.getQ().getType();
  return getElementTypeOrSelf(out.getType()) ==
         getElementTypeOrSelf(op.getQ().getType());
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getOutput())))
    return failure();
  if (getMaskGrad() && (isPacked() || !getMask()))
    return emitOpError("mask_grad needs a mask and q, k and v apart");
  if (!outputTyped(*this, getOutput()))
    return emitOpError("output must have q's type");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this, getOutput())))
    return failure();
  // The sinks' gradient comes last: typed as the sinks.
  size_t sinkGrads = getSinks() ? 1 : 0;
  if (getSinks() && getGrads().back().getType() != getSinks().getType())
    return emitOpError("the last result, the sinks' gradient, must be typed "
                       "as the sinks");
  if (isPacked()) {
    if (getGrads().size() != 1 + sinkGrads ||
        getGrads()[0].getType() != getQ().getType())
      return emitOpError("packed, the gradient is one value typed as q")
             << (getSinks() ? ", then the sinks'" : "");
  } else if (getGrads().size() != (getMaskGrad() ? 4u : 3u) + sinkGrads ||
             getDq().getType() != getQ().getType() ||
             getDk().getType() != getK().getType() ||
             getDv().getType() != getV().getType()) {
    return emitOpError("dq, dk and dv must have the types of q, k and v")
           << (getMaskGrad() ? ", then dS" : "")
           << (getSinks() ? ", then the sinks'" : "");
  }
  if (getMaskGrad()) {
    if (isPacked() || !getMask())
      return emitOpError("mask_grad needs a mask and q, k and v apart");
    AttentionSizes a = attentionSizes(*this);
    SmallVector<int64_t> scores = {a.b, a.h, a.t, a.s};
    auto ds = cast<ShapedType>(getDscores().getType());
    if (ds.getShape() != ArrayRef<int64_t>(scores) ||
        ds.getElementType() != getElementTypeOrSelf(getMask().getType()))
      return emitOpError("dS must be ")
             << formatShape(scores) << " of the mask's element type";
  }
  if (getGrad().getType() != getOutput().getType() ||
      !outputTyped(*this, getOutput()))
    return emitOpError("the output and its gradient must be shaped like q");
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  if (rg[1])
    return emitOpError("the gradient through lse is not supported");
  SmallVector<Type> types = {getQ().getType()};
  if (!isPacked())
    types.append({getK().getType(), getV().getType()});
  AttentionSizes a = attentionSizes(*this);
  if (getMaskGrad())
    types.push_back(RankedTensorType::get(
        {a.b, a.h, a.t, a.s}, getElementTypeOrSelf(getMask().getType())));
  if (getSinks())
    types.push_back(getSinks().getType());
  auto grad = b.create<AttentionGradOp>(
      getLoc(), types, rg[0], getQ(), getK(), getV(), getOutput(), getLse(),
      getMask(), getKey(), getSinks(), getCausalAttr(), getScaleAttr(),
      getDropoutAttr(), getStreamAttr(), getLayoutAttr(), getWindowAttr(),
      getSoftcapAttr(), getMaskGradAttr(), getKeyPaddingAttr());
  // Packed, q, k and v are one value: its whole gradient goes through q.
  if (isPacked())
    out.append({grad.getGrads()[0], Value(), Value()});
  else
    out.append({grad.getDq(), grad.getDk(), grad.getDv()});
  // The mask's gradient is dS summed over the dimensions it broadcasts
  // (mask_grad: computed from parameters); a mask of constants and the key
  // get none.
  if (getMask())
    out.push_back(getMaskGrad()
                      ? sumToShape(b, getLoc(), grad.getDscores(), getMask())
                      : Value());
  if (getKey())
    out.push_back(Value());
  if (getSinks())
    out.push_back(grad.getDsinks());
  return success();
}

/// The keys each query is counted against: all S, as model FLOPs count a
/// causal attention (every pair, though half are hidden), a causal
/// sliding window's W when W < S = T (its band, counted the same way), a
/// bidirectional one's 2 W - 1 when that is below S.
template <typename OpTy>
static int64_t countedKeys(OpTy op, const AttentionSizes &a) {
  int64_t w = static_cast<int64_t>(op.getWindow());
  if (w > 0 && !op.getCausal())
    w = 2 * w - 1;
  return w > 0 && w < a.s && a.t == a.s ? w : a.s;
}

int64_t otc::attentionCountedKeys(Operation *op) {
  AttentionSizes a = attentionSizes(op);
  if (auto f = dyn_cast<AttentionOp>(op))
    return countedKeys(f, a);
  return countedKeys(cast<AttentionGradOp>(op), a);
}

/// Multiply-adds of the two products: B·H·T·K·D each, K the counted keys.
static int64_t attentionMacs(const AttentionSizes &a, int64_t keys) {
  return a.b * a.h * a.t * keys * a.d;
}

/// Scores: B·H·T·K.
static int64_t attentionScores(const AttentionSizes &a, int64_t keys) {
  return a.b * a.h * a.t * keys;
}

int64_t AttentionOp::getFlops() {
  // Two products (4·B·H·T·K·D) and about five operations per score.
  AttentionSizes a = attentionSizes(*this);
  int64_t keys = countedKeys(*this, a);
  return 4 * attentionMacs(a, keys) + 5 * attentionScores(a, keys);
}

int64_t AttentionGradOp::getFlops() {
  // The scores again plus four products (dV, dP, dQ, dK).
  AttentionSizes a = attentionSizes(*this);
  int64_t keys = countedKeys(*this, a);
  return 10 * attentionMacs(a, keys) + 8 * attentionScores(a, keys);
}

/// A packed attention reads its one q, k and v value once.
static int64_t distinctOperandBytes(Operation *op) {
  int64_t n = 0;
  llvm::SmallPtrSet<void *, 8> seen;
  for (Value v : op->getOperands())
    if (seen.insert(v.getAsOpaquePointer()).second)
      n += byteSize(v);
  return n;
}

int64_t AttentionOp::getBytesRead() {
  return distinctOperandBytes(getOperation());
}

int64_t AttentionGradOp::getBytesRead() {
  return distinctOperandBytes(getOperation());
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

/// Checks the axis, the affine parameters (the normalized shape) and the
/// statistics (the leading shape) of a normalization.
static LogicalResult verifyNorm(Operation *op, Value x, int64_t axis,
                                ArrayRef<Value> affine, ArrayRef<Value> stats,
                                Value y) {
  ArrayRef<int64_t> xs = shapeOf(x);
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size()))
    return op->emitOpError("axis ") << axis << " is outside [0, " << xs.size()
                                    << ")";
  for (Value a : affine)
    if (a && shapeOf(a) != xs.drop_front(axis))
      return op->emitOpError("scale and bias must have the normalized shape ")
             << formatShape(xs.drop_front(axis)) << ", got "
             << formatShape(shapeOf(a));
  for (Value s : stats)
    if (shapeOf(s) != xs.take_front(axis))
      return op->emitOpError("statistics must have the shape ")
             << formatShape(xs.take_front(axis));
  if (y.getType() != x.getType())
    return op->emitOpError("result must have the input's type");
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getEpsilon().convertToDouble() < 0.0)
    return emitOpError("epsilon must not be negative");
  return verifyNorm(*this, getInput(), getAxis(), {getGamma(), getBeta()},
                    {getMean(), getRstd()}, getResult());
}

LogicalResult RmsNormOp::verify() {
  if (getEpsilon().convertToDouble() < 0.0)
    return emitOpError("epsilon must not be negative");
  return verifyNorm(*this, getInput(), getAxis(), {getGamma()}, {getRstd()},
                    getResult());
}

/// Checks a normalization gradient: dx like x, the parameter gradients of
/// the normalized shape, statistics of the leading shape.
static LogicalResult verifyNormGrad(Operation *op, Value grad, Value x,
                                    int64_t axis, ArrayRef<Value> stats,
                                    ValueRange results) {
  ArrayRef<int64_t> xs = shapeOf(x);
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size()))
    return op->emitOpError("axis ") << axis << " is outside [0, " << xs.size()
                                    << ")";
  if (grad.getType() != x.getType() || results[0].getType() != x.getType())
    return op->emitOpError("grad and dx must have the input's type");
  for (Value r : results.drop_front())
    if (shapeOf(r) != xs.drop_front(axis))
      return op->emitOpError("parameter gradients must have the normalized "
                             "shape ")
             << formatShape(xs.drop_front(axis));
  for (Value st : stats)
    if (shapeOf(st) != xs.take_front(axis))
      return op->emitOpError("statistics must have the shape ")
             << formatShape(xs.take_front(axis));
  return success();
}

/// An accumulator, when present, has its result's type.
static LogicalResult verifyAccumulator(Operation *op, Value acc, Value result,
                                       StringRef name) {
  if (acc && acc.getType() != result.getType())
    return op->emitOpError(name)
           << " must have the type of the result it adds into, "
           << result.getType() << ", got " << acc.getType();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (getResidual() && getResidual().getType() != getInput().getType())
    return emitOpError("residual must have the input's type");
  if (failed(verifyAccumulator(*this, getDgammaAcc(), getDgamma(),
                               "dgamma_acc")) ||
      failed(verifyAccumulator(*this, getDbetaAcc(), getDbeta(), "dbeta_acc")))
    return failure();
  return verifyNormGrad(*this, getGrad(), getInput(), getAxis(),
                        {getMean(), getRstd()}, getResults());
}

LogicalResult RmsNormGradOp::verify() {
  if (getResidual() && getResidual().getType() != getInput().getType())
    return emitOpError("residual must have the input's type");
  if (failed(
          verifyAccumulator(*this, getDgammaAcc(), getDgamma(), "dgamma_acc")))
    return failure();
  return verifyNormGrad(*this, getGrad(), getInput(), getAxis(), {getRstd()},
                        getResults());
}

/// The type of a normalization's scale gradient: the normalized shape.
static Type normalizedType(Value x, int64_t axis) {
  return withShape(x.getType(), shapeOf(x).drop_front(axis));
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &out) {
  if (rg[1] || rg[2])
    return emitOpError("the gradient through mean or rstd is not supported");
  Type affine = normalizedType(getInput(), getAxis());
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), TypeRange{getInput().getType(), affine, affine}, rg[0],
      getInput(), getGamma(), getMean(), getRstd(), /*residual=*/Value(),
      /*dgamma_acc=*/Value(), /*dbeta_acc=*/Value(), getAxisAttr());
  out.push_back(grad.getDx());
  if (getGamma())
    out.push_back(grad.getDgamma());
  if (getBeta())
    out.push_back(grad.getDbeta());
  return success();
}

LogicalResult RmsNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &out) {
  if (rg[1])
    return emitOpError("the gradient through rstd is not supported");
  Type affine = normalizedType(getInput(), getAxis());
  auto grad = b.create<RmsNormGradOp>(
      getLoc(), TypeRange{getInput().getType(), affine}, rg[0], getInput(),
      getGamma(), getRstd(), /*residual=*/Value(), /*dgamma_acc=*/Value(),
      getAxisAttr());
  out.push_back(grad.getDx());
  if (getGamma())
    out.push_back(grad.getDgamma());
  return success();
}

int64_t LayerNormOp::getFlops() { return 8 * elementsOf(getInput()); }
int64_t LayerNormGradOp::getFlops() {
  return (getResidual() ? 13 : 12) * elementsOf(getInput());
}
int64_t RmsNormOp::getFlops() { return 5 * elementsOf(getInput()); }
int64_t RmsNormGradOp::getFlops() {
  return (getResidual() ? 10 : 9) * elementsOf(getInput());
}

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

LogicalResult RopeOp::verify() {
  ArrayRef<int64_t> xs = shapeOf(getInput()), ts = shapeOf(getCos());
  if (xs.empty() || xs.size() > 4)
    return emitOpError("needs an input of rank 1 to 4, got ")
           << formatShape(xs);
  if (getResult().getType() != getInput().getType())
    return emitOpError("result must have the input's type");
  if (getSin().getType() != getCos().getType())
    return emitOpError("cos and sin must have one type");
  if (!getElementTypeOrSelf(getCos().getType()).isF32())
    return emitOpError("cos and sin must be f32 tables");
  if (ts.empty() || ts.back() <= 0 || ts.back() % 2 != 0 ||
      ts.back() > xs.back())
    return emitOpError("the tables' last dimension (the rotary width) must "
                       "be even, positive and at most the input's, got ")
           << formatShape(ts) << " for " << formatShape(xs);
  bool fits = ts.size() <= xs.size();
  for (size_t i = 2; fits && i <= ts.size(); ++i)
    fits = ts[ts.size() - i] == 1 || ts[ts.size() - i] == xs[xs.size() - i];
  if (!fits)
    return emitOpError("cos and sin ")
           << formatShape(ts) << " must broadcast to the input "
           << formatShape(xs) << " but for the last dimension";
  return success();
}

/// The map is linear in x with the transposed map as its adjoint; the
/// tables are constants (otc-fuse-patterns fuses no other) and get none.
LogicalResult RopeOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  Value dx;
  if (rg[0])
    dx = b.create<RopeOp>(getLoc(), getInput().getType(), rg[0], getCos(),
                          getSin(), /*transposed=*/!getTransposed(),
                          getInterleaved());
  out.append({dx, Value(), Value()});
  return success();
}

/// Three a rotated element (two products and a sum); the copied ones none.
int64_t RopeOp::getFlops() {
  ArrayRef<int64_t> xs = shapeOf(getInput());
  return 3 * elementsOf(getInput()) / xs.back() * shapeOf(getCos()).back();
}

/// The tables stay FP32 whatever the data's precision.
bool RopeOp::isFp32StatisticsOperand(unsigned index) { return index > 0; }

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be none or tanh, got '")
           << getApproximate() << "'";
  return success();
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be none or tanh, got '")
           << getApproximate() << "'";
  if (getGrad().getType() != getInput().getType() ||
      getResult().getType() != getInput().getType())
    return emitOpError("grad, input and result must share one type");
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(b.create<GeluGradOp>(getLoc(), getType(), rg[0], getInput(),
                                     getApproximateAttr()));
  return success();
}

LogicalResult SiluOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &out) {
  out.push_back(b.create<SiluGradOp>(getLoc(), getType(), rg[0], getInput(),
                                     getAlphaAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// What the cross-entropy and its fused form check alike: [..., C] logits
/// and int64 labels of the leading shape, a known reduction, and a loss of
/// the labels' shape ("none") or a scalar.
/// The labels' type, the reduction and the loss's shape by it.
template <typename OpTy> static LogicalResult verifyLossResult(OpTy op) {
  ArrayRef<int64_t> y = shapeOf(op.getLabels());
  if (!getElementTypeOrSelf(op.getLabels().getType()).isInteger(64))
    return op.emitOpError("labels must be int64");
  StringRef red = op.getReduction();
  if (red != "mean" && red != "sum" && red != "none")
    return op.emitOpError("reduction must be mean, sum or none");
  ArrayRef<int64_t> loss = shapeOf(op.getLoss());
  if (red == "none" ? loss != y : !loss.empty())
    return op.emitOpError("loss shape does not match reduction '")
           << red << "'";
  return success();
}

template <typename OpTy> static LogicalResult verifyLoss(OpTy op) {
  ArrayRef<int64_t> z = shapeOf(op.getLogits()), y = shapeOf(op.getLabels());
  if (z.size() < 2 || y != z.drop_back())
    return op.emitOpError("expects logits [..., C] and labels [...] of the ")
           << "leading shape, got " << formatShape(z) << " and "
           << formatShape(y);
  return verifyLossResult(op);
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLoss(*this)))
    return failure();
  ArrayRef<int64_t> y = shapeOf(getLabels());
  if (shapeOf(getLse()) != y)
    return emitOpError("lse must have the labels' shape");
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  ArrayRef<int64_t> z = shapeOf(getLogits());
  StringRef red = getReduction();
  if (red != "mean" && red != "sum" && red != "none")
    return emitOpError("reduction must be mean, sum or none");
  if (z.size() < 2 || shapeOf(getLabels()) != z.drop_back() ||
      shapeOf(getLse()) != z.drop_back())
    return emitOpError("expects logits [..., C] with labels and lse of the "
                       "leading shape");
  if (shapeOf(getGrad()) != (red == "none" ? z.drop_back() : ArrayRef<int64_t>()))
    return emitOpError("the loss gradient's shape does not match reduction '")
           << red << "'";
  if (getResult().getType() != getLogits().getType())
    return emitOpError("result must have the logits' type");
  return success();
}

LogicalResult CrossEntropyWithGradOp::verify() {
  if (failed(verifyLoss(*this)))
    return failure();
  ArrayRef<int64_t> y = shapeOf(getLabels());
  StringRef red = getReduction();
  if (shapeOf(getGrad()) != shapeOf(getLoss()))
    return emitOpError("the loss gradient's shape does not match reduction '")
           << red << "'";
  if (shapeOf(getRowLoss()) != y)
    return emitOpError("row_loss must have the labels' shape");
  for (Value v : {getGrad(), getLoss(), getRowLoss()})
    if (!getElementTypeOrSelf(v.getType()).isF32())
      return emitOpError("the loss, its gradient and row_loss must be f32");
  if (getDlogits().getType() != getLogits().getType())
    return emitOpError("dlogits must have the logits' type");
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                             SmallVectorImpl<Value> &out) {
  if (rg[1])
    return emitOpError("the gradient through lse is not supported");
  out.push_back(b.create<CrossEntropyGradOp>(
      getLoc(), getLogits().getType(), rg[0], getLogits(), getLabels(),
      getLse(), getReductionAttr(), getIgnoreIndexAttr()));
  out.push_back(Value());
  return success();
}

int64_t CrossEntropyOp::getFlops() { return 4 * elementsOf(getLogits()); }
int64_t CrossEntropyGradOp::getFlops() { return 4 * elementsOf(getLogits()); }
int64_t CrossEntropyWithGradOp::getFlops() {
  return 8 * elementsOf(getLogits());
}

int64_t LinearCrossEntropyWithGradOp::getClasses() {
  return shapeOf(getW())[getWByHidden() ? 1 : 0];
}
int64_t LinearCrossEntropyWithGradOp::getHidden() {
  return shapeOf(getW())[getWByHidden() ? 0 : 1];
}

LogicalResult LinearCrossEntropyWithGradOp::verify() {
  ArrayRef<int64_t> h = shapeOf(getH()), w = shapeOf(getW()),
                    y = shapeOf(getLabels());
  if (h.size() < 2 || w.size() != 2 || h.back() != getHidden() ||
      y != h.drop_back())
    return emitOpError("expects h [..., C], w [V, C] ([C, V] with "
                       "w_by_hidden) and labels [...] of h's leading shape, "
                       "got ")
           << formatShape(h) << ", " << formatShape(w) << " and "
           << formatShape(y);
  if (failed(verifyLossResult(*this)))
    return failure();
  if (shapeOf(getGrad()) != shapeOf(getLoss()))
    return emitOpError("the loss gradient's shape does not match reduction '")
           << getReduction() << "'";
  if (shapeOf(getRowLoss()) != y)
    return emitOpError("row_loss must have the labels' shape");
  for (Value v : {getGrad(), getLoss(), getRowLoss()})
    if (!getElementTypeOrSelf(v.getType()).isF32())
      return emitOpError("the loss, its gradient and row_loss must be f32");
  Type t = getElementTypeOrSelf(getH().getType());
  if (getElementTypeOrSelf(getW().getType()) != t || !(t.isF32() || t.isBF16()))
    return emitOpError("h and w must be both f32 or both bf16");
  Type dwType = getElementTypeOrSelf(getDw().getType());
  if (shapeOf(getDh()) != h || shapeOf(getDw()) != w ||
      !getElementTypeOrSelf(getDh().getType()).isF32() ||
      !(dwType.isF32() || dwType == t))
    return emitOpError("dh must be f32 of h's shape, dw f32 or of w's type "
                       "and shape");
  if (getDwAcc() && getDwAcc().getType() != getDw().getType())
    return emitOpError("dw_acc must have dw's type");
  int64_t rows = numElements(y), chunk = getChunkRows();
  if (chunk < 1 || (rows > 0 && chunk > rows))
    return emitOpError("chunk_rows must lie in [1, ") << rows << "], got "
                                                        << chunk;
  ArrayRef<int64_t> c = shapeOf(getChunk());
  if (c.size() != 2 || c[0] != chunk || c[1] != getClasses() ||
      getElementTypeOrSelf(getChunk().getType()) != t)
    return emitOpError("chunk must be [chunk_rows, V] of h's element type");
  const int64_t classes = getClasses();
  if (getBias() && (shapeOf(getBias()) != ArrayRef<int64_t>{classes} ||
                    getElementTypeOrSelf(getBias().getType()) != t))
    return emitOpError("bias must be [V] of h's element type");
  if (getDbias() &&
      (!getBias() || shapeOf(getDbias()) != ArrayRef<int64_t>{classes} ||
       !getElementTypeOrSelf(getDbias().getType()).isF32()))
    return emitOpError("dbias must be f32 [V], and only with a bias");
  return success();
}

/// Three products of 2 N V C each and the loss's 8 per logit.
int64_t LinearCrossEntropyWithGradOp::getFlops() {
  ArrayRef<int64_t> w = shapeOf(getW());
  int64_t rows = numElements(shapeOf(getLabels()));
  return 6 * rows * w[0] * w[1] + 8 * rows * w[0];
}

//===----------------------------------------------------------------------===//
// FP32 statistics (Fp32StatisticsOpInterface)
//===----------------------------------------------------------------------===//

/// Whether operand `index` of `op` is one of `stats`.
static bool isOperandOf(Operation *op, unsigned index,
                        std::initializer_list<Value> stats) {
  Value v = op->getOperand(index);
  return llvm::is_contained(stats, v);
}

/// The log-sum-exp of each row of scores, and the sinks (FP32 logits
/// whatever the data's precision) and their gradient.
bool AttentionOp::isFp32StatisticsResult(unsigned index) { return index > 0; }
bool AttentionOp::isFp32StatisticsOperand(unsigned index) {
  return getSinks() && isOperandOf(*this, index, {getSinks()});
}
bool AttentionGradOp::isFp32StatisticsOperand(unsigned index) {
  if (getSinks())
    return isOperandOf(*this, index, {getLse(), getSinks()});
  return isOperandOf(*this, index, {getLse()});
}
bool AttentionGradOp::isFp32StatisticsResult(unsigned index) {
  return getSinks() && index + 1 == getNumResults();
}

/// The mean and rstd of each row.
bool LayerNormOp::isFp32StatisticsResult(unsigned index) { return index > 0; }
bool LayerNormGradOp::isFp32StatisticsOperand(unsigned index) {
  return isOperandOf(*this, index, {getMean(), getRstd()});
}

/// The rstd of each row.
bool RmsNormOp::isFp32StatisticsResult(unsigned index) { return index > 0; }
bool RmsNormGradOp::isFp32StatisticsOperand(unsigned index) {
  return isOperandOf(*this, index, {getRstd()});
}

/// The loss and the log-sum-exp of each row; the loss's gradient.
bool CrossEntropyOp::isFp32StatisticsResult(unsigned) { return true; }
bool CrossEntropyGradOp::isFp32StatisticsOperand(unsigned index) {
  return isOperandOf(*this, index, {getGrad(), getLse()});
}
/// The loss, each row's loss and the loss's gradient.
bool CrossEntropyWithGradOp::isFp32StatisticsResult(unsigned index) {
  return index > 0;
}
bool CrossEntropyWithGradOp::isFp32StatisticsOperand(unsigned index) {
  return isOperandOf(*this, index, {getGrad()});
}

//===----------------------------------------------------------------------===//
// column_sum
//===----------------------------------------------------------------------===//

LogicalResult ColumnSumOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getRank() < 1)
    return emitOpError("needs an input of rank 1 or more");
  if (out.getRank() != 1 || out.getDimSize(0) != in.getShape().back())
    return emitOpError("result must be [")
           << in.getShape().back() << "] (the input's last dimension), got "
           << out;
  if (getAcc()) {
    if (getAcc().getType() != out ||
        out.getElementType() != in.getElementType())
      return emitOpError("acc must have the result's type, of the input's "
                         "element type ")
             << in.getElementType() << ", got " << getAcc().getType() << " for "
             << out;
    return success();
  }
  if (!out.getElementType().isF32())
    return emitOpError("result must be f32 (FP32 accumulation), got ")
           << out.getElementType();
  return success();
}

int64_t ColumnSumOp::getFlops() { return elementsOf(getInput()); }
