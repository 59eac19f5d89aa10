//===- ShapeOps.cpp - importing shape and data-movement ONNX ops ----------===//
//
// Transpose; Reshape, Flatten, Unsqueeze and Squeeze onto otc.reshape;
// Expand onto otc.broadcast; Concat; Split and Slice onto otc.slice (a
// negative Slice step onto otc.gather of the picked indices); Gather;
// ScatterND with constant indices onto a gather from data and updates
// concatenated; Trilu. Shapes, axes, starts/ends/steps, split sizes and
// scatter indices must be constants once dimensions are bound (they are
// inputs since opset 13, Split's num_outputs attribute since 18); anything
// else is a "shape computation did not fold" error naming the node.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;

namespace otc {
namespace detail {

//===----------------------------------------------------------------------===//
// Building helpers
//===----------------------------------------------------------------------===//

Value Importer::reshape(Value x, ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape)
    return x;
  return builder.createOrFold<ReshapeOp>(currentLoc,
                                         tensorType(shape, elemOf(x)), x);
}

Value Importer::broadcastTo(Value x, ArrayRef<int64_t> shape) {
  if (shapeOf(x) == shape)
    return x;
  return builder.createOrFold<BroadcastOp>(currentLoc,
                                           tensorType(shape, elemOf(x)), x);
}

/// Normalizes `axes` with `norm`, sorted; calls `dup` on a repeated axis.
static SmallVector<int64_t>
sortedAxes(ArrayRef<int64_t> axes, llvm::function_ref<int64_t(int64_t)> norm,
           llvm::function_ref<void()> dup) {
  SmallVector<int64_t> out;
  for (int64_t a : axes)
    out.push_back(norm(a));
  llvm::sort(out);
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    dup();
  return out;
}

//===----------------------------------------------------------------------===//
// Permutation and reshapes
//===----------------------------------------------------------------------===//

void Importer::importTranspose() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  SmallVector<int64_t> perm;
  if (auto p = attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < rank && !seen[p];
    if (ok)
      seen[p] = true;
  }
  if (!ok)
    nodeFail("perm " + shapeStr(perm) + " is not a permutation of the input " +
             shapeStr(in));
  SmallVector<int64_t> out;
  for (int64_t p : perm)
    out.push_back(in[p]);
  define(0, builder.createOrFold<TransposeOp>(
                currentLoc, tensorType(out, elemOf(x)), x, perm));
}

void Importer::importReshape() {
  Value x = input(0);
  SmallVector<int64_t> shape = constantInts(1, "shape");
  if (auto a = constantInput(1); a && a->getType().getRank() != 1)
    nodeFail("shape '" + current->proto->input(1) + "' must be 1-D");
  bool allowZero = attrInt("allowzero", 0) != 0;
  ArrayRef<int64_t> in = shapeOf(x);
  SmallVector<int64_t> out;
  std::optional<size_t> inferred;
  for (auto [i, s] : llvm::enumerate(shape)) {
    if (s == 0 && !allowZero) {
      if (i >= in.size())
        nodeFail("shape " + shapeStr(shape) + " copies dimension " + Twine(i) +
                 " but the input " + shapeStr(in) + " has rank " +
                 Twine(in.size()));
      out.push_back(in[i]);
    } else if (s == -1) {
      if (inferred)
        nodeFail("shape " + shapeStr(shape) + " has more than one -1");
      inferred = i;
      out.push_back(1);
    } else if (s < 0) {
      nodeFail("shape " + shapeStr(shape) + " has a negative size");
    } else {
      out.push_back(s);
    }
  }
  int64_t total = numElements(in);
  if (inferred) {
    int64_t known = numElements(out);
    if (known == 0 || total % known != 0)
      nodeFail("cannot reshape " + shapeStr(in) + " to " + shapeStr(shape));
    out[*inferred] = total / known;
  }
  if (numElements(out) != total)
    nodeFail("cannot reshape " + shapeStr(in) + " to " + shapeStr(shape));
  define(0, reshape(x, out));
}

