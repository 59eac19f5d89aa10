//===- FusedBodies.cpp - bodies of the fused activations ------------------===//
//
// Kernel bodies of the fused elementwise ops of OtcFusedOps.td: GELU (exact
// and tanh) and SiLU with their gradients, one work item per element. All
// arithmetic happens in float whatever the storage type (an otc_bf16 widens
// exactly on load and rounds to nearest even on store); each item reads all
// it needs before its store, so the result may alias an input. The other
// fused ops (attention, the norms, cross-entropy) are calls of the runtime's
// kernel library (LibraryCallOpInterface), not generated bodies.
//
//===----------------------------------------------------------------------===//

#include "codegen/BodyUtils.h"
#include "ir/OtcDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace otc;

namespace {

/// `p[at]` widened to float.
std::string load(StringRef p, const Twine &at) {
  return ("(float)" + p + "[" + at + "]").str();
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// 1 / sqrt(2), sqrt(2 / pi) and 1 / sqrt(2 pi).
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

/// gelu (`grad` false) or gelu_grad of element `i`.
LogicalResult emitGelu(Operation *op, StringRef approximate, bool grad,
                       BodyContext &c) {
  StringRef x = c.in[grad ? 1 : 0];
  if (grad)
    c.os << "    const float g = " << load(c.in[0], "i") << ";\n";
  c.os << "    const float x = " << load(x, "i") << ";\n";
  if (approximate == "tanh") {
    c.os << "    const float u = " << floatLiteral(kSqrt2OverPi) << " * (x + "
         << floatLiteral(kGeluCubic) << " * x * x * x);\n"
         << "    const float th = tanhf(u);\n";
    if (grad)
      c.os << "    const float du = " << floatLiteral(kSqrt2OverPi)
           << " * (1.0f + " << floatLiteral(3 * kGeluCubic) << " * x * x);\n"
           << "    " << c.out[0]
           << "[i] = g * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * "
              "du);\n";
    else
      c.os << "    " << c.out[0] << "[i] = 0.5f * x * (1.0f + th);\n";
  } else if (approximate == "none") {
    c.os << "    const float cdf = 0.5f * (1.0f + erff(x * "
         << floatLiteral(kInvSqrt2) << "));\n";
    if (grad)
      c.os << "    " << c.out[0] << "[i] = g * (cdf + x * "
           << floatLiteral(kInvSqrt2Pi) << " * expf(-0.5f * x * x));\n";
    else
      c.os << "    " << c.out[0] << "[i] = x * cdf;\n";
  } else {
    return op->emitOpError("unknown approximation '") << approximate << "'";
  }
  return success();
}

/// silu (`grad` false) or silu_grad of element `i`.
LogicalResult emitSilu(bool grad, BodyContext &c) {
  if (grad)
    c.os << "    const float g = " << load(c.in[0], "i") << ";\n";
  c.os << "    const float x = " << load(c.in[grad ? 1 : 0], "i") << ";\n"
       << "    const float sg = 1.0f / (1.0f + expf(-x));\n"
       << "    " << c.out[0]
       << "[i] = " << (grad ? "g * sg * (1.0f + x * (1.0f - sg))" : "x * sg")
       << ";\n";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::optional<int64_t> otc::fusedWorkItems(Operation *op) {
  if (isa<GeluOp, GeluGradOp, SiluOp, SiluGradOp>(op))
    return bodyNumel(op->getResult(0));
  return std::nullopt;
}

std::optional<LogicalResult> otc::emitFusedBody(Operation *op, BodyContext &c) {
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](GeluOp o) {
        return emitGelu(o, o.getApproximate(), /*grad=*/false, c);
      })
      .Case([&](GeluGradOp o) {
        return emitGelu(o, o.getApproximate(), /*grad=*/true, c);
      })
      .Case([&](SiluOp) { return emitSilu(/*grad=*/false, c); })
      .Case([&](SiluGradOp) { return emitSilu(/*grad=*/true, c); })
      .Default([](Operation *) { return std::nullopt; });
}
