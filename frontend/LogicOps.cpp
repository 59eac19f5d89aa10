//===- LogicOps.cpp - masks, index arithmetic and their helpers -----------===//
//
// The ops today's exporters write to build attention masks from index
// tensors (torch.onnx's dynamo exporter over transformers' mask functions):
// Not/And/Or/Xor on bools, IsNaN/IsInf, Max/Min, CumSum, GatherND and
// GatherElements. Each one is expressed in ops the dialect already has
// (compare, select, gather, reshape...), built with createOrFold, so that
//
//  - a subgraph that reads only constants and bound dimensions folds to an
//    `otc.constant` at import (the mask machinery disappears when there is no
//    run-time mask), and the attention recognizer can still read a mask too
//    large to fold element by element through those same ops;
//  - the same subgraph over a run-time input (a padding mask built from
//    `attention_mask`) runs in the interpreter and in both code generators
//    with nothing new to implement there.
//
// CumSum of a constant is summed at import in order; of a run-time value it
// becomes a log-step scan of shifted slices.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace otc {
namespace detail {

void Importer::importLogic() {
  StringRef op = opType();
  Value a = input(0);
  if (!elemOf(a).isInteger(1))
    nodeFail("the input must be a bool tensor, got " + typeStr(a.getType()));
  auto compare = [&](Value x, Value y, StringRef pred) {
    auto shape = broadcastOrFail(shapeOf(x), shapeOf(y));
    return builder.createOrFold<CompareOp>(
        currentLoc, tensorType(shape, builder.getI1Type()), x, y,
        builder.getStringAttr(pred));
  };
  if (op == "Not") {
    define(0, compare(a, scalarLike(a, 0), "eq"));
    return;
  }
  Value b = input(1);
  if (!elemOf(b).isInteger(1))
    nodeFail("the second input must be a bool tensor, got " +
             typeStr(b.getType()));
  if (op == "Xor") {
    define(0, compare(a, b, "ne"));
    return;
  }
  auto shape = broadcastOrFail(shapeOf(a), shapeOf(b));
  Type t = tensorType(shape, builder.getI1Type());
  // a and b = a ? b : false; a or b = a ? true : b.
  Value y = op == "And"
                ? builder.createOrFold<SelectOp>(
                      currentLoc, t, a, b, scalarLike(a, 0))
                : builder.createOrFold<SelectOp>(
                      currentLoc, t, a, scalarLike(a, 1), b);
  define(0, y);
}

void Importer::importIsNan() {
  Value x = requireFloat(input(0), "the input");
  auto i1 = tensorType(shapeOf(x), builder.getI1Type());
  if (opType() == "IsNaN") {
    // Only NaN differs from itself.
    define(0, builder.createOrFold<CompareOp>(currentLoc, i1, x, x,
                                              builder.getStringAttr("ne")));
    return;
  }
  bool neg = attrInt("detect_negative", 1) != 0;
  bool pos = attrInt("detect_positive", 1) != 0;
  auto isValue = [&](double v) {
    return builder.createOrFold<CompareOp>(currentLoc, i1, x, scalarF32(v),
                                           builder.getStringAttr("eq"));
  };
  double inf = std::numeric_limits<double>::infinity();
  Value y;
  if (pos && neg) {
    // +inf or -inf: an Or of the two, as select(c, c, d).
    Value up = isValue(inf);
    y = builder.createOrFold<SelectOp>(currentLoc, i1, up, up, isValue(-inf));
  } else if (pos || neg) {
    y = isValue(pos ? inf : -inf);
  } else {
    y = builder.create<ConstantOp>(currentLoc, DenseElementsAttr::get(i1, false));
  }
  define(0, y);
}

void Importer::importMinMax() {
  bool isMax = opType() == "Max";
  int n = current->proto->input_size();
  if (n < 1)
    nodeFail("needs at least one input");
  Value acc = input(0);
  for (int i = 1; i < n; ++i) {
    Value x = input(i);
    if (elemOf(x) != elemOf(acc))
      nodeFail("operand element types differ: " + typeStr(acc.getType()) +
               " and " + typeStr(x.getType()));
    auto shape = broadcastOrFail(shapeOf(acc), shapeOf(x));
    // max(a, b) = a >= b ? a : b (min: a <= b); the first operand wins ties.
    Value keep = builder.createOrFold<CompareOp>(
        currentLoc, tensorType(shape, builder.getI1Type()), acc, x,
        builder.getStringAttr(isMax ? "ge" : "le"));
    acc = builder.createOrFold<SelectOp>(
        currentLoc, tensorType(shape, elemOf(acc)), keep, acc, x);
  }
  define(0, acc);
}

Value Importer::cumSumOps(Value x, int64_t axis, bool exclusive,
                          bool reverse) {
  // A log-step scan: after adding the copy shifted by 1, 2, 4... along the
  // axis (zeros shifted in), element k holds the sum of the 2^j elements up
  // to it. Slices, concats and adds: exact on integers, differentiable on
  // floats.
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t n = shape[axis];
  auto type = cast<RankedTensorType>(x.getType());
  auto shifted = [&](Value v, int64_t by) -> Value {
    if (by >= n) {
      return builder.create<ConstantOp>(
          currentLoc, DenseElementsAttr::get(
                          type, builder.getZeroAttr(type.getElementType())));
    }
    SmallVector<int64_t> keepShape(shape), zeroShape(shape);
    keepShape[axis] = n - by;
    zeroShape[axis] = by;
    SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1);
    if (reverse)
      starts[axis] = by;
    Value kept = builder.createOrFold<SliceOp>(
        currentLoc, tensorType(keepShape, type.getElementType()), v,
        builder.getDenseI64ArrayAttr(starts),
        builder.getDenseI64ArrayAttr(steps));
    auto zt = tensorType(zeroShape, type.getElementType());
    Value zeros = builder.create<ConstantOp>(
        currentLoc,
        DenseElementsAttr::get(zt, builder.getZeroAttr(type.getElementType())));
    SmallVector<Value> parts = reverse ? SmallVector<Value>{kept, zeros}
                                       : SmallVector<Value>{zeros, kept};
    return builder.createOrFold<ConcatOp>(currentLoc, type, parts,
                                          builder.getI64IntegerAttr(axis));
  };
  Value y = exclusive ? shifted(x, 1) : x;
  for (int64_t by = 1; by < n; by *= 2)
    y = builder.createOrFold<AddOp>(currentLoc, type, y, shifted(y, by));
  return y;
}

