//===- Interpreter.cpp - reference interpreter of the otc dialect ---------===//
//
// Evaluates a func.func of `otc` ops op by op, in program order, holding every
// value as a row-major array of doubles. Each op has one small function that
// follows the op's description in ir/OtcOps.td with the plainest possible
// loops; broadcasting, index arithmetic and the dropout hash are written out
// here rather than taken from the shape utilities or the code generators, so
// that this file stays an independent oracle.
//
//===----------------------------------------------------------------------===//

#include "interp/Interpreter.h"
#include "ir/OtcDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using otc::interp::Tensor;

//===----------------------------------------------------------------------===//
// Index helpers
//===----------------------------------------------------------------------===//

/// Number of elements of `shape` (1 for a scalar).
static int64_t elementCount(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The static shape of `value`'s tensor type.
static std::vector<int64_t> shapeOf(Value value) {
  ArrayRef<int64_t> shape = cast<ShapedType>(value.getType()).getShape();
  return std::vector<int64_t>(shape.begin(), shape.end());
}

/// True when `value`'s element type is an integer (or i1) type.
static bool isIntegerTensor(Value value) {
  return isa<IntegerType>(getElementTypeOrSelf(value.getType()));
}

/// The multi-index of flat row-major position `flat` in `shape`.
static std::vector<int64_t> unravel(int64_t flat, ArrayRef<int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// The flat row-major position of multi-index `index` in `shape`.
static int64_t ravel(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

/// The flat position in a tensor of shape `source` of the element that numpy
/// broadcasting maps to multi-index `index` of a larger shape: dimensions are
/// aligned on the right and a source dimension of size 1 is always read at 0.
static int64_t broadcastSource(ArrayRef<int64_t> index,
                               ArrayRef<int64_t> source) {
  size_t offset = index.size() - source.size();
  int64_t flat = 0;
  for (size_t d = 0; d < source.size(); ++d) {
    int64_t i = source[d] == 1 ? 0 : index[offset + d];
    flat = flat * source[d] + i;
  }
  return flat;
}

/// A zero-filled tensor of `shape`.
static Tensor zeros(std::vector<int64_t> shape) {
  Tensor t;
  t.data.assign(elementCount(shape), 0.0);
  t.shape = std::move(shape);
  return t;
}

//===----------------------------------------------------------------------===//
// Dropout mask
//===----------------------------------------------------------------------===//

/// The splitmix64 finalizer (Steele, Lea, Flood 2014) applied to `z`: adds the
/// golden-ratio increment, then two xor-shift-multiply rounds and a final
/// xor-shift. All arithmetic is modulo 2^64.
static uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The dropout mask, a pure function of (key, stream, flat element index):
///   h = splitmix64((key * 0x9E3779B97F4A7C15) ^ (stream << 32) ^ index)
///   u = (h >> 11) * 2^-53            (uniform in [0, 1), 53 bits)
///   keep = u >= ratio
/// with key, stream and index as uint64 (key and stream are the two's
/// complement bits of the i64 values) and wrap-around multiplication.
bool otc::interp::dropoutKeep(uint64_t key, uint64_t stream, uint64_t index,
                              double ratio) {
  uint64_t h =
      splitmix64((key * 0x9E3779B97F4A7C15ull) ^ (stream << 32) ^ index);
  double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u >= ratio;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

namespace {

/// Holds the value of every SSA value computed so far and evaluates one op at
/// a time. Each `run` overload implements one op.
class Interpreter {
public:
  /// Evaluates `op`; emits an error at its location on failure.
  LogicalResult evaluate(Operation *op) {
    return llvm::TypeSwitch<Operation *, LogicalResult>(op)
        .Case<otc::ConstantOp, otc::AddOp, otc::SubOp, otc::MulOp, otc::DivOp,
              otc::NegOp, otc::ExpOp, otc::LogOp, otc::TanhOp, otc::ReluOp,
              otc::MatMulOp, otc::TransposeOp, otc::ReshapeOp, otc::BroadcastOp,
              otc::ReduceSumOp, otc::DropoutOp, otc::DropoutGradOp,
              otc::SoftmaxCrossEntropyOp, otc::SoftmaxCrossEntropyGradOp,
              otc::ReluGradOp, otc::TanhGradOp, otc::AdamWOp>(
            [&](auto concrete) { return run(concrete); })
        .Default([&](Operation *other) {
          return other->emitError("cannot interpret '")
                 << other->getName() << "'";
        });
  }

  /// Binds `value` to `tensor`.
  void set(Value value, Tensor tensor) { values[value] = std::move(tensor); }

  /// The tensor bound to `value` (which dominates its uses, so it is set).
  const Tensor &get(Value value) const {
    auto it = values.find(value);
    assert(it != values.end() && "value used before it was computed");
    return it->second;
  }

private:
  LogicalResult run(otc::ConstantOp op);
  LogicalResult run(otc::AddOp op) {
    return binary(op, [](double a, double b) { return a + b; });
  }
  LogicalResult run(otc::SubOp op) {
    return binary(op, [](double a, double b) { return a - b; });
  }
  LogicalResult run(otc::MulOp op) {
    return binary(op, [](double a, double b) { return a * b; });
  }
  LogicalResult run(otc::DivOp op);
  LogicalResult run(otc::NegOp op) {
    return unary(op, [](double x) { return -x; });
  }
  LogicalResult run(otc::ExpOp op) {
    return unary(op, [](double x) { return std::exp(x); });
  }
  LogicalResult run(otc::LogOp op) {
    return unary(op, [](double x) { return std::log(x); });
  }
  LogicalResult run(otc::TanhOp op) {
    return unary(op, [](double x) { return std::tanh(x); });
  }
  LogicalResult run(otc::ReluOp op) {
    return unary(op, [](double x) { return x > 0.0 ? x : 0.0; });
  }
  LogicalResult run(otc::MatMulOp op);
  LogicalResult run(otc::TransposeOp op);
  LogicalResult run(otc::ReshapeOp op);
  LogicalResult run(otc::BroadcastOp op);
  LogicalResult run(otc::ReduceSumOp op);
  LogicalResult run(otc::DropoutOp op);
  LogicalResult run(otc::DropoutGradOp op);
  LogicalResult run(otc::SoftmaxCrossEntropyOp op);
  LogicalResult run(otc::SoftmaxCrossEntropyGradOp op);
  LogicalResult run(otc::ReluGradOp op);
  LogicalResult run(otc::TanhGradOp op);
  LogicalResult run(otc::AdamWOp op);

  /// result[i] = fn(lhs[bcast i], rhs[bcast i]) over the result shape.
  template <typename OpT, typename Fn> LogicalResult binary(OpT op, Fn fn) {
    const Tensor &lhs = get(op.getLhs());
    const Tensor &rhs = get(op.getRhs());
    Tensor out = zeros(shapeOf(op.getResult()));
    for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
      std::vector<int64_t> index = unravel(i, out.shape);
      out.data[i] = fn(lhs.data[broadcastSource(index, lhs.shape)],
                       rhs.data[broadcastSource(index, rhs.shape)]);
    }
    set(op.getResult(), std::move(out));
    return success();
  }

  /// result[i] = fn(input[i]).
  template <typename OpT, typename Fn> LogicalResult unary(OpT op, Fn fn) {
    Tensor out = get(op.getInput());
    for (double &x : out.data)
      x = fn(x);
    set(op.getResult(), std::move(out));
    return success();
  }

  llvm::DenseMap<Value, Tensor> values;
};

} // namespace

/// Decodes the element of type `type` stored little-endian at `bytes` to a
/// double, or nullopt for an unsupported element type.
static std::optional<double> decodeElement(Type type, const char *bytes) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, bytes, sizeof(v));
    return v;
  };
  if (type.isF32())
    return static_cast<double>(load(float()));
  if (type.isF64())
    return load(double());
  if (type.isF16() || type.isBF16()) {
    APFloat f(cast<FloatType>(type).getFloatSemantics(),
              APInt(16, load(uint16_t())));
    return f.convertToDouble();
  }
  if (type.isInteger(64))
    return static_cast<double>(load(int64_t()));
  if (type.isInteger(32))
    return static_cast<double>(load(int32_t()));
  if (type.isInteger(1))
    return load(uint8_t()) ? 1.0 : 0.0;
  return std::nullopt;
}

