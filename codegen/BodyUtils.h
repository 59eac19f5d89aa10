//===- BodyUtils.h - helpers shared by the kernel body emitters -*- C++ -*-===//
//
// Index arithmetic, literal formatting and the dropout keep test used by the
// families of kernel bodies (elementwise, data movement, reductions and
// normalization, losses and optimizer), and the per-family emitter entry
// points that KernelBodies.cpp dispatches to. Shapes are static, so the helpers print
// constant extents and strides into the generated text. Private to codegen/.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_BODYUTILS_H
#define OTC_CODEGEN_BODYUTILS_H

#include "codegen/KernelBodies.h"
#include "ir/OtcDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace otc {

/// The static shape of a tensor value.
llvm::ArrayRef<int64_t> bodyShapeOf(mlir::Value v);

/// The number of elements of a tensor value.
int64_t bodyNumel(mlir::Value v);

/// The C type of `v`'s element type.
std::string bodyCType(mlir::Value v);

/// A C literal of `v` (double precision; `INFINITY`, `NAN` for specials).
std::string literal(double v);

/// A float (f32) C literal of `v`.
std::string floatLiteral(double v);

/// Emits `int64_t <name> = <offset of element i of `target` in `shape`
/// broadcast to `target`>;`.
void emitBroadcastIndex(llvm::raw_ostream &os, llvm::StringRef name,
                        llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<int64_t> target);

/// Emits `int64_t <name>` (at the body's indent): the input offset that
/// slice or transpose `op` reads for the result index `index` (a C
/// expression) decomposes into along the result's first `dims` dimensions
/// (all of them by default; the dimensions after them then are `index`'s
/// run, read from there on).
void emitCopySource(llvm::raw_ostream &os, mlir::Operation *op,
                    llvm::StringRef index, llvm::StringRef name = "src",
                    std::optional<size_t> dims = std::nullopt);

/// An (outer, axis, inner) view of a shape around dimension `axis`: element
/// (o, a, n) sits at offset (o * axis + a) * inner + n.
struct AxisView {
  int64_t outer = 1, axis = 1, inner = 1;
};

/// The (outer, axis, inner) view of `shape` around `axis`.
AxisView axisView(llvm::ArrayRef<int64_t> shape, int64_t axis);

/// The C test "`label` is the ignored index" (`false` without one).
std::string ignoredTest(std::optional<int64_t> ignore, llvm::StringRef label);

//===----------------------------------------------------------------------===//
// Family entry points: each returns std::nullopt when `op` is not one of its
// ops, else the result of emitting it.
//===----------------------------------------------------------------------===//

std::optional<mlir::LogicalResult> emitElementwiseBody(mlir::Operation *op,
                                                       BodyContext &c);
std::optional<mlir::LogicalResult> emitDataMovementBody(mlir::Operation *op,
                                                        BodyContext &c);
std::optional<mlir::LogicalResult> emitReductionBody(mlir::Operation *op,
                                                     BodyContext &c);
std::optional<mlir::LogicalResult> emitLossBody(mlir::Operation *op,
                                                BodyContext &c);

/// Work items of the ops whose items are not their result elements, by
/// family; std::nullopt for ops with one item per result element.
std::optional<int64_t> reductionWorkItems(mlir::Operation *op);
std::optional<int64_t> lossWorkItems(mlir::Operation *op);

/// The steps of one work item of the ops whose items loop, by family;
/// std::nullopt for ops whose item is one step.
std::optional<ItemSteps> dataMovementItemSteps(mlir::Operation *op);
std::optional<ItemSteps> reductionItemSteps(mlir::Operation *op);
std::optional<ItemSteps> lossItemSteps(mlir::Operation *op);

} // namespace otc

#endif // OTC_CODEGEN_BODYUTILS_H