void Importer::importCumSum() {
  Value x = input(0);
  int64_t rank = shapeOf(x).size();
  if (rank == 0)
    nodeFail("the input must have rank 1 or more");
  int64_t axis = normAxis(int64_t(constantScalar(1, "axis")), rank, "axis");
  bool exclusive = attrInt("exclusive", 0) != 0;
  bool reverse = attrInt("reverse", 0) != 0;
  if (!isa<FloatType>(elemOf(x)))
    requireInt(x, "the input");
  DenseElementsAttr c;
  if (!matchPattern(x, m_Constant(&c))) {
    define(0, cumSumOps(x, axis, exclusive, reverse));
    return;
  }
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t n = shape[axis], inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  bool isFloat = isa<FloatType>(elemOf(x));
  auto at = [&](int64_t o, int64_t k, int64_t i) {
    return (o * n + k) * inner + i;
  };
  auto scan = [&](auto values, auto zero) {
    using T = decltype(zero);
    std::vector<T> out(values.size(), zero);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T sum = zero;
        for (int64_t s = 0; s < n; ++s) {
          int64_t k = reverse ? n - 1 - s : s;
          if (exclusive) {
            out[at(o, k, i)] = sum;
            sum += values[at(o, k, i)];
          } else {
            sum += values[at(o, k, i)];
            out[at(o, k, i)] = sum;
          }
        }
      }
    return out;
  };
  if (isFloat) {
    std::vector<float> in(c.getValues<float>().begin(),
                          c.getValues<float>().end());
    std::vector<float> out = scan(in, 0.0f);
    defineConstant(0, DenseElementsAttr::get(c.getType(), ArrayRef<float>(out)));
    return;
  }
  if (!elemOf(x).isInteger(64) && !elemOf(x).isInteger(32))
    nodeFail("the input must be a float or integer tensor, got " +
             typeStr(x.getType()));
  std::vector<int64_t> in;
  for (APInt v : c.getValues<APInt>())
    in.push_back(v.getSExtValue());
  std::vector<int64_t> out = scan(in, int64_t(0));
  unsigned width = elemOf(x).getIntOrFloatBitWidth();
  SmallVector<APInt> vals;
  for (int64_t v : out)
    vals.push_back(APInt(width, v, /*isSigned=*/true));
  defineConstant(0, DenseElementsAttr::get(c.getType(), vals));
}