/// Dense (splat or not) and dense-resource constants, float or integer.
LogicalResult Interpreter::run(otc::ConstantOp op) {
  Tensor out = zeros(shapeOf(op.getResult()));
  Type elementType = getElementTypeOrSelf(op.getResult().getType());
  Attribute value = op.getValue();
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    // getValues repeats a splat value for every element.
    int64_t i = 0;
    if (isa<FloatType>(elementType)) {
      for (APFloat f : dense.getValues<APFloat>())
        out.data[i++] = f.convertToDouble();
    } else if (elementType.isInteger(1)) {
      for (bool b : dense.getValues<bool>())
        out.data[i++] = b ? 1.0 : 0.0;
    } else {
      for (APInt v : dense.getValues<APInt>())
        out.data[i++] = static_cast<double>(v.getSExtValue());
    }
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return op.emitError("constant data of resource '")
             << resource.getRawHandle().getKey() << "' is not available";
    ArrayRef<char> bytes = blob->getData();
    int64_t width =
        elementType.isInteger(1) ? 1 : elementType.getIntOrFloatBitWidth() / 8;
    if (static_cast<int64_t>(bytes.size()) != width * elementCount(out.shape))
      return op.emitError("constant resource has ")
             << bytes.size() << " bytes, expected "
             << width * elementCount(out.shape);
    for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
      std::optional<double> v =
          decodeElement(elementType, bytes.data() + i * width);
      if (!v)
        return op.emitError("unsupported constant element type ")
               << elementType;
      out.data[i] = *v;
    }
  } else {
    return op.emitError("cannot interpret constant attribute ") << value;
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Floating division, or C-style truncating division for integer tensors.
LogicalResult Interpreter::run(otc::DivOp op) {
  if (!isIntegerTensor(op.getResult()))
    return binary(op, [](double a, double b) { return a / b; });
  const Tensor &rhs = get(op.getRhs());
  for (double b : rhs.data)
    if (b == 0.0)
      return op.emitError("integer division by zero");
  return binary(op, [](double a, double b) {
    return static_cast<double>(static_cast<int64_t>(a) /
                               static_cast<int64_t>(b));
  });
}

/// result[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n], where A is
/// lhs (or its last two dims swapped with transpose_lhs), B likewise, and the
/// batch dims of lhs and rhs broadcast to the result's.
LogicalResult Interpreter::run(otc::MatMulOp op) {
  const Tensor &a = get(op.getLhs());
  const Tensor &b = get(op.getRhs());
  Tensor out = zeros(shapeOf(op.getResult()));
  size_t rank = out.shape.size(), rankA = a.shape.size();
  int64_t m = out.shape[rank - 2], n = out.shape[rank - 1];
  bool transA = op.getTransposeLhs(), transB = op.getTransposeRhs();
  int64_t k = transA ? a.shape[rankA - 2] : a.shape[rankA - 1];

  ArrayRef<int64_t> batchOut = ArrayRef<int64_t>(out.shape).drop_back(2);
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(a.shape).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef<int64_t>(b.shape).drop_back(2);
  for (int64_t bi = 0, be = elementCount(batchOut); bi < be; ++bi) {
    std::vector<int64_t> batch = unravel(bi, batchOut);
    int64_t baseA = broadcastSource(batch, batchA) * m * k;
    int64_t baseB = broadcastSource(batch, batchB) * k * n;
    int64_t baseOut = bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) {
          double x =
              transA ? a.data[baseA + l * m + i] : a.data[baseA + i * k + l];
          double y =
              transB ? b.data[baseB + j * k + l] : b.data[baseB + l * n + j];
          sum += x * y;
        }
        out.data[baseOut + i * n + j] = sum;
      }
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// result[idx] = input[idx'] where idx'[permutation[d]] = idx[d].
LogicalResult Interpreter::run(otc::TransposeOp op) {
  const Tensor &in = get(op.getInput());
  ArrayRef<int64_t> perm = op.getPermutation();
  Tensor out = zeros(shapeOf(op.getResult()));
  std::vector<int64_t> source(in.shape.size());
  for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, out.shape);
    for (size_t d = 0; d < perm.size(); ++d)
      source[perm[d]] = index[d];
    out.data[i] = in.data[ravel(source, in.shape)];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// Same row-major data, new shape.
LogicalResult Interpreter::run(otc::ReshapeOp op) {
  Tensor out = get(op.getInput());
  out.shape = shapeOf(op.getResult());
  set(op.getResult(), std::move(out));
  return success();
}

/// result[idx] = input[bcast idx].
LogicalResult Interpreter::run(otc::BroadcastOp op) {
  const Tensor &in = get(op.getInput());
  Tensor out = zeros(shapeOf(op.getResult()));
  for (int64_t i = 0, e = out.data.size(); i < e; ++i)
    out.data[i] = in.data[broadcastSource(unravel(i, out.shape), in.shape)];
  set(op.getResult(), std::move(out));
  return success();
}

/// Adds every input element into the output element whose index is the
/// input's with the reduced axes set to 0. Dropping the size-1 dims without
/// keep_dims does not move any element, so only the shape differs.
LogicalResult Interpreter::run(otc::ReduceSumOp op) {
  const Tensor &in = get(op.getInput());
  std::vector<int64_t> keptShape = in.shape;
  for (int64_t axis : op.getAxes())
    keptShape[axis] = 1;
  Tensor out = zeros(keptShape);
  for (int64_t i = 0, e = in.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, in.shape);
    for (int64_t axis : op.getAxes())
      index[axis] = 0;
    out.data[ravel(index, keptShape)] += in.data[i];
  }
  out.shape = shapeOf(op.getResult());
  set(op.getResult(), std::move(out));
  return success();
}

