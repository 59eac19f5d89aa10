//===- FuseAttention.cpp - recognize scaled dot-product attention ---------===//
//
// The attention recognizer of otc-fuse-patterns. From a softmax over the last
// axis of [B, H, T, S] scores it walks up to the scores product Q K^T (its
// scale, its mask, the reshapes and transposes exporters put around it) and
// down to the product with V (through optional dropout), undoes grouped-query
// K/V repeats, and classifies the mask by evaluating its constant values
// element by element: exactly causal becomes the `causal` flag, a causal
// sliding window (Mistral's, Gemma 2/3's local layers) `causal` and `window`,
// a bidirectional one (ModernBERT's local layers) `window` alone,
// anything else an additive mask operand (both for a causal select under an
// added mask). The mask's values come from passes/ConstantEvaluator.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "ir/ShapeUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

//===----------------------------------------------------------------------===//
// The attention chain
//===----------------------------------------------------------------------===//

/// Fill values at or below this hide a score: exp of it underflows to
/// exactly zero next to any score an attention layer produces.
static constexpr double kHiddenBelow = -1e4;

/// Whether a matmul feeds `v` within a few ops (the softmax reads scores).
static bool hasProductAbove(Value v, int depth = 6) {
  Operation *d = v.getDefiningOp();
  if (!d || depth == 0)
    return false;
  if (isa<MatMulOp>(d))
    return true;
  return llvm::any_of(d->getOperands(), [&](Value o) {
    return hasProductAbove(o, depth - 1);
  });
}

/// Whether some reader of `p` (through reshapes, a dropout, a NaN guard's
/// select or a slice: the sink column dropped) multiplies it:
/// probabilities times V. A router's
/// softmax feeds a top-k and the routing weights' products instead.
static bool feedsProduct(Value p, int depth = 4) {
  if (depth == 0)
    return false;
  return llvm::any_of(p.getUsers(), [&](Operation *u) {
    if (auto mm = dyn_cast<MatMulOp>(u))
      return mm.getLhs() == p;
    if (isa<ReshapeOp, DropoutOp, SelectOp, SliceOp>(u))
      return llvm::any_of(u->getResults(), [&](Value r) {
        return feedsProduct(r, depth - 1);
      });
    return false;
  });
}

/// Whether `v` is a concatenation along `axis`, or one less its maximum
/// (the softmax's stabilization, GPT-OSS's: x - max(x)).
static bool concatAbove(Value v, int64_t axis) {
  for (int depth = 0; depth < 3; ++depth) {
    Operation *d = v.getDefiningOp();
    if (auto cat = dyn_cast_or_null<ConcatOp>(d))
      return static_cast<int64_t>(cat.getAxis()) == axis;
    if (!isa_and_nonnull<SubOp, AddOp>(d))
      return false;
    v = d->getOperand(0);
  }
  return false;
}

/// Multiplies `scale` by the constant factors of single-use scalings of `v`
/// and returns the value they scale.
static Value absorbScale(Value v, double &scale) {
  while (true) {
    if (auto mul = v.getDefiningOp<MulOp>(); mul && v.hasOneUse()) {
      if (std::optional<double> c = splatValue(mul.getRhs());
          c && shapeOf(mul.getLhs()) == shapeOf(v)) {
        scale *= *c;
        v = mul.getLhs();
        continue;
      }
      if (std::optional<double> c = splatValue(mul.getLhs());
          c && shapeOf(mul.getRhs()) == shapeOf(v)) {
        scale *= *c;
        v = mul.getRhs();
        continue;
      }
    }
    if (auto div = v.getDefiningOp<DivOp>(); div && v.hasOneUse()) {
      if (std::optional<double> c = splatValue(div.getRhs());
          c && shapeOf(div.getLhs()) == shapeOf(v)) {
        scale /= *c;
        v = div.getLhs();
        continue;
      }
    }
    return v;
  }
}

/// `v` as a rank-4 [b, h, x, y] value: itself, or the rank-4 value a
/// single-use reshape merged into a [b*h, x, y] batch.
static Value asRank4(Value v, int64_t b) {
  ArrayRef<int64_t> s = shapeOf(v);
  if (s.size() == 4)
    return s[0] == b ? v : Value();
  auto r = v.getDefiningOp<ReshapeOp>();
  if (s.size() != 3 || !r || !v.hasOneUse())
    return Value();
  ArrayRef<int64_t> in = shapeOf(r.getInput());
  if (in.size() != 4 || in[0] != b || in[0] * in[1] != s[0] ||
      in.drop_front(2) != s.drop_front(1))
    return Value();
  return r.getInput();
}