void Importer::importFlatten() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  int64_t axis = attrInt("axis", 1);
  if (axis < -rank || axis > rank)
    nodeFail("axis " + Twine(axis) + " is out of range for rank " +
             Twine(rank));
  if (axis < 0)
    axis += rank;
  SmallVector<int64_t> out = {numElements(in.take_front(axis)),
                              numElements(in.drop_front(axis))};
  define(0, reshape(x, out));
}

void Importer::importUnsqueeze() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  SmallVector<int64_t> axes;
  if (hasInput(1))
    axes = constantInts(1, "axes");
  else if (auto a = attrInts("axes"))
    axes = *a;
  else
    nodeFail("missing the axes input");
  int64_t rank = in.size() + axes.size();
  SmallVector<int64_t> sorted = sortedAxes(
      axes, [&](int64_t a) { return normAxis(a, rank, "axis"); },
      [&] { nodeFail("axes " + shapeStr(axes) + " repeat an axis"); });
  SmallVector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    out.push_back(llvm::is_contained(sorted, d) ? 1 : in[next++]);
  define(0, reshape(x, out));
}

void Importer::importSqueeze() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  std::optional<SmallVector<int64_t>> axes;
  if (hasInput(1))
    axes = constantInts(1, "axes");
  else
    axes = attrInts("axes");
  SmallVector<int64_t> out;
  if (!axes) {
    for (int64_t d : in)
      if (d != 1)
        out.push_back(d);
  } else {
    SmallVector<int64_t> sorted = sortedAxes(
        *axes, [&](int64_t a) { return normAxis(a, rank, "axis"); },
        [&] { nodeFail("axes " + shapeStr(*axes) + " repeat an axis"); });
    for (int64_t d = 0; d < rank; ++d) {
      if (!llvm::is_contained(sorted, d)) {
        out.push_back(in[d]);
        continue;
      }
      if (in[d] != 1)
        nodeFail("cannot squeeze dimension " + Twine(d) + " of " +
                 shapeStr(in) + ": its size is not 1");
    }
  }
  define(0, reshape(x, out));
}

void Importer::importExpand() {
  Value x = input(0);
  SmallVector<int64_t> shape = constantInts(1, "shape");
  auto out = broadcastShapes(shapeOf(x), shape);
  if (!out)
    nodeFail("cannot expand " + shapeStr(shapeOf(x)) + " to " +
             shapeStr(shape));
  define(0, broadcastTo(x, *out));
}

//===----------------------------------------------------------------------===//
// Concat, Split, Slice, Gather, Trilu
//===----------------------------------------------------------------------===//

