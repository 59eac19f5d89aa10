//===- FusePatterns.cpp - recognize fused transformer ops -----------------===//
//
// The otc-fuse-patterns pass and its recognizers for everything but
// attention (FuseAttention.cpp), the rotary embedding (FuseRope.cpp) and
// layer and RMS normalization (FuseNorm.cpp): GELU in its erf and tanh
// forms, x * sigmoid(x) (and CLIP's QuickGELU, x * sigmoid(1.702 x)), the
// cross-entropy losses and a mixture of experts' per-row products of
// gathered weights (otc.expert_matmul). Each recognizer starts from one
// anchor op, checks the whole chain around it (constants, axes, single uses
// of the intermediates) and replaces the chain's result by one fused op, all
// through the PatternRewriter; the chain ops left unread are erased through
// it too. Each recognizer is an MLIR rewrite pattern rooted at its anchor
// (populateFusionPatterns: one line per fusion, naming the ops it builds);
// chains that almost match are the patterns' match failures, reported as
// remarks with the condition that failed. The pass applies the patterns
// once at each op in order (applyInOrder), then at each attention the
// pattern that moves a constant factor of q or k into its scale
// (populateScoreScalePatterns) and the layout pattern
// (populateHeadTransposePatterns).
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"
#include "passes/Passes.h"

#include "ir/ShapeUtils.h"

#include "mlir/Rewrite/PatternApplicator.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <map>

