//===- FuseRope.cpp - recognize the rotary position embedding -------------===//
//
// The otc-fuse-patterns rewrite patterns that turn the rotary embedding as
// exporters write it into one otc.rope:
//
// - x * cos + rotate(x) * sin, anchored at its add, with rotate_half(x) =
//   concat(-x[..., D/2:], x[..., :D/2]) over the last dimension (Slice,
//   Neg, Concat, Mul, Add; both exporters of Llama, Mistral, Qwen and
//   GPT-NeoX write it so), or GPT-J's rotate_every_two(x) =
//   flatten(stack(-x[..., 1::2], x[..., ::2])) (strided slices, Neg, two
//   unsqueezes, a Concat over the new last axis and a reshape back;
//   `interleaved`). The slices may read one value or two copies of it (one
//   transpose per slice, as torch.onnx.export's dynamo exporter writes
//   them). The tables must be constants or the model's constant buffers
//   (the dynamo exporter's folded tables, `otc.buffer` arguments): no
//   gradient, and otc.rope returns none for them; a chain whose tables
//   depend on parameters or inputs is left unfused with a remark.
// - half-width tables (GPT-OSS): concat(x1 cos - x2 sin, x2 cos + x1 sin)
//   of x's halves x1 and x2, anchored at the concat: otc.rope of x with
//   the tables repeated to full width.
// - partial rotary (GPT-NeoX, Phi, GPT-J): concat(rope(x[..., :r]),
//   x[..., r:]) over the last axis, anchored at the concat once the rope
//   over x[..., :r] is fused, becomes one otc.rope of x whose r-wide tables
//   leave the features past r as they are.
//
// When x is the [B, T, H, D] -> [B, H, T, D] transpose of a head split and
// the tables do not vary over the heads, the rope moves before the
// transpose (rope commutes with it, the tables reshaped from [., 1, T, R]
// to [., T, 1, R]): a transpose, a rope and attention become a rope and a
// transpose feeding attention, whose head transposes otc-fuse-patterns then
// folds into the attention (layout "bthd"). Every change goes through the
// pattern's rewriter, which erases the chain the rope replaces
// (fuse::replaceChainOutput).
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "llvm/ADT/SmallBitVector.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

namespace {

/// `a` and `b` compute the same tensor: one value, or the same transpose or
/// reshape of values that do.
bool sameValue(Value a, Value b) {
  if (a == b)
    return true;
  if (a.getType() != b.getType())
    return false;
  auto ta = a.getDefiningOp<TransposeOp>(), tb = b.getDefiningOp<TransposeOp>();
  if (ta && tb)
    return ta.getPermutation() == tb.getPermutation() &&
           sameValue(ta.getInput(), tb.getInput());
  auto ra = a.getDefiningOp<ReshapeOp>(), rb = b.getDefiningOp<ReshapeOp>();
  return ra && rb && sameValue(ra.getInput(), rb.getInput());
}

/// The input of a slice that takes the whole of every dimension but the
/// last, elements [start, start + D / 2) of it with stride 1, where the
/// input's last dimension is D; null otherwise.
Value halfSliced(Value v, bool upper) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || !slice.getResult().hasOneUse())
    return nullptr;
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(v);
  if (in.empty() || in.back() % 2 != 0 || out.back() != in.back() / 2)
    return nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t start = i + 1 == in.size() && upper ? in.back() / 2 : 0;
    if (slice.getStrides()[i] != 1 || slice.getStarts()[i] != start ||
        (i + 1 < in.size() && out[i] != in[i]))
      return nullptr;
  }
  return slice.getInput();
}

/// rotate_half(x) as concat(neg(x[..., h:]), x[..., :h]) over the last
/// axis: x, else null.
Value rotatedHalf(Value v) {
  auto concat = v.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 || !v.hasOneUse())
    return nullptr;
  int64_t rank = static_cast<int64_t>(shapeOf(v).size());
  if (static_cast<int64_t>(concat.getAxis()) != rank - 1)
    return nullptr;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  if (!neg || !neg.getResult().hasOneUse())
    return nullptr;
  Value upper = halfSliced(neg.getInput(), /*upper=*/true);
  Value lower = halfSliced(concat.getInputs()[1], /*upper=*/false);
  if (!upper || !lower || !sameValue(upper, lower))
    return nullptr;
  return lower;
}

