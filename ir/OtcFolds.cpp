//===- OtcFolds.cpp - constant folding of otc ops
//--------------------------===//
//
// Folders of the otc ops and the dialect's constant materializer. Once the
// symbolic dimensions of a model are bound at import, the shape arithmetic of
// exported graphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Range,
// masks built with Equal/Where...) only reads constants; these folders turn
// it into `otc.constant`s, both when the importer builds ops with
// `createOrFold` and in the `otc-fold-shapes` pass. Folding evaluates small
// tensors only (kMaxFoldElements, splats excepted) so that big float
// computations stay in the program.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace otc;

namespace {

/// The largest non-splat result a folder computes.
constexpr int64_t kMaxFoldElements = 1 << 16;

/// The values of a constant tensor widened to int64 or double.
struct Elems {
  RankedTensorType type;
  bool isFloat = false;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;

  int64_t size() const { return isFloat ? floats.size() : ints.size(); }
  /// Element `i` as a double.
  double f(int64_t i) const { return isFloat ? floats[i] : double(ints[i]); }
  /// Element `i` as an int64 (floats truncate toward zero).
  int64_t i(int64_t k) const {
    return isFloat ? static_cast<int64_t>(floats[k]) : ints[k];
  }
};

} // namespace

/// Reads `attr` into Elems when it is a dense constant small enough to fold.
static std::optional<Elems> readElems(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || (!dense.isSplat() && type.getNumElements() > kMaxFoldElements))
    return std::nullopt;
  Elems e;
  e.type = type;
  Type et = type.getElementType();
  int64_t n = type.getNumElements();
  if (isa<FloatType>(et)) {
    e.isFloat = true;
    e.floats.reserve(n);
    for (APFloat v : dense.getValues<APFloat>())
      e.floats.push_back(v.convertToDouble());
    return e;
  }
  if (!et.isIntOrIndex())
    return std::nullopt;
  e.ints.reserve(n);
  bool isBool = et.isInteger(1);
  for (APInt v : dense.getValues<APInt>())
    e.ints.push_back(isBool ? int64_t(v.getBoolValue()) : v.getSExtValue());
  return e;
}

/// Builds a dense attribute of `type` from doubles (float element types) or
/// int64s (integer types; i1 is `v != 0`).
static Attribute makeAttr(RankedTensorType type, ArrayRef<double> floats,
                          ArrayRef<int64_t> ints) {
  Type et = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> vals;
    vals.reserve(floats.size());
    for (double v : floats) {
      APFloat a(v);
      bool lost;
      a.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(a);
    }
    return DenseElementsAttr::get(type, vals);
  }
  unsigned width = et.getIntOrFloatBitWidth();
  SmallVector<APInt> vals;
  vals.reserve(ints.size());
  for (int64_t v : ints)
    vals.push_back(width == 1 ? APInt(1, v != 0)
                              : APInt(width, static_cast<uint64_t>(v),
                                      /*isSigned=*/true));
  return DenseElementsAttr::get(type, vals);
}

/// Builds a result from values computed as doubles, converting them to the
/// integer element type (truncating toward zero) when `type` is an integer.
static Attribute makeFromDoubles(RankedTensorType type, ArrayRef<double> vals) {
  if (isa<FloatType>(type.getElementType()))
    return makeAttr(type, vals, {});
  SmallVector<int64_t> ints;
  for (double v : vals)
    ints.push_back(type.getElementType().isInteger(1)
                       ? int64_t(v != 0.0)
                       : static_cast<int64_t>(v));
  return makeAttr(type, {}, ints);
}

/// The static result type of a folded op, or null when it is not ranked or
/// too big to fold.
static RankedTensorType foldType(Value result) {
  auto type = dyn_cast<RankedTensorType>(result.getType());
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() > kMaxFoldElements)
    return nullptr;
  return type;
}

/// Row-major multi-index of `flat` in `shape`, dotted with `strides`.
static int64_t mapIndex(int64_t flat, ArrayRef<int64_t> shape,
                        ArrayRef<int64_t> strides) {
  int64_t src = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    src += (flat % shape[d]) * strides[d];
    flat /= shape[d];
  }
  return src;
}

