//===- ShapeUtils.cpp - shape arithmetic shared by otc ---------------------===//
//
// Implements the broadcasting rules of ONNX (the numpy ones): shapes align on
// the right, and a dimension of 1 stretches to the other's size.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeUtils.h"

#include "mlir/IR/BuiltinTypeInterfaces.h"

using namespace llvm;

namespace otc {

ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return mlir::cast<mlir::ShapedType>(v.getType()).getShape();
}

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

int64_t ravelIndex(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

SmallVector<int64_t> unravelIndex(int64_t flat, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> target) {
  SmallVector<int64_t> strides(target.size(), 0);
  int64_t stride = 1;
  size_t lead = target.size() - shape.size();
  for (size_t i = shape.size(); i-- > 0;) {
    strides[lead + i] = shape[i] == 1 && target[lead + i] != 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

SmallVector<int64_t> broadcastAxes(ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> target) {
  SmallVector<int64_t> axes;
  size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < target.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && target[i] != 1))
      axes.push_back(i);
  return axes;
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace otc