/// Whether `slice` takes the whole of every dimension but the last, and of
/// the last the elements from `start` on `stride` apart.
bool slicesLastAxisOnly(SliceOp slice, int64_t start, int64_t stride) {
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(slice);
  for (size_t i = 0; i < in.size(); ++i) {
    bool last = i + 1 == in.size();
    if (slice.getStrides()[i] != (last ? stride : 1) ||
        slice.getStarts()[i] != (last ? start : 0) ||
        (!last && out[i] != in[i]))
      return false;
  }
  return true;
}

/// The input of a slice `v` that takes the whole of every dimension but the
/// last, and of the last (even, D) the elements start, start + 2, ... (D / 2
/// of them); null otherwise.
Value everyOtherSliced(Value v, int64_t start) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || !slice.getResult().hasOneUse())
    return nullptr;
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(v);
  if (in.empty() || in.back() % 2 != 0 || out.back() != in.back() / 2 ||
      !slicesLastAxisOnly(slice, start, /*stride=*/2))
    return nullptr;
  return slice.getInput();
}

/// `v` as [..., n] reshaped to [..., n, 1] (an unsqueeze): its input, else
/// null.
Value unsqueezedLast(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  if (!r || !r.getResult().hasOneUse())
    return nullptr;
  ArrayRef<int64_t> in = shapeOf(r.getInput()), out = shapeOf(v);
  if (out.size() != in.size() + 1 || out.back() != 1 || out.drop_back() != in)
    return nullptr;
  return r.getInput();
}

/// rotate_every_two(x) (GPT-J) as flatten(stack(neg(x[..., 1::2]),
/// x[..., ::2]), the stack a concat of [..., D/2, 1] reshapes over the new
/// last axis, the flatten a reshape back to x's shape: x, else null.
Value rotatedPairs(Value v) {
  auto flat = v.getDefiningOp<ReshapeOp>();
  if (!flat || !v.hasOneUse())
    return nullptr;
  auto concat = flat.getInput().getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 ||
      !concat.getResult().hasOneUse())
    return nullptr;
  ArrayRef<int64_t> pairs = shapeOf(concat.getResult()), xs = shapeOf(v);
  int64_t rank = static_cast<int64_t>(pairs.size());
  if (static_cast<int64_t>(concat.getAxis()) != rank - 1 ||
      pairs.size() != xs.size() + 1 || pairs.back() != 2 ||
      pairs.drop_back(2) != xs.drop_back() || pairs[rank - 2] * 2 != xs.back())
    return nullptr;
  Value first = unsqueezedLast(concat.getInputs()[0]);
  auto neg = first ? first.getDefiningOp<NegOp>() : NegOp();
  if (!neg || !neg.getResult().hasOneUse())
    return nullptr;
  Value odd = everyOtherSliced(neg.getInput(), 1);
  Value second = unsqueezedLast(concat.getInputs()[1]);
  Value even = second ? everyOtherSliced(second, 0) : Value();
  if (!odd || !even || !sameValue(odd, even) || shapeOf(even) != xs)
    return nullptr;
  return even;
}

/// Whether the function argument `a` is a constant buffer of the model (a
/// rotary table the exporter folded: never trained, no gradient).
bool isBufferArgument(BlockArgument a) {
  auto f = dyn_cast<func::FuncOp>(a.getOwner()->getParentOp());
  return f && f.getArgAttr(a.getArgNumber(), attrs::kBuffer);
}

/// Whether `v` is computed from constants and constant buffers alone (no
/// parameter, no input).
bool isConstantTable(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value w = work.pop_back_val();
    if (auto a = dyn_cast<BlockArgument>(w)) {
      if (!isBufferArgument(a))
        return false;
      continue;
    }
    Operation *def = w.getDefiningOp();
    if (!seen.insert(def).second)
      continue;
    if (def->getNumRegions() != 0)
      return false;
    llvm::append_range(work, def->getOperands());
  }
  return true;
}

/// Whether `table` broadcasts to `x` with x's last dimension.
bool tableFits(Value table, Value x) {
  ArrayRef<int64_t> ts = shapeOf(table), xs = shapeOf(x);
  if (ts.empty() || ts.size() > xs.size() || ts.back() != xs.back())
    return false;
  for (size_t i = 1; i <= ts.size(); ++i)
    if (ts[ts.size() - i] != 1 && ts[ts.size() - i] != xs[xs.size() - i])
      return false;
  return true;
}

