//===- ShapeUtils.h - shape arithmetic shared by otc -------------*- C++ -*-===//
//
// Broadcasting and index helpers used by the verifiers, the gradient rules,
// the importer and the code generators: pure functions on shapes, and the
// static shape of a tensor value.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_SHAPEUTILS_H
#define OTC_IR_SHAPEUTILS_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>
#include <string>

namespace otc {

/// The numpy/ONNX broadcast of two shapes, or nullopt when they are
/// incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// The static shape of a tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

/// Number of elements of a shape (1 for a scalar).
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`: the elements between neighbours along
/// each axis.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// The row-major position of `index` in `shape`, and back.
int64_t ravelIndex(llvm::ArrayRef<int64_t> index,
                   llvm::ArrayRef<int64_t> shape);
llvm::SmallVector<int64_t> unravelIndex(int64_t flat,
                                        llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`, with stride 0 for the dimensions that
/// `shape` broadcasts along when it is broadcast to `target` (right-aligned).
/// The result has target's rank.
llvm::SmallVector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<int64_t> target);

/// The axes of `target` that `shape` is broadcast along (including the
/// leading ones that `shape` lacks), sorted.
llvm::SmallVector<int64_t> broadcastAxes(llvm::ArrayRef<int64_t> shape,
                                         llvm::ArrayRef<int64_t> target);

/// "[2, 3]": a shape as error messages print it.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace otc

#endif // OTC_IR_SHAPEUTILS_H
