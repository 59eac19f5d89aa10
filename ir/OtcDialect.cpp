//===- OtcDialect.cpp - the otc tensor dialect -----------------------------===//
//
// Dialect registration and the verifiers of the otc ops. Verifiers check what
// the ODS type constraints cannot: broadcast compatibility, matmul and
// transpose shapes, and that reshapes keep the element count.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/Fp8.h"
#include "ir/ShapeUtils.h"
#include "ir/TargetRegistry.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace otc;

#include "ir/OtcDialect.cpp.inc"
#include "ir/OtcInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/OtcAttrs.cpp.inc"

void OtcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/OtcOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/OtcAttrs.cpp.inc"
      >();
  // The targets' models of these ops (what a GPU target launches for each).
  attachTargetInterfaces(*this);
}

RankedTensorType otc::withShape(Type like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, getElementTypeOrSelf(like));
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  return formatShape(shape);
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange,
    DictionaryAttr attributes, OpaqueProperties properties, RegionRange,
    SmallVectorImpl<Type> &inferred) {
  auto *props = properties.as<Properties *>();
  TypedAttr value =
      props ? dyn_cast_if_present<TypedAttr>(props->value) : TypedAttr();
  if (!value)
    value = dyn_cast_if_present<TypedAttr>(attributes.get("value"));
  if (!value)
    return failure();
  inferred.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Checks that the operands broadcast to the result and share its element type.
static LogicalResult verifyBroadcastBinary(Operation *op) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value res = op->getResult(0);
  Type et = getElementTypeOrSelf(res.getType());
  if (getElementTypeOrSelf(lhs.getType()) != et ||
      getElementTypeOrSelf(rhs.getType()) != et)
    return op->emitOpError("operand and result element types must match");
  auto shape = broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  if (!shape)
    return op->emitOpError("operand shapes ")
           << shapeStr(shapeOf(lhs)) << " and " << shapeStr(shapeOf(rhs))
           << " do not broadcast";
  if (ArrayRef<int64_t>(*shape) != shapeOf(res))
    return op->emitOpError("result shape ")
           << shapeStr(shapeOf(res)) << " is not the broadcast shape "
           << shapeStr(*shape);
  return success();
}

LogicalResult AddOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult SubOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult MulOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult DivOp::verify() { return verifyBroadcastBinary(*this); }
LogicalResult PowOp::verify() { return verifyBroadcastBinary(*this); }

LogicalResult CompareOp::verify() {
  static const char *preds[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  if (!llvm::is_contained(preds, getPredicate()))
    return emitOpError("unknown predicate '") << getPredicate() << "'";
  if (getElementTypeOrSelf(getLhs().getType()) !=
      getElementTypeOrSelf(getRhs().getType()))
    return emitOpError("operand element types must match");
  auto shape = broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()));
  if (!shape || ArrayRef<int64_t>(*shape) != shapeOf(getResult()))
    return emitOpError("result shape must be the broadcast of ")
           << shapeStr(shapeOf(getLhs())) << " and "
           << shapeStr(shapeOf(getRhs()));
  return success();
}

LogicalResult SelectOp::verify() {
  Type et = getElementTypeOrSelf(getResult().getType());
  if (getElementTypeOrSelf(getLhs().getType()) != et ||
      getElementTypeOrSelf(getRhs().getType()) != et)
    return emitOpError("operand and result element types must match");
  auto shape = broadcastShapes(shapeOf(getLhs()), shapeOf(getRhs()));
  if (shape)
    shape = broadcastShapes(*shape, shapeOf(getCondition()));
  if (!shape || ArrayRef<int64_t>(*shape) != shapeOf(getResult()))
    return emitOpError("result shape must be the broadcast of the operands");
  return success();
}

