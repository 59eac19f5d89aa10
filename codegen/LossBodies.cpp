//===- LossBodies.cpp - bodies of losses and the optimizer ----------------===//
//
// Kernel bodies of softmax_cross_entropy and nll_loss on [N, C] scores with
// [N] labels, their gradients, and the AdamW update. A loss with reduction
// "none" runs one work item per row; "mean" and "sum" run a single item that
// sums the rows in order (the loss is a scalar). The gradients run one item
// per row, which owns that row of the [N, C] result. Rows whose label is the
// ignore index contribute nothing; "mean" divides by the rows not ignored.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"
#include "ir/TypeBytes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace otc;

/// Emits the log-sum-exp of row `row` of logits [N, C] (element type
/// `type`, a C type) into `lse`, with `z` pointing at the row. Loads widen to
/// float, so BF16 logits compute in FP32.
static void emitRowLogSumExp(raw_ostream &os, StringRef logits,
                             StringRef type, StringRef row, int64_t classes) {
  os << "      const " << type << "* z = " << logits << " + " << row << " * "
     << classes << ";\n"
     << "      float mx = (float)z[0];\n"
     << "      for (int64_t k = 1; k < " << classes
     << "; ++k) mx = (float)z[k] > mx ? (float)z[k] : mx;\n"
     << "      float se = 0.0f;\n"
     << "      for (int64_t k = 0; k < " << classes
     << "; ++k) se += expf((float)z[k] - mx);\n"
     << "      const float lse = mx + logf(se);\n";
}

/// Emits the loss of a [N, C]-scores op: `rowLoss` emits the statements that
/// compute `rl`, the loss of row `n` (label `y`), with `z` pointing at the
/// row of scores.
static LogicalResult
emitRowLoss(Value scores, std::optional<int64_t> ignore, StringRef red,
            BodyContext &c, llvm::function_ref<void(StringRef row)> rowLoss) {
  int64_t rows = bodyShapeOf(scores)[0];
  if (red == "none") {
    c.os << "    const int64_t y = (int64_t)" << c.in[1] << "[i];\n"
         << "    if (" << ignoredTest(ignore, "y") << ") { " << c.out[0]
         << "[i] = 0.0f; } else {\n";
    rowLoss("i");
    c.os << "      " << c.out[0] << "[i] = rl;\n    }\n";
    return success();
  }
  c.os << "    float total = 0.0f; int64_t count = 0;\n"
       << "    for (int64_t n = 0; n < " << rows << "; ++n) {\n"
       << "      const int64_t y = (int64_t)" << c.in[1] << "[n];\n"
       << "      if (" << ignoredTest(ignore, "y") << ") continue;\n";
  rowLoss("n");
  c.os << "      total += rl; ++count;\n    }\n";
  // With every row ignored the mean is 0 / 0: NaN, as in PyTorch.
  if (red == "mean")
    c.os << "    " << c.out[0] << "[0] = total / (float)count;\n";
  else
    c.os << "    " << c.out[0] << "[0] = total;\n";
  return success();
}

/// Emits `g`, the incoming gradient of row `i`'s loss, for a loss reduced by
/// `red` whose labels are `labels`.
static void emitRowGradScale(StringRef grad, StringRef labels, int64_t rows,
                             std::optional<int64_t> ignore, StringRef red,
                             BodyContext &c) {
  if (red == "mean") {
    c.os << "      int64_t count = 0;\n"
         << "      for (int64_t n = 0; n < " << rows << "; ++n) count += !("
         << ignoredTest(ignore, "(int64_t)" + labels.str() + "[n]") << ");\n"
         << "      const float g = " << grad << "[0] / (float)count;\n";
  } else if (red == "sum") {
    c.os << "      const float g = " << grad << "[0];\n";
  } else {
    c.os << "      const float g = " << grad << "[i];\n";
  }
}

static LogicalResult emitSoftmaxCrossEntropy(SoftmaxCrossEntropyOp op,
                                             BodyContext &c) {
  int64_t classes = bodyShapeOf(op.getLogits())[1];
  return emitRowLoss(op.getLogits(), op.getIgnoreIndex(), op.getReduction(), c,
                     [&](StringRef row) {
                       emitRowLogSumExp(c.os, c.in[0],
                                        bodyCType(op.getLogits()), row,
                                        classes);
                       c.os << "      const float rl = lse - (float)z[y];\n";
                     });
}

