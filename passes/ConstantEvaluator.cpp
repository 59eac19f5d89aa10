//===- ConstantEvaluator.cpp - the values of a constant computation --------===//
//
// Evaluates a value computed from constants alone (through constants,
// slices, reshapes, broadcasts, transposes, casts, comparisons, selects,
// trilu and elementwise arithmetic) an element or a row at a time, without
// materializing it: the attention recognizer classifies masks of [T, T]
// and more with it, and --generate checks that a model's mask is causal.
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "ir/ShapeUtils.h"

#include <cmath>

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

//===----------------------------------------------------------------------===//
// Evaluating constant masks
//===----------------------------------------------------------------------===//

/// The index of an operand of shape `source` that numpy broadcasting reads
/// for result index `index`.
static SmallVector<int64_t> broadcastIndex(ArrayRef<int64_t> index,
                                           ArrayRef<int64_t> source) {
  size_t offset = index.size() - source.size();
  SmallVector<int64_t> out(source.size());
  for (size_t d = 0; d < source.size(); ++d)
    out[d] = source[d] == 1 ? 0 : index[offset + d];
  return out;
}

static std::optional<double> evalOperand(Value operand,
                                         ArrayRef<int64_t> index) {
  return evaluateAt(operand, broadcastIndex(index, shapeOf(operand)));
}

/// A constant's elements as doubles, decoded once per attribute (attributes
/// are uniqued and live as long as the context): a mask's classification
/// reads the same position tables T x T times. Cleared with the mask cache.
static thread_local llvm::DenseMap<Attribute, std::vector<double>> constantValues;

void fuse::clearConstantValues() { constantValues.clear(); }

static const std::vector<double> &decoded(DenseElementsAttr attr) {
  std::vector<double> &out = constantValues[attr];
  if (!out.empty() || attr.getNumElements() == 0)
    return out;
  out.reserve(attr.getNumElements());
  Type et = attr.getElementType();
  if (isa<FloatType>(et))
    for (const APFloat &x : attr.getValues<APFloat>())
      out.push_back(x.convertToDouble());
  else if (et.isInteger(1))
    for (bool x : attr.getValues<bool>())
      out.push_back(x ? 1.0 : 0.0);
  else
    for (const APInt &x : attr.getValues<APInt>())
      out.push_back(static_cast<double>(x.getSExtValue()));
  return out;
}