/// A [., 1, T, D] table (padded to rank 4) as the [., T, 1, D] one of the
/// untransposed [B, T, H, D] input: an existing reshape of it, else one
/// made after its definition. Null when the table varies over the heads.
Value headsMovedTable(Value table, PatternRewriter &rewriter) {
  SmallVector<int64_t, 4> s(shapeOf(table));
  while (s.size() < 4)
    s.insert(s.begin(), 1);
  if (s[1] != 1)
    return nullptr;
  std::swap(s[1], s[2]);
  auto type = RankedTensorType::get(
      s, cast<ShapedType>(table.getType()).getElementType());
  for (Operation *user : table.getUsers())
    if (auto r = dyn_cast<ReshapeOp>(user))
      if (r.getType() == type)
        return r.getResult();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfterValue(table);
  return rewriter.create<ReshapeOp>(table.getLoc(), type, table);
}

/// The input of a slice `v` that takes the whole of every dimension but the
/// last, elements [start, start + n) of it with stride 1 (n the result's
/// last dimension), from an input of `full`'s type; null otherwise.
Value lastAxisWindow(Value v, int64_t start, Value full) {
  auto slice = v.getDefiningOp<SliceOp>();
  if (!slice || !slice.getResult().hasOneUse() ||
      slice.getInput().getType() != full.getType())
    return nullptr;
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(v);
  if (in.empty() || (start != 0 && start + out.back() != in.back()) ||
      !slicesLastAxisOnly(slice, start, /*stride=*/1))
    return nullptr;
  return slice.getInput();
}

/// x as rms_norm(transpose(y)) over x's last axis whose statistics nothing
/// reads yet (Gemma 3's q and k norms, after the head transpose; the
/// gradient that reads them is built later): the norm, else null.
RmsNormOp perHeadNormOfTranspose(Value x) {
  auto norm = x.getDefiningOp<RmsNormOp>();
  if (!norm || !norm.getRstd().use_empty() ||
      norm.getAxis() + 1 != shapeOf(x).size())
    return nullptr;
  auto t = norm.getInput().getDefiningOp<TransposeOp>();
  if (!t || t.getPermutation() != ArrayRef<int64_t>{0, 2, 1, 3})
    return nullptr;
  return norm;
}

/// Replaces `result` (the chain's output) by otc.rope of x with the tables.
/// When x is the [B, T, H, D] -> [B, H, T, D] transpose of a head split and
/// the tables do not vary over the heads, the rope reads the untransposed
/// value (tables reshaped) and is transposed after. So too when x is an RMS
/// norm over the last axis of that transpose: the norm of a row does not
/// depend on the rows' order, so the norm moves before the transpose too.
void replaceWithRope(PatternRewriter &rewriter, Value result, Value x,
                     Value cos, Value sin, bool interleaved) {
  Location loc = result.getLoc();
  RmsNormOp norm = perHeadNormOfTranspose(x);
  auto t = (norm ? norm.getInput() : x).getDefiningOp<TransposeOp>();
  if (t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3}) {
    Value c = headsMovedTable(cos, rewriter);
    Value s = c ? headsMovedTable(sin, rewriter) : Value();
    if (c && s) {
      Value y = t.getInput();
      if (norm) {
        ArrayRef<int64_t> ys = shapeOf(y);
        auto stats = RankedTensorType::get(
            ys.drop_back(), getElementTypeOrSelf(norm.getRstd().getType()));
        y = rewriter
                .create<RmsNormOp>(norm.getLoc(), TypeRange{y.getType(), stats},
                                   y, norm.getGamma(), norm.getAxisAttr(),
                                   norm.getEpsilonAttr())
                .getResult();
      }
      auto rope = rewriter.create<RopeOp>(loc, y.getType(), y, c, s,
                                          /*transposed=*/false, interleaved);
      auto moved = rewriter.create<TransposeOp>(
          loc, result.getType(), rope.getResult(), t.getPermutationAttr());
      fuse::replaceChainOutput(rewriter, result, moved.getResult());
      return;
    }
    // A near miss changes nothing: the reshape made for cos goes.
    if (Operation *made = c ? c.getDefiningOp() : nullptr)
      if (made->use_empty())
        rewriter.eraseOp(made);
  }
  auto rope = rewriter.create<RopeOp>(loc, result.getType(), x, cos, sin,
                                      /*transposed=*/false, interleaved);
  fuse::replaceChainOutput(rewriter, result, rope.getResult());
}

