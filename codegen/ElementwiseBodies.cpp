//===- ElementwiseBodies.cpp - bodies of elementwise ops ------------------===//
//
// Kernel bodies of the ops whose result element `i` depends on one element
// of each operand. Every op with a scalar expression
// (ScalarExpressionOpInterface: broadcasting arithmetic and comparisons,
// select, unary math, casts, the fused activations and the gradient kernels)
// gets one generic body: its operands' elements read into locals, its
// expression printed by ScalarExprPrinter, one store, so the output may
// alias an input of the same shape. Constants (a value or a table) and
// dropout (which draws its mask) have bodies of their own. Float math uses
// the `f`-suffixed C functions (expf, erff, ...), which both the host
// compiler and nvcc accept; booleans are stored as uint8_t.
//
//===----------------------------------------------------------------------===//

#include "codegen/Target.h"
#include "codegen/BodyUtils.h"
#include "codegen/ScalarExprPrinter.h"
#include "ir/OtcDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace otc;

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
  c.globals << c.target.tableQualifier() << "const " << tableType
            << " " << table << "[" << attr.getNumElements() << "] = {";
  for (int64_t k = 0, e = attr.getNumElements(); k < e; ++k)
    c.globals << (k ? ", " : "") << value(k);
  c.globals << "};\n";
  c.os << "    " << c.out[0] << "[i] = " << table << "[i];\n";
  return success();
}

/// The local holding operand `k` of an op with `n` operands: `x` for a
/// single operand, else `a`, `b`, ... (`x0`, `x1`, ... past eight).
static std::string operandLocal(unsigned k, unsigned n) {
  if (n == 1)
    return "x";
  if (n <= 8)
    return std::string(1, char('a' + k));
  return "x" + std::to_string(k);
}

/// Emits the body of an op with a scalar expression: each operand's
/// broadcast element i read into a local of its storage type (bf16 widens
/// where it is used), the expression, one store. Every read happens before
/// the store, so the result may alias an operand.
static LogicalResult emitScalarExpression(Operation *op, const ScalarExpr &e,
                                          BodyContext &c) {
  ArrayRef<int64_t> target = bodyShapeOf(op->getResult(0));
  unsigned n = op->getNumOperands();
  SmallVector<std::string> names;
  for (unsigned k = 0; k < n; ++k) {
    Value v = op->getOperand(k);
    std::string name = operandLocal(k, n), index = "i";
    if (bodyShapeOf(v) != target) {
      index = "i" + name;
      emitBroadcastIndex(c.os, index, bodyShapeOf(v), target);
    }
    c.os << "    const " << bodyCType(v) << " " << name << " = " << c.in[k]
         << "[" << index << "];\n";
    names.push_back(name);
  }
  std::string value = printScalarExpr(c.os, e, names);
  c.os << "    " << c.out[0] << "[i] = " << value << ";\n";
  return success();
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

std::optional<LogicalResult> otc::emitElementwiseBody(Operation *op,
                                                      BodyContext &c) {
  if (auto scalar = dyn_cast<ScalarExpressionOpInterface>(op))
    return emitScalarExpression(op, scalar.getScalarExpression(), c);
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](ConstantOp o) { return emitConstant(o, c); })
      .Case([&](DropoutOp o) { return emitDropout(o, c); })
      .Default([](Operation *) { return std::nullopt; });
}