/// Folds an elementwise op of constant operands with broadcasting. `fn`
/// computes one element from the operands' elements (all widened to
/// doubles, or all int64 when every operand is an integer); it returns
/// nullopt to refuse the fold (e.g. an integer division by zero).
static OpFoldResult foldElementwise(
    Value result, ArrayRef<Attribute> operands,
    llvm::function_ref<std::optional<double>(ArrayRef<double>)> ff,
    llvm::function_ref<std::optional<int64_t>(ArrayRef<int64_t>)> fi) {
  RankedTensorType type = foldType(result);
  if (!type)
    return {};
  SmallVector<Elems> in;
  bool anyFloat = false;
  for (Attribute a : operands) {
    std::optional<Elems> e = readElems(a);
    if (!e)
      return {};
    anyFloat |= e->isFloat;
    in.push_back(std::move(*e));
  }
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<SmallVector<int64_t>> strides;
  for (const Elems &e : in)
    strides.push_back(broadcastStrides(e.type.getShape(), shape));
  int64_t n = type.getNumElements();
  SmallVector<double> fout;
  SmallVector<int64_t> iout;
  SmallVector<double> fargs(in.size());
  SmallVector<int64_t> iargs(in.size());
  for (int64_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < in.size(); ++j) {
      int64_t src = mapIndex(k, shape, strides[j]);
      if (anyFloat)
        fargs[j] = in[j].f(src);
      else
        iargs[j] = in[j].ints[src];
    }
    if (anyFloat) {
      std::optional<double> v = ff(fargs);
      if (!v)
        return {};
      fout.push_back(*v);
    } else {
      std::optional<int64_t> v = fi(iargs);
      if (!v)
        return {};
      iout.push_back(*v);
    }
  }
  if (!anyFloat) {
    if (isa<FloatType>(type.getElementType()))
      for (int64_t v : iout)
        fout.push_back(double(v));
    else
      return makeAttr(type, {}, iout);
  }
  return makeFromDoubles(type, fout);
}

/// Folds a unary float op of a constant operand with `fn`.
static OpFoldResult foldUnary(Value result, Attribute operand,
                              double (*fn)(double)) {
  return foldElementwise(
      result, {operand},
      [&](ArrayRef<double> a) -> std::optional<double> { return fn(a[0]); },
      [](ArrayRef<int64_t>) -> std::optional<int64_t> { return std::nullopt; });
}

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

