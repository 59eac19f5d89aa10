//===- TrainingLoop.cpp - gradient accumulation and AdamW
//------------------===//
//
// Turns `@train_step` into the functions the runtime calls once per
// micro-batch or optimizer step: `@zero_grads`, `@micro_step` and
// `@optimizer_step`, and `@eval_step` (the loss alone, for evaluation). Their
// arguments and results name arena slots, so that state (parameters, gradient
// accumulators, Adam moments) persists between calls without the runtime
// knowing anything about the model. Under mixed precision (`otc.bf16_copy`
// parameters) the parameters that `@micro_step` reads are BF16 working copies
// in "param_bf16:<name>" slots, refreshed from the FP32 masters
// ("param:<name>") by `@zero_grads`, which the runtime calls first in every
// optimizer step; gradients accumulate in the element type of
// `@train_step`'s gradient results, and AdamW runs in FP32 on the masters. A
// parameter that is not trained and is read in BF16 (a frozen base model
// under LoRA) is a "buffer:<name>" slot in BF16 alone, with no FP32 copy.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ConstantValues.h"
#include "passes/DecodeStep.h"
#include "ir/Config.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace otc {
#define GEN_PASS_DEF_TRAININGLOOP
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// Builds functions argument by argument: each with its slot name.
struct FuncSignature {
  SmallVector<Type> types;
  SmallVector<Attribute> attrs;

  void add(OpBuilder &b, Type type, StringRef slot) {
    types.push_back(type);
    attrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(attrs::kSlot, b.getStringAttr(slot))));
  }
};

/// The trained parameters of `@train_step`: those with a gradient result.
static llvm::StringSet<> trainedNames(func::FuncOp f) {
  llvm::StringSet<> names;
  for (unsigned i = 0, e = f.getNumResults(); i < e; ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, attrs::kGrad))
      names.insert(n.getValue());
  return names;
}

/// The slot of a parameter's FP32 values: "param:<name>" when it is
/// trained, "buffer:<name>" when it is not (frozen, a constant buffer such
/// as a rotary table, or not reaching the loss).
static std::string masterSlot(const llvm::StringSet<> &trained,
                              StringRef name) {
  return ((trained.contains(name) ? "param:" : "buffer:") + name).str();
}

/// The slot of a `@train_step` argument.
static std::string argSlot(func::FuncOp f, unsigned i) {
  if (auto n = f.getArgAttrOfType<StringAttr>(i, attrs::kInput))
    return ("input:" + n.getValue()).str();
  if (auto n = f.getArgAttrOfType<StringAttr>(i, attrs::kParam)) {
    llvm::StringSet<> trained = trainedNames(f);
    // A parameter that is not trained (frozen) and that the steps read in
    // BF16 is kept in BF16 alone: no FP32 values, which nothing would read
    // after loading (a frozen 8B base model under LoRA: 16 GB, not 48).
    if (f.getArgAttr(i, attrs::kBf16Copy))
      return ((trained.contains(n.getValue()) ? "param_bf16:" : "buffer:") +
              n.getValue())
          .str();
    return masterSlot(trained, n.getValue());
  }
  if (f.getArgAttr(i, attrs::kRngKey))
    return "rng_key";
  return "";
}

static Value splat(OpBuilder &b, Location loc, Type type, double value) {
  auto t = cast<RankedTensorType>(type);
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), value)));
}

