//===- KernelBodies.cpp - per-op bodies of generated kernels --------------===//
//
// The entry points of kernel body emission: the work-item count of an op and
// the dispatch of an op to its family's emitter (ElementwiseBodies.cpp,
// DataMovementBodies.cpp, ReductionBodies.cpp, LossBodies.cpp), plus the index and literal helpers those files share
// (BodyUtils.h). Each emitter writes the statements that compute work item
// `i` of the op from the operand pointers into the result pointers; the same
// text serves the cpu loop and the cuda grid-stride loop. Bodies read every
// input they need for an output element before writing it, so an elementwise
// output may share its buffer with an input.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/ShapeUtils.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace otc;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

std::string otc::cTypeOf(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  // BF16 storage with float arithmetic (the otc_bf16 struct of the emitted
  // prelude): loads widen exactly, stores round to nearest even.
  if (t.isBF16())
    return "otc_bf16";
  if (t.isInteger(64))
    return "int64_t";
  if (t.isInteger(32))
    return "int32_t";
  // i1, and the bytes of an FP8 copy (otck.fp8_quantize).
  if (t.isInteger(1) || t.isInteger(8))
    return "uint8_t";
  return "";
}

ArrayRef<int64_t> otc::bodyShapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

int64_t otc::bodyNumel(Value v) { return numElements(bodyShapeOf(v)); }

std::string otc::bodyCType(Value v) {
  return cTypeOf(getElementTypeOrSelf(v.getType()));
}

std::string otc::literal(double v) {
  if (std::isinf(v))
    return v > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(v))
    return "NAN";
  return llvm::formatv("{0:e9}", v).str();
}

std::string otc::floatLiteral(double v) {
  if (std::isinf(v) || std::isnan(v))
    return literal(v);
  return literal(v) + "f";
}

void otc::emitBroadcastIndex(raw_ostream &os, StringRef name,
                             ArrayRef<int64_t> shape,
                             ArrayRef<int64_t> target) {
  if (shape == target) {
    os << "    const int64_t " << name << " = i;\n";
    return;
  }
  if (numElements(shape) == 1) {
    os << "    const int64_t " << name << " = 0;\n";
    return;
  }
  SmallVector<int64_t> strides = broadcastStrides(shape, target);
  os << "    int64_t " << name << " = 0;\n    { int64_t r = i;\n";
  for (size_t d = target.size(); d-- > 0;) {
    if (strides[d])
      os << "      " << name << " += (r % " << target[d] << ") * " << strides[d]
         << ";\n";
    if (d)
      os << "      r /= " << target[d] << ";\n";
  }
  os << "    }\n";
}

AxisView otc::axisView(ArrayRef<int64_t> shape, int64_t axis) {
  AxisView v;
  v.outer = numElements(shape.take_front(axis));
  v.axis = shape[axis];
  v.inner = numElements(shape.drop_front(axis + 1));
  return v;
}

std::string otc::ignoredTest(std::optional<int64_t> ignore, StringRef label) {
  if (!ignore)
    return "false";
  return (label + " == " + std::to_string(*ignore)).str();
}

//===----------------------------------------------------------------------===//
// Work items and dispatch
//===----------------------------------------------------------------------===//

int64_t otc::workItems(Operation *op) {
  for (auto family : {reductionWorkItems, lossWorkItems})
    if (std::optional<int64_t> n = family(op))
      return *n;
  return bodyNumel(op->getResult(0));
}

ItemSteps otc::workItemSteps(Operation *op) {
  for (auto family : {dataMovementItemSteps, reductionItemSteps, lossItemSteps})
    if (std::optional<ItemSteps> n = family(op))
      return *n;
  return ItemSteps();
}

LogicalResult otc::emitBody(Operation *op, BodyContext &c) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type t : types)
    if (cTypeOf(getElementTypeOrSelf(t)).empty())
      return op->emitOpError("cannot emit element type ")
             << getElementTypeOrSelf(t);
  for (auto family : {emitElementwiseBody, emitDataMovementBody,
                      emitReductionBody, emitLossBody})
    if (std::optional<LogicalResult> r = family(op, c))
      return *r;
  return op->emitOpError("has no kernel emitter");
}
