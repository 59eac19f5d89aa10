//===- MixedPrecision.cpp - BF16 compute with FP32 master weights ---------===//
//
// Rewrites `@train_step` (after differentiation and recomputation) to compute
// in BF16 where that is safe and in FP32 where it is not, with every
// conversion an explicit `otc.cast`, so the precision of each value is its
// type. Parameters become BF16 working copies (the training loop refreshes
// them from the FP32 master weights); matrix products read BF16 and
// accumulate in FP32; reductions, softmax, losses and the functions that
// lose accuracy in BF16 (exp, log, pow, sqrt, reciprocal) run in FP32;
// every other op computes in BF16 when all its non-constant float operands
// are BF16, else in FP32 (the widest precision wins, as in autocast); a
// gather's gradient sums in FP32 and, when it is an activation's gradient of
// a BF16 gradient, is rounded to BF16 as a product is. A value
// computed from constants and constant buffers alone (a rotary table of a
// long sequence, which the folders leave to the program; a buffer stays
// FP32) counts as a constant, as it does where it folds: it is computed in FP32
// (as the import folds), its readers follow their other operands, and it is
// cast to them. Running after otc-remat means recomputed clones get the same
// precision as the values they replace, and both the forward and the backward
// of every op follow one rule set.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/OtcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

namespace otc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// How an op picks the precision it computes in.
enum class Rule {
  /// BF16 operands, FP32 accumulation, result rounded to BF16 (matmul).
  Product,
  /// FP32 whatever its operands (reductions, softmax, losses, ...).
  Fp32,
  /// BF16 when every non-constant float operand is BF16, else FP32.
  Follow,
  /// FP32 sums of a gradient, rounded to BF16 when the gradient is BF16 and
  /// the result an activation's gradient (gather_grad; see
  /// activationGradient).
  GradientSum,
  /// Left as it is (casts: they are the conversions).
  Keep,
};

/// The rule of `op` when neither the attribute nor the option forces FP32:
/// the op's precision trait (ir/OtcBase.td), Follow without one.
static Rule defaultRule(Operation *op) {
  if (op->hasTrait<OpTrait::OtcBF16Product>())
    return Rule::Product;
  if (op->hasTrait<OpTrait::OtcFp32Compute>())
    return Rule::Fp32;
  if (op->hasTrait<OpTrait::OtcGradientSum>())
    return Rule::GradientSum;
  if (op->hasTrait<OpTrait::OtcKeepPrecision>())
    return Rule::Keep;
  return Rule::Follow;
}

/// Whether `v` is an activation's gradient: it reaches the step's returned
/// gradients through no chain of adds, reshapes and casts (a parameter's
/// gradient does, its contributions added in turn).
static bool activationGradient(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    for (Operation *user : x.getUsers()) {
      if (isa<func::ReturnOp>(user))
        return false;
      if (isa<AddOp, ReshapeOp, CastOp>(user))
        work.push_back(user->getResult(0));
    }
  }
  return true;
}

/// Operand `i` of `op` is FP32 statistics (a fused op's log-sum-exp, mean,
/// rstd, or the loss gradient) that stays FP32 whatever the data's precision,
/// as the op says through Fp32StatisticsOpInterface.
static bool isStatOperand(Operation *op, unsigned i) {
  auto stats = dyn_cast<Fp32StatisticsOpInterface>(op);
  return stats && stats.isFp32StatisticsOperand(i);
}

/// Result `i` of `op` is FP32 statistics (see isStatOperand) or a loss.
static bool isStatResult(Operation *op, unsigned i) {
  auto stats = dyn_cast<Fp32StatisticsOpInterface>(op);
  return stats && stats.isFp32StatisticsResult(i);
}

/// Operand `i` of `op` is an attention's additive mask: it takes the
/// precision of q, k and v rather than choosing it (autocast casts
/// scaled_dot_product_attention's mask to the data's type, and cuDNN reads
/// the bias in the data's type).
static bool isMaskOperand(Operation *op, unsigned i) {
  Value mask;
  if (auto a = dyn_cast<AttentionOp>(op))
    mask = a.getMask();
  else if (auto g = dyn_cast<AttentionGradOp>(op))
    mask = g.getMask();
  return mask && op->getOperand(i) == mask;
}

/// Whether `t` is a tensor of floats.
static bool isFloatTensor(Type t) {
  return isa<FloatType>(getElementTypeOrSelf(t));
}

/// `t` with element type `et` when it is a float tensor, else `t`.
static Type withFloat(Type t, Type et) {
  if (!isFloatTensor(t))
    return t;
  return cast<RankedTensorType>(t).clone(et);
}