Value Importer::normalizeIndex(Value idx, int64_t size) {
  auto type = cast<RankedTensorType>(idx.getType());
  Value neg = builder.createOrFold<CompareOp>(
      currentLoc, tensorType(type.getShape(), builder.getI1Type()), idx,
      scalarLike(idx, 0), builder.getStringAttr("lt"));
  Value wrapped =
      builder.createOrFold<AddOp>(currentLoc, type, idx, scalarLike(idx, size));
  return builder.createOrFold<SelectOp>(currentLoc, type, neg, wrapped, idx);
}

int64_t Importer::importOffsets(ArrayRef<int64_t> shape, StringRef what) {
  int64_t count = checkedElements(shape, 8, "the " + what);
  if (count > kMaxImportRange)
    nodeFail("the " + what + " computed at import would have " +
             Twine(count) + " elements, more than " + Twine(kMaxImportRange));
  return count;
}

Value Importer::indicesI64(int idx) {
  Value indices = requireInt(input(idx), "the indices");
  if (elemOf(indices).isInteger(64))
    return indices;
  return builder.createOrFold<CastOp>(
      currentLoc, tensorType(shapeOf(indices), builder.getI64Type()), indices);
}

void Importer::importGatherND() {
  Value data = input(0);
  Value indices = indicesI64(1);
  ArrayRef<int64_t> ds = shapeOf(data), is = shapeOf(indices);
  int64_t r = ds.size(), q = is.size();
  int64_t batch = attrInt("batch_dims", 0);
  if (q < 1 || r < 1)
    nodeFail("data and indices must have rank 1 or more");
  if (batch < 0 || batch >= std::min(q, r))
    nodeFail("batch_dims " + Twine(batch) + " is out of range");
  int64_t k = is.back();
  if (k < 1 || k > r - batch)
    nodeFail("indices of depth " + Twine(k) + " do not index data of shape " +
             shapeStr(ds) + " after " + Twine(batch) + " batch dims");
  for (int64_t d = 0; d < batch; ++d)
    if (is[d] != ds[d])
      nodeFail("batch dimension " + Twine(d) + " differs: indices " +
               shapeStr(is) + ", data " + shapeStr(ds));
  // The index tuples as one flat row index into data viewed as
  // [prod(ds[:batch + k]), ds[batch + k:]...]: the batch position's offset
  // (a constant over the tuples) plus the sum of each coordinate times the
  // stride of its axis.
  SmallVector<int64_t> tuples(is.drop_back());
  auto tupleType = tensorType(tuples, builder.getI64Type());
  SmallVector<int64_t> strides(batch + k, 1);
  for (int64_t d = batch + k - 1; d > 0; --d)
    strides[d - 1] = strides[d] * ds[d];
  Value flat;
  for (int64_t j = 0; j < k; ++j) {
    SmallVector<int64_t> starts(q, 0), sizes(is), steps(q, 1);
    starts.back() = j;
    sizes.back() = 1;
    Value col = builder.createOrFold<SliceOp>(
        currentLoc, tensorType(sizes, builder.getI64Type()), indices,
        builder.getDenseI64ArrayAttr(starts),
        builder.getDenseI64ArrayAttr(steps));
    col = reshape(col, tuples);
    col = normalizeIndex(col, ds[batch + j]);
    col = builder.createOrFold<MulOp>(
        currentLoc, tupleType, col,
        scalarLike(col, strides[batch + j]));
    flat = flat ? builder.createOrFold<AddOp>(currentLoc, tupleType, flat, col)
                : col;
  }
  if (batch > 0) {
    // Batch position p (row-major over ds[:batch]) starts at row
    // p * strides[batch - 1], the span of one batch position.
    int64_t count = importOffsets(tuples, "batch offsets");
    int64_t per = std::max<int64_t>(
        1, count / std::max<int64_t>(1, numElements(is.take_front(batch))));
    SmallVector<int64_t> offsets(count);
    for (int64_t i = 0; i < count; ++i)
      offsets[i] = (i / per) * strides[batch - 1];
    Value off = builder.create<ConstantOp>(
        currentLoc,
        DenseElementsAttr::get(tupleType, ArrayRef<int64_t>(offsets)));
    flat = builder.createOrFold<AddOp>(currentLoc, tupleType, flat, off);
  }
  SmallVector<int64_t> viewShape{numElements(ds.take_front(batch + k))};
  llvm::append_range(viewShape, ds.drop_front(batch + k));
  Value view = reshape(data, viewShape);
  SmallVector<int64_t> outShape(tuples);
  llvm::append_range(outShape, ds.drop_front(batch + k));
  define(0, builder.createOrFold<GatherOp>(
                currentLoc, tensorType(outShape, elemOf(data)), view, flat,
                builder.getI64IntegerAttr(0)));
}

