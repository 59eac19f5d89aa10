//===- OtcScalarExpressions.cpp - scalar computations of otc ops ----------===//
//
// ScalarExpressionOpInterface of the elementwise ops: what element i of the
// result is, as a ScalarExpr over element i of each operand. Arithmetic,
// comparisons, select and casts work in the operands' element type (bf16
// values compute in float and round when stored). The fused activations
// (GELU in both forms, SiLU and their gradients) compute in float whatever
// their storage type: an f64 operand is narrowed first and the result
// widened back. Constants are typed: an f32 constant keeps float precision
// in an f64 expression (dropout_grad's scale).
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace otc;

using Fn = ScalarExpr::UnaryFn;
using Pred = ScalarExpr::Predicate;

namespace {

/// Element i of operand `k` of `op`.
ScalarExpr in(Operation *op, unsigned k) {
  return ScalarExpr::operand(k,
                             getElementTypeOrSelf(op->getOperand(k).getType()));
}

/// The element type of result 0 of `op`.
Type resultType(Operation *op) {
  return getElementTypeOrSelf(op->getResult(0).getType());
}

/// The constant `v` of `op`'s result element type.
ScalarExpr constant(Operation *op, double v) {
  return ScalarExpr::constant(v, resultType(op));
}

/// `fn(x)`.
ScalarExpr apply(Fn fn, ScalarExpr x) { return ScalarExpr::unary(fn, x); }

/// The float computations of the fused activations: operand `k` of `op` as
/// a float (narrowed from f64), and constants of type f32.
class FloatMath {
public:
  explicit FloatMath(Operation *op)
      : op(op), f32(Float32Type::get(op->getContext())) {}

  ScalarExpr operand(unsigned k) const {
    ScalarExpr x = in(op, k);
    return x.getType().isF64() ? ScalarExpr::cast(x, f32) : x;
  }
  ScalarExpr c(double v) const { return ScalarExpr::constant(v, f32); }
  /// `r` in the result's element type when that is f64.
  ScalarExpr result(ScalarExpr r) const {
    Type t = resultType(op);
    return t.isF64() ? ScalarExpr::cast(r, t) : r;
  }

private:
  Operation *op;
  Type f32;
};

/// 1 / sqrt(2), sqrt(2 / pi) and 1 / sqrt(2 pi).
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

/// gelu(x), or g * gelu'(x) when `g` is set, with the approximation
/// `approximate` ("none" or "tanh", checked by the verifiers).
ScalarExpr gelu(const FloatMath &m, ScalarExpr x, ScalarExpr g,
                StringRef approximate) {
  ScalarExpr half = m.c(0.5), one = m.c(1.0);
  if (approximate == "tanh") {
    ScalarExpr u =
        m.c(kSqrt2OverPi) * (x + m.c(kGeluCubic) * x * x * x);
    ScalarExpr th = apply(Fn::Tanh, u);
    if (!g)
      return half * x * (one + th);
    ScalarExpr du = m.c(kSqrt2OverPi) * (one + m.c(3 * kGeluCubic) * x * x);
    return g * (half * (one + th) + half * x * (one - th * th) * du);
  }
  assert(approximate == "none" && "unverified approximation");
  ScalarExpr cdf = half * (one + apply(Fn::Erf, x * m.c(kInvSqrt2)));
  if (!g)
    return x * cdf;
  return g * (cdf + x * m.c(kInvSqrt2Pi) * apply(Fn::Exp, m.c(-0.5) * x * x));
}

/// x sigmoid(alpha x), or its derivative times g when `g` is set
/// (alpha = 1: silu, written without the factor).
ScalarExpr silu(const FloatMath &m, ScalarExpr x, ScalarExpr g, double alpha) {
  ScalarExpr one = m.c(1.0);
  ScalarExpr ax = alpha == 1.0 ? x : m.c(alpha) * x;
  ScalarExpr sg = one / (one + apply(Fn::Exp, -ax));
  if (!g)
    return x * sg;
  return g * sg * (one + ax * (one - sg));
}

} // namespace

//===----------------------------------------------------------------------===//
// Arithmetic and math
//===----------------------------------------------------------------------===//

ScalarExpr AddOp::getScalarExpression() { return in(*this, 0) + in(*this, 1); }
ScalarExpr SubOp::getScalarExpression() { return in(*this, 0) - in(*this, 1); }
ScalarExpr MulOp::getScalarExpression() { return in(*this, 0) * in(*this, 1); }
ScalarExpr DivOp::getScalarExpression() { return in(*this, 0) / in(*this, 1); }

