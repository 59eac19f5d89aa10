//===- KernelBodies.cpp - per-op bodies of generated kernels ---------------===//
//
// One emitter per otc op, chosen by a TypeSwitch. Each writes the statements
// that compute work item `i` of the op from the operand pointers into the
// result pointers. Shapes are static, so index arithmetic is emitted with
// constant extents and strides. Bodies read every input before writing any
// output, so an output may share its buffer with an elementwise input.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelBodies.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace otc;

std::string otc::cTypeOf(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isInteger(64))
    return "int64_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(1))
    return "uint8_t";
  return "";
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

static int64_t numel(Value v) { return numElements(shapeOf(v)); }

static std::string literal(double v) {
  if (std::isinf(v))
    return v > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(v))
    return "NAN";
  return llvm::formatv("{0:e9}", v).str();
}

/// Emits `int64_t <name> = <offset of element i of `target` in `shape`
/// broadcast to `target`>;`.
static void emitBroadcastIndex(raw_ostream &os, StringRef name,
                               ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> target) {
  if (shape == target) {
    os << "    const int64_t " << name << " = i;\n";
    return;
  }
  if (numElements(shape) == 1) {
    os << "    const int64_t " << name << " = 0;\n";
    return;
  }
  SmallVector<int64_t> strides = broadcastStrides(shape, target);
  os << "    int64_t " << name << " = 0;\n    { int64_t r = i;\n";
  for (size_t d = target.size(); d-- > 0;) {
    if (strides[d])
      os << "      " << name << " += (r % " << target[d] << ") * "
         << strides[d] << ";\n";
    if (d)
      os << "      r /= " << target[d] << ";\n";
  }
  os << "    }\n";
}

/// Row-major strides of a shape.
static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

//===----------------------------------------------------------------------===//
// Work items
//===----------------------------------------------------------------------===//

int64_t otc::workItems(Operation *op) {
  return TypeSwitch<Operation *, int64_t>(op)
      .Case<SoftmaxCrossEntropyOp>([](auto sce) -> int64_t {
        return sce.getReduction() == "none" ? shapeOf(sce.getLogits())[0] : 1;
      })
      .Case<SoftmaxCrossEntropyGradOp>(
          [](auto g) { return shapeOf(g.getLogits())[0]; })
      .Default([](Operation *op) { return numel(op->getResult(0)); });
}

//===----------------------------------------------------------------------===//
// Bodies
//===----------------------------------------------------------------------===//

static LogicalResult emitConstant(ConstantOp op, BodyContext &c) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!attr)
    return op.emitOpError("cannot emit a non-dense constant");
  Type et = attr.getElementType();
  auto value = [&](int64_t k) -> std::string {
    if (isa<FloatType>(et))
      return literal(attr.getValues<APFloat>()[k].convertToDouble());
    return std::to_string(attr.getValues<APInt>()[k].getSExtValue());
  };
  if (attr.isSplat()) {
    c.os << "    " << c.out[0] << "[i] = " << value(0) << ";\n";
    return success();
  }
  std::string table = c.prefix + "_values";
  c.globals << (c.cuda ? "__device__ " : "static ") << "const "
            << cTypeOf(et) << " " << table << "[" << attr.getNumElements()
            << "] = {";
  for (int64_t k = 0, e = attr.getNumElements(); k < e; ++k)
    c.globals << (k ? ", " : "") << value(k);
  c.globals << "};\n";
  c.os << "    " << c.out[0] << "[i] = " << table << "[i];\n";
  return success();
}

static LogicalResult emitBinary(Operation *op, StringRef expr, BodyContext &c) {
  ArrayRef<int64_t> target = shapeOf(op->getResult(0));
  emitBroadcastIndex(c.os, "ia", shapeOf(op->getOperand(0)), target);
  emitBroadcastIndex(c.os, "ib", shapeOf(op->getOperand(1)), target);
  std::string t = cTypeOf(getElementTypeOrSelf(op->getResult(0).getType()));
  c.os << "    const " << t << " a = " << c.in[0] << "[ia];\n"
       << "    const " << t << " b = " << c.in[1] << "[ib];\n"
       << "    " << c.out[0] << "[i] = " << expr << ";\n";
  return success();
}

