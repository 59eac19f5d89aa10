//===- OtcDialect.cpp - the otc tensor dialect -----------------------------===//
//
// Dialect registration and the verifiers of the otc ops. Verifiers check what
// the ODS type constraints cannot: broadcast compatibility, matmul and
// transpose shapes, and that reshapes keep the element count.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace otc;

#include "ir/OtcDialect.cpp.inc"
#include "ir/OtcInterfaces.cpp.inc"

void OtcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/OtcOps.cpp.inc"
      >();
}

RankedTensorType otc::withShape(Type like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, getElementTypeOrSelf(like));
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return os.str();
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

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::verify() {
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
  if (getElementTypeOrSelf(getLhs().getType()) !=
          getElementTypeOrSelf(getResult().getType()) ||
      getElementTypeOrSelf(getRhs().getType()) !=
          getElementTypeOrSelf(getResult().getType()))
    return emitOpError("operand and result element types must match");
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

LogicalResult ReduceSumOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> expected;
  int64_t prev = -1;
  for (int64_t a : getAxes()) {
    if (a <= prev || a >= (int64_t)in.size())
      return emitOpError("axes must be sorted, unique and within the rank");
    prev = a;
  }
  for (auto [i, d] : llvm::enumerate(in)) {
    if (llvm::is_contained(getAxes(), (int64_t)i)) {
      if (getKeepDims())
        expected.push_back(1);
    } else {
      expected.push_back(d);
    }
  }
  if (ArrayRef<int64_t>(expected) != shapeOf(getResult()))
    return emitOpError("result shape ") << shapeStr(shapeOf(getResult()))
                                        << " should be " << shapeStr(expected);
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

LogicalResult SoftmaxCrossEntropyOp::verify() {
  ArrayRef<int64_t> l = shapeOf(getLogits()), y = shapeOf(getLabels());
  if (l.size() != 2 || y.size() != 1 || y[0] != l[0])
    return emitOpError("expects logits [N, C] and labels [N], got ")
           << shapeStr(l) << " and " << shapeStr(y);
  StringRef red = getReduction();
  if (red != "mean" && red != "sum" && red != "none")
    return emitOpError("reduction must be mean, sum or none");
  ArrayRef<int64_t> out = shapeOf(getLoss());
  if ((red == "none") != (out.size() == 1) || out.size() > 1 ||
      (red == "none" && out[0] != l[0]))
    return emitOpError("loss shape does not match reduction '") << red << "'";
  return success();
}

LogicalResult AdamWOp::verify() {
  Type t = getParam().getType();
  if (getGrad().getType() != t || getM().getType() != t ||
      getV().getType() != t || getNewParam().getType() != t ||
      getNewM().getType() != t || getNewV().getType() != t)
    return emitOpError("param, grad, moments and results must share one type");
  return success();
}

#define GET_OP_CLASSES
#include "ir/OtcOps.cpp.inc"