namespace otc {
#define GEN_PASS_DEF_FUSEPATTERNS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Whether `leaves` holds exactly the values of `want` (as multisets).
static bool sameLeaves(ArrayRef<Value> leaves, SmallVector<Value> want) {
  if (leaves.size() != want.size())
    return false;
  for (Value l : leaves) {
    auto it = llvm::find(want, l);
    if (it == want.end())
      return false;
    want.erase(it);
  }
  return true;
}

/// `lhs` when `rhs` is the splat `c`, `rhs` when `lhs` is, else null.
static Value otherThanSplat(Value lhs, Value rhs, double c) {
  if (std::optional<double> v = splatValue(rhs); v && near(*v, c))
    return lhs;
  if (std::optional<double> v = splatValue(lhs); v && near(*v, c))
    return rhs;
  return Value();
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// Given p = 1 + f(x), finds the op computing 0.5 * x * p through the
/// chain of single-use products above p and replaces it by `build(x)`.
static Match finishGelu(Value x, Value p, StringRef approximate,
                        PatternRewriter &rewriter) {
  Value cur = p;
  for (int depth = 0; depth < 3; ++depth) {
    auto mul = singleUser<MulOp>(cur);
    if (!mul)
      break;
    Product prod = flattenProduct(mul);
    if (sameLeaves(prod.leaves, {x, p}) && shapeOf(mul) == shapeOf(x) &&
        near(prod.constant, 0.5)) {
      rewriter.setInsertionPoint(mul);
      Value g = rewriter.create<GeluOp>(mul.getLoc(), x.getType(), x,
                                        rewriter.getStringAttr(approximate));
      replaceChainOutput(rewriter, mul.getResult(), g);
      return Match::yes();
    }
    cur = mul;
  }
  return Match::miss("GELU: 1 + " + approximate.str() +
                     "(...) is not multiplied by 0.5 x");
}

/// p = 1 + v where `v` has one use, else null.
static Value onePlus(Value v) {
  auto add = singleUser<AddOp>(v);
  if (!add || !otherThanSplat(add.getLhs(), add.getRhs(), 1.0) ||
      shapeOf(add) != shapeOf(v))
    return Value();
  return add;
}

Match fuse::fuseGeluErf(ErfOp erf, PatternRewriter &rewriter) {
  Product in = flattenProduct(erf.getInput());
  if (in.leaves.size() != 1 || !near(in.constant, M_SQRT1_2))
    return Match::no();
  Value x = in.leaves[0];
  Value p = onePlus(erf);
  if (!p || shapeOf(x) != shapeOf(erf))
    return Match::miss("GELU: erf(x / sqrt(2)) is not followed by + 1");
  return finishGelu(x, p, "none", rewriter);
}

/// Whether `m` is 0.044715 * x^3 (x^3 as pow(x, 3), x * x * x or x * x^2).
static bool isCubicTerm(Value m, Value x) {
  Product p = flattenProduct(m);
  if (!near(p.constant, 0.044715))
    return false;
  SmallVector<Value> powers;
  int degree = 0;
  for (Value l : p.leaves) {
    if (l == x) {
      ++degree;
    } else if (auto pw = l.getDefiningOp<PowOp>(); pw && pw.getLhs() == x) {
      std::optional<double> e = splatValue(pw.getRhs());
      if (!e || (*e != 2.0 && *e != 3.0))
        return false;
      degree += static_cast<int>(*e);
    } else {
      return false;
    }
  }
  return degree == 3;
}

Match fuse::fuseGeluTanh(TanhOp tanh, PatternRewriter &rewriter) {
  Product in = flattenProduct(tanh.getInput());
  if (in.leaves.size() != 1 || !near(in.constant, std::sqrt(2.0 / M_PI)))
    return Match::no();
  auto sum = in.leaves[0].getDefiningOp<AddOp>();
  if (!sum)
    return Match::no();
  Value x;
  if (isCubicTerm(sum.getRhs(), sum.getLhs()))
    x = sum.getLhs();
  else if (isCubicTerm(sum.getLhs(), sum.getRhs()))
    x = sum.getRhs();
  else
    return Match::no();
  Value p = onePlus(tanh);
  if (!p || shapeOf(x) != shapeOf(tanh))
    return Match::miss("GELU: the tanh term is not followed by + 1");
  return finishGelu(x, p, "tanh", rewriter);
}

Match fuse::fuseSilu(SigmoidOp sigmoid, PatternRewriter &rewriter) {
  auto mul = singleUser<MulOp>(sigmoid);
  if (!mul)
    return Match::no();
  Value x = otherOperand(mul, sigmoid.getResult());
  // x * sigmoid(x), or x * sigmoid(alpha * x) with a constant alpha read
  // there alone (CLIP's QuickGELU: 1.702).
  double alpha = 1.0;
  if (sigmoid.getInput() != x) {
    auto scaled = sigmoid.getInput().getDefiningOp<MulOp>();
    if (!scaled || !scaled->hasOneUse() || shapeOf(scaled) != shapeOf(x))
      return Match::no();
    std::optional<double> a;
    if (scaled.getLhs() == x)
      a = splatValue(scaled.getRhs());
    else if (scaled.getRhs() == x)
      a = splatValue(scaled.getLhs());
    if (!a)
      return Match::no();
    alpha = *a;
  }
  rewriter.setInsertionPoint(mul);
  Value s = rewriter.create<SiluOp>(mul.getLoc(), x.getType(), x,
                                    rewriter.getF64FloatAttr(alpha));
  replaceChainOutput(rewriter, mul.getResult(), s);
  return Match::yes();
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// Builds otc.cross_entropy for a reduced loss on [N, C] `logits` and [N]
/// `labels`, reading through reshapes that only merged leading dimensions
/// (the flattening an exporter writes), and replaces `loss`.
static Match buildCrossEntropy(Operation *loss, Value logits, Value labels,
                               StringAttr reduction, IntegerAttr ignore,
                               PatternRewriter &rewriter) {
  if (reduction.getValue() != "none") {
    auto rz = logits.getDefiningOp<ReshapeOp>();
    auto ry = labels.getDefiningOp<ReshapeOp>();
    if (rz && ry && shapeOf(rz.getInput()).size() >= 2 &&
        shapeOf(rz.getInput()).back() == shapeOf(logits).back() &&
        shapeOf(ry.getInput()) == shapeOf(rz.getInput()).drop_back()) {
      logits = rz.getInput();
      labels = ry.getInput();
    }
  }
  rewriter.setInsertionPoint(loss);
  // The kernel library reads int64 labels.
  if (!getElementTypeOrSelf(labels.getType()).isInteger(64))
    labels = rewriter.create<CastOp>(
        loss->getLoc(),
        RankedTensorType::get(shapeOf(labels), rewriter.getI64Type()), labels);
  auto lse = withShape(logits.getType(), shapeOf(labels));
  auto ce = rewriter.create<CrossEntropyOp>(
      loss->getLoc(), TypeRange{loss->getResult(0).getType(), lse}, logits,
      labels, reduction, ignore);
  replaceChainOutput(rewriter, loss->getResult(0), ce.getLoss());
  return Match::yes();
}

Match fuse::fuseCrossEntropy(SoftmaxCrossEntropyOp loss,
                             PatternRewriter &rewriter) {
  return buildCrossEntropy(loss, loss.getLogits(), loss.getLabels(),
                           loss.getReductionAttr(), loss.getIgnoreIndexAttr(),
                           rewriter);
}

Match fuse::fuseLogSoftmaxNll(NllLossOp loss, PatternRewriter &rewriter) {
  auto ls = loss.getInput().getDefiningOp<LogSoftmaxOp>();
  if (!ls)
    return Match::no();
  if (ls.getAxis() != 1)
    return Match::miss("cross-entropy: log_softmax is not over the classes");
  if (!ls->hasOneUse())
    return Match::miss("cross-entropy: the log-probabilities are also read "
                       "elsewhere");
  return buildCrossEntropy(loss, ls.getInput(), loss.getLabels(),
                           loss.getReductionAttr(), loss.getIgnoreIndexAttr(),
                           rewriter);
}

//===----------------------------------------------------------------------===//
// Expert products
//===----------------------------------------------------------------------===//

/// A mixture of experts' product as the `batched_mm` exports write it: the
/// experts' weights gathered per row (`gather(w [E, A, B], ids [I...])`, an
/// [I..., A, B] tensor) and multiplied with each row, either as
/// `matmul(gathered [I..., O, K], x [I..., K, 1])` (the experts stored
/// [E, O, K]) or as `matmul(x [I..., 1, K], gathered [I..., K, O])`.
/// Becomes otc.expert_matmul on x as [N, K] (N the indices' count), which
/// never builds the gathered tensor.
Match fuse::fuseExpertMatmul(MatMulOp mm, PatternRewriter &rewriter) {
  if (mm.getTransposeLhs() || mm.getTransposeRhs())
    return Match::no();
  auto lhsGather = mm.getLhs().getDefiningOp<GatherOp>();
  auto rhsGather = mm.getRhs().getDefiningOp<GatherOp>();
  GatherOp gather = lhsGather ? lhsGather : rhsGather;
  if (!gather || (lhsGather && rhsGather))
    return Match::no();
  bool transposed = gather == lhsGather; // [I..., O, K] x [I..., K, 1]
  Value rows = transposed ? mm.getRhs() : mm.getLhs();
  ArrayRef<int64_t> ws = shapeOf(gather.getData()), rs = shapeOf(rows);
  ArrayRef<int64_t> is = shapeOf(gather.getIndices());
  if (ws.size() != 3 || rs.size() != is.size() + 2)
    return Match::no();
  if (gather.getAxis() != 0)
    return Match::miss("expert product: the weights are gathered along axis " +
                       std::to_string(gather.getAxis()) + ", not the experts'");
  int64_t n = numElements(is);
  if (rs.drop_back(2) != is ||
      (transposed ? rs.back() : rs[rs.size() - 2]) != 1)
    return Match::miss("expert product: each row must multiply its own "
                       "expert's matrix as a single row or column");
  int64_t k = transposed ? rs[rs.size() - 2] : rs.back();
  int64_t o = transposed ? ws[1] : ws[2];
  Location loc = mm.getLoc();
  rewriter.setInsertionPoint(mm);
  auto elem = cast<ShapedType>(mm.getType()).getElementType();
  Type i64 = rewriter.getI64Type();
  Value x = rewriter.create<ReshapeOp>(loc, RankedTensorType::get({n, k}, elem),
                                       rows);
  Value ids = gather.getIndices();
  auto it = cast<RankedTensorType>(ids.getType());
  if (!it.getElementType().isInteger(64))
    ids = rewriter.create<CastOp>(loc, it.clone(i64), ids);
  if (is.size() != 1)
    ids = rewriter.create<ReshapeOp>(loc, RankedTensorType::get({n}, i64), ids);
  Value y = rewriter.create<ExpertMatmulOp>(
      loc, RankedTensorType::get({n, o}, elem), x, ids, gather.getData(),
      transposed ? rewriter.getUnitAttr() : UnitAttr());
  Value shaped = rewriter.create<ReshapeOp>(loc, mm.getType(), y);
  replaceChainOutput(rewriter, mm.getResult(), shaped);
  return Match::yes();
}

//===----------------------------------------------------------------------===//
// The patterns and their driver
//===----------------------------------------------------------------------===//

namespace {

/// `v` transposed from [B, T, H, D] to [B, H, T, D]: the [B, T, H, D] value,
/// else null.
static Value headsTransposedFrom(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
    return nullptr;
  return t.getInput();
}

/// Attention whose q, k and v are [B, T, H, D] tensors transposed to
/// [B, H, T, D] (as a projection and a head split produce them) and whose
/// output is only transposed back reads and writes the [B, T, H, D] tensors
/// themselves (layout "bthd"): the four transposes, and the four of the
/// gradient, are gone.
struct AbsorbHeadTransposes : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp att,
                                PatternRewriter &rewriter) const override {
    if (att.getLayout() != "bhtd" || att.getOutput().use_empty())
      return failure();
    Value q = headsTransposedFrom(att.getQ()),
          k = headsTransposedFrom(att.getK()),
          v = headsTransposedFrom(att.getV());
    if (!q || !k || !v)
      return failure();
    SmallVector<Operation *> backs;
    for (Operation *user : att.getOutput().getUsers()) {
      auto t = dyn_cast<TransposeOp>(user);
      if (!t || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
        return failure();
      backs.push_back(t);
    }
    rewriter.setInsertionPoint(att);
    auto fused = rewriter.create<AttentionOp>(
        att.getLoc(), TypeRange{q.getType(), att.getLse().getType()}, q, k, v,
        att.getMask(), att.getKey(), att.getSinks(), att.getCausalAttr(),
        att.getScaleAttr(), att.getDropoutAttr(), att.getStreamAttr(),
        rewriter.getStringAttr("bthd"), att.getWindowAttr(),
        att.getSoftcapAttr(), att.getMaskGradAttr(), att.getKeyPaddingAttr());
    // Every replacement first, then the erasures: erasing the last reader
    // of `att` erases `att` (and the transposes it alone read) with it.
    for (Operation *t : backs)
      rewriter.replaceAllUsesWith(t->getResult(0), fused.getOutput());
    rewriter.replaceAllUsesWith(att.getLse(), fused.getLse());
    backs.push_back(att);
    eraseUnread(rewriter, backs);
    return success();
  }
};

/// The constant factor of `v` (a splat multiplying it or dividing it) and
/// what it multiplies, when `v` is that product and read once.
static std::optional<std::pair<Value, double>> scaledBy(Value v) {
  if (!v.hasOneUse())
    return std::nullopt;
  Value x;
  std::optional<double> c;
  if (auto mul = v.getDefiningOp<MulOp>()) {
    if ((c = splatValue(mul.getRhs())))
      x = mul.getLhs();
    else if ((c = splatValue(mul.getLhs())))
      x = mul.getRhs();
  } else if (auto div = v.getDefiningOp<DivOp>()) {
    if ((c = splatValue(div.getRhs())) && *c != 0.0) {
      x = div.getLhs();
      c = 1.0 / *c;
    }
  }
  // The splat must not broadcast the product beyond x.
  if (!x || x.getType() != v.getType() || !std::isfinite(*c))
    return std::nullopt;
  return std::make_pair(x, *c);
}

/// Attention whose q or k is multiplied by a constant (Whisper's and BART's
/// q_proj(x) * head_dim^-0.5, an attention of scale 1), through reshapes and
/// transposes that nothing else reads, reads the unscaled value and scales
/// its scores by the product instead: scale * (c q) k^T = (scale c) q k^T,
/// the soft cap and the mask applying after as before. The multiply, and
/// its gradient, are gone.
struct AbsorbScoreScale : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp att,
                                PatternRewriter &rewriter) const override {
    if (att.isPacked())
      return failure();
    double scale = att.getScale().convertToDouble();
    bool changed = false;
    for (unsigned i : {0u, 1u}) { // q, k
      // The op reading the scaled value (the attention, or the last reshape
      // or transpose of a chain that only reaches it) and its operand.
      Operation *reader = att;
      unsigned operand = i;
      Value v = att->getOperand(i);
      while (v.hasOneUse() &&
             isa_and_nonnull<ReshapeOp, TransposeOp>(v.getDefiningOp())) {
        reader = v.getDefiningOp();
        operand = 0;
        v = reader->getOperand(0);
      }
      auto scaled = scaledBy(v);
      if (!scaled || !v.hasOneUse())
        continue;
      Operation *product = v.getDefiningOp();
      rewriter.modifyOpInPlace(
          reader, [&] { reader->setOperand(operand, scaled->first); });
      eraseUnread(rewriter, {product});
      scale *= scaled->second;
      changed = true;
    }
    if (!changed)
      return failure();
    rewriter.modifyOpInPlace(
        att, [&] { att.setScaleAttr(rewriter.getF64FloatAttr(scale)); });
    return success();
  }
};

/// One fusion of otc-fuse-patterns as an MLIR rewrite pattern: rooted at
/// the op its exported chain ends in (the anchor the recognizer starts
/// from), naming the fused ops it builds (counted in the module's
/// `otc.fused`), and reporting a near miss as its match failure.
template <typename AnchorOp, Match (*Recognize)(AnchorOp, PatternRewriter &)>
struct FusionPattern : OpRewritePattern<AnchorOp> {
  FusionPattern(MLIRContext *context, ArrayRef<StringRef> builds)
      : OpRewritePattern<AnchorOp>(context, /*benefit=*/1, builds) {}