LogicalResult CastOp::verify() {
  if (shapeOf(getInput()) != shapeOf(getResult()))
    return emitOpError("cast keeps the shape");
  return success();
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::verify() {
  if (failed(verifyGemmFp8(*this, getElementTypeOrSelf(getLhs().getType()),
                           getElementTypeOrSelf(getRhs().getType()))))
    return failure();
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs()),
                    r = shapeOf(getResult());
  if (a.size() < 2 || b.size() < 2)
    return emitOpError("operands must have rank >= 2");
  int64_t m = getTransposeLhs() ? a[a.size() - 1] : a[a.size() - 2];
  int64_t k = getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
  int64_t kb = getTransposeRhs() ? b[b.size() - 1] : b[b.size() - 2];
  int64_t n = getTransposeRhs() ? b[b.size() - 2] : b[b.size() - 1];
  if (k != kb)
    return emitOpError("contracting dimensions differ: ")
           << shapeStr(a) << " x " << shapeStr(b);
  auto batch = broadcastShapes(a.drop_back(2), b.drop_back(2));
  if (!batch)
    return emitOpError("batch dimensions do not broadcast: ")
           << shapeStr(a) << " x " << shapeStr(b);
  SmallVector<int64_t> expected(*batch);
  expected.push_back(m);
  expected.push_back(n);
  if (ArrayRef<int64_t>(expected) != r)
    return emitOpError("result shape ") << shapeStr(r) << " should be "
                                        << shapeStr(expected);
  // Operands share one element type; the result has it too, or is f32 for
  // bf16 operands (bf16 inputs, fp32 accumulation: mixed precision).
  Type in = getElementTypeOrSelf(getLhs().getType());
  Type out = getElementTypeOrSelf(getResult().getType());
  if (getElementTypeOrSelf(getRhs().getType()) != in ||
      (out != in && !(in.isBF16() && out.isF32())))
    return emitOpError("operand and result element types must match (or "
                       "bf16 operands with an f32 result)");
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  ArrayRef<int64_t> perm = getPermutation();
  if (perm.size() != in.size() || out.size() != in.size())
    return emitOpError("permutation size must equal the rank");
  SmallVector<bool> seen(in.size(), false);
  for (auto [i, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= (int64_t)in.size() || seen[p])
      return emitOpError("permutation is not a permutation of [0, rank)");
    seen[p] = true;
    if (out[i] != in[p])
      return emitOpError("result dimension ") << i << " should be " << in[p];
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (numElements(shapeOf(getInput())) != numElements(shapeOf(getResult())))
    return emitOpError("cannot reshape ")
           << shapeStr(shapeOf(getInput())) << " to "
           << shapeStr(shapeOf(getResult()));
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto shape = broadcastShapes(shapeOf(getInput()), shapeOf(getResult()));
  if (!shape || ArrayRef<int64_t>(*shape) != shapeOf(getResult()))
    return emitOpError("cannot broadcast ")
           << shapeStr(shapeOf(getInput())) << " to "
           << shapeStr(shapeOf(getResult()));
  return success();
}

/// Checks the axes and result shape of a reduction.
static LogicalResult verifyReduction(Operation *op, Value input,
                                     ArrayRef<int64_t> axes, bool keepDims,
                                     Value result) {
  ArrayRef<int64_t> in = shapeOf(input);
  SmallVector<int64_t> expected;
  int64_t prev = -1;
  for (int64_t a : axes) {
    if (a <= prev || a >= (int64_t)in.size())
      return op->emitOpError("axes must be sorted, unique and within the rank");
    prev = a;
  }
  for (auto [i, d] : llvm::enumerate(in)) {
    if (llvm::is_contained(axes, (int64_t)i)) {
      if (keepDims)
        expected.push_back(1);
    } else {
      expected.push_back(d);
    }
  }
  if (ArrayRef<int64_t>(expected) != shapeOf(result))
    return op->emitOpError("result shape ")
           << shapeStr(shapeOf(result)) << " should be " << shapeStr(expected);
  return success();
}

LogicalResult ReduceSumOp::verify() {
  return verifyReduction(*this, getInput(), getAxes(), getKeepDims(),
                         getResult());
}

LogicalResult ReduceMaxOp::verify() {
  return verifyReduction(*this, getInput(), getAxes(), getKeepDims(),
                         getResult());
}

LogicalResult TopKOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  if (in.empty())
    return emitOpError("input must have rank 1 or more");
  int64_t k = getK();
  if (k < 1 || k > in.back())
    return emitOpError("k = ") << k << " must be in [1, " << in.back()
                               << "] (the last dimension)";
  SmallVector<int64_t> want(in.drop_back());
  want.push_back(k);
  if (out != ArrayRef<int64_t>(want))
    return emitOpError("result shape ") << shapeStr(out) << " should be "
                                        << shapeStr(want);
  if (!getElementTypeOrSelf(getResult().getType()).isInteger(64))
    return emitOpError("result must be i64 indices");
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= (int64_t)out.size())
    return emitOpError("axis ") << axis << " is out of range";
  int64_t total = 0;
  for (Value in : getInputs()) {
    ArrayRef<int64_t> s = shapeOf(in);
    if (getElementTypeOrSelf(in.getType()) !=
        getElementTypeOrSelf(getResult().getType()))
      return emitOpError("operand and result element types must match");
    if (s.size() != out.size())
      return emitOpError("inputs must have the result's rank");
    for (int64_t d = 0, e = s.size(); d < e; ++d)
      if (d != axis && s[d] != out[d])
        return emitOpError("input shape ")
               << shapeStr(s) << " does not match " << shapeStr(out)
               << " off the axis";
    total += s[axis];
  }
  if (total != out[axis])
    return emitOpError("result dimension ") << axis << " should be " << total;
  return success();
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  if (starts.size() != in.size() || strides.size() != in.size() ||
      out.size() != in.size())
    return emitOpError("needs one start and stride per dimension");
  for (size_t d = 0; d < in.size(); ++d) {
    if (strides[d] <= 0)
      return emitOpError("strides must be positive");
    if (out[d] > 0 &&
        (starts[d] < 0 || starts[d] + (out[d] - 1) * strides[d] >= in[d]))
      return emitOpError("window leaves the input in dimension ") << d;
  }
  return success();
}

