//===- NormalizationOps.cpp - importing reductions, norms and losses ------===//
//
// Softmax and LogSoftmax (opset 13 semantics: along one axis); ReduceSum,
// ReduceMean (sum times 1/n) and ReduceMax, whose axes are an input since
// opset 13 (ReduceSum) or 18 (ReduceMean, ReduceMax); LayerNormalization
// (opset 17) in primitives, with its Mean and InvStdDev outputs;
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, whose [N, C, d...]
// inputs are flattened to [N*d..., C] rows, with class weights and
// SoftmaxCrossEntropyLoss's log_prob output.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace otc {
namespace detail {

/// The shape of reducing `in` over sorted `axes`.
static SmallVector<int64_t>
reducedShape(ArrayRef<int64_t> in, ArrayRef<int64_t> axes, bool keepDims) {
  SmallVector<int64_t> out;
  for (auto [d, n] : llvm::enumerate(in)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
      out.push_back(n);
    else if (keepDims)
      out.push_back(1);
  }
  return out;
}

Value Importer::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepDims) {
  return builder.createOrFold<ReduceSumOp>(
      currentLoc,
      tensorType(reducedShape(shapeOf(x), axes, keepDims), elemOf(x)), x, axes,
      keepDims);
}

Value Importer::reduceMax(Value x, ArrayRef<int64_t> axes, bool keepDims) {
  return builder.createOrFold<ReduceMaxOp>(
      currentLoc,
      tensorType(reducedShape(shapeOf(x), axes, keepDims), elemOf(x)), x, axes,
      keepDims);
}

void Importer::importSoftmax() {
  Value x = requireFloat(input(0), "the input");
  int64_t axis = normAxis(attrInt("axis", -1), shapeOf(x).size(), "axis");
  auto axisAttr = builder.getI64IntegerAttr(axis);
  if (opType() == "Softmax")
    define(0, builder.create<SoftmaxOp>(currentLoc, x.getType(), x, axisAttr));
  else
    define(0,
           builder.create<LogSoftmaxOp>(currentLoc, x.getType(), x, axisAttr));
}

void Importer::importReduce() {
  Value x = input(0);
  // An integer sum of booleans (a mask's count of padding: Llama 4's
  // `(attention_mask.cumsum(-1) == 0).sum(-1)`) is summed in float32 and
  // cast back: exact while it counts at most 2^24. Other integer sums are
  // refused below.
  Type intType;
  if (!isa<FloatType>(elemOf(x)) && opType() == "ReduceSum")
    if (auto c = x.getDefiningOp<CastOp>();
        c && elemOf(c.getInput()).isInteger(1)) {
      intType = elemOf(x);
      x = builder.createOrFold<CastOp>(
          currentLoc, tensorType(shapeOf(x), builder.getF32Type()),
          c.getInput());
    }
  x = requireFloat(x, "the data input");
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  bool keepDims = attrInt("keepdims", 1) != 0;
  // The axes are an input since opset 13 (ReduceSum) or 18 (the others),
  // an attribute before; whichever the node carries is used.
  SmallVector<int64_t> axes;
  if (hasInput(1))
    axes = constantInts(1, "axes");
  else if (auto a = attrInts("axes"))
    axes = *a;
  if (axes.empty()) {
    // With noop_with_empty_axes (input forms) no axes means no reduction.
    if (attrInt("noop_with_empty_axes", 0)) {
      define(0, x);
      return;
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes)
    a = normAxis(a, rank, "axis");
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());

  StringRef op = opType();
  if (op == "ReduceMax") {
    define(0, reduceMax(x, axes, keepDims));
    return;
  }
  Value y = reduceSum(x, axes, keepDims);
  if (intType) {
    int64_t n = 1;
    for (int64_t a : axes)
      n *= in[a];
    if (n > (int64_t(1) << 24))
      nodeFail("an integer sum of booleans over " + std::to_string(n) +
               " elements: otc sums them in float32, exact up to 2^24");
    y = builder.createOrFold<CastOp>(currentLoc,
                                     tensorType(shapeOf(y), intType), y);
  }
  if (op == "ReduceMean") {
    int64_t n = 1;
    for (int64_t a : axes)
      n *= in[a];
    y = binary<MulOp>(y, scalarF32(1.0 / static_cast<double>(n)));
  }
  define(0, y);
}