  LogicalResult matchAndRewrite(AnchorOp anchor,
                                PatternRewriter &rewriter) const override {
    Match m = Recognize(anchor, rewriter);
    if (m.fused)
      return success();
    if (!m.nearMiss.empty())
      return rewriter.notifyMatchFailure(anchor, m.nearMiss);
    return failure();
  }
};

template <typename AnchorOp, Match (*Recognize)(AnchorOp, PatternRewriter &),
          typename... Builds>
void addFusion(RewritePatternSet &patterns) {
  patterns.add<FusionPattern<AnchorOp, Recognize>>(
      patterns.getContext(),
      ArrayRef<StringRef>{Builds::getOperationName()...});
}

/// Tells the driver which ops were erased (its list of ops to visit may
/// still name them) and the mask cache which ops it may no longer trust,
/// then passes every notification on.
struct ErasedOps : RewriterBase::ForwardingListener {
  using ForwardingListener::ForwardingListener;
  llvm::DenseSet<Operation *> erased;

  void notifyOperationErased(Operation *op) override {
    erased.insert(op);
    fuse::forgetMask(op);
    ForwardingListener::notifyOperationErased(op);
  }
};

} // namespace

/// The fusions, one line each: the anchor, its recognizer, what it builds.
void fuse::populateFusionPatterns(RewritePatternSet &patterns) {
  addFusion<SoftmaxOp, fuseAttention, AttentionOp>(patterns);
  addFusion<SqrtOp, fuseNorm, LayerNormOp, RmsNormOp>(patterns);
  addFusion<ErfOp, fuseGeluErf, GeluOp>(patterns);
  addFusion<TanhOp, fuseGeluTanh, GeluOp>(patterns);
  addFusion<SigmoidOp, fuseSilu, SiluOp>(patterns);
  addFusion<SoftmaxCrossEntropyOp, fuseCrossEntropy, CrossEntropyOp>(patterns);
  addFusion<NllLossOp, fuseLogSoftmaxNll, CrossEntropyOp>(patterns);
  addFusion<MatMulOp, fuseExpertMatmul, ExpertMatmulOp>(patterns);
  populateRopeFusion(patterns); // AddOp, ConcatOp -> RopeOp (FuseRope.cpp)
  populateBiasTransposeFusion(patterns); // TransposeOp -> AddOp
}