static LogicalResult emitUnary(Operation *op, StringRef expr, BodyContext &c) {
  std::string t = cTypeOf(getElementTypeOrSelf(op->getResult(0).getType()));
  c.os << "    const " << t << " x = " << c.in[0] << "[i];\n"
       << "    " << c.out[0] << "[i] = " << expr << ";\n";
  return success();
}

static LogicalResult emitTranspose(TransposeOp op, BodyContext &c) {
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  SmallVector<int64_t> inStrides = stridesOf(shapeOf(op.getInput()));
  ArrayRef<int64_t> perm = op.getPermutation();
  c.os << "    int64_t src = 0;\n    { int64_t r = i;\n";
  for (size_t d = out.size(); d-- > 0;) {
    c.os << "      src += (r % " << out[d] << ") * " << inStrides[perm[d]]
         << ";\n";
    if (d)
      c.os << "      r /= " << out[d] << ";\n";
  }
  c.os << "    }\n    " << c.out[0] << "[i] = " << c.in[0] << "[src];\n";
  return success();
}

static LogicalResult emitReduceSum(ReduceSumOp op, BodyContext &c) {
  ArrayRef<int64_t> in = shapeOf(op.getInput());
  SmallVector<int64_t> strides = stridesOf(in);
  ArrayRef<int64_t> axes = op.getAxes();
  // Output coordinates walk the kept dimensions; the inner loop walks the
  // reduced ones.
  SmallVector<int64_t> kept, reduced;
  for (int64_t d = 0, e = in.size(); d < e; ++d)
    (llvm::is_contained(axes, d) ? reduced : kept).push_back(d);
  c.os << "    int64_t base = 0;\n    { int64_t r = i;\n";
  for (size_t k = kept.size(); k-- > 0;) {
    int64_t d = kept[k];
    c.os << "      base += (r % " << in[d] << ") * " << strides[d] << ";\n";
    if (k)
      c.os << "      r /= " << in[d] << ";\n";
  }
  int64_t count = 1;
  for (int64_t d : reduced)
    count *= in[d];
  c.os << "    }\n    float acc = 0.0f;\n"
       << "    for (int64_t j = 0; j < " << count << "; ++j) {\n"
       << "      int64_t off = base, r = j;\n";
  for (size_t k = reduced.size(); k-- > 0;) {
    int64_t d = reduced[k];
    c.os << "      off += (r % " << in[d] << ") * " << strides[d] << ";\n";
    if (k)
      c.os << "      r /= " << in[d] << ";\n";
  }
  c.os << "      acc += " << c.in[0] << "[off];\n    }\n"
       << "    " << c.out[0] << "[i] = acc;\n";
  return success();
}

