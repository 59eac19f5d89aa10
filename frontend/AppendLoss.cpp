//===- AppendLoss.cpp - a loss for graphs that end before one -------------===//
//
// Implementation of parseLossSpec and appendLoss (frontend/AppendLoss.h): the
// appended loss is built from the same otc ops the importer makes of ONNX's
// SoftmaxCrossEntropyLoss (reshape to [rows, C], softmax_cross_entropy) and of
// an exported mean squared error (sub, mul, reduce_sum, scale), so every later
// pass sees what it would see for a graph with the loss inside.
//
//===----------------------------------------------------------------------===//

#include "frontend/AppendLoss.h"

#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>

using namespace mlir;

namespace otc {

std::optional<LossSpec> parseLossSpec(llvm::StringRef whole,
                                      std::string &error) {
  LossSpec spec;
  auto bad = [&](const std::string &why) {
    error = "bad --loss '" + whole.str() + "': " + why;
    return std::nullopt;
  };
  // The terms after the first '+': C*OUTPUT or OUTPUT.
  SmallVector<llvm::StringRef> pieces;
  whole.split(pieces, '+');
  llvm::StringRef text = pieces.front();
  for (llvm::StringRef term : llvm::drop_begin(pieces)) {
    LossSpec::Term t;
    auto [coefficient, output] = term.split('*');
    if (output.empty()) {
      output = coefficient;
    } else if (coefficient.trim().getAsDouble(t.coefficient) ||
               !std::isfinite(t.coefficient)) {
      return bad("expected +C*OUTPUT (C a number) or +OUTPUT, got '+" +
                 term.str() + "'");
    }
    t.output = output.trim().str();
    if (t.output.empty())
      return bad("a term names no output");
    spec.terms.push_back(t);
  }
  SmallVector<llvm::StringRef> parts;
  text.split(parts, ':');
  if (parts.size() == 1) {
    if (!spec.terms.empty())
      return bad("terms add to an appended loss (cross_entropy:... or "
                 "mse:...+C*OUTPUT); a graph output that is the loss "
                 "already holds what the model adds to it");
    spec.output = text.str();
    return spec;
  }
  if (parts[0] == "cross_entropy")
    spec.kind = LossSpec::Kind::CrossEntropy;
  else if (parts[0] == "mse")
    spec.kind = LossSpec::Kind::Mse;
  else
    return bad("expected OUTPUT, cross_entropy:LOGITS:TARGETS[:ignore=N] or "
               "mse:OUTPUT:TARGET");
  bool ce = spec.kind == LossSpec::Kind::CrossEntropy;
  if (parts.size() < 3 || parts.size() > (ce ? 4u : 3u))
    return bad(ce ? "expected cross_entropy:LOGITS:TARGETS[:ignore=N]"
                  : "expected mse:OUTPUT:TARGET");
  spec.output = parts[1].str();
  spec.targets = parts[2].str();
  if (spec.output.empty() || spec.targets.empty())
    return bad("empty output or target name");
  if (parts.size() == 4) {
    llvm::StringRef value = parts[3];
    if (!value.consume_front("ignore=") ||
        value.getAsInteger(10, spec.ignoreIndex))
      return bad("expected ignore=N (an integer) after the targets, got '" +
                 parts[3].str() + "'");
  }
  return spec;
}

namespace {

/// Where the loss attaches in the forward function: the output it reads and
/// the position of its new targets input (after the last input).
struct LossSite {
  unsigned output = 0;
  unsigned targetsAt = 0;
};

/// The output `spec` reads and where its targets go, checked against the
/// names the loss adds; "" on success, else the error.
std::string findLossSite(func::FuncOp forward, const LossSpec &spec,
                         LossSite &site) {
  std::optional<unsigned> outIndex;
  for (unsigned i = 0; i < forward.getNumResults(); ++i) {
    auto name = forward.getResultAttrOfType<StringAttr>(i, attrs::kOutput);
    if (name && name.getValue() == spec.output)
      outIndex = i;
    if (name && name.getValue() == kAppendedLossName)
      return std::string("the graph already has an output named '") +
             kAppendedLossName +
             "': name it as the loss (--loss=" + kAppendedLossName +
             ") or rename it";
  }
  if (!outIndex)
    return "no graph output named '" + spec.output + "'";
  site.output = *outIndex;
  site.targetsAt = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    for (const char *kind : {attrs::kInput, attrs::kParam}) {
      auto name = forward.getArgAttrOfType<StringAttr>(i, kind);
      if (name && name.getValue() == spec.targets)
        return "the targets '" + spec.targets + "' would be a new graph " +
               "input, but the graph already has an " +
               (kind == attrs::kInput ? "input" : "initializer") +
               " of that name";
    }
    if (forward.getArgAttr(i, attrs::kInput))
      site.targetsAt = i + 1;
  }
  return "";
}

/// The mean cross-entropy of the rows of `out` (classes last) against
/// `targets` (int64, its shape without the class axis), built at `b`.
Value crossEntropy(OpBuilder &b, Location loc, Value out, Value targets,
                   int64_t ignoreIndex) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(out.getType()).getShape();
  Type f32 = b.getF32Type();
  int64_t classes = shape.back();
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  Value logits = out, labels = targets;
  if (shape.size() > 2) {
    logits = b.create<ReshapeOp>(
        loc, RankedTensorType::get({rows, classes}, f32), out);
    labels = b.create<ReshapeOp>(
        loc, RankedTensorType::get({rows}, b.getIntegerType(64)), targets);
  }
  return b.create<SoftmaxCrossEntropyOp>(loc, RankedTensorType::get({}, f32),
                                         logits, labels, "mean",
                                         b.getI64IntegerAttr(ignoreIndex));
}