void Importer::checkElementIndices(Value indices, int64_t size,
                                   int64_t axis) {
  // Known at import: each in [-size, size), as ONNX and PyTorch require.
  DenseIntElementsAttr known;
  if (matchPattern(indices, m_Constant(&known))) {
    ArrayRef<int64_t> is = shapeOf(indices);
    int64_t flat = 0;
    for (const APInt &v : known.getValues<APInt>()) {
      int64_t x = v.getSExtValue();
      if (x < -size || x >= size)
        nodeFail("index " + Twine(x) + " at " +
                 shapeStr(unravelIndex(known.isSplat() ? 0 : flat, is)) +
                 " is outside [-" + Twine(size) + ", " + Twine(size) +
                 ") (the size of axis " + Twine(axis) + ")");
      ++flat;
    }
    return;
  }
  // Read from a graph input: `train` checks what it feeds (the program's
  // index ranges), as it does a gather's.
  while (auto cast = indices.getDefiningOp<CastOp>())
    indices = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(indices);
  if (!arg || arg.getOwner()->getParentOp() != func.getOperation())
    return;
  // The graph input's name (its attribute is set once the graph is read).
  auto loc = dyn_cast<NameLoc>(arg.getLoc());
  if (!loc)
    return;
  StringAttr name = loc.getName();
  ModuleOp module = func->getParentOfType<ModuleOp>();
  NamedAttrList bounds;
  if (auto d = module->getAttrOfType<DictionaryAttr>(attrs::kIndexBounds))
    bounds.append(d.getValue());
  auto old = bounds.get(name.getValue());
  if (!old || cast<IntegerAttr>(old).getInt() > size)
    bounds.set(name.getValue(), builder.getI64IntegerAttr(size));
  module->setAttr(attrs::kIndexBounds, bounds.getDictionary(func.getContext()));
}