static LogicalResult emitSoftmaxCrossEntropyGrad(SoftmaxCrossEntropyGradOp op,
                                                 BodyContext &c) {
  int64_t rows = bodyShapeOf(op.getLogits())[0];
  int64_t classes = bodyShapeOf(op.getLogits())[1];
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  c.os << "    const int64_t y = (int64_t)" << c.in[2] << "[i];\n"
       << "    " << bodyCType(op.getResult()) << "* dz = " << c.out[0]
       << " + i * " << classes << ";\n"
       << "    if (" << ignoredTest(ignore, "y") << ") {\n"
       << "      for (int64_t k = 0; k < " << classes
       << "; ++k) dz[k] = 0.0f;\n    } else {\n";
  emitRowGradScale(c.in[0], c.in[2], rows, ignore, op.getReduction(), c);
  emitRowLogSumExp(c.os, c.in[1], bodyCType(op.getLogits()), "i", classes);
  c.os << "      for (int64_t k = 0; k < " << classes << "; ++k)\n"
       << "        dz[k] = g * (expf(z[k] - lse) - (k == y ? 1.0f : 0.0f));\n"
       << "    }\n";
  return success();
}

static LogicalResult emitNllLoss(NllLossOp op, BodyContext &c) {
  int64_t classes = bodyShapeOf(op.getInput())[1];
  return emitRowLoss(op.getInput(), op.getIgnoreIndex(), op.getReduction(), c,
                     [&](StringRef row) {
                       c.os << "      const float rl = -" << c.in[0] << "["
                            << row << " * " << classes << " + y];\n";
                     });
}

/// One item per row: -g at the label's column, zero elsewhere.
static LogicalResult emitNllLossGrad(NllLossGradOp op, BodyContext &c) {
  int64_t rows = bodyShapeOf(op.getResult())[0];
  int64_t classes = bodyShapeOf(op.getResult())[1];
  std::optional<int64_t> ignore = op.getIgnoreIndex();
  c.os << "    const int64_t y = (int64_t)" << c.in[1] << "[i];\n"
       << "    " << bodyCType(op.getResult()) << "* dx = " << c.out[0]
       << " + i * " << classes << ";\n"
       << "    for (int64_t k = 0; k < " << classes << "; ++k) dx[k] = 0.0f;\n"
       << "    if (!(" << ignoredTest(ignore, "y") << ")) {\n";
  emitRowGradScale(c.in[0], c.in[1], rows, ignore, op.getReduction(), c);
  c.os << "      dx[y] = -g;\n    }\n";
  return success();
}

/// The scalars of an AdamW body and its bias corrections 1 - beta^t, the
/// same for every element: once per thread before the loop where the
/// emitter allows (`c.uniform`), else at the top of the body. The
/// corrections are -expm1(t ln beta), ln beta formed here in double: no
/// cancellation against 1 (1 - powf(0.999f, 1) is 1.3e-5 off 0.001, since
/// 0.999f is not 0.999).
static void emitAdamWUniforms(AdamWOp op, BodyContext &c) {
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  std::string uniformText;
  llvm::raw_string_ostream local(uniformText);
  llvm::raw_ostream &u = c.uniform ? *c.uniform : local;
  const char *indent = c.uniform ? "  " : "    ";
  u << indent << "const float s = " << c.in[6] << "[0];\n"
    << indent << "const float lr = " << c.in[4] << "[0], t = " << c.in[5]
    << "[0];\n"
    << indent << "const float bc1 = -expm1f(t * " << literal(std::log(b1))
    << "f), bc2 = -expm1f(t * " << literal(std::log(b2)) << "f);\n";
  c.os << local.str();
}

/// The update of one element: parameter `p`, gradient `g` (unscaled), moments
/// `m`, `v` (read, then assigned the new ones) and the new parameter into
/// `np`, each a C lvalue or expression of the body.
static void emitAdamWUpdate(AdamWOp op, BodyContext &c, const std::string &ind,
                            const std::string &p, const std::string &g,
                            const std::string &m, const std::string &v,
                            const std::string &np) {
  double b1 = op.getBeta1().convertToDouble(),
         b2 = op.getBeta2().convertToDouble();
  c.os << ind << "const float p = " << p << ", g = s * (float)" << g << ";\n"
       << ind << "const float m = " << literal(b1) << "f * " << m << " + "
       << literal(1.0 - b1) << "f * g;\n"
       << ind << "const float v = " << literal(b2) << "f * " << v << " + "
       << literal(1.0 - b2) << "f * g * g;\n"
       << ind << "const float mhat = m / bc1;\n"
       << ind << "const float vhat = v / bc2;\n"
       << ind << np << " = p - lr * (mhat / (sqrtf(vhat) + "
       << literal(op.getEpsilon().convertToDouble()) << "f) + "
       << literal(op.getWeightDecay().convertToDouble()) << "f * p);\n";
}