/// x * cos + rotate_half(x) * sin, anchored at the add.
struct FuseRopePattern : OpRewritePattern<AddOp> {
  FuseRopePattern(MLIRContext *context)
      : OpRewritePattern<AddOp>(context, /*benefit=*/1,
                                {RopeOp::getOperationName()}) {}

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    if (add->use_empty())
      return failure();
    auto m0 = add.getLhs().getDefiningOp<MulOp>();
    auto m1 = add.getRhs().getDefiningOp<MulOp>();
    if (!m0 || !m1)
      return failure();
    // The product of rotate_half(x) (or GPT-J's rotate_every_two(x)) and
    // sin, in either order.
    Value x, sin, cos;
    MulOp direct;
    bool interleaved = false;
    for (auto [rot, other] : {std::pair{m0, m1}, std::pair{m1, m0}}) {
      for (auto [r, s] : {std::pair{rot.getLhs(), rot.getRhs()},
                          std::pair{rot.getRhs(), rot.getLhs()}}) {
        Value v = rotatedHalf(r);
        if (!v && (v = rotatedPairs(r)))
          interleaved = true;
        if (v) {
          x = v;
          sin = s;
          direct = other;
          break;
        }
      }
      if (x)
        break;
    }
    if (!x)
      return failure();
    if (sameValue(direct.getLhs(), x))
      cos = direct.getRhs();
    else if (sameValue(direct.getRhs(), x))
      cos = direct.getLhs();
    else
      return rewriter.notifyMatchFailure(
          add, "rotary embedding: the cosine term multiplies another tensor "
               "than the rotated one");
    return rewrite(add, x, cos, sin, direct, interleaved, rewriter);
  }

  LogicalResult rewrite(AddOp add, Value x, Value cos, Value sin, MulOp direct,
                        bool interleaved, PatternRewriter &rewriter) const {
    Value rotMul =
        add.getLhs() == direct.getResult() ? add.getRhs() : add.getLhs();
    if (!direct.getResult().hasOneUse() || !rotMul.hasOneUse())
      return rewriter.notifyMatchFailure(
          add, "rotary embedding: a product is also read elsewhere");
    if (!isConstantTable(cos) || !isConstantTable(sin))
      return rewriter.notifyMatchFailure(
          add, "rotary embedding: the cos and sin tables are not constants "
               "(they would need a gradient)");
    if (cos.getType() != sin.getType() ||
        !getElementTypeOrSelf(cos.getType()).isF32())
      return rewriter.notifyMatchFailure(
          add, "rotary embedding: cos and sin are not f32 tables of one shape");
    if (!tableFits(cos, x) || add.getType() != x.getType() ||
        shapeOf(x).size() > 4)
      return rewriter.notifyMatchFailure(
          add, "rotary embedding: the tables do not broadcast to the input "
               "(of rank 4 at most) along its last dimension");
    replaceWithRope(rewriter, add.getResult(), x, cos, sin, interleaved);
    return success();
  }
};

/// concat(rope(x[..., :r]), x[..., r:]) over the last axis, the partial
/// rotary of GPT-NeoX and Phi (x_rot and x_pass), anchored at the concat:
/// one otc.rope of x whose tables, r wide, leave the features past r as
/// they are. The two slices may read one value or two copies of it.
struct FusePartialRopePattern : OpRewritePattern<ConcatOp> {
  FusePartialRopePattern(MLIRContext *context)
      : OpRewritePattern<ConcatOp>(context, /*benefit=*/1,
                                   {RopeOp::getOperationName()}) {}

  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    if (concat->use_empty() || concat.getInputs().size() != 2)
      return failure();
    Value out = concat.getResult();
    int64_t rank = static_cast<int64_t>(shapeOf(out).size());
    auto rope = concat.getInputs()[0].getDefiningOp<RopeOp>();
    if (!rope || rope.getTransposed() ||
        static_cast<int64_t>(concat.getAxis()) != rank - 1)
      return failure();
    if (!rope.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(
          concat, "partial rotary embedding: the rotated part is also read "
                  "elsewhere");
    int64_t r = shapeOf(rope.getInput()).back();
    Value x = lastAxisWindow(rope.getInput(), 0, out);
    Value pass = lastAxisWindow(concat.getInputs()[1], r, out);
    if (!x || !pass || !sameValue(x, pass))
      return rewriter.notifyMatchFailure(
          concat, "partial rotary embedding: the rotated and passed features "
                  "are not the two parts of one tensor's last dimension");
    replaceWithRope(rewriter, out, x, rope.getCos(), rope.getSin(),
                    rope.getInterleaved());
    return success();
  }
};