/// mask[i] = dropoutKeep(key, stream, i, ratio);
/// output[i] = input[i] * mask[i] / (1 - ratio).
LogicalResult Interpreter::run(otc::DropoutOp op) {
  const Tensor &in = get(op.getInput());
  uint64_t key =
      static_cast<uint64_t>(static_cast<int64_t>(get(op.getKey()).data[0]));
  uint64_t stream = static_cast<uint64_t>(op.getStream());
  double ratio = op.getRatio().convertToDouble();
  Tensor out = zeros(in.shape), mask = zeros(in.shape);
  for (int64_t i = 0, e = in.data.size(); i < e; ++i) {
    mask.data[i] = otc::interp::dropoutKeep(key, stream, i, ratio) ? 1.0 : 0.0;
    out.data[i] = in.data[i] * mask.data[i] / (1.0 - ratio);
  }
  set(op.getOutput(), std::move(out));
  set(op.getMask(), std::move(mask));
  return success();
}

/// result[i] = grad[i] * mask[i] / (1 - ratio).
LogicalResult Interpreter::run(otc::DropoutGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &mask = get(op.getMask());
  double ratio = op.getRatio().convertToDouble();
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = grad.data[i] * mask.data[i] / (1.0 - ratio);
  set(op.getResult(), std::move(out));
  return success();
}