void fuse::populateHeadTransposePatterns(RewritePatternSet &patterns) {
  patterns.add<AbsorbHeadTransposes>(patterns.getContext());
}

void fuse::populateScoreScalePatterns(RewritePatternSet &patterns) {
  patterns.add<AbsorbScoreScale>(patterns.getContext());
}

// Not MLIR's greedy driver: in LLVM 19 it always folds every op it visits
// and deduplicates and hoists the constants (GreedyRewriteConfig has no
// switch for either), which would rewrite IR the fusions do not own, and it
// revisits ops until nothing changes, where a fusion is decided once, at
// its anchor, in the order of the function's ops (the first anchor claims
// a chain). MLIR 19 has no walkAndApplyPatterns either; this is that walk.
void fuse::applyInOrder(ArrayRef<Operation *> ops,
                        const FrozenRewritePatternSet &patterns,
                        RewriterBase::Listener &listener) {
  if (ops.empty())
    return;
  PatternApplicator applicator(patterns);
  applicator.applyDefaultCostModel();
  ErasedOps erased(&listener);
  PatternRewriter rewriter(ops.front()->getContext());
  rewriter.setListener(&erased);
  for (Operation *op : ops) {
    // An erased op's address may since hold an op created meanwhile: it is
    // skipped too, as every op created during the walk is.
    if (erased.erased.contains(op))
      continue;
    // A fusion erases what it leaves unread at once, so an op unread here
    // was unread in the input (none is in the pipeline: otc-fold-shapes'
    // greedy driver erased them). It goes now, with what it alone read, as
    // the greedy driver would erase it: an anchor after it no longer sees
    // it as a second reader.
    if (isUnread(op)) {
      eraseUnread(rewriter, {op});
      continue;
    }
    rewriter.setInsertionPoint(op);
    (void)applicator.matchAndRewrite(op, rewriter);
  }
}