/// One half of a value's last axis, x[..., :D/2] or x[..., D/2:], read
/// directly or through one transpose that keeps the last axis in place.
struct Half {
  Value source;              ///< x
  SmallVector<int64_t> perm; ///< the transpose's permutation; empty: none
};

/// `v` as the lower or `upper` half of some x (see Half), else nullopt.
std::optional<Half> halfOf(Value v, bool upper) {
  if (Value x = halfSliced(v, upper))
    return Half{x, {}};
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t)
    return std::nullopt;
  ArrayRef<int64_t> perm = t.getPermutation();
  if (perm.empty() || perm.back() != static_cast<int64_t>(perm.size()) - 1)
    return std::nullopt;
  Value x = halfSliced(t.getInput(), upper);
  if (!x)
    return std::nullopt;
  return Half{x, SmallVector<int64_t>(perm)};
}

/// Whether `m` is a product read once of `x` and `table`, in either order.
bool isProductOf(Value m, Value x, Value table) {
  auto mul = m.getDefiningOp<MulOp>();
  return mul && m.hasOneUse() &&
         ((mul.getLhs() == x && mul.getRhs() == table) ||
          (mul.getLhs() == table && mul.getRhs() == x));
}

/// The rotary embedding with half-width tables, as GPT-OSS writes it:
/// concat(x1 cos - x2 sin, x2 cos + x1 sin) over the last axis, x1 and x2
/// the halves of x's last axis (sliced, each maybe transposed the same
/// way), cos and sin [..., D/2]. It is otc.rope of x with the tables
/// repeated, concat(cos, cos) and concat(sin, sin): a pair (p, p + D/2)
/// reads cos[p] either way. Anchored at the concat.
struct FuseHalfTableRopePattern : OpRewritePattern<ConcatOp> {
  FuseHalfTableRopePattern(MLIRContext *context)
      : OpRewritePattern<ConcatOp>(context, /*benefit=*/1,
                                   {RopeOp::getOperationName()}) {}

  LogicalResult matchAndRewrite(ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    Value out = concat.getResult();
    const int64_t rank = static_cast<int64_t>(shapeOf(out).size());
    if (concat->use_empty() || concat.getInputs().size() != 2 ||
        static_cast<int64_t>(concat.getAxis()) != rank - 1)
      return failure();
    auto first = concat.getInputs()[0].getDefiningOp<SubOp>();
    auto second = concat.getInputs()[1].getDefiningOp<AddOp>();
    if (!first || !second || !first->hasOneUse() || !second->hasOneUse())
      return failure();
    // first = x1 cos - x2 sin: the halves and tables from its products.
    Value x1, x2, cos, sin;
    std::optional<Half> lower, upper;
    auto split = [](Value m, bool high, Value &half, Value &table) {
      auto mul = m.getDefiningOp<MulOp>();
      if (!mul || !m.hasOneUse())
        return std::optional<Half>();
      for (auto [h, t] : {std::pair{mul.getLhs(), mul.getRhs()},
                          std::pair{mul.getRhs(), mul.getLhs()}})
        if (std::optional<Half> found = halfOf(h, high)) {
          half = h;
          table = t;
          return found;
        }
      return std::optional<Half>();
    };
    lower = split(first.getLhs(), /*high=*/false, x1, cos);
    upper = split(first.getRhs(), /*high=*/true, x2, sin);
    if (!lower || !upper)
      return failure();
    // second = x2 cos + x1 sin, in either order.
    Value a = second.getLhs(), b = second.getRhs();
    if (!((isProductOf(a, x2, cos) && isProductOf(b, x1, sin)) ||
          (isProductOf(b, x2, cos) && isProductOf(a, x1, sin))))
      return failure();
    if (!sameValue(lower->source, upper->source) || lower->perm != upper->perm)
      return rewriter.notifyMatchFailure(
          concat, "rotary embedding (half tables): the halves are not of one "
                  "tensor");
    if (!isConstantTable(cos) || !isConstantTable(sin) ||
        cos.getType() != sin.getType() ||
        !getElementTypeOrSelf(cos.getType()).isF32() || !tableFits(cos, x1) ||
        rank > 4)
      return rewriter.notifyMatchFailure(
          concat, "rotary embedding (half tables): cos and sin are not "
                  "constant f32 tables of one shape broadcasting to a half "
                  "(of rank 4 at most)");
    rewriter.setInsertionPoint(concat);
    Location loc = concat.getLoc();
    auto repeated = [&](Value table) {
      SmallVector<int64_t> shape(shapeOf(table));
      shape.back() *= 2;
      return rewriter
          .create<ConcatOp>(loc, withShape(table.getType(), shape),
                            ValueRange{table, table},
                            rewriter.getI64IntegerAttr(
                                static_cast<int64_t>(shape.size()) - 1))
          .getResult();
    };
    Value fullCos = repeated(cos), fullSin = repeated(sin);
    Value x = lower->source;
    Operation *made = nullptr;
    if (!lower->perm.empty()) {
      made = rewriter.create<TransposeOp>(
          loc, out.getType(), x, rewriter.getDenseI64ArrayAttr(lower->perm));
      x = made->getResult(0);
    }
    replaceWithRope(rewriter, out, x, fullCos, fullSin, /*interleaved=*/false);
    // The transpose made here is left unread when the rope moved before it.
    if (made && made->use_empty())
      rewriter.eraseOp(made);
    return success();
  }
};