/// The summands of gradient `g` as values of `g`'s type, in the order their
/// producers run. A parameter used more than once (a tied embedding and LM
/// head) has the sum of its contributions as gradient, under mixed precision
/// rounded once: cast(cast(a) + b). acc + (a + b) is then accumulated as
/// (acc + a) + b, so that each contribution's producer can add into the
/// gradient slot itself (otc-fuse-epilogues) and no whole-gradient
/// temporary lives across the backward. Only sums read once are split; any
/// other gradient is its one term. The ops left unread are erased.
static SmallVector<Value> gradientTerms(OpBuilder &b, Value g) {
  auto type = cast<RankedTensorType>(g.getType());
  // (producer, term): the producer orders the terms.
  SmallVector<std::pair<Value, Value>> terms;
  SmallVector<Operation *> split;
  std::function<void(Value, bool)> walk = [&](Value v, bool top) {
    auto vt = cast<RankedTensorType>(v.getType());
    bool own = top || v.hasOneUse();
    if (auto add = v.getDefiningOp<AddOp>();
        add && own && add.getLhs().getType() == vt &&
        add.getRhs().getType() == vt) {
      split.push_back(add);
      walk(add.getLhs(), false);
      walk(add.getRhs(), false);
      return;
    }
    if (auto c = v.getDefiningOp<CastOp>(); c && own && top) {
      if (auto add = c.getInput().getDefiningOp<AddOp>();
          add && c.getInput().hasOneUse()) {
        auto at = cast<RankedTensorType>(add.getType());
        if (at.getShape() == type.getShape() &&
            add.getLhs().getType() == at && add.getRhs().getType() == at) {
          split.push_back(c);
          walk(c.getInput(), false);
          return;
        }
      }
    }
    if (vt == type) {
      terms.push_back({v, v});
      return;
    }
    // A widened term is its narrow value; any other is rounded to g's type.
    if (auto c = v.getDefiningOp<CastOp>();
        c && c.getInput().getType() == type && v.hasOneUse()) {
      split.push_back(c);
      terms.push_back({c.getInput(), c.getInput()});
      return;
    }
    terms.push_back({v, b.create<CastOp>(v.getLoc(), type, v).getResult()});
  };
  walk(g, true);
  if (terms.size() < 2)
    return {g};
  llvm::stable_sort(terms, [](const auto &x, const auto &y) {
    Operation *a = x.first.getDefiningOp(), *c = y.first.getDefiningOp();
    if (!a || !c)
      return !a && c; // arguments first
    return a->isBeforeInBlock(c);
  });
  // The split sums and casts, now unread, from the top down.
  for (Operation *op : split)
    if (op->use_empty())
      op->erase();
  SmallVector<Value> out;
  for (auto &t : terms) {
    // An embedding's gradient rounded here reads and writes BF16 instead.
    if (auto round = t.second.getDefiningOp<CastOp>())
      if (GatherGradOp narrow = narrowGatherGrad(round)) {
        out.push_back(narrow.getResult());
        continue;
      }
    out.push_back(t.second);
  }
  return out;
}

/// The operand that seeds the backward pass with the constant 1 that
/// otc-differentiate starts from (d loss / d loss), when every gradient of
/// the function flows from it: the function's one cross-entropy gradient
/// (otc.cross_entropy_with_grad, otc.linear_cross_entropy_with_grad or
/// otc.cross_entropy_grad) takes it as its `grad`, and the loss is that
/// op's own loss or an otc.cross_entropy of the same logits and labels (the
/// forward kept apart, e.g. when the gradient recomputes it). Null
/// otherwise (a loss that adds other terms, whose gradients the seed also
/// starts, or none of these ops).
static OpOperand *lossSeed(Block &body, Value loss) {
  OpOperand *seed = nullptr;
  Operation *gradOp = nullptr;
  Value logits, labels;
  for (Operation &op : body) {
    OpOperand *g = nullptr;
    auto fromLogits = [&](auto ce) {
      g = &ce.getGradMutable();
      logits = ce.getLogits();
      labels = ce.getLabels();
    };
    if (auto ce = dyn_cast<CrossEntropyWithGradOp>(op))
      fromLogits(ce);
    else if (auto ce = dyn_cast<CrossEntropyGradOp>(op))
      fromLogits(ce);
    else if (auto lce = dyn_cast<LinearCrossEntropyWithGradOp>(op))
      g = &lce.getGradMutable();
    if (!g)
      continue;
    if (seed)
      return nullptr; // more than one
    seed = g;
    gradOp = &op;
  }
  if (!seed)
    return nullptr;
  Operation *def = loss.getDefiningOp();
  bool same = def == gradOp;
  if (auto fwd = dyn_cast_or_null<CrossEntropyOp>(def); fwd && logits)
    same = fwd.getLogits() == logits && fwd.getLabels() == labels &&
           fwd.getReductionAttr() == gradOp->getAttr("reduction") &&
           fwd.getIgnoreIndexAttr() == gradOp->getAttr("ignore_index");
  if (!same)
    return nullptr;
  auto c = seed->get().getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()) ||
      !dense.getSplatValue<APFloat>().isExactlyValue(1.0))
    return nullptr;
  return seed;
}