/// The [B, Hk, S, D] value that `k` ([B, H, S, D]) repeats per group of
/// query heads (reshape to [B, Hk, 1, S, D], broadcast to [B, Hk, G, S, D],
/// reshape back), or `k` itself.
static Value unrepeatHeads(Value k) {
  auto outer = k.getDefiningOp<ReshapeOp>();
  auto bc = outer ? outer.getInput().getDefiningOp<BroadcastOp>() : nullptr;
  auto inner = bc ? bc.getInput().getDefiningOp<ReshapeOp>() : nullptr;
  if (!inner)
    return k;
  ArrayRef<int64_t> s = shapeOf(k), src = shapeOf(inner.getInput()),
                    mid = shapeOf(inner), wide = shapeOf(bc);
  if (src.size() != 4 || mid.size() != 5 || wide.size() != 5 ||
      mid != ArrayRef<int64_t>{src[0], src[1], 1, src[2], src[3]} ||
      wide[0] != src[0] || wide[1] != src[1] || wide[3] != src[2] ||
      wide[4] != src[3] || wide[1] * wide[2] != s[1])
    return k;
  return inner.getInput();
}

namespace {
/// The recognized pieces of one attention.
struct Chain {
  Value q, k, v, mask, key;
  /// K is `kSource` permuted by `kPerm` (null perm: k is kSource).
  Value kSource;
  SmallVector<int64_t> kPerm;
  double scale = 1.0, dropout = 0.0;
  int64_t stream = 0;
  bool causal = false;
  /// A sliding window of this many keys (0: none): with causal the keys
  /// W or more behind a query are hidden, without it those W or more away
  /// on either side (MaskBand).
  int64_t window = 0;
  /// Scores soft-capped as c tanh(s / c) (0: not).
  double softcap = 0.0;
  /// The additive mask is computed from parameters (T5's relative position
  /// bias): the fused op returns its gradient.
  bool maskGrad = false;
  /// The value the fused output replaces.
  Value output;
  /// A select with a fill whose condition is no causal band: the additive
  /// mask (the fill where hidden, else 0) is built from it with the fused
  /// op (`maskHideWhenTrue`: the fill is its true operand).
  SelectOp maskSelect;
  bool maskHideWhenTrue = false;
  double maskFill = 0.0;
  /// A run-time mask split into a constant band (causal and window, or
  /// none) and a key padding `padding` ([B, 1, 1, S] booleans, true: the
  /// key is seen): the fused op's mask is select(padding, 0, paddingFill)
  /// [B, 1, 1, S], marked key_padding.
  Value padding;
  double paddingFill = 0.0;
  /// A second additive mask added after the first ((S + mask) + extraMask:
  /// T5's eager attention, its relative bias then the causal mask): the
  /// fused op's mask is their sum.
  Value extraMask;
  /// Attention sinks (GPT-OSS): the [1, H, 1, 1] or [H] logits broadcast
  /// into the column concatenated to the scores (null: none).
  Value sinks;
};
} // namespace

/// The remark for soft-capped scores that are not c * tanh(scale * Q K^T)
/// with c > 0.
static constexpr const char *kSoftCapParse =
    "attention: the scores are soft-capped, but not as c * tanh(scale * Q "
    "K^T) with c > 0: kept unfused (exact)";

/// Whether `x` is c * tanh(s) (after constant scales): scores soft-capped.
static bool isSoftCapped(Value x) {
  double ignored = 1.0;
  x = absorbScale(x, ignored);
  return x.getDefiningOp<TanhOp>() != nullptr;
}

static bool parseProduct(Value x, ArrayRef<int64_t> s, Chain &c);

/// Parses `x` = scale * (Q K^T), or those scores soft-capped,
/// c * tanh(scale / c * Q K^T) (Gemma 2), with the product in rank 4 or
/// merged into a rank-3 batch. Fills q, k (or kSource/kPerm), scale and
/// softcap.
static bool parseScores(Value x, ArrayRef<int64_t> s, Chain &c) {
  double cap = 1.0;
  Value capped = absorbScale(x, cap);
  if (auto t = capped.getDefiningOp<TanhOp>()) {
    if (!(cap > 0.0) || !capped.hasOneUse() || !t.getInput().hasOneUse() ||
        !parseProduct(t.getInput(), s, c))
      return false;
    c.softcap = cap;
    c.scale *= cap;
    return true;
  }
  return parseProduct(x, s, c);
}