/// slice(transpose(x, p)) -> transpose(slice(x), p) for the slices that
/// split one head transpose's last axis into equal contiguous parts (two or
/// more, all of it, nothing else reading the transpose), the transpose
/// keeping the last axis: GPT-NeoX's q, k and v, thirds of its projection
/// [B, T, H, 3D] seen as [B, H, T, 3D]. The ropes over q and k then move
/// before the transposes (replaceWithRope) and the attention absorbs them
/// (AbsorbHeadTransposes): no transpose is left.
struct SlicesBeforeHeadTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern<TransposeOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp t,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> perm = t.getPermutation();
    const int64_t rank = static_cast<int64_t>(perm.size());
    if (rank < 2 || perm.back() != rank - 1)
      return failure();
    SmallVector<SliceOp> slices;
    for (Operation *user : t->getUsers()) {
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice || !slicesLastAxisOnly(slice, slice.getStarts().back(), 1))
        return failure();
      slices.push_back(slice);
    }
    const int64_t width = shapeOf(t).back();
    const int64_t parts = static_cast<int64_t>(slices.size());
    if (parts < 2 || width % parts != 0)
      return failure();
    // Equal parts at 0, w, 2w, ...: each start once.
    llvm::SmallBitVector seen(parts);
    for (SliceOp slice : slices) {
      int64_t start = slice.getStarts().back();
      if (shapeOf(slice).back() != width / parts ||
          start % (width / parts) != 0 || seen.test(start / (width / parts)))
        return failure();
      seen.set(start / (width / parts));
    }
    for (SliceOp slice : slices) {
      rewriter.setInsertionPoint(slice);
      SmallVector<int64_t> shape(shapeOf(t.getInput()));
      shape.back() = shapeOf(slice).back();
      SmallVector<int64_t> starts(rank, 0), strides(rank, 1);
      starts.back() = slice.getStarts().back();
      auto inner = rewriter.create<SliceOp>(
          slice.getLoc(), withShape(slice.getType(), shape), t.getInput(),
          rewriter.getDenseI64ArrayAttr(starts),
          rewriter.getDenseI64ArrayAttr(strides));
      auto moved = rewriter.create<TransposeOp>(slice.getLoc(), slice.getType(),
                                                inner.getResult(),
                                                t.getPermutationAttr());
      rewriter.replaceOp(slice, moved.getResult());
    }
    rewriter.eraseOp(t);
    return success();
  }
};

} // namespace

void fuse::populateRopeFusion(RewritePatternSet &patterns) {
  patterns.add<SlicesBeforeHeadTranspose>(patterns.getContext());
  patterns.add<FuseRopePattern>(patterns.getContext());
  patterns.add<FusePartialRopePattern>(patterns.getContext());
  patterns.add<FuseHalfTableRopePattern>(patterns.getContext());
}