Value Importer::elementOffsets(Value indices, ArrayRef<int64_t> ds,
                               int64_t axis, StringRef what) {
  ArrayRef<int64_t> is = shapeOf(indices);
  int64_t r = ds.size();
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && is[d] > ds[d])
      nodeFail("indices " + shapeStr(is) + " exceed data " + shapeStr(ds) +
               " on axis " + Twine(d));
  checkElementIndices(indices, ds[axis], axis);
  // base(i): the constant offset of every coordinate of i but `axis`.
  SmallVector<int64_t> strides(r, 1);
  for (int64_t d = r - 1; d > 0; --d)
    strides[d - 1] = strides[d] * ds[d];
  int64_t count = importOffsets(is, what);
  SmallVector<int64_t> base(count);
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rem = flat, off = 0;
    for (int64_t d = r - 1; d >= 0; --d) {
      int64_t i = rem % is[d];
      rem /= is[d];
      if (d != axis)
        off += i * strides[d];
    }
    base[flat] = off;
  }
  auto idxType = tensorType(is, builder.getI64Type());
  Value idx = normalizeIndex(indices, ds[axis]);
  idx = builder.createOrFold<MulOp>(currentLoc, idxType, idx,
                                    scalarLike(idx, strides[axis]));
  return builder.createOrFold<AddOp>(
      currentLoc, idxType, idx,
      builder.create<ConstantOp>(
          currentLoc, DenseElementsAttr::get(idxType, ArrayRef<int64_t>(base))));
}

void Importer::importGatherElements() {
  Value data = input(0);
  Value indices = indicesI64(1);
  ArrayRef<int64_t> ds = shapeOf(data), is = shapeOf(indices);
  int64_t r = ds.size();
  if (r < 1 || static_cast<int64_t>(is.size()) != r)
    nodeFail("data " + shapeStr(ds) + " and indices " + shapeStr(is) +
             " must have one rank, 1 or more");
  int64_t axis = normAxis(attrInt("axis", 0), r, "axis");
  // out[i] = data[i with i[axis] = indices[i]]: a gather from the flattened
  // data.
  Value idx = elementOffsets(indices, ds, axis, "gathered offsets");
  Value flatData = reshape(data, {numElements(ds)});
  define(0, builder.createOrFold<GatherOp>(
                currentLoc, tensorType(is, elemOf(data)), flatData, idx,
                builder.getI64IntegerAttr(0)));
}

} // namespace detail
} // namespace otc