/// parseScores without the soft cap.
static bool parseProduct(Value x, ArrayRef<int64_t> s, Chain &c) {
  x = absorbScale(x, c.scale);
  Value mmv = x;
  if (auto r = x.getDefiningOp<ReshapeOp>(); r && shapeOf(x).size() == 4 &&
                                             x.hasOneUse())
    mmv = r.getInput();
  auto mm = mmv.getDefiningOp<MatMulOp>();
  if (!mm || mm.getTransposeLhs() || !mmv.hasOneUse())
    return false;
  ArrayRef<int64_t> ms = shapeOf(mm);
  if (ms.size() == 3 ? ms[0] != s[0] * s[1] || ms.drop_front(1) != s.drop_front(2)
                     : ms != s)
    return false;
  Value q = asRank4(mm.getLhs(), s[0]);
  Value kt = asRank4(mm.getRhs(), s[0]);
  if (!q || !kt)
    return false;
  c.q = absorbScale(q, c.scale);
  if (mm.getTransposeRhs()) {
    c.k = absorbScale(kt, c.scale);
    return true;
  }
  kt = absorbScale(kt, c.scale);
  // K^T = transpose(X, p) is K = transpose(X, p with its last two swapped).
  SmallVector<int64_t> perm = {0, 1, 3, 2};
  Value src = kt;
  if (auto t = kt.getDefiningOp<TransposeOp>(); t && kt.hasOneUse()) {
    perm.assign(t.getPermutation().begin(), t.getPermutation().end());
    std::swap(perm[2], perm[3]);
    src = t.getInput();
  }
  if (perm == SmallVector<int64_t>{0, 1, 2, 3}) {
    c.k = absorbScale(src, c.scale);
  } else {
    c.kSource = src;
    c.kPerm = perm;
  }
  return true;
}

/// Parses `v` = where(cond, scores, fill) (or its mirror) whose condition
/// is a band (MaskBand: the keys after each query, or a sliding window's):
/// a causal mask applied before an additive one, as Hugging Face's GPT-2 writes
/// `where(causal, scores, finfo.min) + attention_mask`.
static bool parseCausalSelect(Value v, ArrayRef<int64_t> s, Chain &c) {
  auto sel = v.getDefiningOp<SelectOp>();
  if (!sel || !v.hasOneUse())
    return false;
  std::optional<double> lf = splatValue(sel.getLhs()),
                        rf = splatValue(sel.getRhs());
  bool hideWhenTrue = lf && *lf <= kHiddenBelow;
  if (!hideWhenTrue && !(rf && *rf <= kHiddenBelow))
    return false;
  if (!parseScores(hideWhenTrue ? sel.getRhs() : sel.getLhs(), s, c))
    return false;
  Value cond = sel.getCondition();
  std::optional<MaskBand> band =
      cachedBand(cond, hideWhenTrue ? 1 : 0, s[2], s[3], [&](double h) {
        return std::optional<bool>((h != 0.0) == hideWhenTrue);
      });
  if (!band)
    return false;
  c.causal = band->causal;
  c.window = band->window;
  return true;
}

/// The result of `where(p != p, 0, p)` when that is all that reads `p`
/// (onnxscript's Where(IsNaN(p), 0, p) after a softmax), else null.
static Value nanGuarded(Value p) {
  SelectOp sel;
  CompareOp isNan;
  for (Operation *user : p.getUsers()) {
    if (auto c = dyn_cast<CompareOp>(user);
        c && c.getLhs() == p && c.getRhs() == p && c.getPredicate() == "ne")
      isNan = c;
    else if (auto s = dyn_cast<SelectOp>(user))
      sel = s;
    else
      return Value();
  }
  if (!sel || !isNan || !isNan->hasOneUse() ||
      sel.getCondition() != isNan.getResult() || sel.getRhs() != p)
    return Value();
  std::optional<double> zero = splatValue(sel.getLhs());
  if (!zero || *zero != 0.0)
    return Value();
  return sel.getResult();
}

/// Whether `v`, computed from constants alone, sees every key (no value 0).
static bool seesEveryKey(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.empty())
    return false;
  ArrayRef<int64_t> rows = shape.drop_back();
  SmallVector<double> row;
  for (int64_t flat = 0, n = numElements(rows); flat < n; ++flat) {
    if (!evaluateRow(v, unravelIndex(flat, rows), row))
      return false;
    if (llvm::is_contained(row, 0.0))
      return false;
  }
  return true;
}