Operation *OtcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getResult(), adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> { return a[0] + a[1]; },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return a[0] + a[1];
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getResult(), adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> { return a[0] - a[1]; },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return a[0] - a[1];
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getResult(), adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> { return a[0] * a[1]; },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return a[0] * a[1];
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  // Integer division truncates toward zero, like ONNX Div on integers.
  return foldElementwise(
      getResult(), adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> { return a[0] / a[1]; },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        if (a[1] == 0)
          return std::nullopt;
        return a[0] / a[1];
      });
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getResult(), adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> {
        return std::pow(a[0], a[1]);
      },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        if (a[1] < 0)
          return std::nullopt;
        return static_cast<int64_t>(std::pow(double(a[0]), double(a[1])));
      });
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return -x; });
}
OpFoldResult ExpOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::exp(x); });
}
OpFoldResult LogOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::log(x); });
}
OpFoldResult TanhOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::tanh(x); });
}
OpFoldResult ReluOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return x > 0 ? x : 0.0; });
}
OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::sqrt(x); });
}
OpFoldResult ReciprocalOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return 1.0 / x; });
}
OpFoldResult ErfOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::erf(x); });
}
OpFoldResult CosOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::cos(x); });
}
OpFoldResult SinOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return std::sin(x); });
}
OpFoldResult SigmoidOp::fold(FoldAdaptor adaptor) {
  return foldUnary(getResult(), adaptor.getInput(),
                   [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  StringRef p = getPredicate();
  auto test = [p](auto a, auto b) -> bool {
    if (p == "eq")
      return a == b;
    if (p == "ne")
      return a != b;
    if (p == "lt")
      return a < b;
    if (p == "le")
      return a <= b;
    if (p == "gt")
      return a > b;
    return a >= b;
  };
  return foldElementwise(
      getResult(), {adaptor.getLhs(), adaptor.getRhs()},
      [&](ArrayRef<double> a) -> std::optional<double> {
        return test(a[0], a[1]) ? 1.0 : 0.0;
      },
      [&](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return test(a[0], a[1]) ? 1 : 0;
      });
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  // A constant uniform condition picks one side when it already has the
  // result type.
  if (auto cond =
          dyn_cast_if_present<DenseElementsAttr>(adaptor.getCondition());
      cond && cond.isSplat()) {
    const bool lhs = cond.getSplatValue<bool>();
    Value pick = lhs ? getLhs() : getRhs();
    if (pick.getType() == getResult().getType())
      return pick;
    // A uniform side broadcast: a splat of the result, whatever its size
    // (an exporter's all-true attention mask, where(true, 0, min), over
    // [B, 1, T, T]).
    auto side = dyn_cast_if_present<DenseElementsAttr>(lhs ? adaptor.getLhs()
                                                           : adaptor.getRhs());
    auto type = dyn_cast<RankedTensorType>(getResult().getType());
    if (side && side.isSplat() && type && type.hasStaticShape() &&
        side.getElementType() == type.getElementType())
      return DenseElementsAttr::get(type, side.getSplatValue<Attribute>());
  }
  RankedTensorType type = foldType(getResult());
  if (!type)
    return {};
  std::optional<Elems> c = readElems(adaptor.getCondition()),
                       a = readElems(adaptor.getLhs()),
                       b = readElems(adaptor.getRhs());
  if (!c || !a || !b)
    return {};
  ArrayRef<int64_t> shape = type.getShape();
  auto cs = broadcastStrides(c->type.getShape(), shape);
  auto as = broadcastStrides(a->type.getShape(), shape);
  auto bs = broadcastStrides(b->type.getShape(), shape);
  SmallVector<double> fout;
  SmallVector<int64_t> iout;
  for (int64_t k = 0, n = type.getNumElements(); k < n; ++k) {
    const Elems &src = c->ints[mapIndex(k, shape, cs)] ? *a : *b;
    int64_t idx = mapIndex(k, shape, &src == &*a ? as : bs);
    if (src.isFloat)
      fout.push_back(src.floats[idx]);
    else
      iout.push_back(src.ints[idx]);
  }
  return makeAttr(type, fout, iout);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  RankedTensorType type = foldType(getResult());
  std::optional<Elems> in = readElems(adaptor.getInput());
  if (!type || !in)
    return {};
  Type et = type.getElementType();
  if (isa<FloatType>(et)) {
    SmallVector<double> out;
    for (int64_t k = 0; k < in->size(); ++k)
      out.push_back(in->f(k));
    if (in->type.getNumElements() != type.getNumElements())
      return {};
    return makeAttr(type, out, {});
  }
  SmallVector<int64_t> out;
  for (int64_t k = 0; k < in->size(); ++k)
    out.push_back(et.isInteger(1) ? int64_t(in->f(k) != 0.0) : in->i(k));
  return makeAttr(type, {}, out);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // Reshape of a reshape reads the original input.
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    if (inner.getInput().getType() == getResult().getType())
      return inner.getInput();
  }
  auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  if (!dense)
    return {};
  return dense.reshape(cast<ShapedType>(getResult().getType()));
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput());
  if (dense && dense.isSplat())
    return SplatElementsAttr::get(cast<ShapedType>(getResult().getType()),
                                  dense.getSplatValue<Attribute>());
  // Numpy broadcasting is an elementwise op with one operand.
  return foldElementwise(
      getResult(), {adaptor.getInput()},
      [](ArrayRef<double> a) -> std::optional<double> { return a[0]; },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> { return a[0]; });
}

