//===- Differentiate.cpp - reverse-mode differentiation of @forward --------===//
//
// Builds `@train_step` from `@forward`: the forward ops are cloned, then the
// ops on the path from a trainable parameter to the loss are visited in
// reverse and asked (through GradientOpInterface) for the gradients of their
// operands. Gradients reaching one value along several paths are summed; a
// parameter used twice (a tied embedding) gets the sum of both. A sum of
// slice gradients that tile the value along one axis (the backward of a
// Split, e.g. a fused QKV projection) is one concat of the pieces' gradients
// instead: each slice_grad would write the whole zero-padded value and each
// add read two of them.
//
//===----------------------------------------------------------------------===//

#include "ir/NameRegex.h"
#include "ir/OtcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace otc {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The concat along one axis of the pieces' gradients when `sum`, an add
/// tree made only to accumulate them, sums slice_grads (unit strides, each
/// used once) whose windows differ from the full value along that axis
/// only and tile it without gaps; `sum` itself otherwise. Exact: the
/// windows are disjoint, so each element of the sum is one piece's value
/// plus zeros.
static Value joinSliceGradients(OpBuilder &b, Value sum) {
  auto type = cast<RankedTensorType>(sum.getType());
  SmallVector<Value> leaves;
  std::function<void(Value)> collect = [&](Value v) {
    auto add = v.getDefiningOp<AddOp>();
    if (add && add.getType() == type && add.getLhs().getType() == type &&
        add.getRhs().getType() == type && (v == sum || v.hasOneUse())) {
      collect(add.getLhs());
      collect(add.getRhs());
      return;
    }
    leaves.push_back(v);
  };
  collect(sum);
  if (leaves.size() < 2)
    return sum;
  std::optional<int64_t> axis;
  SmallVector<std::pair<int64_t, SliceGradOp>> pieces;
  for (Value leaf : leaves) {
    auto sg = leaf.getDefiningOp<SliceGradOp>();
    if (!sg || !leaf.hasOneUse() || sg.getType() != type)
      return sum;
    auto gt = cast<RankedTensorType>(sg.getGrad().getType());
    if (gt.getElementType() != type.getElementType() ||
        gt.getRank() != type.getRank() ||
        llvm::any_of(sg.getStrides(), [](int64_t s) { return s != 1; }))
      return sum;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (gt.getDimSize(d) == type.getDimSize(d) && sg.getStarts()[d] == 0)
        continue;
      if (axis && *axis != d)
        return sum;
      axis = d;
    }
    if (!axis)
      return sum; // A window that is the whole value: nothing to join.
    pieces.push_back({sg.getStarts()[*axis], sg});
  }
  llvm::sort(pieces, [](auto &x, auto &y) { return x.first < y.first; });
  int64_t next = 0;
  SmallVector<Value> parts;
  for (auto &[start, sg] : pieces) {
    if (start != next)
      return sum;
    next += cast<RankedTensorType>(sg.getGrad().getType()).getDimSize(*axis);
    parts.push_back(sg.getGrad());
  }
  if (next != type.getDimSize(*axis))
    return sum;
  return b.create<ConcatOp>(sum.getLoc(), type, parts, *axis);
}

/// Index of the loss among `func`'s results, or failure with an error.
static FailureOr<unsigned> findLoss(func::FuncOp func, StringRef lossName) {
  std::optional<unsigned> found;
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto name = func.getResultAttrOfType<StringAttr>(i, attrs::kOutput);
    auto type = cast<RankedTensorType>(func.getResultTypes()[i]);
    bool scalarFloat =
        type.getRank() == 0 && isa<FloatType>(type.getElementType());
    if (!lossName.empty()) {
      if (name && name.getValue() == lossName) {
        if (!scalarFloat)
          return func.emitError("loss output '")
                 << lossName << "' is not a scalar float (" << type << ")";
        found = i;
      }
      continue;
    }
    if (!scalarFloat)
      continue;
    if (found)
      return func.emitError("several scalar float outputs: name the loss with "
                            "--loss=OUTPUT");
    found = i;
  }
  if (!found) {
    if (!lossName.empty())
      return func.emitError("no graph output named '") << lossName << "'";
    return func.emitError("no scalar float output to use as the loss");
  }
  return *found;
}

struct DifferentiatePass
    : public otc::impl::DifferentiateBase<DifferentiatePass> {
  using DifferentiateBase::DifferentiateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward =
        requireFunction(module, funcName, " to differentiate");
    if (!forward)
      return signalPassFailure();
    if (module.lookupSymbol("train_step")) {
      module.emitError("@train_step exists already");
      return signalPassFailure();
    }
    FailureOr<unsigned> lossIndex = findLoss(forward, lossName);
    if (failed(lossIndex))
      return signalPassFailure();
    std::unique_ptr<NameRegex> frozen;
    if (!freeze.empty()) {
      std::string regexError;
      frozen = NameRegex::compile(freeze, regexError);
      if (!frozen) {
        module.emitError("invalid --freeze regular expression '")
            << freeze << "': " << regexError;
        return signalPassFailure();
      }
    }
    if (failed(buildTrainStep(forward, *lossIndex, frozen.get())))
      return signalPassFailure();
  }

  LogicalResult buildTrainStep(func::FuncOp forward, unsigned lossIndex,
                               const NameRegex *frozen);
};