/// Splits a run-time boolean `cond` over [B, H, T, S] scores (true: the key
/// is seen) into C and K, cond = select(C, K, false) or select(K, C,
/// false): C computed from constants alone, the same for every batch entry
/// and head ([1, 1, T|1, S|1]) and either seeing every key or causal (with
/// a sliding window or not), K the key padding, [B, 1, 1, S] booleans
/// computed at run time. Fills c.padding, c.causal and c.window; changes no
/// IR.
static bool splitKeyPadding(Value cond, ArrayRef<int64_t> s, Chain &c) {
  auto sel = cond.getDefiningOp<SelectOp>();
  auto no = sel ? sel.getRhs().getDefiningOp<ConstantOp>() : ConstantOp();
  auto splat =
      no ? dyn_cast<DenseElementsAttr>(no.getValue()) : DenseElementsAttr();
  if (!splat || !splat.isSplat() || !splat.getElementType().isInteger(1) ||
      splat.getSplatValue<bool>())
    return false;
  auto isPadding = [&](Value v) {
    ArrayRef<int64_t> sh = shapeOf(v);
    return sh.size() == 4 && (sh[0] == s[0] || sh[0] == 1) && sh[1] == 1 &&
           sh[2] == 1 && sh[3] == s[3] &&
           getElementTypeOrSelf(v.getType()).isInteger(1) &&
           !dependsOnParam(v) &&
           !evaluateAt(v, SmallVector<int64_t>(4, 0)).has_value();
  };
  auto isBand = [&](Value v) {
    ArrayRef<int64_t> sh = shapeOf(v);
    return sh.size() == 4 && sh[0] == 1 && sh[1] == 1 &&
           (sh[2] == 1 || sh[2] == s[2]) && (sh[3] == 1 || sh[3] == s[3]) &&
           evaluateAt(v, SmallVector<int64_t>(4, 0)).has_value();
  };
  Value x = sel.getCondition(), y = sel.getLhs();
  Value padding, band;
  if (isPadding(y) && isBand(x))
    padding = y, band = x;
  else if (isPadding(x) && isBand(y))
    padding = x, band = y;
  else
    return false;
  if (seesEveryKey(band)) {
    c.causal = false;
    c.window = 0;
  } else {
    std::optional<MaskBand> w = cachedBand(band, 3, s[2], s[3], [](double v) {
      return std::optional<bool>(v == 0.0);
    });
    if (!w)
      return false;
    // A sliding window too (causal or bidirectional): a padded query W or
    // more past its sequence's last seen key then sees no key, and gets
    // zeros where the export spreads its fill over every key (a padded
    // position either way).
    c.causal = w->causal;
    c.window = w->window;
  }
  c.padding = padding;
  return true;
}

/// The scores side of the attention under `softmax` ([B, H, T, S] scores
/// `s`): a select with a fill or an added mask (classified as causal, a
/// sliding window or an additive operand), the scale and Q K^T, possibly
/// soft-capped. Fills `c`; yes when it matched. Changes no IR.
/// How an additive mask's value hides a key: a fill at or below
/// kHiddenBelow hides it, 0 shows it, anything else is no band's.
static std::optional<bool> additiveHidden(double v) {
  if (v != 0.0 && v > kHiddenBelow)
    return std::nullopt;
  return v <= kHiddenBelow;
}

/// (S + b) + m with S = scale * Q K^T, the inner sum read only by the
/// outer one (T5's eager attention: its relative position bias, then the
/// causal mask): S + (b + m). A causal band m is the fused op's causal
/// flag, with b its mask; otherwise the mask is b + m (Chain::extraMask).
static bool matchTwoMasks(AddOp outer, ArrayRef<int64_t> s, Chain &c) {
  int64_t t = s[2], keys = s[3];
  for (int side = 0; side < 2; ++side) {
    auto inner =
        (side ? outer.getRhs() : outer.getLhs()).getDefiningOp<AddOp>();
    Value m = side ? outer.getLhs() : outer.getRhs();
    if (!inner || !inner->hasOneUse())
      continue;
    for (int j = 0; j < 2; ++j) {
      c = Chain();
      if (!parseScores(j ? inner.getRhs() : inner.getLhs(), s, c))
        continue;
      Value b = j ? inner.getLhs() : inner.getRhs();
      if (getElementTypeOrSelf(b.getType()) !=
              getElementTypeOrSelf(m.getType()) ||
          !broadcastShapes(shapeOf(b), shapeOf(m)))
        continue;
      std::optional<MaskBand> band = cachedBand(m, 2, t, keys, additiveHidden);
      c.mask = b;
      if (band) {
        c.causal = band->causal;
        c.window = band->window;
      } else {
        c.extraMask = m;
      }
      c.maskGrad = dependsOnParam(b) || (!band && dependsOnParam(m));
      return true;
    }
  }
  c = Chain();
  return false;
}