/// Whether a reader of the buffer `arg` of `step` computes from constants
/// and such buffers alone (every operand one of those).
static bool feedsConstants(func::FuncOp step, BlockArgument arg) {
  auto constantLike = [&](Value v) {
    if (v.getDefiningOp<ConstantOp>())
      return true;
    auto a = dyn_cast<BlockArgument>(v);
    return a && a.getOwner() == arg.getOwner() &&
           step.getArgAttr(a.getArgNumber(), attrs::kBuffer);
  };
  return llvm::any_of(arg.getUsers(), [&](Operation *user) {
    return user->getNumRegions() == 0 &&
           llvm::all_of(user->getOperands(), constantLike);
  });
}

struct MixedPrecisionPass
    : public otc::impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override;

private:
  Value convert(OpBuilder &b, Value v, Type et);
  Value saturatedBf16(Value mask);
  LogicalResult rewrite(Operation *op, const llvm::StringSet<> &forced);
  /// Gives the parameters BF16 working copies of their FP32 masters (a
  /// buffer that computations of constants read excepted), marked
  /// attrs::kBf16Copy.
  LogicalResult retypeParameters(func::FuncOp step);
  /// The ops of the step in order, with `fromConstants` filled: the values
  /// made of constants alone (and of the buffers that feed them).
  SmallVector<Operation *> collectOps(func::FuncOp step);
  /// Returns the loss in FP32 and the gradients in `gradType`.
  void retypeResults(func::FuncOp step, Type gradType);
  /// An FP32 value whose every reader rounds it to BF16 (each reader got
  /// its own cast: a gradient read by the products of dX and of dW) is
  /// rounded once, at its first reader: the FP32 form dies there, where the
  /// later cast kept it alive until its own reader ran, and what lives on
  /// is half its size. (Widening casts stay apart: one made early would
  /// keep the wider copy.)
  void mergeCasts(func::FuncOp step);

  Type bf16, f32;
  /// The BF16 form of each FP32 mask, made once after its definition.
  llvm::DenseMap<Value, Value> bf16Masks;
  /// Values computed from constants alone (see the file comment).
  llvm::DenseSet<Value> fromConstants;
};

/// `mask` (FP32) in BF16 with every value beyond BF16's largest finite
/// magnitude, infinities included, held at it: a plain rounding turns an
/// exported mask's -3.4028e38 (FP32's lowest) into -inf, which makes a row
/// that every key is hidden from NaN (and then every gradient) instead of a
/// finite mean of its values.
Value MixedPrecisionPass::saturatedBf16(Value mask) {
  Value &done = bf16Masks[mask];
  if (done)
    return done;
  const double top = APFloat::getLargest(APFloat::BFloat()).convertToDouble();
  auto type = cast<RankedTensorType>(mask.getType());
  OpBuilder b(mask.getContext());
  b.setInsertionPointAfterValue(mask);
  Location loc = mask.getLoc();
  if (auto c = mask.getDefiningOp<ConstantOp>())
    if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue())) {
      auto attr = dense.mapValues(bf16, [&](const APFloat &x) {
        double v = std::clamp(x.convertToDouble(), -top, top);
        APFloat y(v);
        bool lost;
        y.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven, &lost);
        return y.bitcastToAPInt();
      });
      return done = b.create<ConstantOp>(loc, attr);
    }
  auto scalar = RankedTensorType::get({}, type.getElementType());
  Value held = mask;
  for (double bound : {-top, top}) {
    Value limit = b.create<ConstantOp>(
        loc,
        DenseElementsAttr::get(scalar, APFloat(static_cast<float>(bound))));
    Value beyond =
        b.create<CompareOp>(loc, type.clone(b.getI1Type()), held, limit,
                            b.getStringAttr(bound < 0 ? "lt" : "gt"));
    held = b.create<SelectOp>(loc, type, beyond, limit, held);
  }
  return done = b.create<CastOp>(loc, type.clone(bf16), held);
}

/// `v` as a tensor of `et`: itself, a constant rebuilt in `et` (constants
/// take the precision of the op that reads them), or an `otc.cast` placed
/// at `b`'s insertion point.
Value MixedPrecisionPass::convert(OpBuilder &b, Value v, Type et) {
  if (!isFloatTensor(v.getType()) || getElementTypeOrSelf(v.getType()) == et)
    return v;
  Type to = withFloat(v.getType(), et);
  if (auto c = v.getDefiningOp<ConstantOp>())
    if (auto dense = dyn_cast<DenseElementsAttr>(c.getValue())) {
      auto ft = cast<FloatType>(et);
      auto attr = dense.mapValues(ft, [&](const APFloat &x) {
        APFloat y = x;
        bool lost;
        y.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
        return y.bitcastToAPInt();
      });
      return b.create<ConstantOp>(c.getLoc(), attr);
    }
  return b.create<CastOp>(v.getLoc(), to, v);
}