/// The mean squared error of `out` against `target` (its type).
Value meanSquaredError(OpBuilder &b, Location loc, Value out, Value target) {
  auto outType = cast<RankedTensorType>(out.getType());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Value diff = b.create<SubOp>(loc, outType, out, target);
  Value square = b.create<MulOp>(loc, outType, diff, diff);
  SmallVector<int64_t> axes = llvm::to_vector(
      llvm::seq<int64_t>(0, static_cast<int64_t>(outType.getRank())));
  Value sum = outType.getRank() == 0
                  ? square
                  : b.create<ReduceSumOp>(loc, scalar, square, axes,
                                          /*keep_dims=*/false);
  double count = static_cast<double>(outType.getNumElements());
  Value scale = b.create<ConstantOp>(
      loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(1.0 / count)));
  return b.create<MulOp>(loc, scalar, sum, scale);
}

/// `loss` plus each term of `spec` (a scalar float32 output) times its
/// coefficient; "" on success, else the error.
std::string addTerms(OpBuilder &b, Location loc, func::FuncOp forward,
                     func::ReturnOp ret, const LossSpec &spec, Value &loss) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  for (const LossSpec::Term &t : spec.terms) {
    std::optional<unsigned> at;
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<StringAttr>(i, attrs::kOutput))
        if (name.getValue() == t.output)
          at = i;
    if (!at)
      return "no graph output named '" + t.output + "' to add";
    Value term = ret.getOperand(*at);
    if (term.getType() != scalar)
      return "output '" + t.output +
             "' is not a float32 scalar, so it cannot be added to the loss";
    Value c = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(scalar, b.getF32FloatAttr(t.coefficient)));
    loss = b.create<AddOp>(loc, scalar, loss,
                           b.create<MulOp>(loc, scalar, term, c));
  }
  return "";
}

} // namespace

bool appendLoss(ModuleOp module, const LossSpec &spec, std::string &error) {
  std::string what = spec.kind == LossSpec::Kind::CrossEntropy
                         ? "--loss=cross_entropy"
                         : "--loss=mse";
  auto fail = [&](const std::string &msg) {
    error = what + ": " + msg;
    return false;
  };
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.getBody().empty())
    return fail("the module has no forward function");
  Block &entry = forward.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator());
  if (!ret)
    return fail("the forward function does not end in a return");
  LossSite site;
  if (std::string e = findLossSite(forward, spec, site); !e.empty())
    return fail(e);
  Value out = ret.getOperand(site.output);
  auto outType = cast<RankedTensorType>(out.getType());
  if (!outType.getElementType().isF32())
    return fail("output '" + spec.output + "' is not float32");
  ArrayRef<int64_t> shape = outType.getShape();
  const bool crossEntropyLoss = spec.kind == LossSpec::Kind::CrossEntropy;
  if (crossEntropyLoss && shape.size() < 2)
    return fail("output '" + spec.output +
                "' must have a class axis (last) and at least one row "
                "axis, got rank " +
                std::to_string(shape.size()));

  // The targets: a new graph input after the last one, named by the spec.
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Location loc = NameLoc::get(StringAttr::get(ctx, kAppendedLossName));
  Type targetsType =
      crossEntropyLoss
          ? RankedTensorType::get(shape.drop_back(), b.getIntegerType(64))
          : Type(outType);
  forward.insertArgument(site.targetsAt, targetsType,
                         b.getDictionaryAttr(b.getNamedAttr(
                             attrs::kInput, b.getStringAttr(spec.targets))),
                         NameLoc::get(StringAttr::get(ctx, spec.targets)));
  Value targets = forward.getArgument(site.targetsAt);
  b.setInsertionPoint(ret);
  Value loss = crossEntropyLoss
                   ? crossEntropy(b, loc, out, targets, spec.ignoreIndex)
                   : meanSquaredError(b, loc, out, targets);
  if (std::string e = addTerms(b, loc, forward, ret, spec, loss); !e.empty())
    return fail(e);

  // The loss becomes the last graph output.
  unsigned index = forward.getNumResults();
  ret->insertOperands(index, loss);
  forward.insertResult(
      index, RankedTensorType::get({}, b.getF32Type()),
      b.getDictionaryAttr(
          b.getNamedAttr(attrs::kOutput, b.getStringAttr(kAppendedLossName))));
  return true;
}

} // namespace otc