static Match matchScores(Value x, ArrayRef<int64_t> s, bool scoresLike,
                         Chain &c) {
  int64_t t = s[2], keys = s[3];
  if (!x.hasOneUse())
    return Match::miss("attention: the scores are also read elsewhere");
  if (auto sel = x.getDefiningOp<SelectOp>()) {
    std::optional<double> lf = splatValue(sel.getLhs()),
                          rf = splatValue(sel.getRhs());
    bool hideWhenTrue = lf && *lf <= kHiddenBelow;
    if (!hideWhenTrue && !(rf && *rf <= kHiddenBelow))
      return Match::miss("attention: the masked fill is not -inf or at most "
                         "-1e4");
    Value cond = sel.getCondition();
    double fill = hideWhenTrue ? *lf : *rf;
    Value masked = hideWhenTrue ? sel.getRhs() : sel.getLhs();
    if (!parseScores(masked, s, c))
      return Match::miss(isSoftCapped(masked)
                             ? std::string(kSoftCapParse)
                             : "attention: the masked scores are not scale * "
                               "Q K^T");
    std::optional<MaskBand> band =
        cachedBand(cond, hideWhenTrue ? 1 : 0, t, keys, [&](double v) {
          return std::optional<bool>((v != 0.0) == hideWhenTrue);
        });
    if (band) {
      c.causal = band->causal;
      c.window = band->window;
    } else {
      if (dependsOnParam(cond))
        return Match::miss("attention: the mask depends on a parameter");
      if (!hideWhenTrue && splitKeyPadding(cond, s, c)) {
        c.paddingFill = fill;
      } else {
        c.maskSelect = sel;
        c.maskHideWhenTrue = hideWhenTrue;
        c.maskFill = fill;
      }
    }
  } else if (auto add = x.getDefiningOp<AddOp>()) {
    Value m;
    bool causalSelect = false;
    if (parseScores(add.getLhs(), s, c))
      m = add.getRhs();
    else if (c = Chain(); parseScores(add.getRhs(), s, c))
      m = add.getLhs();
    else if (c = Chain(); parseCausalSelect(add.getLhs(), s, c))
      m = add.getRhs(), causalSelect = true;
    else if (c = Chain(); parseCausalSelect(add.getRhs(), s, c))
      m = add.getLhs(), causalSelect = true;
    else if (isSoftCapped(add.getLhs()) || isSoftCapped(add.getRhs()))
      return Match::miss(kSoftCapParse);
    else if (c = Chain(); matchTwoMasks(add, s, c))
      return Match::yes();
    else
      return Match::miss("attention: neither addend is scale * Q K^T (or "
                         "its causal masking)");
    // A key both hidden by the causal select and by the additive mask gets
    // fill + mask unfused and is left out fused: the same probabilities
    // wherever a row keeps a visible key.
    std::optional<MaskBand> band;
    if (!causalSelect)
      band = cachedBand(m, 2, t, keys, additiveHidden);
    if (band) {
      c.causal = band->causal;
      c.window = band->window;
    }
    if (causalSelect || !band) {
      c.maskGrad = dependsOnParam(m);
      c.mask = m;
    }
    // An additive mask of zeros hides nothing (an exporter's mask of a
    // model without padding, where(true, 0, min), folded to a splat: ViT's
    // and BERT's bidirectional attention): no mask at all, so cuDNN reads
    // none.
    if (c.mask && splatValue(c.mask) == std::optional<double>(0.0))
      c.mask = Value();
    // A run-time mask select(C & K, 0, fill): C's band and K's padding.
    auto msel = m.getDefiningOp<SelectOp>();
    double seen = 1.0, fill = 0.0;
    if (msel) {
      seen = splatValue(msel.getLhs()).value_or(1.0);
      fill = splatValue(msel.getRhs()).value_or(0.0);
    }
    if (!causalSelect && !band && !c.maskGrad && seen == 0.0 &&
        fill <= kHiddenBelow && splitKeyPadding(msel.getCondition(), s, c)) {
      c.mask = Value();
      c.paddingFill = fill;
    }
  } else if (!parseScores(x, s, c)) {
    return scoresLike ? Match::miss("attention: the scores are not "
                                    "scale * Q K^T (+ mask)")
                      : Match::no();
  }

  return Match::yes();
}