std::optional<double> fuse::evaluateAt(Value v, ArrayRef<int64_t> index) {
  Operation *d = v.getDefiningOp();
  if (!d)
    return std::nullopt;
  ArrayRef<int64_t> shape = shapeOf(v);
  if (auto c = dyn_cast<ConstantOp>(d)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr)
      return std::nullopt;
    int64_t flat = attr.isSplat() ? 0 : ravelIndex(index, shape);
    Type et = attr.getElementType();
    if (!attr.isSplat() && (isa<FloatType>(et) || et.isIntOrIndex()))
      return decoded(attr)[flat];
    if (isa<FloatType>(et))
      return attr.getValues<APFloat>()[flat].convertToDouble();
    if (et.isInteger(1))
      return attr.getValues<bool>()[flat] ? 1.0 : 0.0;
    return static_cast<double>(attr.getValues<APInt>()[flat].getSExtValue());
  }
  if (auto s = dyn_cast<SliceOp>(d)) {
    SmallVector<int64_t> in(index);
    for (size_t k = 0; k < in.size(); ++k)
      in[k] = s.getStarts()[k] + index[k] * s.getStrides()[k];
    return evaluateAt(s.getInput(), in);
  }
  if (auto r = dyn_cast<ReshapeOp>(d))
    return evaluateAt(r.getInput(), unravelIndex(ravelIndex(index, shape),
                                                 shapeOf(r.getInput())));
  if (auto bc = dyn_cast<BroadcastOp>(d))
    return evalOperand(bc.getInput(), index);
  if (auto t = dyn_cast<TransposeOp>(d)) {
    SmallVector<int64_t> in(index.size());
    for (auto [i, p] : llvm::enumerate(t.getPermutation()))
      in[p] = index[i];
    return evaluateAt(t.getInput(), in);
  }
  if (auto c = dyn_cast<CastOp>(d)) {
    std::optional<double> x = evaluateAt(c.getInput(), index);
    Type et = getElementTypeOrSelf(c.getType());
    if (!x || isa<FloatType>(et))
      return x;
    if (et.isInteger(1))
      return *x != 0.0 ? 1.0 : 0.0;
    return std::trunc(*x);
  }
  if (auto cmp = dyn_cast<CompareOp>(d)) {
    std::optional<double> a = evalOperand(cmp.getLhs(), index),
                          b = evalOperand(cmp.getRhs(), index);
    if (!a || !b)
      return std::nullopt;
    StringRef p = cmp.getPredicate();
    bool r = p == "eq"   ? *a == *b
             : p == "ne" ? *a != *b
             : p == "lt" ? *a < *b
             : p == "le" ? *a <= *b
             : p == "gt" ? *a > *b
                         : *a >= *b;
    return r ? 1.0 : 0.0;
  }
  if (auto sel = dyn_cast<SelectOp>(d)) {
    std::optional<double> c = evalOperand(sel.getCondition(), index);
    if (!c)
      return std::nullopt;
    return evalOperand(*c != 0.0 ? sel.getLhs() : sel.getRhs(), index);
  }
  if (auto tri = dyn_cast<TriluOp>(d)) {
    int64_t i = index[index.size() - 2], j = index.back();
    auto k = static_cast<int64_t>(tri.getK());
    bool keep = tri.getUpper() ? j - i >= k : j - i <= k;
    if (!keep)
      return 0.0;
    return evaluateAt(tri.getInput(), index);
  }
  if (auto neg = dyn_cast<NegOp>(d)) {
    std::optional<double> x = evaluateAt(neg.getInput(), index);
    return x ? std::optional<double>(-*x) : std::nullopt;
  }
  if (isa<AddOp, SubOp, MulOp, DivOp>(d)) {
    std::optional<double> a = evalOperand(d->getOperand(0), index),
                          b = evalOperand(d->getOperand(1), index);
    if (!a || !b)
      return std::nullopt;
    if (isa<AddOp>(d))
      return *a + *b;
    if (isa<SubOp>(d))
      return *a - *b;
    if (isa<MulOp>(d))
      return *a * *b;
    return *a / *b;
  }
  return std::nullopt;
}

/// The row of operand `o` that a broadcasting op with rows of `n` elements
/// reads at its row `prefix`.
static bool operandRow(Value o, ArrayRef<int64_t> prefix, int64_t n,
                       SmallVectorImpl<double> &row) {
  ArrayRef<int64_t> os = shapeOf(o);
  SmallVector<int64_t> full(prefix);
  full.push_back(0);
  SmallVector<int64_t> at = broadcastIndex(full, os);
  if (os.empty() || os.back() == 1) {
    std::optional<double> x = evaluateAt(o, at);
    if (!x)
      return false;
    row.assign(n, *x);
    return true;
  }
  at.pop_back();
  return evaluateRow(o, at, row);
}