SmallVector<int64_t> Importer::normalizedAxes(ArrayRef<int64_t> shape,
                                              int64_t &elements) {
  int64_t rank = shape.size();
  int64_t axis = normAxis(attrInt("axis", -1), rank, "axis");
  SmallVector<int64_t> axes;
  elements = 1;
  for (int64_t d = axis; d < rank; ++d) {
    axes.push_back(d);
    elements *= shape[d];
  }
  return axes;
}

void Importer::importLayerNorm() {
  Value x = requireFloat(input(0), "X");
  Value scale = requireFloat(input(1), "Scale");
  Value bias = getOptional(2);
  ArrayRef<int64_t> in = shapeOf(x);
  double eps = widenFloat(attrFloat("epsilon", 1e-5f));
  int64_t n = 1;
  SmallVector<int64_t> axes = normalizedAxes(in, n);
  Value invN = scalarF32(1.0 / static_cast<double>(n));
  Value mean = binary<MulOp>(reduceSum(x, axes, true), invN);
  Value d = binary<SubOp>(x, mean);
  Value var = binary<MulOp>(reduceSum(binary<MulOp>(d, d), axes, true), invN);
  Value std = builder.createOrFold<SqrtOp>(currentLoc,
                                           binary<AddOp>(var, scalarF32(eps)));
  Value inv = builder.createOrFold<ReciprocalOp>(currentLoc, std);
  Value y = binary<MulOp>(binary<MulOp>(d, inv), scale);
  if (shapeOf(y) != in)
    nodeFail("Scale " + shapeStr(shapeOf(scale)) + " does not broadcast to X " +
             shapeStr(in));
  if (bias) {
    requireFloat(bias, "B");
    y = binary<AddOp>(y, bias);
    if (shapeOf(y) != in)
      nodeFail("B " + shapeStr(shapeOf(bias)) + " does not broadcast to X " +
               shapeStr(in));
  }
  define(0, y);
  // Mean and InvStdDev keep the normalized dimensions as 1s.
  define(1, mean);
  define(2, inv);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

void Importer::flattenLossInputs(Value &scores, Value &labels,
                                 SmallVectorImpl<int64_t> &extra) {
  ArrayRef<int64_t> s = shapeOf(scores), l = shapeOf(labels);
  requireInt(labels, "labels");
  bool ok = s.size() >= 2 && l.size() == s.size() - 1 && l[0] == s[0];
  for (size_t d = 2; ok && d < s.size(); ++d)
    ok = l[d - 1] == s[d];
  if (!ok)
    nodeFail("expects scores [N, C, d...] and labels [N, d...], got " +
             shapeStr(s) + " and " + shapeStr(l));
  extra.assign(s.begin() + 2, s.end());
  if (extra.empty())
    return;
  // [N, C, d...] -> [N, d..., C] -> [N*d..., C]; labels [N*d...].
  SmallVector<int64_t> perm = {0};
  for (int64_t d = 2, e = s.size(); d < e; ++d)
    perm.push_back(d);
  perm.push_back(1);
  SmallVector<int64_t> tshape;
  for (int64_t p : perm)
    tshape.push_back(s[p]);
  int64_t rows = numElements(l);
  int64_t c = s[1];
  Value t = builder.createOrFold<TransposeOp>(
      currentLoc, tensorType(tshape, elemOf(scores)), scores, perm);
  scores = reshape(t, {rows, c});
  labels = reshape(labels, {rows});
}

/// Builds a loss op on [rows, C] scores: a scalar, or [rows] for "none".
template <typename OpTy>
static Value buildLoss(OpBuilder &builder, Location loc, Value scores,
                       Value labels, StringRef reduction, IntegerAttr ignore,
                       int64_t rows) {
  SmallVector<int64_t> out;
  if (reduction == "none")
    out.push_back(rows);
  return builder.create<OpTy>(loc,
                              RankedTensorType::get(out, builder.getF32Type()),
                              scores, labels, reduction, ignore);
}

/// The part of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss they
/// share: attributes, [N, C, d...] flattened to [N*d..., C], the optional
/// class weights, and "none" losses reshaped back to the labels' shape.
///
/// With weights W [C], row n's loss is W[label_n] times the unweighted one,
/// ignored rows weigh 0, and "mean" divides the sum by the sum of the weights
/// of the rows not ignored (ONNX's definition); this is built from the
/// unweighted "none" loss, a Gather of W and a sum.
template <typename LossOp>
Value Importer::importLoss(Value scores, Value labels) {
  std::string reduction = attrString("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    nodeFail("reduction '" + reduction + "' is not mean, sum or none");
  IntegerAttr ignore;
  if (const onnx::AttributeProto *a = attr("ignore_index"))
    ignore = builder.getI64IntegerAttr(a->i());
  Value weights = getOptional(2);
  SmallVector<int64_t> extra;
  SmallVector<int64_t> lshape(shapeOf(labels));
  flattenLossInputs(scores, labels, extra);
  int64_t rows = shapeOf(labels)[0];
  if (!weights) {
    Value loss = buildLoss<LossOp>(builder, currentLoc, scores, labels,
                                   reduction, ignore, rows);
    return reduction == "none" ? reshape(loss, lshape) : loss;
  }

  requireFloat(weights, "the weights input");
  int64_t classes = shapeOf(scores)[1];
  if (shapeOf(weights) != ArrayRef<int64_t>{classes})
    nodeFail("the weights input has shape " + shapeStr(shapeOf(weights)) +
             ", expected [" + Twine(classes) + "] (one per class)");
  Value loss = buildLoss<LossOp>(builder, currentLoc, scores, labels, "none",
                                 ignore, rows);
  // Ignored rows read W[0] (their label may be out of range) and weigh 0.
  Value kept, safeLabels = labels;
  if (ignore) {
    kept = builder.createOrFold<CompareOp>(
        currentLoc, tensorType({rows}, builder.getI1Type()), labels,
        scalarLike(labels, static_cast<double>(ignore.getInt())),
        builder.getStringAttr("ne"));
    safeLabels = builder.createOrFold<SelectOp>(
        currentLoc, labels.getType(), kept, labels, scalarLike(labels, 0));
  }
  Value rowWeights = builder.createOrFold<GatherOp>(
      currentLoc, tensorType({rows}, elemOf(weights)), weights, safeLabels,
      builder.getI64IntegerAttr(0));
  if (kept)
    rowWeights =
        builder.createOrFold<SelectOp>(currentLoc, rowWeights.getType(), kept,
                                       rowWeights, scalarLike(rowWeights, 0));
  loss = binary<MulOp>(loss, rowWeights);
  if (reduction == "none")
    return reshape(loss, lshape);
  Value total = reduceSum(loss, {0}, false);
  if (reduction == "sum")
    return total;
  return binary<DivOp>(total, reduceSum(rowWeights, {0}, false));
}

void Importer::importSoftmaxCrossEntropy() {
  Value scores = requireFloat(input(0), "scores");
  define(0, importLoss<SoftmaxCrossEntropyOp>(scores, input(1)));
  // The second output: the log-probabilities, [N, C, d...] like the scores.
  if (outputUsed(1))
    define(1, builder.create<LogSoftmaxOp>(currentLoc, scores.getType(), scores,
                                           builder.getI64IntegerAttr(1)));
}

void Importer::importNllLoss() {
  Value logp = requireFloat(input(0), "input");
  define(0, importLoss<NllLossOp>(logp, input(1)));
}

} // namespace detail
} // namespace otc