namespace {

/// Reports a pattern's near miss as a remark at its anchor (when asked to).
struct NearMissRemarks : RewriterBase::Listener {
  bool enabled = false;

  void notifyMatchFailure(Location loc,
                          function_ref<void(Diagnostic &)> reason) override {
    if (!enabled)
      return;
    Diagnostic why(loc, DiagnosticSeverity::Remark);
    reason(why);
    emitRemark(loc) << "not fused: " << why.str();
  }
};

struct FusePatternsPass : otc::impl::FusePatternsBase<FusePatternsPass> {
  using FusePatternsBase::FusePatternsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context), scales(context), layouts(context);
    populateFusionPatterns(patterns);
    populateScoreScalePatterns(scales);
    populateHeadTransposePatterns(layouts);
    llvm::DenseSet<OperationName> builds;
    for (const std::unique_ptr<RewritePattern> &p :
         patterns.getNativePatterns())
      builds.insert(p->getGeneratedOps().begin(), p->getGeneratedOps().end());
    FrozenRewritePatternSet fusions(std::move(patterns)),
        scoreScales(std::move(scales)), headTransposes(std::move(layouts));
    NearMissRemarks nearMisses;
    nearMisses.enabled = remarks;
    std::map<std::string, int64_t> counts;
    fuse::clearMaskCache();
    for (auto f : module.getOps<func::FuncOp>()) {
      // The fusions at every op in order; then, every chain fused, the
      // attentions' constant factors (changed in place) and their layouts
      // (an attention's readers are final by then).
      SmallVector<Operation *> ops;
      f.walk([&](Operation *op) { ops.push_back(op); });
      applyInOrder(ops, fusions, nearMisses);
      ops.clear();
      for (AttentionOp att : f.getOps<AttentionOp>())
        ops.push_back(att);
      applyInOrder(ops, scoreScales, nearMisses);
      applyInOrder(ops, headTransposes, nearMisses);
      f.walk([&](Operation *op) {
        if (builds.contains(op->getName()))
          ++counts[op->getName().getStringRef().drop_front(4).str()];
      });
    }
    fuse::clearMaskCache();
    Builder b(context);
    SmallVector<NamedAttribute> entries;
    for (auto &[name, n] : counts)
      entries.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(n)));
    module->setAttr(attrs::kFused, b.getDictionaryAttr(entries));
  }
};

} // namespace