void Importer::importConcat() {
  SmallVector<Value> ins;
  for (int i = 0; i < current->proto->input_size(); ++i)
    if (hasInput(i))
      ins.push_back(input(i));
  if (ins.empty())
    nodeFail("needs at least one input");
  ArrayRef<int64_t> first = shapeOf(ins[0]);
  int64_t rank = first.size();
  int64_t axis = normAxis(attrInt("axis", 0), rank, "axis");
  SmallVector<int64_t> out(first);
  out[axis] = 0;
  for (Value v : ins) {
    ArrayRef<int64_t> s = shapeOf(v);
    if (elemOf(v) != elemOf(ins[0]))
      nodeFail("input element types differ: " + typeStr(ins[0].getType()) +
               " and " + typeStr(v.getType()));
    bool ok = static_cast<int64_t>(s.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || s[d] == first[d];
    if (!ok)
      nodeFail("input shapes " + shapeStr(first) + " and " + shapeStr(s) +
               " differ off axis " + Twine(axis));
    out[axis] += s[axis];
  }
  define(0, builder.createOrFold<ConcatOp>(currentLoc,
                                           tensorType(out, elemOf(ins[0])), ins,
                                           builder.getI64IntegerAttr(axis)));
}

void Importer::importSplit() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  int64_t axis = normAxis(attrInt("axis", 0), rank, "axis");
  int64_t parts = current->proto->output_size();
  SmallVector<int64_t> sizes;
  if (hasInput(1)) {
    sizes = constantInts(1, "split");
  } else if (auto s = attrInts("split")) {
    sizes = *s;
  } else {
    // Equal parts; at opset 18 num_outputs, the last part may be smaller.
    int64_t n = attrInt("num_outputs", parts);
    if (n <= 0)
      nodeFail("num_outputs must be positive");
    int64_t chunk = (in[axis] + n - 1) / n;
    if (!attr("num_outputs") && in[axis] % n != 0)
      nodeFail("dimension " + Twine(axis) + " of " + shapeStr(in) +
               " does not split into " + Twine(n) + " equal parts");
    for (int64_t i = 0, left = in[axis]; i < n; ++i, left -= chunk)
      sizes.push_back(std::min(chunk, std::max<int64_t>(left, 0)));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  if (total != in[axis] || static_cast<int64_t>(sizes.size()) != parts ||
      llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
    nodeFail("split " + shapeStr(sizes) + " does not cut dimension " +
             Twine(axis) + " of " + shapeStr(in) + " into " + Twine(parts) +
             " outputs");
  int64_t offset = 0;
  for (int64_t i = 0; i < parts; ++i) {
    SmallVector<int64_t> starts(rank, 0), strides(rank, 1), out(in);
    starts[axis] = sizes[i] ? offset : 0;
    out[axis] = sizes[i];
    offset += sizes[i];
    define(i, builder.createOrFold<SliceOp>(
                  currentLoc, tensorType(out, elemOf(x)), x, starts, strides));
  }
}

void Importer::importSplitToSequence() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  int64_t axis = normAxis(attrInt("axis", 0), rank, "axis");
  // Without `split`, pieces of one along the axis, squeezed unless keepdims.
  bool squeeze = !hasInput(1) && attrInt("keepdims", 1) == 0;
  SmallVector<int64_t> sizes;
  // Each piece is its own value: bound their number first.
  auto checkPieces = [&](int64_t pieces) {
    if (pieces > kMaxSequenceLength)
      nodeFail("splitting dimension " + Twine(axis) + " of " + shapeStr(in) +
               " gives " + Twine(pieces) + " pieces, more than the " +
               Twine(kMaxSequenceLength) + " a sequence may hold");
  };
  if (hasInput(1)) {
    SmallVector<int64_t> split = constantInts(1, "split");
    std::optional<DenseElementsAttr> c = constantInput(1);
    if (c && c->getType().getRank() == 0) {
      if (split[0] <= 0)
        nodeFail("split must be positive, got " + Twine(split[0]));
      checkPieces(in[axis] / split[0] + 1);
      for (int64_t left = in[axis]; left > 0; left -= split[0])
        sizes.push_back(std::min(split[0], left));
    } else {
      sizes = split;
    }
  } else {
    checkPieces(in[axis]);
    sizes.assign(in[axis], 1);
  }
  int64_t total = 0;
  for (int64_t n : sizes)
    total += n < 0 ? in[axis] + 1 : n;
  if (total != in[axis])
    nodeFail("split " + shapeStr(sizes) + " does not cut dimension " +
             Twine(axis) + " of " + shapeStr(in));
  SmallVector<Value> parts;
  int64_t offset = 0;
  for (int64_t n : sizes) {
    SmallVector<int64_t> starts(rank, 0), strides(rank, 1), out(in);
    starts[axis] = n ? offset : 0;
    out[axis] = n;
    offset += n;
    Value part = builder.createOrFold<SliceOp>(
        currentLoc, tensorType(out, elemOf(x)), x, starts, strides);
    if (squeeze) {
      out.erase(out.begin() + axis);
      part = reshape(part, out);
    }
    parts.push_back(part);
  }
  sequences[current->proto->output(0)] = std::move(parts);
}

void Importer::importSequenceAt() {
  auto it = sequences.find(current->proto->input(0));
  if (it == sequences.end())
    nodeFail("input '" + current->proto->input(0) +
             "' is not a sequence made by SplitToSequence");
  int64_t n = it->second.size();
  int64_t pos = constantInts(1, "position")[0];
  if (pos < -n || pos >= n)
    nodeFail("position " + Twine(pos) + " is out of range for a sequence of " +
             Twine(n));
  define(0, it->second[pos < 0 ? pos + n : pos]);
}

void Importer::importSlice() {
  Value x = input(0);
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  SmallVector<int64_t> starts = constantInts(1, "starts");
  SmallVector<int64_t> ends = constantInts(2, "ends");
  SmallVector<int64_t> axes, steps;
  if (hasInput(3))
    axes = constantInts(3, "axes");
  else
    for (int64_t i = 0, e = starts.size(); i < e; ++i)
      axes.push_back(i);
  if (hasInput(4))
    steps = constantInts(4, "steps");
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    nodeFail("starts, ends, axes and steps must have the same length");

  SmallVector<int64_t> outStarts(rank, 0), strides(rank, 1), out(in);
  SmallVector<bool> seen(rank, false);
  // Axes with a negative step are gathered afterwards: (axis, indices).
  SmallVector<std::pair<int64_t, SmallVector<int64_t>>> reversed;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t d = normAxis(axes[i], rank, "axis");
    if (seen[d])
      nodeFail("axis " + Twine(d) + " is sliced twice");
    seen[d] = true;
    int64_t step = steps[i], dim = in[d];
    if (step == 0)
      nodeFail("step 0 on axis " + Twine(d));
    if (step < 0) {
      // ONNX clamps the start to [0, dim - 1] and the end to [-1, dim - 1].
      int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      SmallVector<int64_t> indices;
      for (int64_t j = b; j > e; j += step)
        indices.push_back(j);
      if (indices.empty())
        nodeFail("the slice of axis " + Twine(d) + " is empty");
      reversed.push_back({d, std::move(indices)});
      continue;
    }
    // ONNX clamps out-of-range starts and ends (INT64_MAX means "to the end").
    auto clampIndex = [dim](int64_t v) {
      if (v < 0)
        v = v < -dim ? 0 : v + dim;
      return std::min(v, dim);
    };
    int64_t b = clampIndex(starts[i]), e = clampIndex(ends[i]);
    int64_t n = e > b ? (e - b + step - 1) / step : 0;
    out[d] = n;
    outStarts[d] = n ? b : 0;
    strides[d] = step;
  }
  Value y = builder.createOrFold<SliceOp>(
      currentLoc, tensorType(out, elemOf(x)), x, outStarts, strides);
  for (auto &[d, indices] : reversed) {
    auto type = RankedTensorType::get({static_cast<int64_t>(indices.size())},
                                      builder.getI64Type());
    Value idx = builder.create<ConstantOp>(
        currentLoc, DenseElementsAttr::get(type, ArrayRef<int64_t>(indices)));
    out[d] = indices.size();
    y = builder.createOrFold<GatherOp>(currentLoc, tensorType(out, elemOf(x)),
                                       y, idx, builder.getI64IntegerAttr(d));
  }
  define(0, y);
}