bool fuse::evaluateRow(Value v, ArrayRef<int64_t> prefix,
                       SmallVectorImpl<double> &row) {
  ArrayRef<int64_t> shape = shapeOf(v);
  const int64_t n = shape.empty() ? 1 : shape.back();
  // Element by element: evaluateAt's walk for each.
  auto perElement = [&]() {
    row.resize(n);
    SmallVector<int64_t> index(prefix);
    if (!shape.empty())
      index.push_back(0);
    for (int64_t j = 0; j < n; ++j) {
      if (!shape.empty())
        index.back() = j;
      std::optional<double> x = evaluateAt(v, index);
      if (!x)
        return false;
      row[j] = *x;
    }
    return true;
  };
  Operation *d = v.getDefiningOp();
  if (!d || shape.empty())
    return d && perElement();
  SmallVector<int64_t> first(prefix);
  first.push_back(0);
  if (auto c = dyn_cast<ConstantOp>(d)) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    Type et = attr ? attr.getElementType() : Type();
    if (!attr || attr.isSplat() || !(isa<FloatType>(et) || et.isIntOrIndex()))
      return perElement();
    const std::vector<double> &values = decoded(attr);
    int64_t at = ravelIndex(first, shape);
    row.assign(values.begin() + at, values.begin() + at + n);
    return true;
  }
  if (auto s = dyn_cast<SliceOp>(d)) {
    SmallVector<int64_t> in(prefix);
    for (size_t k = 0; k < in.size(); ++k)
      in[k] = s.getStarts()[k] + prefix[k] * s.getStrides()[k];
    SmallVector<double> whole;
    if (!evaluateRow(s.getInput(), in, whole))
      return false;
    int64_t start = s.getStarts().back(), stride = s.getStrides().back();
    row.resize(n);
    for (int64_t j = 0; j < n; ++j)
      row[j] = whole[start + j * stride];
    return true;
  }
  if (auto r = dyn_cast<ReshapeOp>(d)) {
    ArrayRef<int64_t> in = shapeOf(r.getInput());
    if (in.empty() || in.back() != n)
      return perElement();
    SmallVector<int64_t> at = unravelIndex(ravelIndex(first, shape), in);
    at.pop_back();
    return evaluateRow(r.getInput(), at, row);
  }
  if (auto bc = dyn_cast<BroadcastOp>(d))
    return operandRow(bc.getInput(), prefix, n, row);
  if (auto t = dyn_cast<TransposeOp>(d)) {
    ArrayRef<int64_t> perm = t.getPermutation();
    if (perm.back() != static_cast<int64_t>(perm.size()) - 1)
      return perElement();
    SmallVector<int64_t> in(prefix.size());
    for (size_t i = 0; i < prefix.size(); ++i)
      in[perm[i]] = prefix[i];
    return evaluateRow(t.getInput(), in, row);
  }
  if (auto c = dyn_cast<CastOp>(d)) {
    if (!evaluateRow(c.getInput(), prefix, row))
      return false;
    Type et = getElementTypeOrSelf(c.getType());
    if (!isa<FloatType>(et))
      for (double &x : row)
        x = et.isInteger(1) ? (x != 0.0 ? 1.0 : 0.0) : std::trunc(x);
    return true;
  }
  if (auto cmp = dyn_cast<CompareOp>(d)) {
    SmallVector<double> b;
    if (!operandRow(cmp.getLhs(), prefix, n, row) ||
        !operandRow(cmp.getRhs(), prefix, n, b))
      return false;
    StringRef p = cmp.getPredicate();
    for (int64_t j = 0; j < n; ++j) {
      double x = row[j], y = b[j];
      bool r = p == "eq"   ? x == y
               : p == "ne" ? x != y
               : p == "lt" ? x < y
               : p == "le" ? x <= y
               : p == "gt" ? x > y
                           : x >= y;
      row[j] = r ? 1.0 : 0.0;
    }
    return true;
  }
  if (auto sel = dyn_cast<SelectOp>(d)) {
    // A branch no element takes may not evaluate (evaluateAt never reads
    // it): then element by element.
    SmallVector<double> cond, lhs, rhs;
    if (!operandRow(sel.getCondition(), prefix, n, cond) ||
        !operandRow(sel.getLhs(), prefix, n, lhs) ||
        !operandRow(sel.getRhs(), prefix, n, rhs))
      return perElement();
    row.resize(n);
    for (int64_t j = 0; j < n; ++j)
      row[j] = cond[j] != 0.0 ? lhs[j] : rhs[j];
    return true;
  }
  if (auto tri = dyn_cast<TriluOp>(d)) {
    if (!evaluateRow(tri.getInput(), prefix, row))
      return false;
    int64_t i = prefix.back();
    auto k = static_cast<int64_t>(tri.getK());
    for (int64_t j = 0; j < n; ++j)
      if (!(tri.getUpper() ? j - i >= k : j - i <= k))
        row[j] = 0.0;
    return true;
  }
  if (auto neg = dyn_cast<NegOp>(d)) {
    if (!evaluateRow(neg.getInput(), prefix, row))
      return false;
    for (double &x : row)
      x = -x;
    return true;
  }
  if (isa<AddOp, SubOp, MulOp, DivOp>(d)) {
    SmallVector<double> b;
    if (!operandRow(d->getOperand(0), prefix, n, row) ||
        !operandRow(d->getOperand(1), prefix, n, b))
      return false;
    for (int64_t j = 0; j < n; ++j)
      row[j] = isa<AddOp>(d)   ? row[j] + b[j]
               : isa<SubOp>(d) ? row[j] - b[j]
               : isa<MulOp>(d) ? row[j] * b[j]
                               : row[j] / b[j];
    return true;
  }
  return perElement();
}