/// Checks the labels of a softmax cross-entropy against the class count and
/// returns, per row, whether it counts (its label is not `ignoreIndex`).
static FailureOr<std::vector<bool>>
activeRows(Operation *op, const Tensor &labels, int64_t classes,
           std::optional<int64_t> ignoreIndex) {
  std::vector<bool> active(labels.data.size());
  for (size_t r = 0; r < labels.data.size(); ++r) {
    auto label = static_cast<int64_t>(labels.data[r]);
    active[r] = !(ignoreIndex && label == *ignoreIndex);
    if (active[r] && (label < 0 || label >= classes))
      return op->emitError("label ") << label << " of row " << r
                                     << " is outside [0, " << classes << ")";
  }
  return active;
}

/// log(sum_c exp(row[c])) computed as max + log(sum exp(row[c] - max)).
static double logSumExp(const double *row, int64_t classes) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < classes; ++c)
    max = std::max(max, row[c]);
  double sum = 0.0;
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(row[c] - max);
  return max + std::log(sum);
}

/// loss_n = logsumexp(logits_n) - logits_n[label_n] (0 for ignored rows);
/// "none" returns them, "sum" adds them, "mean" divides the sum by the number
/// of rows not ignored (NaN when every row is ignored, as 0 / 0).
LogicalResult Interpreter::run(otc::SoftmaxCrossEntropyOp op) {
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, op.getIgnoreIndex());
  if (failed(active))
    return failure();
  Tensor perRow = zeros({rows});
  double sum = 0.0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!(*active)[r])
      continue;
    const double *row = logits.data.data() + r * classes;
    perRow.data[r] =
        logSumExp(row, classes) - row[static_cast<int64_t>(labels.data[r])];
    sum += perRow.data[r];
    ++counted;
  }
  StringRef reduction = op.getReduction();
  Tensor out = zeros(shapeOf(op.getLoss()));
  if (reduction == "none")
    out.data = perRow.data;
  else if (reduction == "sum")
    out.data[0] = sum;
  else if (reduction == "mean")
    out.data[0] = sum / static_cast<double>(counted);
  else
    return op.emitError("unknown reduction '") << reduction << "'";
  set(op.getLoss(), std::move(out));
  return success();
}