/// The shape of `data` gathered along `axis` by `indices`: data's
/// dimensions before the axis, the indices', then data's after it.
static SmallVector<int64_t> gatheredShape(ArrayRef<int64_t> data, int64_t axis,
                                          ArrayRef<int64_t> indices) {
  SmallVector<int64_t> shape(data.take_front(axis));
  llvm::append_range(shape, indices);
  llvm::append_range(shape, data.drop_front(axis + 1));
  return shape;
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> data = shapeOf(getData());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= (int64_t)data.size())
    return emitOpError("axis ") << axis << " is out of range";
  SmallVector<int64_t> expected =
      gatheredShape(data, axis, shapeOf(getIndices()));
  if (ArrayRef<int64_t>(expected) != shapeOf(getResult()))
    return emitOpError("result shape ") << shapeStr(shapeOf(getResult()))
                                        << " should be " << shapeStr(expected);
  if (getElementTypeOrSelf(getData().getType()) !=
      getElementTypeOrSelf(getResult().getType()))
    return emitOpError("data and result element types must match");
  return success();
}

GatherGradOp otc::narrowGatherGrad(CastOp round) {
  auto gather = round.getInput().getDefiningOp<GatherGradOp>();
  if (!gather || gather.getAcc() || !round.getInput().hasOneUse() ||
      !getElementTypeOrSelf(round.getType()).isBF16() ||
      !getElementTypeOrSelf(gather.getType()).isF32())
    return nullptr;
  auto widen = gather.getGrad().getDefiningOp<CastOp>();
  if (!widen || !getElementTypeOrSelf(widen.getInput().getType()).isBF16())
    return nullptr;
  OpBuilder b(round);
  auto narrow = b.create<GatherGradOp>(gather.getLoc(), round.getType(),
                                       widen.getInput(), gather.getIndices(),
                                       /*acc=*/Value(), gather.getAxisAttr());
  round.getResult().replaceAllUsesWith(narrow.getResult());
  round.erase();
  gather.erase();
  if (widen->use_empty())
    widen.erase();
  return narrow;
}

int64_t ExpertMatmulOp::getExperts() { return shapeOf(getW())[0]; }
int64_t ExpertMatmulOp::getDepth() { return shapeOf(getX())[1]; }
int64_t ExpertMatmulOp::getWidth() { return shapeOf(getResult())[1]; }

/// The checks otc.expert_matmul and its weight gradient share: x [N, K],
/// ids [N] int64, the other [N, O], experts [E, K, O] ([E, O, K] when
/// `transposed`), float data of one storage type and a result of FP32 or
/// that type.
static LogicalResult verifyExpertShapes(Operation *op, Value x, Value ids,
                                        Value other, Value experts,
                                        bool transposed) {
  ArrayRef<int64_t> xs = shapeOf(x), is = shapeOf(ids), os = shapeOf(other),
                    es = shapeOf(experts);
  if (xs.size() != 2 || os.size() != 2 || es.size() != 3 || is.size() != 1)
    return op->emitOpError("needs rows [N, K], indices [N], the other side "
                           "[N, O] and experts [E, K, O]");
  if (!getElementTypeOrSelf(ids.getType()).isInteger(64))
    return op->emitOpError("indices must be int64");
  int64_t k = transposed ? es[2] : es[1], o = transposed ? es[1] : es[2];
  if (is[0] != xs[0] || os[0] != xs[0] || k != xs[1] || o != os[1])
    return op->emitOpError("shapes ")
           << shapeStr(xs) << ", " << shapeStr(is) << ", " << shapeStr(os)
           << " and experts " << shapeStr(es) << " do not agree"
           << (transposed ? " (experts [E, O, K])" : " (experts [E, K, O])");
  Type et = getElementTypeOrSelf(x.getType());
  for (Value v : {other, experts})
    if (v != op->getResult(0) && getElementTypeOrSelf(v.getType()) != et)
      return op->emitOpError("float operands must share one element type");
  if (!getElementTypeOrSelf(op->getResult(0).getType()).isF32() &&
      getElementTypeOrSelf(op->getResult(0).getType()) != et)
    return op->emitOpError("result must be f32 or the operands' type");
  return success();
}