void Importer::importGather() {
  Value data = input(0);
  Value indices = requireInt(input(1), "indices");
  ArrayRef<int64_t> ds = shapeOf(data);
  int64_t axis = normAxis(attrInt("axis", 0), ds.size(), "axis");
  if (auto c = constantInput(1)) {
    for (APInt v : c->getValues<APInt>()) {
      int64_t i = v.getSExtValue();
      if (i < -ds[axis] || i >= ds[axis])
        nodeFail("index " + Twine(i) + " is out of range for dimension " +
                 Twine(axis) + " of " + shapeStr(ds));
    }
  }
  SmallVector<int64_t> out(ds.take_front(axis));
  llvm::append_range(out, shapeOf(indices));
  llvm::append_range(out, ds.drop_front(axis + 1));
  define(0, builder.createOrFold<GatherOp>(
                currentLoc, tensorType(out, elemOf(data)), data, indices,
                builder.getI64IntegerAttr(axis)));
}

Value Importer::scatterRows(Value data, Value updates, Value rows,
                            int64_t slice, bool add) {
  ArrayRef<int64_t> ds = shapeOf(data);
  Type et = elemOf(data);
  int64_t n = numElements(ds), m = numElements(shapeOf(rows));
  SmallVector<int64_t> view{n / slice}, upd{m};
  if (slice != 1) {
    view.push_back(slice);
    upd.push_back(slice);
  }
  Value sums = builder.create<GatherGradOp>(
      currentLoc, tensorType(view, et), reshape(updates, upd), rows,
      /*acc=*/Value(), builder.getI64IntegerAttr(0));
  Value flatData = reshape(data, view);
  Value out;
  if (add) {
    out = builder.createOrFold<AddOp>(currentLoc, tensorType(view, et),
                                      flatData, sums);
  } else {
    // The rows some index picks: a sum of ones there.
    Value ones = builder.create<ConstantOp>(
        currentLoc, DenseElementsAttr::get(tensorType(upd, et),
                                           FloatAttr::get(et, 1.0)));
    Value hits = builder.create<GatherGradOp>(
        currentLoc, tensorType(view, et), ones, rows, /*acc=*/Value(),
        builder.getI64IntegerAttr(0));
    Value picked = builder.createOrFold<CompareOp>(
        currentLoc, tensorType(view, builder.getI1Type()), hits,
        scalarLike(hits, 0.0), builder.getStringAttr("gt"));
    out = builder.createOrFold<SelectOp>(currentLoc, tensorType(view, et),
                                         picked, sums, flatData);
  }
  return reshape(out, ds);
}