namespace otc {
namespace detail {

void Importer::importTopK() {
  Value x = input(0);
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t r = xs.size();
  if (r < 1)
    nodeFail("the input must have rank 1 or more");
  if (!isa<FloatType>(elemOf(x)))
    nodeFail("TopK of " + typeStr(x.getType()) +
             " is not supported (float inputs)");
  SmallVector<int64_t> ks = constantInts(1, "K");
  if (ks.size() != 1)
    nodeFail("K must hold one value, got " + Twine(ks.size()));
  int64_t axis = normAxis(attrInt("axis", -1), r, "axis");
  int64_t k = ks[0];
  if (k < 1 || k > xs[axis])
    nodeFail("K = " + Twine(k) + " is outside [1, " + Twine(xs[axis]) +
             "] (the size of axis " + Twine(axis) + ")");
  bool largest = attrInt("largest", 1) != 0;
  // With `sorted` 0 any order is allowed: the sorted one is.
  Value values;
  Value idx = topK(x, axis, k, largest, &values);
  define(0, values);
  define(1, idx);
}

Value Importer::topK(Value x, int64_t axis, int64_t k, bool largest,
                     Value *values) {
  int64_t r = shapeOf(x).size();
  // The axis goes last, then back.
  SmallVector<int64_t> perm, inverse(r);
  for (int64_t d = 0; d < r; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < r; ++d)
    inverse[perm[d]] = d;
  bool moved = axis != r - 1;
  Value xt = moved ? transposeTo(x, perm) : x;
  ArrayRef<int64_t> ts = shapeOf(xt);
  int64_t n = ts.back(), rows = numElements(ts.drop_back());
  SmallVector<int64_t> outShape(ts.drop_back());
  outShape.push_back(k);
  // The smallest first: the largest of the negated values (ties still by
  // the lower index).
  Value key = largest ? xt : builder.createOrFold<NegOp>(currentLoc, xt);
  auto idxType = tensorType(outShape, builder.getI64Type());
  Value idx = builder.create<TopKOp>(currentLoc, idxType, key,
                                     builder.getI64IntegerAttr(k));
  if (values) {
    // The values: a gather of the flattened rows at row * n + index,
    // through which the values' gradient reaches the input.
    SmallVector<int64_t> base(rows * k);
    for (int64_t i = 0; i < rows * k; ++i)
      base[i] = (i / k) * n;
    Value flatIdx = builder.createOrFold<AddOp>(
        currentLoc, idxType, idx,
        builder.create<ConstantOp>(
            currentLoc,
            DenseElementsAttr::get(idxType, ArrayRef<int64_t>(base))));
    *values = builder.createOrFold<GatherOp>(
        currentLoc, tensorType(outShape, elemOf(x)), reshape(xt, {rows * n}),
        flatIdx, builder.getI64IntegerAttr(0));
    if (moved)
      *values = transposeTo(*values, inverse);
  }
  return moved ? transposeTo(idx, inverse) : idx;
}

/// Integers compared as float32 are exact within +-2^24.
static constexpr int64_t kExactInFloat = int64_t(1) << 24;

void Importer::importArgMax() {
  Value x = input(0);
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t r = xs.size();
  if (r < 1)
    nodeFail("the input must have rank 1 or more");
  int64_t axis = normAxis(attrInt("axis", 0), r, "axis");
  if (xs[axis] < 1)
    nodeFail("axis " + Twine(axis) + " is empty");
  bool lastOnTies = attrInt("select_last_index", 0) != 0;
  bool keepDims = attrInt("keepdims", 1) != 0;
  if (!isa<FloatType>(elemOf(x))) {
    // An integer input is compared as float32 (otc.top_k orders floats),
    // which is exact within +-2^24: so it must be known to stay there. A
    // cast of booleans does (CLIP's argmax of `ids == eos`); a constant is
    // checked; a graph input is bounded as a gather's indices are (`train`
    // checks what it feeds); anything else is refused.
    // Through integer-to-integer casts to a boolean, or to where they start.
    Value src = x;
    bool fromBool = false;
    while (true) {
      if (getElementTypeOrSelf(src.getType()).isInteger(1)) {
        fromBool = true;
        break;
      }
      auto cast = src.getDefiningOp<CastOp>();
      if (!cast || !getElementTypeOrSelf(cast.getInput().getType()).isInteger())
        break;
      src = cast.getInput();
    }
    DenseIntElementsAttr known;
    if (fromBool) {
      // 0 and 1.
    } else if (matchPattern(x, m_Constant(&known))) {
      for (const APInt &v : known.getValues<APInt>())
        if (int64_t i = v.getSExtValue();
            i <= -kExactInFloat || i >= kExactInFloat)
          nodeFail(opType() + " of the integer " + Twine(i) +
                   ": integers are compared as float32, exact within +-2^24");
    } else if (isa<BlockArgument>(src)) {
      checkElementIndices(src, kExactInFloat, axis);
    } else {
      nodeFail(opType() + " of " + typeStr(x.getType()) +
               " values computed in the graph is not supported: integers are "
               "compared as float32, exact within +-2^24, which only booleans, "
               "constants and graph inputs (checked by train) are known to "
               "keep");
    }
    x = builder.createOrFold<CastOp>(currentLoc,
                                     tensorType(xs, builder.getF32Type()), x);
  }
  // Ties go to the first (otc.top_k's order); with select_last_index to
  // the last: the first of the axis reversed, counted back from its end.
  const int64_t n = xs[axis];
  if (lastOnTies) {
    SmallVector<int64_t> reversed(n);
    for (int64_t i = 0; i < n; ++i)
      reversed[i] = n - 1 - i;
    auto idxType = tensorType({n}, builder.getI64Type());
    x = builder.createOrFold<GatherOp>(
        currentLoc, x.getType(), x,
        builder.create<ConstantOp>(
            currentLoc,
            DenseElementsAttr::get(idxType, ArrayRef<int64_t>(reversed))),
        builder.getI64IntegerAttr(axis));
  }
  Value idx = topK(x, axis, 1, opType() == "ArgMax", nullptr);
  if (lastOnTies) {
    auto t = cast<RankedTensorType>(idx.getType());
    idx = builder.createOrFold<SubOp>(
        currentLoc, t,
        builder.create<ConstantOp>(currentLoc,
                                   DenseElementsAttr::get(t, APInt(64, n - 1))),
        idx);
  }
  if (!keepDims) {
    SmallVector<int64_t> shape(xs);
    shape.erase(shape.begin() + axis);
    idx = reshape(idx, shape);
  }
  define(0, idx);
}

void Importer::importOneHot() {
  // Float indices and depth are taken as integers (ONNX casts them).
  Value indices = input(0);
  if (isa<FloatType>(elemOf(indices)))
    indices = builder.createOrFold<CastOp>(
        currentLoc, tensorType(shapeOf(indices), builder.getI64Type()),
        indices);
  else
    indices = indicesI64(0);
  double depthValue = constantScalar(1, "depth");
  if (!(depthValue >= 1) || depthValue > double(INT32_MAX))
    nodeFail("depth must be one positive value, got " +
             std::to_string(depthValue));
  int64_t depth = static_cast<int64_t>(depthValue);
  Value values = input(2);
  if (numElements(shapeOf(values)) != 2)
    nodeFail("values must hold two elements (off, on), got " +
             shapeStr(shapeOf(values)));
  ArrayRef<int64_t> is = shapeOf(indices);
  int64_t r = is.size();
  int64_t axis = normAxis(attrInt("axis", -1), r + 1, "axis");
  // out[..., c, ...] = values[indices == c ? 1 : 0] with c along `axis`;
  // negative indices count from depth.
  Value idx = normalizeIndex(indices, depth);
  SmallVector<int64_t> outShape(is);
  outShape.insert(outShape.begin() + axis, depth);
  SmallVector<int64_t> idxShape(is);
  idxShape.insert(idxShape.begin() + axis, 1);
  SmallVector<int64_t> classShape(r + 1, 1);
  classShape[axis] = depth;
  SmallVector<int64_t> classes(depth);
  for (int64_t c = 0; c < depth; ++c)
    classes[c] = c;
  Value cls = builder.create<ConstantOp>(
      currentLoc,
      DenseElementsAttr::get(tensorType(classShape, builder.getI64Type()),
                             ArrayRef<int64_t>(classes)));
  Value hot = builder.createOrFold<CompareOp>(
      currentLoc, tensorType(outShape, builder.getI1Type()),
      reshape(idx, idxShape), cls, builder.getStringAttr("eq"));
  Value flat = reshape(values, {2});
  auto pick = [&](int64_t i) {
    Value v = builder.createOrFold<SliceOp>(
        currentLoc, tensorType({1}, elemOf(values)), flat,
        builder.getDenseI64ArrayAttr({i}), builder.getDenseI64ArrayAttr({1}));
    return reshape(v, {});
  };
  define(0, builder.createOrFold<SelectOp>(
                currentLoc, tensorType(outShape, elemOf(values)), hot, pick(1),
                pick(0)));
}

void Importer::importTile() {
  Value x = input(0);
  SmallVector<int64_t> repeats = constantInts(1, "repeats");
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t r = xs.size();
  if (static_cast<int64_t>(repeats.size()) != r)
    nodeFail("repeats has " + Twine(repeats.size()) +
             " values for an input of rank " + Twine(r));
  for (int64_t v : repeats)
    if (v < 0)
      nodeFail("repeats must not be negative");
  // [a, b] tiled by [p, q]: [1, a, 1, b] broadcast to [p, a, q, b], then
  // reshaped to [p a, q b].
  SmallVector<int64_t> expanded, broadcast, out;
  for (int64_t d = 0; d < r; ++d) {
    expanded.append({1, xs[d]});
    broadcast.append({repeats[d], xs[d]});
    out.push_back(repeats[d] * xs[d]);
  }
  define(0, reshape(broadcastTo(reshape(x, expanded), broadcast), out));
}

} // namespace detail
} // namespace otc