/// Clones `step`'s ops but its return into `entry`, whose first arguments
/// stand for `step`'s; returns the map from `step`'s values to the clones.
static IRMapping cloneBody(func::FuncOp step, Block &entry) {
  IRMapping map;
  Block &src = step.getBody().front();
  for (unsigned i = 0, e = src.getNumArguments(); i < e; ++i)
    map.map(src.getArgument(i), entry.getArgument(i));
  OpBuilder fb = OpBuilder::atBlockEnd(&entry);
  for (Operation &op : src.without_terminator())
    fb.clone(op, map);
  return map;
}

static func::FuncOp createFunc(OpBuilder &b, Location loc, StringRef name,
                               const FuncSignature &args,
                               const FuncSignature &results) {
  auto f = b.create<func::FuncOp>(loc, name,
                                  b.getFunctionType(args.types, results.types));
  f.setAllArgAttrs(args.attrs);
  f.setAllResultAttrs(results.attrs);
  f.addEntryBlock();
  return f;
}

struct TrainingLoopPass
    : public otc::impl::TrainingLoopBase<TrainingLoopPass> {
  using TrainingLoopBase::TrainingLoopBase;

  /// From the module's #otc.config.
  int64_t gradAccum = 1;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0.0;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = requireTrainStep(module);
    if (!step)
      return signalPassFailure();
    // Grad-accum and AdamW's hyper-parameters: the compile's configuration.
    FailureOr<ConfigAttr> config = requireConfig(module, "otc-training-loop");
    if (failed(config))
      return signalPassFailure();
    gradAccum = config->getGradAccum();
    beta1 = config->beta1();
    beta2 = config->beta2();
    epsilon = config->epsilon();
    weightDecay = config->weightDecay();
    for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
      if (argSlot(step, i).empty()) {
        step.emitError("argument ") << i << " is neither an input, a "
                                    << "parameter nor the random key";
        return signalPassFailure();
      }

    // The trainable parameters, in result order.
    SmallVector<std::pair<StringRef, Type>> trained;
    for (unsigned i = 1, e = step.getNumResults(); i < e; ++i) {
      auto name = step.getResultAttrOfType<StringAttr>(i, attrs::kGrad);
      if (!name) {
        step.emitError("result ") << i << " is not a gradient";
        return signalPassFailure();
      }
      trained.push_back({name.getValue(), step.getResultTypes()[i]});
    }

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = step.getLoc();
    recordCountedTargets(module, step);
    buildZeroGrads(b, step, trained);
    buildMicroStep(b, step, trained);
    buildOptimizerStep(b, loc, trained);
    func::FuncOp eval = buildEvalStep(b, step);
    if (decode && failed(buildDecodeStep(module, eval)))
      return signalPassFailure();
    hoistConstantValues(module, {"micro_step", "eval_step", "decode_step"});

    step.erase();
    if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
      forward.erase();
  }

  /// Whether `v` is `step`'s otc.prediction_rows input, possibly reshaped.
  static bool isPredictionRows(func::FuncOp step, Value v) {
    auto arg = dyn_cast<BlockArgument>(throughReshapes(v));
    return arg && arg.getOwner()->getParentOp() == step &&
           step.getArgAttr(arg.getArgNumber(), attrs::kPredictionRows);
  }

  /// When the loss is the mean over the targets that are not ignored (a
  /// cross-entropy or NLL loss with reduction "mean" and an ignore index,
  /// whose labels are a graph input, possibly reshaped), records that input
  /// and the index on the module: a micro-batch then weighs in its step's
  /// gradient by its share of the counted targets.
  void recordCountedTargets(ModuleOp module, func::FuncOp step) {
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    Operation *loss = ret.getOperand(0).getDefiningOp();
    Value labels;
    std::optional<int64_t> ignore;
    StringRef reduction;
    if (auto ce = dyn_cast_or_null<CrossEntropyOp>(loss)) {
      labels = ce.getLabels();
      ignore = ce.getIgnoreIndex();
      reduction = ce.getReduction();
    } else if (auto ce = dyn_cast_or_null<CrossEntropyWithGradOp>(loss)) {
      labels = ce.getLabels();
      ignore = ce.getIgnoreIndex();
      reduction = ce.getReduction();
    } else if (auto ce =
                   dyn_cast_or_null<LinearCrossEntropyWithGradOp>(loss)) {
      labels = ce.getLabels();
      ignore = ce.getIgnoreIndex();
      reduction = ce.getReduction();
    } else if (auto ce = dyn_cast_or_null<SoftmaxCrossEntropyOp>(loss)) {
      labels = ce.getLabels();
      ignore = ce.getIgnoreIndex();
      reduction = ce.getReduction();
    } else if (auto nll = dyn_cast_or_null<NllLossOp>(loss)) {
      labels = nll.getLabels();
      ignore = nll.getIgnoreIndex();
      reduction = nll.getReduction();
    }
    if (!labels || !ignore || reduction != "mean")
      return;
    // Through reshapes, and the gather of the rows otc-sparse-prediction
    // keeps: the graph input's counted entries are the kept rows' (the
    // runtime keeps every counted one).
    for (;;) {
      if (auto r = labels.getDefiningOp<ReshapeOp>())
        labels = r->getOperand(0);
      else if (auto g = labels.getDefiningOp<GatherOp>();
               g && isPredictionRows(step, g.getIndices()))
        labels = g.getData();
      else
        break;
    }
    auto arg = dyn_cast<BlockArgument>(labels);
    if (!arg || arg.getOwner()->getParentOp() != step)
      return;
    auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  attrs::kInput);
    if (!name)
      return;
    Builder b(module.getContext());
    module->setAttr(attrs::kCountInput, name);
    module->setAttr(attrs::kCountIgnoreIndex, b.getI64IntegerAttr(*ignore));
  }

  /// `@zero_grads`: zero gradient accumulators and, under mixed precision,
  /// the BF16 working copy of every parameter rounded from its FP32 master.
  void buildZeroGrads(OpBuilder &b, func::FuncOp step,
                      ArrayRef<std::pair<StringRef, Type>> trained) {
    Location loc = step.getLoc();
    FuncSignature args, results;
    SmallVector<unsigned> copies;
    llvm::StringSet<> trainedSet = trainedNames(step);
    for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
      if (!step.getArgAttr(i, attrs::kBf16Copy))
        continue;
      auto name = step.getArgAttrOfType<StringAttr>(i, attrs::kParam);
      // A frozen parameter's BF16 values are its only ones (argSlot).
      if (!trainedSet.contains(name.getValue()))
        continue;
      auto type = cast<RankedTensorType>(step.getArgumentTypes()[i]);
      args.add(b, type.clone(b.getF32Type()),
               masterSlot(trainedNames(step), name.getValue()));
      copies.push_back(i);
    }
    for (auto [name, type] : trained)
      results.add(b, type, ("grad:" + name).str());
    for (unsigned i : copies)
      results.add(b, step.getArgumentTypes()[i], argSlot(step, i));
    func::FuncOp f = createFunc(b, loc, "zero_grads", args, results);
    Block &entry = f.getBody().front();
    OpBuilder fb = OpBuilder::atBlockEnd(&entry);
    SmallVector<Value> outs;
    for (auto [name, type] : trained)
      outs.push_back(splat(fb, loc, type, 0.0));
    for (auto [k, i] : llvm::enumerate(copies))
      outs.push_back(fb.create<CastOp>(loc, step.getArgumentTypes()[i],
                                       entry.getArgument(k)));
    fb.create<func::ReturnOp>(loc, outs);
  }

  void buildMicroStep(OpBuilder &b, func::FuncOp step,
                      ArrayRef<std::pair<StringRef, Type>> trained) {
    Location loc = step.getLoc();
    FuncSignature args, results;
    for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
      args.add(b, step.getArgumentTypes()[i], argSlot(step, i));
    for (auto [name, type] : trained)
      args.add(b, type, ("grad:" + name).str());
    results.add(b, step.getResultTypes()[0], "loss");
    for (auto [name, type] : trained)
      results.add(b, type, ("grad:" + name).str());
    func::FuncOp f = createFunc(b, loc, "micro_step", args, results);
    Block &entry = f.getBody().front();
    Block &src = step.getBody().front();
    IRMapping map = cloneBody(step, entry);
    OpBuilder fb = OpBuilder::atBlockEnd(&entry);
    auto ret = cast<func::ReturnOp>(src.getTerminator());

    // acc' = acc + g * w: the runtime sets the micro-batch's weight w (the
    // "grad_scale" slot) before each micro-step, so that after the step's
    // micro-steps the slots hold the gradient of the whole batch: 1/K for K
    // micro-batches, or, for a mean over the targets that are not ignored,
    // the micro-batch's share of the step's counted targets (the module's
    // otc.count_input and otc.count_ignore_index say which those are). The
    // backward seeded with w gives g * w where it can (lossSeed).
    SmallVector<Value> outs{map.lookup(ret.getOperand(0))};
    unsigned accBase = src.getNumArguments();
    Value weight;
    if (gradAccum != 1) {
      Type scalar = RankedTensorType::get({}, b.getF32Type());
      f.insertArgument(f.getNumArguments(), scalar,
                       b.getDictionaryAttr(b.getNamedAttr(
                           attrs::kSlot, b.getStringAttr("grad_scale"))),
                       loc);
      weight = entry.getArgument(entry.getNumArguments() - 1);
    }
    // Where every gradient flows from the cross-entropy gradient's seed, the
    // constant 1 (otc-differentiate's d loss / d loss), every gradient is
    // linear in that seed: seeded with w, the backward gives the weighted
    // gradients themselves, which then land in the slots as they are (so
    // the producers can add into the slots, otc-fuse-epilogues).
    if (weight)
      if (OpOperand *seed = lossSeed(entry, map.lookup(ret.getOperand(0)));
          seed && seed->get().getType() == weight.getType()) {
        Operation *one = seed->get().getDefiningOp();
        seed->set(weight);
        if (one->use_empty())
          one->erase();
        weight = Value();
      }
    for (auto [i, entryPair] : llvm::enumerate(trained)) {
      Value g = map.lookup(ret.getOperand(i + 1));
      Location gl = g.getLoc();
      if (weight) {
        // In FP32, then rounded once to the gradient's type.
        auto t = cast<RankedTensorType>(g.getType());
        Value wide = t.getElementType().isF32()
                         ? g
                         : fb.create<CastOp>(gl, t.clone(fb.getF32Type()), g);
        Value scaled =
            fb.create<MulOp>(gl, wide.getType(), wide, weight);
        g = scaled.getType() == t ? scaled
                                  : fb.create<CastOp>(gl, t, scaled).getResult();
      }
      Value acc = entry.getArgument(accBase + i);
      // Unweighted, a sum of contributions lands in the slot one by one.
      Type type = g.getType();
      for (Value term : weight ? SmallVector<Value>{g} : gradientTerms(fb, g))
        acc = fb.create<AddOp>(gl, type, acc, term);
      outs.push_back(acc);
    }
    fb.create<func::ReturnOp>(loc, outs);
  }

  /// `@eval_step`: the loss of a micro-batch and nothing else, for
  /// evaluation. `@train_step`'s ops that the loss depends on, with the
  /// loss's fused gradient ops replaced by their forward: no backward runs
  /// and no gradient slot is touched.
  func::FuncOp buildEvalStep(OpBuilder &b, func::FuncOp step) {
    Location loc = step.getLoc();
    FuncSignature args, results;
    for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i)
      args.add(b, step.getArgumentTypes()[i], argSlot(step, i));
    results.add(b, step.getResultTypes()[0], "loss");
    func::FuncOp f = createFunc(b, loc, "eval_step", args, results);
    Block &entry = f.getBody().front();
    IRMapping map = cloneBody(step, entry);
    OpBuilder fb = OpBuilder::atBlockEnd(&entry);
    auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
    fb.create<func::ReturnOp>(loc, map.lookup(ret.getOperand(0)));
    eraseDeadOps(entry);
    forwardOnlyLoss(entry);
    eraseDeadOps(entry);
    return f;
  }

  /// The loss ops that also compute a gradient, where only their loss is
  /// read, replaced by the forward alone: otc.cross_entropy_with_grad by
  /// otc.cross_entropy, and otc.linear_cross_entropy_with_grad by the LM
  /// head's product (f32, plus its bias, rounded to the logits' type as the
  /// chunks are) and otc.cross_entropy.
  static void forwardOnlyLoss(Block &block) {
    SmallVector<Operation *> fused;
    for (Operation &op : block)
      if (isa<CrossEntropyWithGradOp, LinearCrossEntropyWithGradOp>(op))
        fused.push_back(&op);
    for (Operation *op : fused) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto lossOnly = [&](Value loss, Value logits, Value labels,
                          StringAttr reduction, IntegerAttr ignore) {
        auto lt = cast<RankedTensorType>(labels.getType());
        Type lse = RankedTensorType::get(
            lt.getShape(), getElementTypeOrSelf(loss.getType()));
        auto ce = b.create<CrossEntropyOp>(
            loc, TypeRange{loss.getType(), lse}, logits, labels, reduction,
            ignore);
        loss.replaceAllUsesWith(ce.getLoss());
      };
      if (auto ce = dyn_cast<CrossEntropyWithGradOp>(op)) {
        if (!ce.getDlogits().use_empty() || !ce.getRowLoss().use_empty())
          continue;
        lossOnly(ce.getLoss(), ce.getLogits(), ce.getLabels(),
                 ce.getReductionAttr(), ce.getIgnoreIndexAttr());
      } else if (auto lce = dyn_cast<LinearCrossEntropyWithGradOp>(op)) {
        if (!lce.getDh().use_empty() || !lce.getDw().use_empty() ||
            !lce.getRowLoss().use_empty() ||
            (lce.getDbias() && !lce.getDbias().use_empty()))
          continue;
        auto ht = cast<RankedTensorType>(lce.getH().getType());
        Type e = getElementTypeOrSelf(lce.getChunk().getType());
        SmallVector<int64_t> shape(ht.getShape().drop_back());
        shape.push_back(lce.getClasses());
        Value logits = b.create<MatMulOp>(
            loc, RankedTensorType::get(shape, b.getF32Type()), lce.getH(),
            lce.getW(), /*transpose_lhs=*/UnitAttr(),
            /*transpose_rhs=*/lce.getWByHidden() ? UnitAttr()
                                                 : b.getUnitAttr());
        if (Value bias = lce.getBias()) {
          auto bt = cast<RankedTensorType>(bias.getType());
          if (!bt.getElementType().isF32())
            bias = b.create<CastOp>(loc, bt.clone(b.getF32Type()), bias);
          logits = b.create<AddOp>(loc, logits.getType(), logits, bias);
        }
        if (!e.isF32())
          logits = b.create<CastOp>(loc, RankedTensorType::get(shape, e),
                                    logits);
        lossOnly(lce.getLoss(), logits, lce.getLabels(),
                 lce.getReductionAttr(), lce.getIgnoreIndexAttr());
      }
      op->erase();
    }
  }

  void buildOptimizerStep(OpBuilder &b, Location loc,
                          ArrayRef<std::pair<StringRef, Type>> trained) {
    // Masters and moments are FP32 whatever the gradients are.
    FuncSignature args, results;
    SmallVector<Type> masters;
    for (auto [name, type] : trained) {
      auto t = cast<RankedTensorType>(type);
      Type master = t.getElementType().isBF16() ? t.clone(b.getF32Type()) : t;
      masters.push_back(master);
      args.add(b, master, ("param:" + name).str());
      args.add(b, type, ("grad:" + name).str());
      args.add(b, master, ("adam_m:" + name).str());
      args.add(b, master, ("adam_v:" + name).str());
    }
    Type scalar = RankedTensorType::get({}, b.getF32Type());
    args.add(b, scalar, "lr");
    args.add(b, scalar, "step");
    args.add(b, scalar, "grad_factor");
    for (auto [i, entryPair] : llvm::enumerate(trained)) {
      StringRef name = entryPair.first;
      results.add(b, masters[i], ("param:" + name).str());
      results.add(b, masters[i], ("adam_m:" + name).str());
      results.add(b, masters[i], ("adam_v:" + name).str());
    }
    func::FuncOp f = createFunc(b, loc, "optimizer_step", args, results);
    Block &entry = f.getBody().front();
    OpBuilder fb = OpBuilder::atBlockEnd(&entry);
    unsigned n = trained.size();
    Value lr = entry.getArgument(4 * n), t = entry.getArgument(4 * n + 1),
          factor = entry.getArgument(4 * n + 2);
    SmallVector<Value> outs;
    for (unsigned i = 0; i < n; ++i) {
      Type type = masters[i];
      // A BF16 gradient is read as it is (adamw widens it exactly).
      Value grad = entry.getArgument(4 * i + 1);
      auto upd = fb.create<AdamWOp>(
          loc, TypeRange{type, type, type}, entry.getArgument(4 * i), grad,
          entry.getArgument(4 * i + 2),
          entry.getArgument(4 * i + 3), lr, t, factor, fb.getF64FloatAttr(beta1),
          fb.getF64FloatAttr(beta2), fb.getF64FloatAttr(epsilon),
          fb.getF64FloatAttr(weightDecay));
      outs.append(upd->result_begin(), upd->result_end());
    }
    fb.create<func::ReturnOp>(loc, outs);
  }
};

} // namespace