/// The probabilities side from `p` (the softmax's result, or its columns
/// without the sink's): an optional NaN guard and dropout, then the
/// product with V ([B, H, S, D], in `v`), whose output (reshaped back to
/// rank 4 where the product was batched in rank 3) is `c.output`.
static Match matchValues(Value p, ArrayRef<int64_t> s, Chain &c, Value &v) {
  int64_t keys = s[3];
  if (Value guarded = nanGuarded(p)) {
    // NaN appears only in a row that hides every key: never without a
    // mask or under a band alone (causal or a sliding window: each query
    // sees itself); under a key padding (and a band) the fused op gives
    // such a row zeros, as the guard does; with any other mask, the fused
    // op would give it NaN.
    if (c.mask || c.maskSelect)
      return Match::miss("attention: the probabilities are guarded by "
                         "Where(IsNaN(p), 0, p) and a row may hide every key "
                         "(the guard's zeros differ from the fused op's NaN): "
                         "kept unfused (exact)");
    p = guarded;
  }
  if (auto drop = singleUser<DropoutOp>(p)) {
    if (!drop.getMask().use_empty())
      return Match::miss("attention: the dropout mask is read elsewhere");
    c.dropout = drop.getRatio().convertToDouble();
    c.stream = drop.getStream();
    c.key = drop.getKey();
    p = drop.getOutput();
  }
  if (!p.hasOneUse())
    return Match::miss("attention: the probabilities are also read elsewhere");
  Value pv = p;
  if (auto r = singleUser<ReshapeOp>(p)) {
    ArrayRef<int64_t> rs = shapeOf(r);
    if (rs.size() != 3 || rs[0] != s[0] * s[1] || rs.drop_front(1) != s.drop_front(2))
      return Match::miss("attention: the probabilities are reshaped to " +
                         formatShape(rs));
    pv = r;
  }
  auto mm = singleUser<MatMulOp>(pv);
  if (!mm || mm.getLhs() != pv || mm.getTransposeLhs() || mm.getTransposeRhs())
    return Match::miss("attention: the probabilities do not multiply V");
  v = asRank4(mm.getRhs(), s[0]);
  c.output = mm.getResult();
  if (shapeOf(mm).size() == 3) {
    auto back = singleUser<ReshapeOp>(mm.getResult());
    if (!back || shapeOf(back).size() != 4 || shapeOf(back)[0] != s[0])
      return Match::miss("attention: the output is not reshaped back to "
                         "[B, H, T, D]");
    c.output = back;
  }
  if (!v || shapeOf(v)[2] != keys)
    return Match::miss("attention: V is not [B, H, S, D]");

  return Match::yes();
}

/// Attention sinks (GPT-OSS): the softmax reads concat(scores, column)
/// over the last axis, or that less its row maximum (a stabilization the
/// softmax makes itself), where the column broadcasts a logit per head
/// ([1, H, 1, 1], or [H] reshaped to it) over the batch and the queries,
/// and only the scores' columns of the probabilities are read (a slice
/// from 0). Sets `scores` to the scores, `probs` to that slice and
/// c.sinks; a miss names what differs. Changes no IR.
static Match matchSinks(SoftmaxOp softmax, Chain &c, Value &scores,
                        Value &probs) {
  Value x = softmax.getInput();
  const int64_t last = static_cast<int64_t>(shapeOf(x).size()) - 1;
  if (auto sub = x.getDefiningOp<SubOp>(); sub && x.hasOneUse()) {
    auto max = sub.getRhs().getDefiningOp<ReduceMaxOp>();
    if (!max || max.getInput() != sub.getLhs() ||
        max.getAxes() != ArrayRef<int64_t>{last} || !max.getKeepDims())
      return Match::miss("attention sinks: the concatenated scores less "
                         "something other than their row maximum");
    x = sub.getLhs();
  }
  auto cat = x.getDefiningOp<ConcatOp>();
  if (!cat || cat.getInputs().size() != 2 ||
      shapeOf(cat.getInputs()[1]).back() != 1)
    return Match::miss("attention sinks: not one column concatenated after "
                       "the scores");
  Value column = cat.getInputs()[1];
  Value logits = column;
  if (auto bc = logits.getDefiningOp<BroadcastOp>())
    logits = bc.getInput();
  const int64_t heads = shapeOf(x)[1];
  if (shapeOf(logits) != ArrayRef<int64_t>{1, heads, 1, 1})
    return Match::miss("attention sinks: the column " +
                       formatShape(shapeOf(column)) +
                       " does not broadcast one logit per head");
  if (auto r = logits.getDefiningOp<ReshapeOp>();
      r && shapeOf(r.getInput()) == ArrayRef<int64_t>{heads})
    logits = r.getInput();
  if (!getElementTypeOrSelf(logits.getType()).isF32())
    return Match::miss("attention sinks: logits not FP32");
  Value p = softmax.getResult();
  auto slice = singleUser<SliceOp>(p);
  SmallVector<int64_t> kept(shapeOf(x).begin(), shapeOf(x).end());
  kept.back() -= 1;
  if (!slice || !p.hasOneUse() || shapeOf(slice) != ArrayRef<int64_t>(kept) ||
      llvm::any_of(slice.getStarts(), [](int64_t v) { return v != 0; }) ||
      llvm::any_of(slice.getStrides(), [](int64_t v) { return v != 1; }))
    return Match::miss("attention sinks: the probabilities are read other "
                       "than as the scores' columns");
  scores = cat.getInputs()[0];
  probs = slice.getResult();
  c.sinks = logits;
  return Match::yes();
}