/// Folds a data-movement op whose result element k is input element
/// `srcOf(k)` (or refuses when `srcOf` returns -1).
static OpFoldResult foldGather(Value result, Attribute input,
                               llvm::function_ref<int64_t(int64_t)> srcOf) {
  RankedTensorType type = foldType(result);
  std::optional<Elems> in = readElems(input);
  if (!type || !in)
    return {};
  SmallVector<double> fout;
  SmallVector<int64_t> iout;
  for (int64_t k = 0, n = type.getNumElements(); k < n; ++k) {
    int64_t src = srcOf(k);
    if (src < 0 || src >= in->size())
      return {};
    if (in->isFloat)
      fout.push_back(in->floats[src]);
    else
      iout.push_back(in->ints[src]);
  }
  return makeAttr(type, fout, iout);
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  ArrayRef<int64_t> in = cast<ShapedType>(getInput().getType()).getShape();
  ArrayRef<int64_t> out = cast<ShapedType>(getResult().getType()).getShape();
  SmallVector<int64_t> inStrides(in.size(), 1), strides(in.size());
  for (int64_t d = static_cast<int64_t>(in.size()) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * in[d + 1];
  for (size_t d = 0; d < perm.size(); ++d)
    strides[d] = inStrides[perm[d]];
  return foldGather(getResult(), adaptor.getInput(),
                    [&](int64_t k) { return mapIndex(k, out, strides); });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  ArrayRef<int64_t> in = cast<ShapedType>(getInput().getType()).getShape();
  ArrayRef<int64_t> out = cast<ShapedType>(getResult().getType()).getShape();
  ArrayRef<int64_t> starts = getStarts(), steps = getStrides();
  return foldGather(getResult(), adaptor.getInput(), [&](int64_t k) {
    int64_t src = 0, stride = 1;
    for (size_t d = out.size(); d-- > 0;) {
      int64_t i = k % out[d];
      k /= out[d];
      src += (starts[d] + i * steps[d]) * stride;
      stride *= in[d];
    }
    return src;
  });
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  std::optional<Elems> idx = readElems(adaptor.getIndices());
  if (!idx)
    return {};
  ArrayRef<int64_t> data = cast<ShapedType>(getData().getType()).getShape();
  int64_t axis = getAxis();
  int64_t outer = numElements(data.take_front(axis));
  int64_t dim = data[axis];
  int64_t inner = numElements(data.drop_front(axis + 1));
  int64_t nIdx = idx->size();
  (void)outer;
  // Every row in order (learned positions 0..T-1 of a T-row table): the
  // gather is the table itself, and its gradient a plain sum rather than a
  // scatter.
  auto idxType = cast<ShapedType>(getIndices().getType());
  if (!idx->isFloat && getResult().getType() == getData().getType() &&
      idxType.getRank() == 1 && nIdx == dim) {
    bool identity = true;
    for (int64_t j = 0; j < nIdx && identity; ++j)
      identity = idx->ints[j] == j || idx->ints[j] == j - dim;
    if (identity)
      return getData();
  }
  return foldGather(getResult(), adaptor.getData(), [&](int64_t k) -> int64_t {
    int64_t in = k % inner;
    int64_t j = (k / inner) % nIdx;
    int64_t o = k / inner / nIdx;
    int64_t i = idx->ints[j];
    if (i < 0)
      i += dim;
    if (i < 0 || i >= dim)
      return -1;
    return (o * dim + i) * inner + in;
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 &&
      getInputs()[0].getType() == getResult().getType())
    return getInputs()[0];
  // One input beside empty ones (nothing along the axis: the x[..., D:] that
  // a partial rotary of factor 1 passes on) is the result.
  Value whole;
  bool othersEmpty = true;
  const int64_t along = static_cast<int64_t>(getAxis());
  for (Value v : getInputs()) {
    auto t = cast<ShapedType>(v.getType());
    if (!whole && t == getResult().getType())
      whole = v;
    else
      othersEmpty = othersEmpty && t.hasRank() && along < t.getRank() &&
                    t.getDimSize(along) == 0;
  }
  if (whole && othersEmpty)
    return whole;
  RankedTensorType type = foldType(getResult());
  if (!type)
    return {};
  SmallVector<Elems> in;
  for (Attribute a : adaptor.getInputs()) {
    std::optional<Elems> e = readElems(a);
    if (!e)
      return {};
    in.push_back(std::move(*e));
  }
  int64_t axis = getAxis();
  ArrayRef<int64_t> out = type.getShape();
  int64_t outer = numElements(out.take_front(axis));
  int64_t inner = numElements(out.drop_front(axis + 1));
  SmallVector<double> fout;
  SmallVector<int64_t> iout;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Elems &e : in) {
      int64_t chunk = e.type.getShape()[axis] * inner;
      for (int64_t j = 0; j < chunk; ++j) {
        if (e.isFloat)
          fout.push_back(e.floats[o * chunk + j]);
        else
          iout.push_back(e.ints[o * chunk + j]);
      }
    }
  }
  return makeAttr(type, fout, iout);
}

//===----------------------------------------------------------------------===//
// MatMulOp canonicalization
//===----------------------------------------------------------------------===//

namespace {
/// matmul(transpose(a), b) with a transpose of the last two dimensions only
/// becomes a matmul that reads `a` transposed (and likewise for b): exported
/// linear layers transpose their weights, and the copy would otherwise be
/// computed every step and kept for the backward.
struct AbsorbTranspose : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// The input of `v` when `v` swaps its last two dimensions only.
  static Value swappedInput(Value v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return Value();
    ArrayRef<int64_t> p = t.getPermutation();
    int64_t n = p.size();
    for (int64_t i = 0; i < n - 2; ++i)
      if (p[i] != i)
        return Value();
    return n >= 2 && p[n - 2] == n - 1 && p[n - 1] == n - 2 ? t.getInput()
                                                            : Value();
  }

  LogicalResult matchAndRewrite(MatMulOp op,
                                PatternRewriter &rewriter) const override {
    Value lhs = swappedInput(op.getLhs()), rhs = swappedInput(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (lhs) {
        op.getLhsMutable().assign(lhs);
        op.setTransposeLhs(!op.getTransposeLhs());
      }
      if (rhs) {
        op.getRhsMutable().assign(rhs);
        op.setTransposeRhs(!op.getTransposeRhs());
      }
    });
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<AbsorbTranspose>(context);
}