ScalarExpr PowOp::getScalarExpression() {
  return ScalarExpr::binary(ScalarExpr::BinaryOp::Pow, in(*this, 0),
                            in(*this, 1));
}

ScalarExpr NegOp::getScalarExpression() { return -in(*this, 0); }
ScalarExpr ExpOp::getScalarExpression() { return apply(Fn::Exp, in(*this, 0)); }
ScalarExpr LogOp::getScalarExpression() { return apply(Fn::Log, in(*this, 0)); }
ScalarExpr TanhOp::getScalarExpression() {
  return apply(Fn::Tanh, in(*this, 0));
}
ScalarExpr SqrtOp::getScalarExpression() {
  return apply(Fn::Sqrt, in(*this, 0));
}
ScalarExpr ErfOp::getScalarExpression() { return apply(Fn::Erf, in(*this, 0)); }
ScalarExpr CosOp::getScalarExpression() { return apply(Fn::Cos, in(*this, 0)); }
ScalarExpr SinOp::getScalarExpression() { return apply(Fn::Sin, in(*this, 0)); }

ScalarExpr ReciprocalOp::getScalarExpression() {
  return constant(*this, 1.0) / in(*this, 0);
}

ScalarExpr SigmoidOp::getScalarExpression() {
  ScalarExpr one = constant(*this, 1.0);
  return one / (one + apply(Fn::Exp, -in(*this, 0)));
}

ScalarExpr ReluOp::getScalarExpression() {
  ScalarExpr x = in(*this, 0), zero = constant(*this, 0.0);
  return ScalarExpr::select(ScalarExpr::compare(Pred::Gt, x, zero), x, zero);
}

//===----------------------------------------------------------------------===//
// Comparison, selection and conversion
//===----------------------------------------------------------------------===//

ScalarExpr CompareOp::getScalarExpression() {
  std::optional<Pred> pred = llvm::StringSwitch<std::optional<Pred>>(
                                 getPredicate())
                                 .Case("eq", Pred::Eq)
                                 .Case("ne", Pred::Ne)
                                 .Case("lt", Pred::Lt)
                                 .Case("le", Pred::Le)
                                 .Case("gt", Pred::Gt)
                                 .Case("ge", Pred::Ge)
                                 .Default(std::nullopt);
  if (!pred)
    llvm::report_fatal_error("otc.compare with an unverified predicate");
  return ScalarExpr::compare(*pred, in(*this, 0), in(*this, 1));
}

ScalarExpr SelectOp::getScalarExpression() {
  return ScalarExpr::select(in(*this, 0), in(*this, 1), in(*this, 2));
}

ScalarExpr CastOp::getScalarExpression() {
  return ScalarExpr::cast(in(*this, 0), resultType(*this));
}

//===----------------------------------------------------------------------===//
// Gradient kernels
//===----------------------------------------------------------------------===//

ScalarExpr ReluGradOp::getScalarExpression() {
  ScalarExpr zero = constant(*this, 0.0);
  return ScalarExpr::select(
      ScalarExpr::compare(Pred::Gt, in(*this, 1), zero), in(*this, 0), zero);
}

ScalarExpr TanhGradOp::getScalarExpression() {
  ScalarExpr y = in(*this, 1);
  return in(*this, 0) * (constant(*this, 1.0) - y * y);
}

ScalarExpr DropoutGradOp::getScalarExpression() {
  // The scale and the zero are float constants whatever the element type.
  Type f32 = Float32Type::get(getContext());
  double scale = 1.0 / (1.0 - getRatio().convertToDouble());
  return ScalarExpr::select(in(*this, 1),
                            in(*this, 0) * ScalarExpr::constant(scale, f32),
                            ScalarExpr::constant(0.0, f32));
}

//===----------------------------------------------------------------------===//
// Fused activations
//===----------------------------------------------------------------------===//

ScalarExpr GeluOp::getScalarExpression() {
  FloatMath m(*this);
  return m.result(gelu(m, m.operand(0), {}, getApproximate()));
}

ScalarExpr GeluGradOp::getScalarExpression() {
  FloatMath m(*this);
  return m.result(gelu(m, m.operand(1), m.operand(0), getApproximate()));
}

ScalarExpr SiluOp::getScalarExpression() {
  FloatMath m(*this);
  return m.result(silu(m, m.operand(0), {}, getAlpha().convertToDouble()));
}

ScalarExpr SiluGradOp::getScalarExpression() {
  FloatMath m(*this);
  return m.result(
      silu(m, m.operand(1), m.operand(0), getAlpha().convertToDouble()));
}
