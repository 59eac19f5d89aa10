//===- ElementwiseOps.cpp - elementwise ops of the reference interpreter --===//
//
// The elementwise ops: the broadcasting binary arithmetic (add, sub, mul,
// div, pow), the unary float functions, comparisons (an i1 result held as
// 0.0 / 1.0), select, and cast between element types. Every value is a
// double; integer tensors hold exact integers, so integer arithmetic is done
// on int64 and converted back.
//
//===----------------------------------------------------------------------===//

#include "interp/InterpreterImpl.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>

using namespace mlir;
using otc::interp::Tensor;
using namespace otc::interp::detail;

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::run(otc::AddOp op) {
  return binary(op, [](double a, double b) { return a + b; });
}

LogicalResult Interpreter::run(otc::SubOp op) {
  return binary(op, [](double a, double b) { return a - b; });
}

LogicalResult Interpreter::run(otc::MulOp op) {
  return binary(op, [](double a, double b) { return a * b; });
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

/// lhs ^ rhs with std::pow (a negative base with a non-integer exponent gives
/// NaN); for integer tensors the result is truncated toward zero, as numpy's
/// integer power of the ONNX reference does for non-negative exponents.
LogicalResult Interpreter::run(otc::PowOp op) {
  if (!isIntegerTensor(op.getResult()))
    return binary(op, [](double a, double b) { return std::pow(a, b); });
  return binary(op, [](double a, double b) { return std::trunc(std::pow(a, b)); });
}

//===----------------------------------------------------------------------===//
// Unary float functions
//===----------------------------------------------------------------------===//

LogicalResult Interpreter::run(otc::NegOp op) {
  return unary(op, [](double x) { return -x; });
}

LogicalResult Interpreter::run(otc::ExpOp op) {
  return unary(op, [](double x) { return std::exp(x); });
}

LogicalResult Interpreter::run(otc::LogOp op) {
  return unary(op, [](double x) { return std::log(x); });
}

LogicalResult Interpreter::run(otc::TanhOp op) {
  return unary(op, [](double x) { return std::tanh(x); });
}

LogicalResult Interpreter::run(otc::ReluOp op) {
  return unary(op, [](double x) { return x > 0.0 ? x : 0.0; });
}

LogicalResult Interpreter::run(otc::SqrtOp op) {
  return unary(op, [](double x) { return std::sqrt(x); });
}

LogicalResult Interpreter::run(otc::ReciprocalOp op) {
  return unary(op, [](double x) { return 1.0 / x; });
}

LogicalResult Interpreter::run(otc::ErfOp op) {
  return unary(op, [](double x) { return std::erf(x); });
}

LogicalResult Interpreter::run(otc::CosOp op) {
  return unary(op, [](double x) { return std::cos(x); });
}

LogicalResult Interpreter::run(otc::SinOp op) {
  return unary(op, [](double x) { return std::sin(x); });
}

/// 1 / (1 + e^-x), written as e^x / (1 + e^x) for negative x so that neither
/// form overflows.
LogicalResult Interpreter::run(otc::SigmoidOp op) {
  return unary(op, [](double x) {
    if (x >= 0.0)
      return 1.0 / (1.0 + std::exp(-x));
    double e = std::exp(x);
    return e / (1.0 + e);
  });
}

//===----------------------------------------------------------------------===//
// Comparison, selection, conversion
//===----------------------------------------------------------------------===//

/// result[i] = (lhs[bcast i] PRED rhs[bcast i]) ? 1 : 0 for the predicates
/// eq ne lt le gt ge (NaN compares unequal to everything, as in C).
LogicalResult Interpreter::run(otc::CompareOp op) {
  StringRef p = op.getPredicate();
  auto as = [](bool b) { return b ? 1.0 : 0.0; };
  if (p == "eq")
    return binary(op, [&](double a, double b) { return as(a == b); });
  if (p == "ne")
    return binary(op, [&](double a, double b) { return as(a != b); });
  if (p == "lt")
    return binary(op, [&](double a, double b) { return as(a < b); });
  if (p == "le")
    return binary(op, [&](double a, double b) { return as(a <= b); });
  if (p == "gt")
    return binary(op, [&](double a, double b) { return as(a > b); });
  if (p == "ge")
    return binary(op, [&](double a, double b) { return as(a >= b); });
  return op.emitError("unknown comparison predicate '") << p << "'";
}

/// result[i] = condition[bcast i] != 0 ? lhs[bcast i] : rhs[bcast i].
LogicalResult Interpreter::run(otc::SelectOp op) {
  const Tensor &cond = get(op.getCondition());
  const Tensor &lhs = get(op.getLhs());
  const Tensor &rhs = get(op.getRhs());
  Tensor out = zeros(shapeOf(op.getResult()));
  for (int64_t i = 0, e = out.data.size(); i < e; ++i) {
    std::vector<int64_t> index = unravel(i, out.shape);
    out.data[i] = cond.data[broadcastSource(index, cond.shape)] != 0.0
                      ? lhs.data[broadcastSource(index, lhs.shape)]
                      : rhs.data[broadcastSource(index, rhs.shape)];
  }
  set(op.getResult(), std::move(out));
  return success();
}

/// `x` rounded to the nearest value of float type `type` (ties to even), or
/// unchanged for f64.
static double roundToFloatType(double x, FloatType type) {
  if (type.isF64())
    return x;
  llvm::APFloat f(x);
  bool losesInfo = false;
  f.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

/// `x` converted to integer type `type`: truncated toward zero (a float
/// source), then wrapped to the type's width the way a two's complement
/// conversion does; i1 is `x != 0`. NaN and values beyond int64 give 0
/// (undefined in ONNX).
static double convertToIntegerType(double x, IntegerType type) {
  if (type.getWidth() == 1)
    return x != 0.0 ? 1.0 : 0.0;
  double t = std::trunc(x);
  if (!(std::fabs(t) < 0x1.0p63)) // NaN, infinities: no integer; keep it defined.
    t = 0.0;
  if (type.getWidth() == 32)
    return static_cast<double>(
        static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(t))));
  return static_cast<double>(static_cast<int64_t>(t));
}

/// Converts every element to the result's element type: to i1 `x != 0`; to
/// an integer type truncation toward zero; to a float type rounding to that
/// type's precision, except between equal types and toward f64, where
/// nothing changes.
LogicalResult Interpreter::run(otc::CastOp op) {
  Type from = elementTypeOf(op.getInput());
  Type to = elementTypeOf(op.getResult());
  Tensor out = get(op.getInput());
  out.shape = shapeOf(op.getResult());
  if (auto intType = dyn_cast<IntegerType>(to)) {
    for (double &x : out.data)
      x = convertToIntegerType(x, intType);
  } else if (from != to) {
    auto floatType = cast<FloatType>(to);
    for (double &x : out.data)
      x = roundToFloatType(x, floatType);
  }
  set(op.getResult(), std::move(out));
  return success();
}