/// The dropout keep test: splitmix64 of (key * 0x9E3779B97F4A7C15) ^
/// (stream << 32) ^ index; kept when the top 53 bits as a fraction in [0, 1)
/// are >= ratio. The interpreter implements the same function independently.
static void emitDropoutKeep(raw_ostream &os, StringRef key, int64_t stream,
                            double ratio) {
  os << "    uint64_t h = (uint64_t)" << key << "[0] * 0x9E3779B97F4A7C15ull ^ "
     << "((uint64_t)" << stream << "ull << 32) ^ (uint64_t)i;\n"
     << "    h += 0x9E3779B97F4A7C15ull;\n"
     << "    h ^= h >> 30; h *= 0xBF58476D1CE4E5B9ull;\n"
     << "    h ^= h >> 27; h *= 0x94D049BB133111EBull;\n"
     << "    h ^= h >> 31;\n"
     << "    const bool keep = (double)(h >> 11) * 0x1.0p-53 >= "
     << literal(ratio) << ";\n";
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

/// Emits the log-sum-exp of row `row` of logits [N, C] into `lse`.
static void emitRowLogSumExp(raw_ostream &os, StringRef logits, StringRef row,
                             int64_t classes) {
  os << "      const float* z = " << logits << " + " << row << " * " << classes
     << ";\n"
     << "      float mx = z[0];\n"
     << "      for (int64_t k = 1; k < " << classes
     << "; ++k) mx = z[k] > mx ? z[k] : mx;\n"
     << "      float se = 0.0f;\n"
     << "      for (int64_t k = 0; k < " << classes
     << "; ++k) se += expf(z[k] - mx);\n"
     << "      const float lse = mx + logf(se);\n";
}

static std::string ignoredTest(std::optional<int64_t> ignore, StringRef label) {
  if (!ignore)
    return "false";
  return (label + " == " + std::to_string(*ignore)).str();
}

static LogicalResult emitSoftmaxCrossEntropy(SoftmaxCrossEntropyOp op,
                                             BodyContext &c) {
  int64_t rows = shapeOf(op.getLogits())[0], classes = shapeOf(op.getLogits())[1];
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  StringRef red = op.getReduction();
  if (red == "none") {
    c.os << "    const int64_t y = (int64_t)" << c.in[1] << "[i];\n"
         << "    if (" << ignoredTest(ignore, "y") << ") { " << c.out[0]
         << "[i] = 0.0f; } else {\n";
    emitRowLogSumExp(c.os, c.in[0], "i", classes);
    c.os << "      " << c.out[0] << "[i] = lse - z[y];\n    }\n";
    return success();
  }
  c.os << "    float total = 0.0f; int64_t count = 0;\n"
       << "    for (int64_t n = 0; n < " << rows << "; ++n) {\n"
       << "      const int64_t y = (int64_t)" << c.in[1] << "[n];\n"
       << "      if (" << ignoredTest(ignore, "y") << ") continue;\n";
  emitRowLogSumExp(c.os, c.in[0], "n", classes);
  c.os << "      total += lse - z[y]; ++count;\n    }\n";
  if (red == "mean")
    c.os << "    " << c.out[0] << "[0] = count ? total / (float)count : 0.0f;\n";
  else
    c.os << "    " << c.out[0] << "[0] = total;\n";
  return success();
}

static LogicalResult emitSoftmaxCrossEntropyGrad(SoftmaxCrossEntropyGradOp op,
                                                 BodyContext &c) {
  int64_t rows = shapeOf(op.getLogits())[0], classes = shapeOf(op.getLogits())[1];
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  StringRef red = op.getReduction();
  c.os << "    const int64_t y = (int64_t)" << c.in[2] << "[i];\n"
       << "    float* dz = " << c.out[0] << " + i * " << classes << ";\n"
       << "    if (" << ignoredTest(ignore, "y") << ") {\n"
       << "      for (int64_t k = 0; k < " << classes
       << "; ++k) dz[k] = 0.0f;\n    } else {\n";
  if (red == "mean") {
    c.os << "      int64_t count = 0;\n"
         << "      for (int64_t n = 0; n < " << rows << "; ++n) count += !("
         << ignoredTest(ignore, "(int64_t)" + c.in[2] + "[n]") << ");\n"
         << "      const float g = " << c.in[0] << "[0] / (float)count;\n";
  } else if (red == "sum") {
    c.os << "      const float g = " << c.in[0] << "[0];\n";
  } else {
    c.os << "      const float g = " << c.in[0] << "[i];\n";
  }
  emitRowLogSumExp(c.os, c.in[1], "i", classes);
  c.os << "      for (int64_t k = 0; k < " << classes << "; ++k)\n"
       << "        dz[k] = g * (expf(z[k] - lse) - (k == y ? 1.0f : 0.0f));\n"
       << "    }\n";
  return success();
}

static LogicalResult emitAdamW(AdamWOp op, BodyContext &c) {
  double b1 = op.getBeta1().convertToDouble(), b2 = op.getBeta2().convertToDouble();
  c.os << "    const float p = " << c.in[0] << "[i], g = " << c.in[1]
       << "[i];\n"
       << "    const float lr = " << c.in[4] << "[0], t = " << c.in[5]
       << "[0];\n"
       << "    const float m = " << literal(b1) << "f * " << c.in[2]
       << "[i] + " << literal(1.0 - b1) << "f * g;\n"
       << "    const float v = " << literal(b2) << "f * " << c.in[3]
       << "[i] + " << literal(1.0 - b2) << "f * g * g;\n"
       << "    const float mhat = m / (1.0f - powf(" << literal(b1)
       << "f, t));\n"
       << "    const float vhat = v / (1.0f - powf(" << literal(b2)
       << "f, t));\n"
       << "    " << c.out[0] << "[i] = p - lr * (mhat / (sqrtf(vhat) + "
       << literal(op.getEpsilon().convertToDouble()) << "f) + "
       << literal(op.getWeightDecay().convertToDouble()) << "f * p);\n"
       << "    " << c.out[1] << "[i] = m;\n"
       << "    " << c.out[2] << "[i] = v;\n";
  return success();
}

LogicalResult otc::emitBody(Operation *op, BodyContext &c) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type t : types)
    if (cTypeOf(getElementTypeOrSelf(t)).empty())
      return op->emitOpError("cannot emit element type ")
             << getElementTypeOrSelf(t);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ConstantOp o) { return emitConstant(o, c); })
      .Case([&](AddOp o) { return emitBinary(o, "a + b", c); })
      .Case([&](SubOp o) { return emitBinary(o, "a - b", c); })
      .Case([&](MulOp o) { return emitBinary(o, "a * b", c); })
      .Case([&](DivOp o) { return emitBinary(o, "a / b", c); })
      .Case([&](NegOp o) { return emitUnary(o, "-x", c); })
      .Case([&](ExpOp o) { return emitUnary(o, "expf(x)", c); })
      .Case([&](LogOp o) { return emitUnary(o, "logf(x)", c); })
      .Case([&](TanhOp o) { return emitUnary(o, "tanhf(x)", c); })
      .Case([&](ReluOp o) { return emitUnary(o, "x > 0.0f ? x : 0.0f", c); })
      .Case([&](ReluGradOp o) {
        return emitBinary(o, "b > 0.0f ? a : 0.0f", c);
      })
      .Case([&](TanhGradOp o) {
        return emitBinary(o, "a * (1.0f - b * b)", c);
      })
      .Case([&](ReshapeOp o) {
        c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[i];\n";
        return success();
      })
      .Case([&](BroadcastOp o) {
        emitBroadcastIndex(c.os, "src", shapeOf(o.getInput()),
                           shapeOf(o.getResult()));
        c.os << "    " << c.out[0] << "[i] = " << c.in[0] << "[src];\n";
        return success();
      })
      .Case([&](TransposeOp o) { return emitTranspose(o, c); })
      .Case([&](ReduceSumOp o) { return emitReduceSum(o, c); })
      .Case([&](DropoutOp o) { return emitDropout(o, c); })
      .Case([&](DropoutGradOp o) { return emitDropoutGrad(o, c); })
      .Case([&](SoftmaxCrossEntropyOp o) {
        return emitSoftmaxCrossEntropy(o, c);
      })
      .Case([&](SoftmaxCrossEntropyGradOp o) {
        return emitSoftmaxCrossEntropyGrad(o, c);
      })
      .Case([&](AdamWOp o) { return emitAdamW(o, c); })
      .Default([](Operation *op) {
        return op->emitOpError("has no kernel emitter");
      });
}