/// Sets the precision of one op: converts its float operands and retypes its
/// float results.
LogicalResult MixedPrecisionPass::rewrite(Operation *op,
                                          const llvm::StringSet<> &forced) {
  Rule rule = defaultRule(op);
  if (rule == Rule::Keep)
    return success();
  // Made of constants alone: FP32, as the import would have folded it (a
  // rotary table's angles, position x frequency as a MatMul, are hundreds of
  // radians, which BF16 would round by whole radians).
  if (op->hasAttr(attrs::kKeepFp32) ||
      forced.contains(op->getName().getStringRef()) ||
      (op->getNumResults() > 0 && fromConstants.contains(op->getResult(0))))
    rule = Rule::Fp32;
  if (op->getNumRegions())
    return op->emitOpError("has regions: otc-mixed-precision cannot set its "
                           "precision");

  // An activation's gradient summed from a BF16 gradient: FP32 sums, the
  // result rounded to BF16 (the precision of the value it is the gradient
  // of, as every other activation gradient here), so the ops that read it
  // (a norm's gradient, the residual stream's) stay BF16.
  bool round = false;
  if (rule == Rule::GradientSum) {
    rule = Rule::Fp32;
    round = llvm::all_of(op->getOperands(),
                         [](Value v) {
                           return !isFloatTensor(v.getType()) ||
                                  getElementTypeOrSelf(v.getType()).isBF16();
                         }) &&
            llvm::all_of(op->getResults(), activationGradient);
  }

  Type et = f32;
  if (rule == Rule::Product) {
    et = bf16;
  } else if (rule == Rule::Follow) {
    bool anyFloat = false, allBf16 = true;
    for (OpOperand &use : op->getOpOperands()) {
      Value v = use.get();
      if (!isFloatTensor(v.getType()) || v.getDefiningOp<ConstantOp>() ||
          fromConstants.contains(v) ||
          isStatOperand(op, use.getOperandNumber()) ||
          isMaskOperand(op, use.getOperandNumber()))
        continue;
      anyFloat = true;
      allBf16 &= getElementTypeOrSelf(v.getType()).isBF16();
    }
    et = anyFloat && allBf16 ? bf16 : f32;
  }

  OpBuilder b(op);
  for (OpOperand &use : op->getOpOperands()) {
    unsigned i = use.getOperandNumber();
    if (et == bf16 && isMaskOperand(op, i) &&
        isFloatTensor(use.get().getType()) &&
        getElementTypeOrSelf(use.get().getType()).isF32())
      use.set(saturatedBf16(use.get()));
    else
      use.set(convert(b, use.get(), isStatOperand(op, i) ? f32 : et));
  }
  if (rule == Rule::Product || round) {
    // FP32 accumulation, rounded to BF16 where the result is stored.
    Value r = op->getResult(0);
    r.setType(withFloat(r.getType(), f32));
    b.setInsertionPointAfter(op);
    auto round =
        b.create<CastOp>(op->getLoc(), withFloat(r.getType(), bf16), r);
    r.replaceAllUsesExcept(round, round);
    return success();
  }
  for (OpResult r : op->getResults())
    r.setType(withFloat(r.getType(),
                        isStatResult(op, r.getResultNumber()) ? f32 : et));
  return success();
}

void MixedPrecisionPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto step = requireTrainStep(module);
  if (!step)
    return signalPassFailure();
  // BF16 compute only under precision "bf16"; FP32 gradients with
  // fp32_grad_accum (the compile's configuration).
  FailureOr<ConfigAttr> config = requireConfig(module, "otc-mixed-precision");
  if (failed(config))
    return signalPassFailure();
  if (!config->bf16())
    return;
  const bool fp32GradAccum = config->getFp32GradAccum();
  MLIRContext *ctx = module.getContext();
  bf16 = BFloat16Type::get(ctx);
  f32 = Float32Type::get(ctx);
  llvm::StringSet<> forced;
  for (const std::string &name : fp32Ops) {
    if (!RegisteredOperationName::lookup(name, ctx)) {
      module.emitError("fp32-ops: unknown op '") << name << "'";
      return signalPassFailure();
    }
    forced.insert(name);
  }

  if (failed(retypeParameters(step)))
    return signalPassFailure();
  SmallVector<Operation *> ops = collectOps(step);
  for (Operation *op : ops)
    if (failed(rewrite(op, forced)))
      return signalPassFailure();
  // The loss in FP32; gradients in BF16, or FP32 for FP32 accumulation.
  retypeResults(step, fp32GradAccum ? f32 : bf16);
  // Constants that every reader now takes in the other precision.
  for (Operation *op : ops)
    if (isa<ConstantOp>(op) && op->use_empty())
      op->erase();
  mergeCasts(step);
}