LogicalResult ExpertMatmulOp::verify() {
  return verifyExpertShapes(*this, getX(), getIds(), getResult(), getW(),
                            getTransposeRhs());
}

LogicalResult ExpertMatmulWgradOp::verify() {
  if (failed(verifyExpertShapes(*this, getX(), getIds(), getDy(), getResult(),
                                getTransposeRhs())))
    return failure();
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("acc ")
           << getAcc().getType() << " must have the result's type "
           << getResult().getType();
  return success();
}

LogicalResult GatherGradOp::verify() {
  ArrayRef<int64_t> data = shapeOf(getResult());
  int64_t axis = getAxis();
  if (axis < 0 || axis >= (int64_t)data.size())
    return emitOpError("axis ") << axis << " is out of range";
  SmallVector<int64_t> expected =
      gatheredShape(data, axis, shapeOf(getIndices()));
  if (ArrayRef<int64_t>(expected) != shapeOf(getGrad()))
    return emitOpError("grad shape ") << shapeStr(shapeOf(getGrad()))
                                      << " should be " << shapeStr(expected);
  if (getElementTypeOrSelf(getGrad().getType()) !=
      getElementTypeOrSelf(getResult().getType()))
    return emitOpError("grad and result element types must match");
  if (!getElementTypeOrSelf(getIndices().getType()).isInteger(64))
    return emitOpError("indices must be int64");
  if (getAcc() && getAcc().getType() != getResult().getType())
    return emitOpError("acc ")
           << getAcc().getType() << " must have the result's type "
           << getResult().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Dropout, losses, optimizer
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  if (getOutput().getType() != getInput().getType() ||
      shapeOf(getMask()) != shapeOf(getInput()))
    return emitOpError("output and mask must have the input's shape");
  return success();
}

/// Checks [N, C] scores, [N] labels and the loss shape of `reduction`.
static LogicalResult verifyLoss(Operation *op, Value scores, Value labels,
                                StringRef red, Value loss) {
  ArrayRef<int64_t> l = shapeOf(scores), y = shapeOf(labels);
  if (l.size() != 2 || y.size() != 1 || y[0] != l[0])
    return op->emitOpError("expects logits [N, C] and labels [N], got ")
           << shapeStr(l) << " and " << shapeStr(y);
  if (red != "mean" && red != "sum" && red != "none")
    return op->emitOpError("reduction must be mean, sum or none");
  ArrayRef<int64_t> out = shapeOf(loss);
  if ((red == "none") != (out.size() == 1) || out.size() > 1 ||
      (red == "none" && out[0] != l[0]))
    return op->emitOpError("loss shape does not match reduction '")
           << red << "'";
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  return verifyLoss(*this, getLogits(), getLabels(), getReduction(),
                    getLoss());
}

LogicalResult NllLossOp::verify() {
  return verifyLoss(*this, getInput(), getLabels(), getReduction(), getLoss());
}

LogicalResult AdamWOp::verify() {
  Type t = getParam().getType();
  if (getM().getType() != t || getV().getType() != t ||
      getNewParam().getType() != t || getNewM().getType() != t ||
      getNewV().getType() != t)
    return emitOpError("param, moments and results must share one type");
  if (Value copy = getCopy()) {
    auto c = cast<RankedTensorType>(copy.getType());
    auto p = cast<RankedTensorType>(t);
    if (c.getShape() != p.getShape() || !c.getElementType().isBF16() ||
        !p.getElementType().isF32())
      return emitOpError("copy must be bf16 of an f32 param's shape, got ")
             << c;
  }
  // The gradient: the parameter's type, or BF16 of its shape under FP32
  // masters (read widened, exactly).
  auto g = cast<RankedTensorType>(getGrad().getType());
  auto p = cast<RankedTensorType>(t);
  if (g != p && !(g.getShape() == p.getShape() && g.getElementType().isBF16() &&
                  p.getElementType().isF32()))
    return emitOpError("grad must have the param's type, or be bf16 of its "
                       "shape for f32 params, got ")
           << g;
  return success();
}

#define GET_OP_CLASSES
#include "ir/OtcOps.cpp.inc"

Value otc::throughReshapes(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}
