//===- ElementwiseOps.cpp - importing elementwise ONNX ops ----------------===//
//
// Add/Sub/Mul/Div (any element type, both operands of one type), Pow (float
// or integer base; see importPow for the types), the unary float ops (Neg
// also on integers, as 0 - x), Gelu (opset 20: the erf or tanh formula in
// primitives), Cos and Sin of constants (folded at import),
// Equal/Less/Greater(OrEqual) onto otc.compare, Where onto
// otc.select, Cast, Identity and Dropout. Every op is built with
// createOrFold, so shape arithmetic on constants folds here.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace otc {
namespace detail {

void Importer::importBinary() {
  Value a = input(0), b = input(1);
  if (elemOf(a) != elemOf(b))
    nodeFail("operand element types differ: " + typeStr(a.getType()) + " and " +
             typeStr(b.getType()));
  StringRef op = opType();
  Value y;
  if (op == "Add")
    y = binary<AddOp>(a, b);
  else if (op == "Sub")
    y = binary<SubOp>(a, b);
  else if (op == "Mul")
    y = binary<MulOp>(a, b);
  else
    y = binary<DivOp>(a, b);
  define(0, y);
}

void Importer::importPow() {
  Value x = input(0);
  Value e = input(1);
  auto cast = [&](Value v, Type to) -> Value {
    if (elemOf(v) == to)
      return v;
    return builder.createOrFold<CastOp>(currentLoc, tensorType(shapeOf(v), to),
                                        v);
  };
  // Opset 15 allows any numeric exponent type. With a float base, or an
  // integer base and an integer exponent, the power is computed in the base's
  // type; an integer base with a float exponent is raised in the exponent's
  // float type and truncated back to the base's (numpy's power + astype).
  if (!isa<FloatType>(elemOf(x))) {
    requireInt(x, "the base X");
    if (isa<FloatType>(elemOf(e))) {
      Value y = binary<PowOp>(cast(x, elemOf(e)), e);
      define(0, cast(y, elemOf(x)));
      return;
    }
  }
  // x^0.5 and x^-0.5 (an RMS norm written x * pow(mean(x^2) + eps, -0.5),
  // Gemma 3n's) as the square root and its reciprocal, the forms the norm
  // fusions read.
  DenseElementsAttr c;
  if (isa<FloatType>(elemOf(x)) && matchPattern(e, m_Constant(&c)) &&
      c.isSplat() && isa<FloatType>(c.getElementType())) {
    double v = c.getSplatValue<APFloat>().convertToDouble();
    if (v == 0.5 || v == -0.5) {
      auto shape = broadcastOrFail(shapeOf(x), shapeOf(e));
      Value base = shape == shapeOf(x) ? x : broadcastTo(x, shape);
      Value root = builder.createOrFold<SqrtOp>(currentLoc, base);
      define(0, v > 0 ? root
                      : builder.createOrFold<ReciprocalOp>(currentLoc, root));
      return;
    }
  }
  define(0, binary<PowOp>(x, cast(e, elemOf(x))));
}

void Importer::importCompare() {
  Value a = input(0), b = input(1);
  if (elemOf(a) != elemOf(b))
    nodeFail("operand element types differ: " + typeStr(a.getType()) + " and " +
             typeStr(b.getType()));
  StringRef op = opType();
  StringRef pred = op == "Equal"         ? "eq"
                   : op == "Less"        ? "lt"
                   : op == "LessOrEqual" ? "le"
                   : op == "Greater"     ? "gt"
                                         : "ge";
  auto shape = broadcastOrFail(shapeOf(a), shapeOf(b));
  define(0, builder.createOrFold<CompareOp>(
                currentLoc, tensorType(shape, builder.getI1Type()), a, b,
                builder.getStringAttr(pred)));
}

void Importer::importWhere() {
  Value c = input(0), a = input(1), b = input(2);
  if (!elemOf(c).isInteger(1))
    nodeFail("the condition must be a bool tensor, got " +
             typeStr(c.getType()));
  if (elemOf(a) != elemOf(b))
    nodeFail("X and Y element types differ: " + typeStr(a.getType()) + " and " +
             typeStr(b.getType()));
  auto shape = broadcastOrFail(shapeOf(a), shapeOf(b));
  shape = broadcastOrFail(shape, shapeOf(c));
  define(0, builder.createOrFold<SelectOp>(
                currentLoc, tensorType(shape, elemOf(a)), c, a, b));
}

void Importer::importUnary() {
  StringRef op = opType();
  Value x = input(0);
  if (op == "Neg" && !elemOf(x).isF32()) {
    requireInt(x, "the input");
    define(0, binary<SubOp>(scalarLike(x, 0), x));
    return;
  }
  if (op == "Abs" || op == "Sign") {
    // |x| = x < 0 ? -x : x (its gradient the sign, 0 at 0, as PyTorch's);
    // sign(x) = x > 0 ? 1 : (x < 0 ? -1 : 0), NaN where x is NaN. Integers
    // too (T5's relative position buckets take |i - j|).
    auto boolType = tensorType(shapeOf(x), builder.getI1Type());
    Value zero = scalarLike(x, 0);
    Value neg = builder.createOrFold<CompareOp>(currentLoc, boolType, x, zero,
                                               builder.getStringAttr("lt"));
    if (op == "Abs") {
      define(0, builder.createOrFold<SelectOp>(currentLoc, x.getType(), neg,
                                               binary<SubOp>(zero, x), x));
      return;
    }
    Value pos = builder.createOrFold<CompareOp>(currentLoc, boolType, x, zero,
                                               builder.getStringAttr("gt"));
    Value minus = builder.createOrFold<SelectOp>(
        currentLoc, x.getType(), neg, scalarLike(x, -1), binary<MulOp>(x, zero));
    define(0, builder.createOrFold<SelectOp>(currentLoc, x.getType(), pos,
                                             scalarLike(x, 1), minus));
    return;
  }
  requireFloat(x, "the input");
  if (op == "Cos" || op == "Sin") {
    // A constant input folds here whatever its size (rotary tables of
    // constant positions); a value computed at run time (positions of a
    // sequence longer than the folders' limit, or of a bound --dim) stays an
    // op that the program computes.
    DenseElementsAttr c;
    if (matchPattern(x, m_Constant(&c)) && elemOf(x).isF32()) {
      SmallVector<float> out;
      out.reserve(c.getNumElements());
      for (float v : c.getValues<float>())
        out.push_back(static_cast<float>(op == "Cos" ? std::cos(double(v))
                                                     : std::sin(double(v))));
      defineConstant(
          0, DenseElementsAttr::get(c.getType(), ArrayRef<float>(out)));
    } else if (op == "Cos") {
      define(0, builder.createOrFold<CosOp>(currentLoc, x));
    } else {
      define(0, builder.createOrFold<SinOp>(currentLoc, x));
    }
    return;
  }
  Value y;
  if (op == "Neg")
    y = builder.createOrFold<NegOp>(currentLoc, x);
  else if (op == "Exp")
    y = builder.createOrFold<ExpOp>(currentLoc, x);
  else if (op == "Log")
    y = builder.createOrFold<LogOp>(currentLoc, x);
  else if (op == "Tanh")
    y = builder.createOrFold<TanhOp>(currentLoc, x);
  else if (op == "Relu")
    y = builder.createOrFold<ReluOp>(currentLoc, x);
  else if (op == "Sqrt")
    y = builder.createOrFold<SqrtOp>(currentLoc, x);
  else if (op == "Reciprocal")
    y = builder.createOrFold<ReciprocalOp>(currentLoc, x);
  else if (op == "Erf")
    y = builder.createOrFold<ErfOp>(currentLoc, x);
  else
    y = builder.createOrFold<SigmoidOp>(currentLoc, x);
  define(0, y);
}

void Importer::importGelu() {
  Value x = requireFloat(input(0), "the input");
  std::string approx = attrString("approximate", "none");
  Value inner;
  if (approx == "none") {
    // 0.5 x (1 + erf(x / sqrt(2)))
    Value s = binary<MulOp>(x, scalarF32(M_SQRT1_2));
    inner = builder.createOrFold<ErfOp>(currentLoc, s);
  } else if (approx == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    Value x3 = binary<MulOp>(binary<MulOp>(x, x), x);
    Value t = binary<AddOp>(x, binary<MulOp>(x3, scalarF32(0.044715)));
    t = binary<MulOp>(t, scalarF32(std::sqrt(2.0 / M_PI)));
    inner = builder.createOrFold<TanhOp>(currentLoc, t);
  } else {
    nodeFail("approximate '" + approx + "' is not none or tanh");
  }
  Value y = binary<AddOp>(inner, scalarF32(1.0));
  y = binary<MulOp>(binary<MulOp>(x, scalarF32(0.5)), y);
  define(0, y);
}

/// The width of a narrow integer ONNX type (int8/16, uint8/16/32), or none.
static std::optional<unsigned> narrowIntegerBits(int32_t type) {
  switch (type) {
  case onnx::TensorProto_DataType_INT8:
  case onnx::TensorProto_DataType_UINT8:
    return 8;
  case onnx::TensorProto_DataType_INT16:
  case onnx::TensorProto_DataType_UINT16:
    return 16;
  case onnx::TensorProto_DataType_UINT32:
    return 32;
  default:
    return std::nullopt;
  }
}

static bool narrowIntegerSigned(int32_t type) {
  return type == onnx::TensorProto_DataType_INT8 ||
         type == onnx::TensorProto_DataType_INT16;
}

void Importer::importCast() {
  Value x = input(0);
  const onnx::AttributeProto *to = attr("to");
  if (!to)
    nodeFail("missing the 'to' attribute");
  std::optional<Kind> kind = kindOf(static_cast<int32_t>(to->i()));
  if (!kind) {
    // A constant cast to a narrow integer type (torch.eye's decomposition:
    // arange(n, dtype=uint8) == arange(n)[:, None]) folds here: its values,
    // wrapped as the type wraps them, held as int64.
    if (std::optional<unsigned> bits =
            narrowIntegerBits(static_cast<int32_t>(to->i()))) {
      DenseElementsAttr c;
      if (matchPattern(x, m_Constant(&c))) {
        bool isSigned = narrowIntegerSigned(static_cast<int32_t>(to->i()));
        SmallVector<int64_t> out;
        out.reserve(c.getNumElements());
        auto wrap = [&](int64_t v) {
          uint64_t mask = (uint64_t(1) << *bits) - 1;
          uint64_t u = uint64_t(v) & mask;
          if (isSigned && (u >> (*bits - 1)) & 1)
            return int64_t(u | ~mask);
          return int64_t(u);
        };
        if (isa<FloatType>(elemOf(x)))
          for (APFloat f : c.getValues<APFloat>())
            out.push_back(wrap(static_cast<int64_t>(f.convertToDouble())));
        else
          for (APInt v : c.getValues<APInt>())
            out.push_back(wrap(elemOf(x).isInteger(1) ? v.getZExtValue()
                                                      : v.getSExtValue()));
        auto type = tensorType(shapeOf(x), builder.getI64Type());
        defineConstant(0, DenseElementsAttr::get(cast<ShapedType>(type),
                                                 ArrayRef<int64_t>(out)));
        return;
      }
    }
    nodeFail("casting to " + dataTypeName(static_cast<int32_t>(to->i())) +
             " is not supported (float types, int64, int32 and bool are; a "
             "constant cast to a narrower integer type folds)");
  }
  Type et = elementType(&ctx, *kind);
  if (et == elemOf(x)) {
    define(0, x);
    return;
  }
  define(0, builder.createOrFold<CastOp>(currentLoc, tensorType(shapeOf(x), et),
                                         x));
}

void Importer::importCastLike() {
  Value x = input(0);
  Type et = elemOf(input(1));
  if (et == elemOf(x)) {
    define(0, x);
    return;
  }
  define(0, builder.createOrFold<CastOp>(currentLoc, tensorType(shapeOf(x), et),
                                         x));
}

void Importer::importIdentity() { define(0, input(0)); }

void Importer::importDropout() {
  Value x = requireFloat(input(0), "the data input");
  double ratio = hasInput(1) ? constantScalar(1, "ratio") : 0.5;
  bool training = hasInput(2) && constantScalar(2, "training_mode") != 0.0;
  if (!(ratio >= 0.0 && ratio < 1.0))
    nodeFail("ratio " + std::to_string(ratio) + " is not in [0, 1)");

  auto maskType = tensorType(shapeOf(x), builder.getI1Type());
  if (!training || ratio == 0.0) {
    define(0, x);
    if (outputUsed(1))
      define(1, builder.create<ConstantOp>(
                    currentLoc, DenseElementsAttr::get(maskType, true)));
    return;
  }
  if (!rngKeyArg) {
    Value key =
        entry->addArgument(RankedTensorType::get({}, builder.getI64Type()),
                           NameLoc::get(builder.getStringAttr("rng_key")));
    rngKeyArg = cast<BlockArgument>(key).getArgNumber();
  }
  auto op = builder.create<DropoutOp>(
      currentLoc, x.getType(), maskType, x, entry->getArgument(*rngKeyArg),
      builder.getF64FloatAttr(ratio),
      builder.getI64IntegerAttr(dropoutStream++));
  define(0, op.getOutput());
  define(1, op.getMask());
}

} // namespace detail
} // namespace otc
