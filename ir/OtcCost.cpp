//===- OtcCost.cpp - FLOP counts of the otc ops
//----------------------------===//
//
// The CostOpInterface methods of the ops whose work is not one operation per
// result element or whose reads are not their whole operands, and the
// helpers behind the interface's defaults. FLOPs
// count a multiply-add as two; they rank recomputation choices and feed the
// report, so they aim at proportions, not cycle counts.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

using namespace mlir;
using namespace otc;

static int64_t elementsOf(Value v) {
  return numElements(cast<ShapedType>(v.getType()).getShape());
}

int64_t otc::detail::resultElements(Operation *op) {
  int64_t n = 0;
  for (Value r : op->getResults())
    n += elementsOf(r);
  return n;
}

int64_t otc::detail::operandBytes(Operation *op) {
  int64_t n = 0;
  for (Value v : op->getOperands())
    n += byteSize(v);
  return n;
}

int64_t otc::detail::resultBytes(Operation *op) {
  int64_t n = 0;
  for (Value v : op->getResults())
    n += byteSize(v);
  return n;
}

// Products: 2·M·N·K per batch entry.
int64_t MatMulOp::getFlops() {
  ArrayRef<int64_t> a = cast<ShapedType>(getLhs().getType()).getShape();
  int64_t k = getTransposeLhs() ? a[a.size() - 2] : a.back();
  return 2 * elementsOf(getResult()) * k;
}

// Data movement computes nothing.
int64_t ConstantOp::getFlops() { return 0; }
int64_t TransposeOp::getFlops() { return 0; }
int64_t ReshapeOp::getFlops() { return 0; }
int64_t BroadcastOp::getFlops() { return 0; }
int64_t ConcatOp::getFlops() { return 0; }
int64_t SliceOp::getFlops() { return 0; }
int64_t SliceGradOp::getFlops() { return 0; }
int64_t GatherOp::getFlops() { return 0; }
int64_t CastOp::getFlops() { return 0; }

// A window and a gather read only the elements they return (and the
// indices), not their whole input.
int64_t SliceOp::getBytesRead() { return detail::resultBytes(getOperation()); }
int64_t GatherOp::getBytesRead() {
  return detail::resultBytes(getOperation()) + byteSize(getIndices());
}

// Reductions: one operation per input element.
int64_t ReduceSumOp::getFlops() { return elementsOf(getInput()); }
int64_t ReduceMaxOp::getFlops() { return elementsOf(getInput()); }
// Top-k: k comparisons per input element.
int64_t TopKOp::getFlops() { return elementsOf(getInput()) * getK(); }
// Expert products: a multiply-add per row, depth and width element.
int64_t ExpertMatmulOp::getFlops() {
  return 2 * elementsOf(getX()) * getWidth();
}
int64_t ExpertMatmulWgradOp::getFlops() {
  return 2 * elementsOf(getX()) * cast<ShapedType>(getDy().getType()).getDimSize(1);
}
int64_t GatherGradOp::getFlops() { return elementsOf(getGrad()); }

// A gather gradient reads the gradient and the indices; it writes its whole
// result (the rows no index picks are zeros), or, adding into `acc`, reads
// and writes only the rows the indices pick.
int64_t GatherGradOp::getPickedRowBytes() {
  int64_t all = elementsOf(getResult());
  if (all == 0)
    return 0;
  return std::min(elementsOf(getGrad()), all) * (byteSize(getResult()) / all);
}
int64_t GatherGradOp::getBytesRead() {
  return byteSize(getGrad()) + byteSize(getIndices()) +
         (getAcc() ? getPickedRowBytes() : 0);
}
int64_t GatherGradOp::getBytesWritten() {
  return getAcc() ? getPickedRowBytes() : byteSize(getResult());
}

// Normalizations: max, exp, sum, divide (or log) and the subtraction.
int64_t SoftmaxOp::getFlops() { return 5 * elementsOf(getInput()); }
int64_t LogSoftmaxOp::getFlops() { return 5 * elementsOf(getInput()); }
int64_t SoftmaxGradOp::getFlops() { return 5 * elementsOf(getResult()); }
int64_t LogSoftmaxGradOp::getFlops() { return 5 * elementsOf(getResult()); }
int64_t SoftmaxCrossEntropyOp::getFlops() {
  return 5 * elementsOf(getLogits());
}
int64_t SoftmaxCrossEntropyGradOp::getFlops() {
  return 5 * elementsOf(getResult());
}

// AdamW: two moment updates, bias corrections, the square root, the step
// and the decay, about a dozen operations per parameter.
int64_t AdamWOp::getFlops() { return 12 * elementsOf(getParam()); }