LogicalResult DifferentiatePass::buildTrainStep(func::FuncOp forward,
                                                unsigned lossIndex,
                                                const NameRegex *frozen) {
  OpBuilder b(forward);
  b.setInsertionPointAfter(forward);
  auto step = cast<func::FuncOp>(b.clone(*forward.getOperation()));
  step.setSymName("train_step");
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(lossIndex);

  // Candidate parameters: float `otc.param` arguments not frozen. --freeze
  // matches the state-dict name the import recovered (`otc.param_of`: the
  // module parameter an exporter's folded copy is, the name otc-export
  // writes) and the initializer's own name only where there is none, so
  // that a pattern that selects by absence (`^(?!.*lora_)`) does not freeze
  // a folded `val_N` copy of an adapter (both where the state-dict name is
  // a guess of otc.param_of_guessed).
  SmallVector<BlockArgument> params;
  int64_t candidates = 0, frozenCount = 0;
  for (BlockArgument arg : body.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  attrs::kParam);
    if (!name || !isa<FloatType>(getElementTypeOrSelf(arg.getType())))
      continue;
    if (step.getArgAttr(arg.getArgNumber(), attrs::kBuffer))
      continue;
    ++candidates;
    auto of = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                attrs::kParamOf);
    // A name guessed from the scope of the additions that read it may be
    // wrong (a buffer the TorchScript exporter folded): its own name too.
    bool guessed =
        step.getArgAttr(arg.getArgNumber(), attrs::kParamOfGuessed) != nullptr;
    if (frozen && (frozen->matches((of ? of : name).getValue().str()) ||
                   (guessed && frozen->matches(name.getValue().str())))) {
      ++frozenCount;
      continue;
    }
    params.push_back(arg);
  }
  if (frozen && candidates && frozenCount == candidates)
    return forward.emitError("--freeze='")
           << frozen->pattern() << "' matches all " << candidates
           << " parameters: nothing is left to train";
  if (frozen && frozenCount == 0)
    forward.emitWarning("--freeze='")
        << frozen->pattern()
        << "' matches no parameter: every one trains (the names matched are "
           "the state dict's, as otc-export writes them)";

  // Varied: values that depend on a candidate parameter through float values.
  llvm::DenseSet<Value> varied(params.begin(), params.end());
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value r : op.getResults())
        if (isa<FloatType>(getElementTypeOrSelf(r.getType())))
          varied.insert(r);

  // Active ops are visited in reverse; gradients accumulate per value.
  llvm::DenseMap<Value, Value> grads;
  b.setInsertionPoint(ret);
  Location lossLoc = loss.getLoc();
  auto lossType = cast<RankedTensorType>(loss.getType());
  grads[loss] = b.create<ConstantOp>(
      lossLoc, DenseElementsAttr::get(
                   lossType, FloatAttr::get(lossType.getElementType(), 1.0)));
  auto accumulate = [&](Value v, Value g) {
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = b.create<AddOp>(g.getLoc(), v.getType(), it->second, g);
  };

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = grads.lookup(r);
      if (g)
        g = joinSliceGradients(b, g);
      resultGrads.push_back(g);
      any |= static_cast<bool>(g);
    }
    if (!any)
      continue;
    if (llvm::none_of(op->getOperands(),
                      [&](Value v) { return varied.contains(v); }))
      continue;
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitError("no gradient rule for '")
             << op->getName() << "' on the path from a parameter to the loss";
    // Results without a gradient of their own get zeros only if the rule
    // needs every one; the rules here accept null result gradients.
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    assert(operandGrads.size() == op->getNumOperands() &&
           "gradient rule must return one value per operand");
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && varied.contains(operand))
        accumulate(operand, g);
  }

  // Results: the loss, then the gradient of every parameter reached.
  SmallVector<Value> results{loss};
  SmallVector<Attribute> resultAttrs{
      b.getDictionaryAttr(b.getNamedAttr(attrs::kLoss, b.getUnitAttr()))};
  for (BlockArgument p : params) {
    Value g = grads.lookup(p);
    if (!g)
      continue; // No path to the loss: not trainable.
    g = joinSliceGradients(b, g);
    results.push_back(g);
    auto name =
        step.getArgAttrOfType<StringAttr>(p.getArgNumber(), attrs::kParam);
    resultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(attrs::kGrad, name)));
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  step.setType(b.getFunctionType(step.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  step.setAllResultAttrs(resultAttrs);

  // Drop what no result needs (gradients of inactive operands, unused
  // forward outputs).
  SmallVector<Operation *> all;
  for (Operation &op : body.without_terminator())
    all.push_back(&op);
  for (Operation *op : llvm::reverse(all))
    if (op->use_empty() && isPure(op))
      op->erase();
  return success();
}

} // namespace