void Importer::importScatterElements() {
  std::string reduction = attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    nodeFail("reduction '" + reduction + "' is not supported (none or add)");
  Value data = input(0), updates = input(2);
  if (!isa<FloatType>(elemOf(data)) || elemOf(updates) != elemOf(data))
    nodeFail("data and updates must be floats of one type, got " +
             typeStr(data.getType()) + " and " + typeStr(updates.getType()));
  Value indices = indicesI64(1);
  ArrayRef<int64_t> ds = shapeOf(data), is = shapeOf(indices);
  int64_t r = ds.size();
  if (r < 1 || static_cast<int64_t>(is.size()) != r ||
      shapeOf(updates) != is)
    nodeFail("data " + shapeStr(ds) + ", indices " + shapeStr(is) +
             " and updates " + shapeStr(shapeOf(updates)) +
             " must have one rank, indices and updates one shape");
  int64_t axis = normAxis(attrInt("axis", 0), r, "axis");
  // Element i of updates lands at its flat offset in the data.
  Value idx = elementOffsets(indices, ds, axis, "scattered offsets");
  int64_t count = numElements(is);
  define(0, scatterRows(data, updates, reshape(idx, {count}), 1,
                        reduction == "add"));
}

int64_t Importer::scatterNDTupleSize(Value data, Value updates,
                                     ArrayRef<int64_t> is) {
  ArrayRef<int64_t> ds = shapeOf(data);
  if (is.empty() || is.back() < 1 ||
      is.back() > static_cast<int64_t>(ds.size()))
    nodeFail("indices of shape " + shapeStr(is) + " do not index data " +
             shapeStr(ds));
  int64_t k = is.back();
  SmallVector<int64_t> want(is.drop_back());
  llvm::append_range(want, ds.drop_front(k));
  if (shapeOf(updates) != ArrayRef<int64_t>(want) ||
      elemOf(updates) != elemOf(data))
    nodeFail("updates " + typeStr(updates.getType()) + " do not match " +
             typeStr(data.getType()) + " at indices " + shapeStr(is) +
             " (expected shape " + shapeStr(want) + ")");
  return k;
}