/// The additive form of `c`'s select mask, before `softmax`: the fill where
/// hidden, else 0.
static Value buildAdditiveMask(SoftmaxOp softmax, const Chain &c,
                               PatternRewriter &rewriter) {
  SelectOp sel = c.maskSelect;
  Value x = softmax.getInput(), cond = sel.getCondition();
  rewriter.setInsertionPoint(softmax);
  auto ft = RankedTensorType::get({}, getElementTypeOrSelf(x.getType()));
  Value fill = rewriter.create<ConstantOp>(
      sel.getLoc(), DenseElementsAttr::get(ft, static_cast<float>(c.maskFill)));
  Value zero = rewriter.create<ConstantOp>(sel.getLoc(),
                                           DenseElementsAttr::get(ft, 0.0f));
  Type mt = withShape(x.getType(), shapeOf(cond));
  if (c.maskHideWhenTrue)
    return rewriter.create<SelectOp>(sel.getLoc(), mt, cond, fill, zero);
  return rewriter.create<SelectOp>(sel.getLoc(), mt, cond, zero, fill);
}

/// The key padding mask of `c`: select(padding, 0, fill) [B|1, 1, 1, S] in
/// the scores' element type, made once after the padding and shared by
/// every attention that reads the padding with that fill (each layer of a
/// model reads the same one).
static Value buildPaddingMask(SoftmaxOp softmax, const Chain &c,
                              PatternRewriter &rewriter) {
  Value x = softmax.getInput();
  Type mt = withShape(x.getType(), shapeOf(c.padding));
  for (Operation *user : c.padding.getUsers()) {
    auto sel = dyn_cast<SelectOp>(user);
    std::optional<double> fill =
        sel ? splatValue(sel.getRhs()) : std::optional<double>();
    if (sel && sel.getCondition() == c.padding && sel.getType() == mt &&
        splatValue(sel.getLhs()) == 0.0 && fill && near(*fill, c.paddingFill) &&
        sel->getBlock() == softmax->getBlock() && sel->isBeforeInBlock(softmax))
      return sel.getResult();
  }
  Location loc = c.padding.getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  if (Operation *def = c.padding.getDefiningOp();
      def && def->getBlock() == softmax->getBlock())
    rewriter.setInsertionPointAfter(def);
  else
    rewriter.setInsertionPoint(softmax);
  auto ft = RankedTensorType::get({}, getElementTypeOrSelf(x.getType()));
  Value fill = rewriter.create<ConstantOp>(
      loc, DenseElementsAttr::get(ft, static_cast<float>(c.paddingFill)));
  Value zero =
      rewriter.create<ConstantOp>(loc, DenseElementsAttr::get(ft, 0.0f));
  return rewriter.create<SelectOp>(loc, mt, c.padding, zero, fill);
}

