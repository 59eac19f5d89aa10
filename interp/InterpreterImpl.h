//===- InterpreterImpl.h - internals of the reference interpreter -*- C++ -*-===//
//
// Private to interp/: the `Interpreter` class that holds the value of every
// SSA value and evaluates one op at a time, and the index helpers (row-major
// ravel/unravel, numpy broadcasting) its op functions are written with. The op
// functions live in one file per family: Interpreter.cpp (dispatch,
// constants, the entry point), ElementwiseOps.cpp, DataMovementOps.cpp,
// ReductionOps.cpp (reductions and softmax), TrainingOps.cpp (dropout,
// losses, gradient kernels, AdamW) and FusedOps.cpp (the fused transformer
// ops of ir/OtcFusedOps.td and their gradients). Everything is written out
// here rather than taken from ir/ShapeUtils or the code generators, so that
// the interpreter stays an independent oracle.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_INTERP_INTERPRETERIMPL_H
#define OTC_INTERP_INTERPRETERIMPL_H

#include "interp/Interpreter.h"
#include "ir/OtcDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"

#include <cassert>
#include <optional>
#include <vector>

namespace otc::interp::detail {

//===----------------------------------------------------------------------===//
// Index helpers
//===----------------------------------------------------------------------===//

/// Number of elements of `shape` (1 for a scalar).
inline int64_t elementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The static shape of `value`'s tensor type.
inline std::vector<int64_t> shapeOf(mlir::Value value) {
  llvm::ArrayRef<int64_t> shape =
      llvm::cast<mlir::ShapedType>(value.getType()).getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

/// The element type of `value`'s tensor type.
inline mlir::Type elementTypeOf(mlir::Value value) {
  return mlir::getElementTypeOrSelf(value.getType());
}

/// True when `value`'s element type is an integer (or i1) type.
inline bool isIntegerTensor(mlir::Value value) {
  return llvm::isa<mlir::IntegerType>(elementTypeOf(value));
}

/// The multi-index of flat row-major position `flat` in `shape`.
inline std::vector<int64_t> unravel(int64_t flat,
                                    llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// The flat row-major position of multi-index `index` in `shape`.
inline int64_t ravel(llvm::ArrayRef<int64_t> index,
                     llvm::ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

/// The flat position in a tensor of shape `source` of the element that numpy
/// broadcasting maps to multi-index `index` of a larger shape: dimensions are
/// aligned on the right and a source dimension of size 1 is always read at 0.
inline int64_t broadcastSource(llvm::ArrayRef<int64_t> index,
                               llvm::ArrayRef<int64_t> source) {
  size_t offset = index.size() - source.size();
  int64_t flat = 0;
  for (size_t d = 0; d < source.size(); ++d) {
    int64_t i = source[d] == 1 ? 0 : index[offset + d];
    flat = flat * source[d] + i;
  }
  return flat;
}

/// A zero-filled tensor of `shape`.
inline Tensor zeros(std::vector<int64_t> shape) {
  Tensor t;
  t.data.assign(elementCount(shape), 0.0);
  t.shape = std::move(shape);
  return t;
}

/// Splits `shape` around `axis` into (outer, size, inner) element counts, so
/// that element (o, a, i) of the axis view is at flat o * size * inner +
/// a * inner + i.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
  AxisView(llvm::ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < axis ? outer : d == axis ? size : inner) *= shape[d];
  }
  /// Flat position of element `a` along the axis in line (o, i).
  int64_t at(int64_t o, int64_t a, int64_t i) const {
    return (o * size + a) * inner + i;
  }
};

//===----------------------------------------------------------------------===//
// Loss helpers (TrainingOps.cpp), shared by the losses and cross_entropy
//===----------------------------------------------------------------------===//

/// Checks the labels of a loss against the class count and returns, per row,
/// whether it counts (its label is not `ignoreIndex`); emits an error at `op`
/// for a counted label outside [0, classes).
mlir::FailureOr<std::vector<bool>>
activeRows(mlir::Operation *op, const Tensor &labels, int64_t classes,
           std::optional<int64_t> ignoreIndex);

/// The rows of a loss's gradient: activeRows's verdicts and how many count.
struct GradRows {
  std::vector<bool> active;
  int64_t counted = 0;
};

/// activeRows, the number of counted rows, and the reduction checked
/// ("none", "sum" or "mean"; an error at `op` otherwise).
mlir::FailureOr<GradRows> gradRows(mlir::Operation *op, const Tensor &labels,
                                   int64_t classes,
                                   std::optional<int64_t> ignoreIndex,
                                   llvm::StringRef reduction);

/// log(sum_c exp(row[c])) computed as max + log(sum exp(row[c] - max)).
double logSumExp(const double *row, int64_t classes);

/// The gradient scale of row `r` of a loss with `reduction`: grad[r]
/// ("none"), grad ("sum") or grad / `counted` ("mean").
double rowGradScale(llvm::StringRef reduction, const Tensor &grad, int64_t r,
                    int64_t counted);

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

/// Holds the value of every SSA value computed so far and evaluates one op at
/// a time. Each `run` overload implements one op and is defined in the file
/// of its family (see the top of this header).
class Interpreter {
public:
  /// Evaluates `op`; emits an error at its location on failure.
  mlir::LogicalResult evaluate(mlir::Operation *op);

  /// Binds `value` to `tensor`.
  void set(mlir::Value value, Tensor tensor) {
    values[value] = std::move(tensor);
  }

  /// Drops the tensor bound to `value` (its last reader has run).
  void erase(mlir::Value value) { values.erase(value); }

  /// The tensor bound to `value` (which dominates its uses, so it is set).
  const Tensor &get(mlir::Value value) const {
    auto it = values.find(value);
    assert(it != values.end() && "value used before it was computed");
    return it->second;
  }

  /// The tensor bound to optional operand `value`, or nullptr when absent.
  const Tensor *getIfPresent(mlir::Value value) const {
    return value ? &get(value) : nullptr;
  }

  /// Where a sum that may add into an accumulator starts: a copy of the
  /// optional accumulator `acc`, or zeros of `result`'s shape without one.
  Tensor startOfSum(mlir::Value acc, mlir::Value result) const {
    return acc ? get(acc) : zeros(shapeOf(result));
  }

private:
  // Interpreter.cpp
  mlir::LogicalResult run(ConstantOp op);

  // ElementwiseOps.cpp
  mlir::LogicalResult run(AddOp op);
  mlir::LogicalResult run(SubOp op);
  mlir::LogicalResult run(MulOp op);
  mlir::LogicalResult run(DivOp op);
  mlir::LogicalResult run(PowOp op);
  mlir::LogicalResult run(NegOp op);
  mlir::LogicalResult run(ExpOp op);
  mlir::LogicalResult run(LogOp op);
  mlir::LogicalResult run(TanhOp op);
  mlir::LogicalResult run(ReluOp op);
  mlir::LogicalResult run(SqrtOp op);
  mlir::LogicalResult run(ReciprocalOp op);
  mlir::LogicalResult run(ErfOp op);
  mlir::LogicalResult run(SigmoidOp op);
  mlir::LogicalResult run(CosOp op);
  mlir::LogicalResult run(SinOp op);
  mlir::LogicalResult run(CompareOp op);
  mlir::LogicalResult run(SelectOp op);
  mlir::LogicalResult run(CastOp op);

  // DataMovementOps.cpp
  mlir::LogicalResult run(MatMulOp op);
  mlir::LogicalResult run(TransposeOp op);
  mlir::LogicalResult run(ReshapeOp op);
  mlir::LogicalResult run(BroadcastOp op);
  mlir::LogicalResult run(ConcatOp op);
  mlir::LogicalResult run(SliceOp op);
  mlir::LogicalResult run(SliceGradOp op);
  mlir::LogicalResult run(GatherOp op);
  mlir::LogicalResult run(GatherGradOp op);
  mlir::LogicalResult run(TriluOp op);

  // ReductionOps.cpp
  mlir::LogicalResult run(ReduceSumOp op);
  mlir::LogicalResult run(ReduceMaxOp op);
  mlir::LogicalResult run(TopKOp op);
  mlir::LogicalResult run(ExpertMatmulOp op);
  mlir::LogicalResult run(ExpertMatmulWgradOp op);
  mlir::LogicalResult run(SoftmaxOp op);
  mlir::LogicalResult run(SoftmaxGradOp op);
  mlir::LogicalResult run(LogSoftmaxOp op);
  mlir::LogicalResult run(LogSoftmaxGradOp op);

  // TrainingOps.cpp
  mlir::LogicalResult run(DropoutOp op);
  mlir::LogicalResult run(DropoutGradOp op);
  mlir::LogicalResult run(SoftmaxCrossEntropyOp op);
  mlir::LogicalResult run(SoftmaxCrossEntropyGradOp op);
  mlir::LogicalResult run(NllLossOp op);
  /// The reduction shared by the two losses (see TrainingOps.cpp).
  mlir::LogicalResult reduceLoss(mlir::Operation *op, llvm::StringRef reduction,
                                 const std::vector<double> &perRow, double sum,
                                 int64_t counted, mlir::Value loss);
  mlir::LogicalResult run(NllLossGradOp op);
  mlir::LogicalResult run(ReluGradOp op);
  mlir::LogicalResult run(TanhGradOp op);
  mlir::LogicalResult run(AdamWOp op);

  // FusedOps.cpp
  mlir::LogicalResult run(AttentionOp op);
  mlir::LogicalResult run(AttentionGradOp op);
  mlir::LogicalResult run(LayerNormOp op);
  mlir::LogicalResult run(LayerNormGradOp op);
  mlir::LogicalResult run(RmsNormOp op);
  mlir::LogicalResult run(RmsNormGradOp op);
  mlir::LogicalResult run(RopeOp op);
  mlir::LogicalResult run(ColumnSumOp op);
  mlir::LogicalResult run(GeluOp op);
  mlir::LogicalResult run(GeluGradOp op);
  mlir::LogicalResult run(SiluOp op);
  mlir::LogicalResult run(SiluGradOp op);
  mlir::LogicalResult run(CrossEntropyOp op);
  mlir::LogicalResult run(CrossEntropyGradOp op);
  mlir::LogicalResult run(CrossEntropyWithGradOp op);
  mlir::LogicalResult run(LinearCrossEntropyWithGradOp op);

  /// result[i] = fn(lhs[bcast i], rhs[bcast i]) over the result shape.
  template <typename OpT, typename Fn>
  mlir::LogicalResult binary(OpT op, Fn fn) {
    const Tensor &lhs = get(op.getLhs());
    const Tensor &rhs = get(op.getRhs());
    Tensor out = zeros(shapeOf(op.getResult()));
    for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
      std::vector<int64_t> index = unravel(i, out.shape);
      out.data[i] = fn(lhs.data[broadcastSource(index, lhs.shape)],
                       rhs.data[broadcastSource(index, rhs.shape)]);
    }
    set(op.getResult(), std::move(out));
    return mlir::success();
  }

  /// result[i] = fn(input[i]).
  template <typename OpT, typename Fn>
  mlir::LogicalResult unary(OpT op, Fn fn) {
    Tensor out = get(op.getInput());
    for (double &x : out.data)
      x = fn(x);
    set(op.getResult(), std::move(out));
    return mlir::success();
  }

  llvm::DenseMap<mlir::Value, Tensor> values;
  /// The FP8 values of a function body's tensor in one format (0 E4M3, 1
  /// E5M2), quantized once for every FP8 GEMM that reads them (ir/Fp8.h:
  /// one copy per tensor and format).
  llvm::DenseMap<std::pair<mlir::Value, int>, Tensor> fp8Copies;
  const Tensor &fp8Copy(mlir::Value v, int format);
};

} // namespace otc::interp::detail

#endif // OTC_INTERP_INTERPRETERIMPL_H