void Importer::importScatterND() {
  std::string reduction = attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    nodeFail("reduction '" + reduction + "' is not supported (none or add)");
  Value data = input(0), updates = input(2);
  std::optional<DenseElementsAttr> indices = constantInput(1);
  if (!indices || reduction == "add") {
    importScatterNDAtRunTime(reduction == "add");
    return;
  }
  if (!indices->getElementType().isInteger(64))
    foldFail("the indices '" + current->proto->input(1) +
             "' are not int64 constants once dimensions are bound");
  ArrayRef<int64_t> ds = shapeOf(data), is = indices->getType().getShape();
  int64_t k = scatterNDTupleSize(data, updates, is);
  // With constant indices the scatter is a gather from data and updates
  // side by side: element i of the result reads element src[i] of
  // concat(flat data, flat updates). Later updates of one element win.
  int64_t n = numElements(ds), slice = numElements(ds.drop_front(k));
  SmallVector<int64_t> src = llvm::to_vector(llvm::seq<int64_t>(0, n));
  SmallVector<int64_t> flat;
  for (APInt v : indices->getValues<APInt>())
    flat.push_back(v.getSExtValue());
  int64_t tuples = static_cast<int64_t>(flat.size()) / k;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = flat[t * k + d];
      if (i < -ds[d] || i >= ds[d])
        nodeFail("index " + Twine(i) + " is out of range for dimension " +
                 Twine(d) + " of " + shapeStr(ds));
      offset = offset * ds[d] + (i < 0 ? i + ds[d] : i);
    }
    for (int64_t j = 0; j < slice; ++j)
      src[offset * slice + j] = n + t * slice + j;
  }
  Value both = builder.createOrFold<ConcatOp>(
      currentLoc, tensorType({n + tuples * slice}, elemOf(data)),
      ValueRange{reshape(data, {n}), reshape(updates, {tuples * slice})},
      builder.getI64IntegerAttr(0));
  auto srcType = RankedTensorType::get({n}, builder.getI64Type());
  Value srcIdx = builder.create<ConstantOp>(
      currentLoc, DenseElementsAttr::get(srcType, ArrayRef<int64_t>(src)));
  Value picked = builder.createOrFold<GatherOp>(
      currentLoc, tensorType({n}, elemOf(data)), both, srcIdx,
      builder.getI64IntegerAttr(0));
  define(0, reshape(picked, ds));
}

/// ScatterND whose indices are computed at run time (or with reduction
/// add): each index tuple is a row of data viewed as [rows, slice].
void Importer::importScatterNDAtRunTime(bool add) {
  Value data = input(0), updates = input(2);
  if (!isa<FloatType>(elemOf(data)) || elemOf(updates) != elemOf(data))
    nodeFail("with indices computed at run time, data and updates must be "
             "floats of one type, got " + typeStr(data.getType()) + " and " +
             typeStr(updates.getType()));
  Value indices = indicesI64(1);
  ArrayRef<int64_t> ds = shapeOf(data), is = shapeOf(indices);
  int64_t k = scatterNDTupleSize(data, updates, is);
  int64_t tuples = numElements(is.drop_back());
  auto colType = tensorType({tuples, 1}, builder.getI64Type());
  Value flatIdx = reshape(indices, {tuples, k});
  // row = ((i0 * d1 + i1) * d2 + i2) ..., each index counted from the end
  // of its dimension when negative.
  Value row;
  for (int64_t d = 0; d < k; ++d) {
    Value col = builder.createOrFold<SliceOp>(
        currentLoc, colType, flatIdx, builder.getDenseI64ArrayAttr({0, d}),
        builder.getDenseI64ArrayAttr({1, 1}));
    col = normalizeIndex(col, ds[d]);
    row = row ? builder.createOrFold<AddOp>(
                    currentLoc, colType,
                    builder.createOrFold<MulOp>(currentLoc, colType, row,
                                                scalarLike(row, ds[d])),
                    col)
              : col;
  }
  define(0, scatterRows(data, updates, reshape(row, {tuples}),
                        numElements(ds.drop_front(k)), add));
}