/// The fused op for the recognized chain `c` with values `v`: grouped-query
/// repeats undone and the shapes checked (a near miss changes no IR); then
/// the additive mask and K materialized and otc.attention replaces the
/// chain's output.
static Match buildAttention(SoftmaxOp softmax, Chain &c, Value v, int64_t t,
                            PatternRewriter &rewriter) {
  // K is c.k, or c.kSource permuted by c.kPerm (built below), which repeats
  // no heads: only V's repeats are undone then.
  SmallVector<int64_t> ks;
  Value vv = unrepeatHeads(v);
  if (c.k) {
    if (Value k = unrepeatHeads(c.k); shapeOf(k) == shapeOf(vv)) {
      c.k = k;
      v = vv;
    }
    ks.assign(shapeOf(c.k).begin(), shapeOf(c.k).end());
  } else {
    for (int64_t d : c.kPerm)
      ks.push_back(shapeOf(c.kSource)[d]);
    if (ArrayRef<int64_t>(ks) == shapeOf(vv))
      v = vv;
  }
  if (ArrayRef<int64_t>(ks) != shapeOf(v) || shapeOf(c.q)[3] != shapeOf(v)[3] ||
      shapeOf(c.q)[2] != t)
    return Match::miss("attention: Q " + formatShape(shapeOf(c.q)) + ", K " +
                       formatShape(ks) + " and V " + formatShape(shapeOf(v)) +
                       " do not share D and S");
  c.v = v;

  if (c.maskSelect)
    c.mask = buildAdditiveMask(softmax, c, rewriter);
  else if (c.padding)
    c.mask = buildPaddingMask(softmax, c, rewriter);
  Operation *at = c.output.getDefiningOp();
  rewriter.setInsertionPoint(at);
  if (c.extraMask) {
    // The two masks' sum, broadcast as the unfused adds broadcast them.
    SmallVector<int64_t> sum =
        *broadcastShapes(shapeOf(c.mask), shapeOf(c.extraMask));
    c.mask = rewriter.create<AddOp>(
        at->getLoc(), withShape(c.mask.getType(), sum), c.mask, c.extraMask);
  }
  if (!c.k)
    c.k = rewriter.create<TransposeOp>(
        at->getLoc(), withShape(c.kSource.getType(), ks), c.kSource, c.kPerm);
  ArrayRef<int64_t> qs = shapeOf(c.q);
  if (c.sinks && shapeOf(c.sinks).size() != 1)
    c.sinks = rewriter.create<ReshapeOp>(
        at->getLoc(), withShape(c.sinks.getType(), {qs[1]}), c.sinks);
  auto att = rewriter.create<AttentionOp>(
      at->getLoc(),
      TypeRange{withShape(c.q.getType(), qs),
                withShape(c.q.getType(), qs.drop_back())},
      c.q, c.k, c.v, c.mask, c.key, c.sinks,
      c.causal ? rewriter.getUnitAttr() : UnitAttr(),
      rewriter.getF64FloatAttr(c.scale), rewriter.getF64FloatAttr(c.dropout),
      rewriter.getI64IntegerAttr(c.stream), rewriter.getStringAttr("bhtd"),
      rewriter.getI64IntegerAttr(c.window), rewriter.getF64FloatAttr(c.softcap),
      c.maskGrad ? rewriter.getUnitAttr() : UnitAttr(),
      c.padding ? rewriter.getUnitAttr() : UnitAttr());
  replaceChainOutput(rewriter, c.output, att.getOutput());
  return Match::yes();
}

Match fuse::fuseAttention(SoftmaxOp softmax, PatternRewriter &rewriter) {
  ArrayRef<int64_t> s = shapeOf(softmax);
  // A softmax of a product's result whose probabilities multiply something:
  // attention's shape, so a near miss is worth a remark.
  bool scoresLike = hasProductAbove(softmax.getInput()) &&
                    feedsProduct(softmax.getResult());
  if (static_cast<int64_t>(softmax.getAxis()) !=
      static_cast<int64_t>(s.size()) - 1)
    return scoresLike ? Match::miss("attention: softmax over axis " +
                                    std::to_string(softmax.getAxis()) +
                                    ", not the last")
                      : Match::no();
  if (s.size() != 4)
    return scoresLike ? Match::miss("attention: scores of rank " +
                                    std::to_string(s.size()) +
                                    ", not [B, H, T, S]")
                      : Match::no();
  // Attention sinks (GPT-OSS): a learned logit per head concatenated to
  // the scores, its probability sliced off after the softmax. The rest of
  // the chain is matched on the scores and probabilities without it.
  Chain c;
  Value scores = softmax.getInput(), probs = softmax.getResult();
  SmallVector<int64_t> keyed(s.begin(), s.end());
  if (scoresLike && concatAbove(scores, static_cast<int64_t>(s.size()) - 1)) {
    if (Match m = matchSinks(softmax, c, scores, probs); !m.fused)
      return m;
    keyed.back() -= 1;
  }
  Value sinks = c.sinks;
  if (Match m = matchScores(scores, keyed, scoresLike, c); !m.fused)
    return m;
  c.sinks = sinks;
  Value v;
  if (Match m = matchValues(probs, keyed, c, v); !m.fused)
    return m;
  return buildAttention(softmax, c, v, keyed[2], rewriter);
}