static LogicalResult emitAdamW(AdamWOp op, BodyContext &c) {
  emitAdamWUniforms(op, c);
  // A factor that is not finite (the runtime's verdict on the gradients'
  // norm) skips the update: every output keeps its input. s - s is 0 for a
  // finite s and NaN otherwise (one test for the host and device compilers).
  c.os << "    if (!(s - s == 0.0f)) {\n"
       << "      " << c.out[0] << "[i] = " << c.in[0] << "[i];\n"
       << "      " << c.out[1] << "[i] = " << c.in[2] << "[i];\n"
       << "      " << c.out[2] << "[i] = " << c.in[3] << "[i];\n";
  if (op.getCopy())
    c.os << "      " << c.out[3] << "[i] = " << bodyCType(op.getCopy()) << "("
         << c.in[0] << "[i]);\n";
  c.os << "    } else {\n";
  emitAdamWUpdate(op, c, "    ", c.in[0] + "[i]", c.in[1] + "[i]",
                  c.in[2] + "[i]", c.in[3] + "[i]", c.out[0] + "[i]");
  c.os << "    " << c.out[1] << "[i] = m;\n"
       << "    " << c.out[2] << "[i] = v;\n";
  // The BF16 working copy of the updated parameter, in the same pass.
  if (op.getCopy())
    c.os << "    " << c.out[3] << "[i] = " << bodyCType(op.getCopy()) << "("
         << c.out[0] << "[i]);\n";
  c.os << "    }\n";
  return success();
}

/// The vector type that holds `width` elements of `bytes` bytes in one
/// load (8 or 16 bytes), or "" when there is none.
static std::string packetType(int width, int64_t bytes) {
  switch (width * bytes) {
  case 8:
    return "uint2";
  case 16:
    return "uint4";
  default:
    return "";
  }
}

int otc::packedAdamWWidth(Operation *op, int64_t items) {
  auto adam = dyn_cast<AdamWOp>(op);
  constexpr int kWidth = 4;
  if (!adam || items % kWidth != 0)
    return 1;
  for (Value v : op->getOperands().take_front(4))
    if (packetType(kWidth, storageBytes(getElementTypeOrSelf(v.getType()))).empty())
      return 1;
  if (adam.getCopy() &&
      packetType(kWidth, storageBytes(getElementTypeOrSelf(adam.getCopy().getType())))
          .empty())
    return 1;
  return kWidth;
}

int otc::packedItemWidth(Operation *op, int64_t items) {
  if (isa<SliceOp, ConcatOp>(op))
    return packedCopyWidth(op);
  return packedAdamWWidth(op, items);
}

LogicalResult otc::emitPackedAdamWBody(Operation *op, int width,
                                       BodyContext &c) {
  auto adam = cast<AdamWOp>(op);
  emitAdamWUniforms(adam, c);
  // Item i updates elements [i * width, (i + 1) * width): one vector load
  // or store per operand (every slot starts 16-byte aligned), the same
  // arithmetic per element as the scalar body.
  auto packet = [&](Value v, const std::string &name) {
    std::string t = bodyCType(v);
    std::string vec = packetType(width, storageBytes(getElementTypeOrSelf(v.getType())));
    c.os << "    union { " << vec << " v; " << t << " e[" << width << "]; } "
         << name << ";\n";
    return vec;
  };
  std::vector<std::string> ins = {"pk_p", "pk_g", "pk_m", "pk_v"};
  for (unsigned k = 0; k < 4; ++k) {
    std::string vec = packet(op->getOperand(k), ins[k]);
    c.os << "    " << ins[k] << ".v = reinterpret_cast<const " << vec << " *>("
         << c.in[k] << ")[i];\n";
  }
  if (adam.getCopy())
    packet(adam.getCopy(), "pk_c");
  // A factor that is not finite skips the update: the outputs are written
  // their inputs (the scalar body's rule).
  c.os << "    if (s - s == 0.0f) {\n"
       << "#pragma unroll\n"
       << "      for (int e = 0; e < " << width << "; ++e) {\n";
  emitAdamWUpdate(adam, c, "        ", "pk_p.e[e]", "pk_g.e[e]", "pk_m.e[e]",
                  "pk_v.e[e]", "pk_p.e[e]");
  c.os << "        pk_m.e[e] = m;\n"
       << "        pk_v.e[e] = v;\n"
       << "      }\n"
       << "    }\n";
  if (adam.getCopy())
    c.os << "#pragma unroll\n"
         << "    for (int e = 0; e < " << width << "; ++e) pk_c.e[e] = "
         << bodyCType(adam.getCopy()) << "(pk_p.e[e]);\n";
  std::vector<std::pair<std::string, Value>> outs = {
      {"pk_p", adam.getNewParam()}, {"pk_m", adam.getNewM()}, {"pk_v", adam.getNewV()}};
  if (adam.getCopy())
    outs.push_back({"pk_c", adam.getCopy()});
  for (auto [k, o] : llvm::enumerate(outs)) {
    std::string vec = packetType(width, storageBytes(getElementTypeOrSelf(o.second.getType())));
    c.os << "    reinterpret_cast<" << vec << " *>(" << c.out[k] << ")[i] = "
         << o.first << ".v;\n";
  }
  return success();
}