/// result[n, c] = g_n * (softmax(logits_n)[c] - [c == label_n]), where g_n is
/// grad[n] ("none"), grad ("sum") or grad / (rows not ignored) ("mean"), and 0
/// for ignored rows.
LogicalResult Interpreter::run(otc::SoftmaxCrossEntropyGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &logits = get(op.getLogits());
  const Tensor &labels = get(op.getLabels());
  int64_t rows = logits.shape[0], classes = logits.shape[1];
  FailureOr<std::vector<bool>> active =
      activeRows(op, labels, classes, op.getIgnoreIndex());
  if (failed(active))
    return failure();
  int64_t counted = 0;
  for (bool a : *active)
    counted += a;
  StringRef reduction = op.getReduction();
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return op.emitError("unknown reduction '") << reduction << "'";
  Tensor out = zeros(logits.shape);
  for (int64_t r = 0; r < rows; ++r) {
    if (!(*active)[r])
      continue;
    double g = reduction == "none"  ? grad.data[r]
               : reduction == "sum" ? grad.data[0]
                                    : grad.data[0] / counted;
    const double *row = logits.data.data() + r * classes;
    double lse = logSumExp(row, classes);
    auto label = static_cast<int64_t>(labels.data[r]);
    for (int64_t c = 0; c < classes; ++c) {
      double softmax = std::exp(row[c] - lse);
      out.data[r * classes + c] = g * (softmax - (c == label ? 1.0 : 0.0));
    }
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// result[i] = input[i] > 0 ? grad[i] : 0.
LogicalResult Interpreter::run(otc::ReluGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &in = get(op.getInput());
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = in.data[i] > 0.0 ? grad.data[i] : 0.0;
  set(op.getResult(), std::move(out));
  return success();
}

/// result[i] = grad[i] * (1 - y[i]^2) with y = tanh(x) the forward output.
LogicalResult Interpreter::run(otc::TanhGradOp op) {
  const Tensor &grad = get(op.getGrad());
  const Tensor &y = get(op.getOutput());
  Tensor out = zeros(grad.shape);
  for (int64_t i = 0, e = grad.data.size(); i < e; ++i)
    out.data[i] = grad.data[i] * (1.0 - y.data[i] * y.data[i]);
  set(op.getResult(), std::move(out));
  return success();
}

/// The AdamW update of ir/OtcOps.td, elementwise, with t = step:
///   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2;
///   p' = p - lr (m' / (1 - b1^t) / (sqrt(v' / (1 - b2^t)) + eps) + wd p).
LogicalResult Interpreter::run(otc::AdamWOp op) {
  const Tensor &p = get(op.getParam());
  const Tensor &g = get(op.getGrad());
  const Tensor &m = get(op.getM());
  const Tensor &v = get(op.getV());
  double lr = get(op.getLr()).data[0];
  double t = get(op.getStep()).data[0];
  double b1 = op.getBeta1().convertToDouble();
  double b2 = op.getBeta2().convertToDouble();
  double eps = op.getEpsilon().convertToDouble();
  double wd = op.getWeightDecay().convertToDouble();
  Tensor newP = zeros(p.shape), newM = zeros(p.shape), newV = zeros(p.shape);
  for (int64_t i = 0, e = p.data.size(); i < e; ++i) {
    newM.data[i] = b1 * m.data[i] + (1.0 - b1) * g.data[i];
    newV.data[i] = b2 * v.data[i] + (1.0 - b2) * g.data[i] * g.data[i];
    double mHat = newM.data[i] / (1.0 - std::pow(b1, t));
    double vHat = newV.data[i] / (1.0 - std::pow(b2, t));
    newP.data[i] =
        p.data[i] - lr * (mHat / (std::sqrt(vHat) + eps) + wd * p.data[i]);
  }
  set(op.getNewParam(), std::move(newP));
  set(op.getNewM(), std::move(newM));
  set(op.getNewV(), std::move(newV));
  return success();
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

FailureOr<std::vector<Tensor>> otc::interp::runFunction(func::FuncOp func,
                                                        ArrayRef<Tensor> args) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitError("cannot interpret @")
           << func.getSymName() << ": it must have exactly one block";
  Block &body = func.getBody().front();
  if (args.size() != body.getNumArguments())
    return func.emitError("@")
           << func.getSymName() << " takes " << body.getNumArguments()
           << " arguments, got " << args.size();

  Interpreter interpreter;
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    std::vector<int64_t> expected = shapeOf(arg);
    if (args[i].shape != expected ||
        static_cast<int64_t>(args[i].data.size()) != elementCount(expected))
      return func.emitError("argument ")
             << i << " of @" << func.getSymName() << " does not match its type "
             << arg.getType();
    interpreter.set(arg, args[i]);
  }

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (Value v : ret.getOperands())
        results.push_back(interpreter.get(v));
      return results;
    }
    if (failed(interpreter.evaluate(&op)))
      return failure();
  }
  return func.emitError("@")
         << func.getSymName() << " does not end in func.return";
}
