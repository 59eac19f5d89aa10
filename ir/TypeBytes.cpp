//===- TypeBytes.cpp - bytes of otc types in memory ------------------------===//
//
// The byte sizes of ir/TypeBytes.h.
//
//===----------------------------------------------------------------------===//

#include "ir/TypeBytes.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

int64_t otc::storageBytes(Type elementType) {
  if (elementType.isInteger(1))
    return 1;
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t otc::byteSize(ShapedType type) {
  return numElements(type.getShape()) * storageBytes(type.getElementType());
}

int64_t otc::byteSize(Value value) {
  return byteSize(cast<ShapedType>(value.getType()));
}
