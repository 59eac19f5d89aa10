//===- ElementwiseBodies.cpp - bodies of elementwise ops ------------------===//
//
// Kernel bodies of the ops whose result element `i` depends on one element
// of each operand: constants, broadcasting binary arithmetic and comparisons,
// select, unary math, casts, the ReLU/tanh gradient kernels and dropout. Each
// body reads its operands into locals before the single store, so the output
// may alias an input of the same shape. Float math uses the `f`-suffixed C
// functions (expf, erff, ...), which both the host compiler and nvcc accept;
// booleans are stored as uint8_t.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace otc;

/// The C math function `name` ("exp") for element type `t`: `expf` for f32
/// and bf16 (computed in float, rounded on store), `exp` for f64.
static std::string mathFn(StringRef name, Type t) {
  return t.isF64() ? name.str() : (name + "f").str();
}

/// The literal `v` in the C type of element type `t`.
static std::string typedLiteral(double v, Type t) {
  if (isa<FloatType>(t) && (v == 0.0 || v == 1.0))
    return std::string(v == 0.0 ? "0.0" : "1.0") + (t.isF64() ? "" : "f");
  if (t.isF32() || t.isBF16())
    return floatLiteral(v);
  if (isa<FloatType>(t))
    return literal(v);
  return "(" + cTypeOf(t) + ")" + std::to_string((int64_t)v);
}

static LogicalResult emitConstant(ConstantOp op, BodyContext &c) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!attr)
    return op.emitOpError("cannot emit a non-dense constant");
  Type et = attr.getElementType();
  auto value = [&](int64_t k) -> std::string {
    if (isa<FloatType>(et))
      return literal(attr.getValues<APFloat>()[k].convertToDouble());
    if (et.isInteger(1))
      return attr.getValues<APInt>()[k].isZero() ? "0" : "1";
    return std::to_string(attr.getValues<APInt>()[k].getSExtValue());
  };
  if (attr.isSplat()) {
    c.os << "    " << c.out[0] << "[i] = " << value(0) << ";\n";
    return success();
  }
  std::string table = c.prefix + "_values";
  // BF16 tables hold the (exactly representable) values as floats.
  std::string tableType = et.isBF16() ? "float" : cTypeOf(et);
  c.globals << (c.cuda ? "__device__ " : "static ") << "const " << tableType
            << " " << table << "[" << attr.getNumElements() << "] = {";
  for (int64_t k = 0, e = attr.getNumElements(); k < e; ++k)
    c.globals << (k ? ", " : "") << value(k);
  c.globals << "};\n";
  c.os << "    " << c.out[0] << "[i] = " << table << "[i];\n";
  return success();
}

/// Emits `out[i] = expr` over locals `a` and `b`, the broadcast elements of
/// operands 0 and 1 in their own element type.
static LogicalResult emitBinary(Operation *op, StringRef expr, BodyContext &c) {
  ArrayRef<int64_t> target = bodyShapeOf(op->getResult(0));
  emitBroadcastIndex(c.os, "ia", bodyShapeOf(op->getOperand(0)), target);
  emitBroadcastIndex(c.os, "ib", bodyShapeOf(op->getOperand(1)), target);
  c.os << "    const " << bodyCType(op->getOperand(0)) << " a = " << c.in[0]
       << "[ia];\n"
       << "    const " << bodyCType(op->getOperand(1)) << " b = " << c.in[1]
       << "[ib];\n"
       << "    " << c.out[0] << "[i] = " << expr << ";\n";
  return success();
}

/// Emits `out[i] = expr` over the local `x`, element i of operand 0.
static LogicalResult emitUnary(Operation *op, const Twine &expr,
                               BodyContext &c) {
  c.os << "    const " << bodyCType(op->getOperand(0)) << " x = " << c.in[0]
       << "[i];\n"
       << "    " << c.out[0] << "[i] = " << expr << ";\n";
  return success();
}

static LogicalResult emitPow(PowOp op, BodyContext &c) {
  Type t = getElementTypeOrSelf(op.getType());
  if (isa<FloatType>(t))
    return emitBinary(op, mathFn("pow", t) + "(a, b)", c);
  return emitBinary(op, "(" + cTypeOf(t) + ")pow((double)a, (double)b)", c);
}

static LogicalResult emitCompare(CompareOp op, BodyContext &c) {
  StringRef sym = llvm::StringSwitch<StringRef>(op.getPredicate())
                      .Case("eq", "==")
                      .Case("ne", "!=")
                      .Case("lt", "<")
                      .Case("le", "<=")
                      .Case("gt", ">")
                      .Case("ge", ">=")
                      .Default("");
  if (sym.empty())
    return op.emitOpError("unknown predicate '") << op.getPredicate() << "'";
  return emitBinary(op, ("(uint8_t)(a " + sym + " b)").str(), c);
}

static LogicalResult emitSelect(SelectOp op, BodyContext &c) {
  ArrayRef<int64_t> target = bodyShapeOf(op.getResult());
  emitBroadcastIndex(c.os, "ic", bodyShapeOf(op.getCondition()), target);
  emitBroadcastIndex(c.os, "ia", bodyShapeOf(op.getLhs()), target);
  emitBroadcastIndex(c.os, "ib", bodyShapeOf(op.getRhs()), target);
  std::string t = bodyCType(op.getResult());
  c.os << "    const " << t << " v = " << c.in[0] << "[ic] ? " << c.in[1]
       << "[ia] : " << c.in[2] << "[ib];\n"
       << "    " << c.out[0] << "[i] = v;\n";
  return success();
}