void Importer::importTrilu() {
  Value x = input(0);
  if (shapeOf(x).size() < 2)
    nodeFail("the input must have rank >= 2, got " + shapeStr(shapeOf(x)));
  int64_t k = hasInput(1) ? static_cast<int64_t>(constantScalar(1, "k")) : 0;
  bool upper = attrInt("upper", 1) != 0;
  define(0, builder.create<TriluOp>(currentLoc, x.getType(), x,
                                    builder.getBoolAttr(upper),
                                    builder.getI64IntegerAttr(k)));
}

} // namespace detail
} // namespace otc

namespace otc {
namespace detail {

/// Pad, constant mode: each padded axis a concatenation of constant blocks
/// around the input (a negative pad is a slice). Reflect and edge modes are
/// refused.
void Importer::importPad() {
  std::string mode = attrString("mode", "constant");
  if (mode != "constant")
    nodeFail("mode '" + mode + "' is not supported (constant)");
  Value x = input(0);
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t r = xs.size();
  SmallVector<int64_t> pads = constantInts(1, "pads");
  SmallVector<int64_t> axes;
  if (hasInput(3)) {
    for (int64_t a : constantInts(3, "axes"))
      axes.push_back(normAxis(a, r, "axes"));
  } else {
    for (int64_t d = 0; d < r; ++d)
      axes.push_back(d);
  }
  int64_t na = axes.size();
  if (static_cast<int64_t>(pads.size()) != 2 * na)
    nodeFail("pads has " + Twine(pads.size()) + " values for " + Twine(na) +
             " axes (expected " + Twine(2 * na) + ")");
  double fill = hasInput(2) ? constantScalar(2, "constant_value") : 0.0;
  Value y = x;
  for (int64_t i = 0; i < na; ++i) {
    int64_t axis = axes[i], before = pads[i], after = pads[na + i];
    SmallVector<int64_t> shape(shapeOf(y));
    // Negative pads remove elements: a slice first.
    if (before < 0 || after < 0) {
      int64_t drop0 = std::max<int64_t>(0, -before),
              drop1 = std::max<int64_t>(0, -after);
      if (drop0 + drop1 > shape[axis])
        nodeFail("pads remove more than axis " + Twine(axis) + "'s " +
                 Twine(shape[axis]) + " elements");
      SmallVector<int64_t> starts(r, 0), steps(r, 1);
      starts[axis] = drop0;
      shape[axis] -= drop0 + drop1;
      y = builder.createOrFold<SliceOp>(
          currentLoc, tensorType(shape, elemOf(y)), y,
          builder.getDenseI64ArrayAttr(starts), builder.getDenseI64ArrayAttr(steps));
      before = std::max<int64_t>(0, before);
      after = std::max<int64_t>(0, after);
    }
    if (!before && !after)
      continue;
    auto block = [&](int64_t n) {
      SmallVector<int64_t> bs(shape);
      bs[axis] = n;
      return broadcastTo(scalarLike(y, fill), bs);
    };
    SmallVector<Value> parts;
    if (before)
      parts.push_back(block(before));
    parts.push_back(y);
    if (after)
      parts.push_back(block(after));
    shape[axis] += before + after;
    y = builder.createOrFold<ConcatOp>(currentLoc, tensorType(shape, elemOf(y)),
                                       parts, builder.getI64IntegerAttr(axis));
  }
  define(0, y);
}

} // namespace detail
} // namespace otc