std::optional<int64_t> otc::lossWorkItems(Operation *op) {
  return TypeSwitch<Operation *, std::optional<int64_t>>(op)
      .Case([](SoftmaxCrossEntropyOp o) -> int64_t {
        return o.getReduction() == "none" ? bodyShapeOf(o.getLogits())[0] : 1;
      })
      .Case([](NllLossOp o) -> int64_t {
        return o.getReduction() == "none" ? bodyShapeOf(o.getInput())[0] : 1;
      })
      .Case([](SoftmaxCrossEntropyGradOp o) -> int64_t {
        return bodyShapeOf(o.getLogits())[0];
      })
      .Case([](NllLossGradOp o) -> int64_t {
        return bodyShapeOf(o.getResult())[0];
      })
      .Default([](Operation *) { return std::nullopt; });
}

// An item reads its label, then the logit it names or its row's
// log-sum-exp (maximum and sum: store-free sweeps over the classes); a
// gradient then sweeps the row again to write it, after the incoming
// gradient and, for a mean, a count over every row's label (the same for
// every item: cached); nll_loss_grad's zeros are stores alone. A reduced
// loss's single item does every row in turn.
std::optional<ItemSteps> otc::lossItemSteps(Operation *op) {
  auto meanCount = [](StringRef reduction, int64_t rows) -> int64_t {
    return reduction == "mean" ? unrolledSteps(rows) : 0;
  };
  return TypeSwitch<Operation *, std::optional<ItemSteps>>(op)
      .Case([](SoftmaxCrossEntropyOp o) -> std::optional<ItemSteps> {
        ArrayRef<int64_t> s = bodyShapeOf(o.getLogits());
        int64_t row = 2 + 2 * unrolledSteps(s[1]);
        return ItemSteps{o.getReduction() == "none" ? row : s[0] * row, 0};
      })
      .Case([](NllLossOp o) -> std::optional<ItemSteps> {
        int64_t rows = bodyShapeOf(o.getInput())[0];
        return ItemSteps{
            o.getReduction() == "none" ? 2 : 2 * unrolledSteps(rows), 0};
      })
      .Case([&](SoftmaxCrossEntropyGradOp o) -> std::optional<ItemSteps> {
        ArrayRef<int64_t> s = bodyShapeOf(o.getLogits());
        return ItemSteps{2 + 2 * unrolledSteps(s[1]) + s[1],
                         meanCount(o.getReduction(), s[0])};
      })
      .Case([&](NllLossGradOp o) -> std::optional<ItemSteps> {
        ArrayRef<int64_t> s = bodyShapeOf(o.getResult());
        return ItemSteps{2, meanCount(o.getReduction(), s[0])};
      })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<LogicalResult> otc::emitLossBody(Operation *op, BodyContext &c) {
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](SoftmaxCrossEntropyOp o) {
        return emitSoftmaxCrossEntropy(o, c);
      })
      .Case([&](SoftmaxCrossEntropyGradOp o) {
        return emitSoftmaxCrossEntropyGrad(o, c);
      })
      .Case([&](NllLossOp o) { return emitNllLoss(o, c); })
      .Case([&](NllLossGradOp o) { return emitNllLossGrad(o, c); })
      .Case([&](AdamWOp o) { return emitAdamW(o, c); })
      .Default([](Operation *) { return std::nullopt; });
}