static LogicalResult emitCast(CastOp op, BodyContext &c) {
  Type to = getElementTypeOrSelf(op.getType());
  // Anything to i1 is `x != 0`; every other conversion is C's (floats to
  // integers truncate toward zero).
  if (to.isInteger(1))
    return emitUnary(op, "(uint8_t)(x != 0)", c);
  return emitUnary(op, "(" + cTypeOf(to) + ")x", c);
}

/// Emits the dropout keep test of element `i` of a tensor dropped out with
/// `key` (the pointer to the i64 key) and `stream`: splitmix64 of
/// (key * 0x9E3779B97F4A7C15) ^ (stream << 32) ^ i, kept when the top 53 bits
/// as a fraction in [0, 1) are >= `ratio` (OTCRT_DROPOUT_BITS of
/// otcrt/kernels.h; the interpreter implements it independently).
static void emitDropoutKeep(raw_ostream &os, StringRef key, int64_t stream,
                            double ratio) {
  StringRef indent = "    ";
  os << indent << "uint64_t h = (uint64_t)" << key
     << "[0] * 0x9E3779B97F4A7C15ull ^ "
     << "((uint64_t)" << stream << "ull << 32) ^ (uint64_t)i;\n"
     << indent << "h += 0x9E3779B97F4A7C15ull;\n"
     << indent << "h ^= h >> 30; h *= 0xBF58476D1CE4E5B9ull;\n"
     << indent << "h ^= h >> 27; h *= 0x94D049BB133111EBull;\n"
     << indent << "h ^= h >> 31;\n"
     << indent
     << "const bool keep = (double)(h >> 11) * 0x1.0p-53 >= " << literal(ratio)
     << ";\n";
}

static LogicalResult emitDropout(DropoutOp op, BodyContext &c) {
  double ratio = op.getRatio().convertToDouble();
  emitDropoutKeep(c.os, c.in[1], op.getStream(), ratio);
  c.os << "    " << c.out[0] << "[i] = keep ? " << c.in[0] << "[i] * "
       << literal(1.0 / (1.0 - ratio)) << "f : 0.0f;\n"
       << "    " << c.out[1] << "[i] = keep;\n";
  return success();
}

static LogicalResult emitDropoutGrad(DropoutGradOp op, BodyContext &c) {
  double ratio = op.getRatio().convertToDouble();
  c.os << "    " << c.out[0] << "[i] = " << c.in[1] << "[i] ? " << c.in[0]
       << "[i] * " << literal(1.0 / (1.0 - ratio)) << "f : 0.0f;\n";
  return success();
}

std::optional<LogicalResult> otc::emitElementwiseBody(Operation *op,
                                                      BodyContext &c) {
  Type t = getElementTypeOrSelf(op->getResult(0).getType());
  std::string zero = typedLiteral(0.0, t), one = typedLiteral(1.0, t);
  auto fn = [&](StringRef name) { return mathFn(name, t); };
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ConstantOp o) { return emitConstant(o, c); })
      .Case([&](AddOp o) { return emitBinary(o, "a + b", c); })
      .Case([&](SubOp o) { return emitBinary(o, "a - b", c); })
      .Case([&](MulOp o) { return emitBinary(o, "a * b", c); })
      .Case([&](DivOp o) { return emitBinary(o, "a / b", c); })
      .Case([&](PowOp o) { return emitPow(o, c); })
      .Case([&](CompareOp o) { return emitCompare(o, c); })
      .Case([&](SelectOp o) { return emitSelect(o, c); })
      .Case([&](CastOp o) { return emitCast(o, c); })
      .Case([&](NegOp o) { return emitUnary(o, "-x", c); })
      .Case([&](ExpOp o) { return emitUnary(o, fn("exp") + "(x)", c); })
      .Case([&](LogOp o) { return emitUnary(o, fn("log") + "(x)", c); })
      .Case([&](TanhOp o) { return emitUnary(o, fn("tanh") + "(x)", c); })
      .Case([&](SqrtOp o) { return emitUnary(o, fn("sqrt") + "(x)", c); })
      .Case([&](ErfOp o) { return emitUnary(o, fn("erf") + "(x)", c); })
      .Case([&](ReciprocalOp o) { return emitUnary(o, one + " / x", c); })
      .Case([&](SigmoidOp o) {
        return emitUnary(o, one + " / (" + one + " + " + fn("exp") + "(-x))",
                         c);
      })
      .Case([&](ReluOp o) {
        return emitUnary(o, "x > " + zero + " ? x : " + zero, c);
      })
      .Case([&](ReluGradOp o) {
        return emitBinary(o, "b > " + zero + " ? a : " + zero, c);
      })
      .Case([&](TanhGradOp o) {
        return emitBinary(o, "a * (" + one + " - b * b)", c);
      })
      .Case([&](DropoutOp o) { return emitDropout(o, c); })
      .Case([&](DropoutGradOp o) { return emitDropoutGrad(o, c); })
      .Default([](Operation *) { return std::nullopt; });
}