void MixedPrecisionPass::mergeCasts(func::FuncOp step) {
  llvm::DenseSet<Operation *> erased;
  auto mergeReaders = [&](Value v) {
    if (!getElementTypeOrSelf(v.getType()).isF32())
      return;
    CastOp first;
    bool merge = !v.use_empty() && !v.hasOneUse();
    for (Operation *user : v.getUsers()) {
      auto c = dyn_cast<CastOp>(user);
      merge &= c && c->getBlock() == v.getParentBlock() &&
               getElementTypeOrSelf(c.getType()).isBF16() &&
               (!first || c.getType() == first.getType());
      if (!merge)
        break;
      if (!first || c->isBeforeInBlock(first))
        first = c;
    }
    if (!merge)
      return;
    for (Operation *user : llvm::make_early_inc_range(v.getUsers()))
      if (user != first.getOperation()) {
        user->getResult(0).replaceAllUsesWith(first.getResult());
        erased.insert(user);
        user->erase();
      }
  };
  SmallVector<Operation *> ops;
  step.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops)
    if (!erased.contains(op))
      for (Value v : op->getResults())
        mergeReaders(v);
}

LogicalResult MixedPrecisionPass::retypeParameters(func::FuncOp step) {
  MLIRContext *ctx = step.getContext();
  Block &body = step.getBody().front();
  std::vector<bool> bf16Args(body.getNumArguments(), false);
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (!step.getArgAttr(i, attrs::kParam))
      continue;
    // A constant buffer that computations of constants read (a rotary
    // table's angles, folded by the exporter, going into cos; inv_freq
    // going into the positions' product) stays FP32 and is read as a
    // constant is (collectOps): BF16 would round an angle of 2047 radians
    // by whole radians. One that data reads (the cos and sin tables
    // themselves) gets its BF16 working copy, as a parameter does.
    if (step.getArgAttr(i, attrs::kBuffer) && feedsConstants(step, arg))
      continue;
    if (!getElementTypeOrSelf(arg.getType()).isF32())
      return step.emitError("parameter argument ")
             << i << " is " << arg.getType() << ", expected f32 master weights";
    arg.setType(withFloat(arg.getType(), bf16));
    bf16Args[i] = true;
  }
  // All at once: setting one argument's attribute rebuilds every one's.
  if (llvm::is_contained(bf16Args, true)) {
    SmallVector<DictionaryAttr> argAttrs;
    for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
      NamedAttrList list(step.getArgAttrDict(i));
      if (bf16Args[i])
        list.set(attrs::kBf16Copy, UnitAttr::get(ctx));
      argAttrs.push_back(list.getDictionary(ctx));
    }
    step.setAllArgAttrs(argAttrs);
  }
  return success();
}

SmallVector<Operation *> MixedPrecisionPass::collectOps(func::FuncOp step) {
  Block &body = step.getBody().front();
  bf16Masks.clear();
  fromConstants.clear();
  for (BlockArgument arg : body.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), attrs::kBuffer) &&
        getElementTypeOrSelf(arg.getType()).isF32() && feedsConstants(step, arg))
      fromConstants.insert(arg);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    ops.push_back(&op);
    // Side-effect free, with operands (a constant is one itself; a random
    // draw is not free of effects), every one a constant or made of them.
    bool made = op.getNumOperands() > 0 && op.getNumRegions() == 0 &&
                isMemoryEffectFree(&op) &&
                llvm::all_of(op.getOperands(), [&](Value v) {
                  return v.getDefiningOp<ConstantOp>() ||
                         fromConstants.contains(v);
                });
    if (made)
      fromConstants.insert(op.getResults().begin(), op.getResults().end());
  }
  return ops;
}

void MixedPrecisionPass::retypeResults(func::FuncOp step, Type gradType) {
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  OpBuilder b(ret);
  for (OpOperand &use : ret->getOpOperands()) {
    Type et = use.getOperandNumber() == 0 ? f32 : gradType;
    Value v = use.get();
    // A value rounded to BF16 from FP32 (a matmul's result) is returned
    // unrounded when FP32 is wanted.
    if (auto round = v.getDefiningOp<CastOp>())
      if (round.getInput().getType() == withFloat(v.getType(), et)) {
        use.set(round.getInput());
        if (round->use_empty())
          round->erase();
        continue;
      }
    use.set(convert(b, v, et));
  }
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 ret.getOperandTypes()));
}

} // namespace
