//===- DecodeAttention.cpp - decode_step's attention over its caches ------===//
//
// The attentions of @decode_step (DecodeStep.h): each writes the position's
// keys and values into its cache and attends to the cached positions up to
// the position, under a mask of its own added to the model's; a model's
// mask is first evaluated a row at a time to prove it hides later keys.
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeUtils.h"
#include "passes/DecodeBuilder.h"
#include "passes/FusePatterns.h"

#include <array>
#include <limits>

namespace otc {
namespace decode {

LogicalResult DecodeBuilder::checkDecodable(AttentionOp op) {
  // Causal, or under a mask of the model's (which the position's own mask
  // then makes causal: a query never sees a later key).
  if (!op.getCausal() && !op.getMask())
    return refuse(op, "attention that is neither causal nor masked: a "
                      "position's output would depend on later positions");
  if (!isRow(op.getQ()) || !isRow(op.getK()) || !isRow(op.getV()))
    return refuse(op, "attention over keys that do not depend on the tokens");
  if (op.getMask() && isRow(op.getMask()))
    return refuse(op, "an attention mask that depends on the tokens");
  if (!op.getCausal()) {
    // The model's mask must hide the later keys, as the decode mask will.
    std::optional<bool> causal = hidesLaterKeys(map.lookup(op.getMask()));
    if (causal && !*causal)
      return refuse(op, "attention whose mask lets a query see later keys "
                        "(bidirectional): not a model that generates one "
                        "position after another");
    if (!causal)
      op.emitWarning("--generate: this attention's mask is not evaluated "
                     "at compile time; decode_step hides the keys after each "
                     "position, as a causal mask does");
  }
  if (!current.plain())
    return refuse(op, "attention over a sequence merged with other axes");
  int64_t seqAxis = op.getLayout() == "bhtd" ? 2 : 1;
  if (seq[op.getQ()] != seqAxis || seq[op.getK()] != seqAxis ||
      seq[op.getV()] != seqAxis)
    return refuse(op, "attention whose sequence axis is not its layout's");
  return success();
}

std::array<Value, 3> DecodeBuilder::positionRows(AttentionOp op) {
  StringRef layout = op.getLayout();
  Value q = map.lookup(op.getQ()), k = map.lookup(op.getK()),
        v = map.lookup(op.getV());
  if (layout == "packed") {
    // [B, 1, H + 2 Hk, D]: the queries, keys and values side by side.
    ArrayRef<int64_t> p = shapeOf(q);
    int64_t h = shapeOf(op.getOutput())[2], hk = (p[2] - h) / 2;
    Value packed = q;
    auto part = [&](int64_t first, int64_t heads) {
      auto t = RankedTensorType::get({p[0], 1, heads, p[3]},
                                     getElementTypeOrSelf(q.getType()));
      return fb
          .create<SliceOp>(loc, t, packed,
                           fb.getDenseI64ArrayAttr({0, 0, first, 0}),
                           fb.getDenseI64ArrayAttr({1, 1, 1, 1}))
          .getResult();
    };
    q = part(0, h);
    k = part(h, hk);
    v = part(h + hk, hk);
  }
  // The position's rows [B, H, 1, D] (a [B, 1, H, D] row is the same
  // elements): the caches are [B, Hk, T, D] whatever the model's layout,
  // each head's keys contiguous, which the kernels read without copies.
  auto headsFirst = [&](Value row) -> Value {
    if (layout == "bhtd")
      return row;
    ArrayRef<int64_t> r = shapeOf(row);
    auto t = RankedTensorType::get({r[0], r[2], 1, r[3]},
                                   getElementTypeOrSelf(row.getType()));
    return fb.create<ReshapeOp>(loc, t, row).getResult();
  };
  return {headsFirst(q), headsFirst(k), headsFirst(v)};
}

Value DecodeBuilder::addToCache(Value row, StringRef slot) {
  // The position's row added into the cache, whose row p is still zero
  // (the caches are zeroed for a sequence, each position written once):
  // cache + gather_grad(row at p), which otc-fuse-epilogues turns into the
  // scatter adding into the cache slot, touching that row alone.
  const int64_t cacheAxis = 2;
  Type type = withDim(row.getType(), cacheAxis, T);
  Value old = addArgument(type, slot);
  Value put = fb.create<GatherGradOp>(loc, type, row, position, Value(),
                                      fb.getI64IntegerAttr(cacheAxis));
  Value updated = fb.create<AddOp>(loc, type, old, put);
  cacheResults.push_back(updated);
  cacheSlots.push_back(slot.str());
  return updated;
}

FailureOr<Value> DecodeBuilder::positionMask(AttentionOp op, Type elementType) {
  // The keys up to p (and, with a window W, after p - W) are seen: an
  // additive [1, 1, 1, T] mask, 0 where seen.
  Type i1 = fb.getI1Type();
  RankedTensorType maskType = RankedTensorType::get({T}, fb.getF32Type());
  float hidden = std::numeric_limits<float>::lowest();
  Value seen = fb.create<CompareOp>(loc, RankedTensorType::get({T}, i1), iota,
                                    position, fb.getStringAttr("le"));
  Value zero = splatF32({T}, 0.0f), lowest = splatF32({T}, hidden);
  Value mask = fb.create<SelectOp>(loc, maskType, seen, zero, lowest);
  if (int64_t w = op.getWindow()) {
    Value from = fb.create<SubOp>(loc, position.getType(), position,
                                  constantI64({1}, {w - 1}));
    Value inWindow = fb.create<CompareOp>(loc, RankedTensorType::get({T}, i1),
                                          iota, from, fb.getStringAttr("ge"));
    mask = fb.create<SelectOp>(loc, maskType, inWindow, mask, lowest);
  }
  mask = fb.create<ReshapeOp>(
      loc, RankedTensorType::get({1, 1, 1, T}, fb.getF32Type()), mask);
  if (Value m = op.getMask()) {
    // The model's own mask, [.., .., T, S] broadcast to the scores: its
    // row p.
    FailureOr<Value> row = atPosition(op, map.lookup(m), rankOf(m) - 2);
    if (failed(row))
      return failure();
    Type e = getElementTypeOrSelf(row->getType());
    if (!e.isF32())
      mask =
          fb.create<CastOp>(loc, RankedTensorType::get({1, 1, 1, T}, e), mask);
    SmallVector<int64_t> shape = {1, 1, 1, T};
    auto b = broadcastShapes(shapeOf(*row), shape);
    if (!b)
      return refuse(op, "a mask that does not broadcast to [1, 1, 1, ")
             << T << "]";
    mask = fb.create<AddOp>(loc, RankedTensorType::get(*b, e), *row, mask);
  }
  // The mask in the attention's precision (BF16 under mixed precision).
  if (getElementTypeOrSelf(mask.getType()) != elementType)
    mask = fb.create<CastOp>(
        loc, cast<RankedTensorType>(mask.getType()).clone(elementType), mask);
  return mask;
}

/// Writes the position's keys and values into the caches and attends to
/// the cached positions up to p (and after p - window).
LogicalResult DecodeBuilder::visitAttention(AttentionOp op) {
  if (failed(checkDecodable(op)))
    return failure();
  auto [q, k, v] = positionRows(op);
  std::string n = std::to_string(attentions++);
  Value kc = addToCache(k, "kv_cache:" + n + ".k");
  Value vc = addToCache(v, "kv_cache:" + n + ".v");
  FailureOr<Value> mask = positionMask(op, getElementTypeOrSelf(q.getType()));
  if (failed(mask))
    return failure();
  RankedTensorType outType = cast<RankedTensorType>(q.getType());
  ArrayRef<int64_t> qs = shapeOf(q);
  auto lseType = RankedTensorType::get(
      {qs[0], qs[1], 1}, getElementTypeOrSelf(op.getLse().getType()));
  auto att = fb.create<AttentionOp>(
      loc, TypeRange{outType, lseType}, q, kc, vc, *mask, /*key=*/Value(),
      op.getSinks() ? map.lookup(op.getSinks()) : Value(),
      /*causal=*/UnitAttr(), op.getScaleAttr(), fb.getF64FloatAttr(0.0),
      op.getStreamAttr(), fb.getStringAttr("bhtd"), fb.getI64IntegerAttr(0),
      op.getSoftcapAttr(), /*mask_grad=*/UnitAttr(),
      /*key_padding=*/UnitAttr());
  // Back to the model's [B, 1, H, D] where it keeps sequence first.
  int64_t seqAxis = op.getLayout() == "bhtd" ? 2 : 1;
  Value output = att.getOutput();
  if (op.getLayout() != "bhtd")
    output = fb.create<ReshapeOp>(
        loc, withDim(op.getOutput().getType(), seqAxis, 1), output);
  map.map(op.getOutput(), output);
  map.map(op.getLse(), att.getLse());
  seq[op.getOutput()] = seqAxis;
  seq[op.getLse()] = 2;
  return success();
}

/// Evaluates `mask` ([.., T, S] additive, of constants once the inputs are
/// fed) row by row: whether every key after its query is hidden.
std::optional<bool> DecodeBuilder::hidesLaterKeys(Value mask) {
  auto [it, fresh] = maskCausal.try_emplace(mask);
  if (!fresh)
    return it->second;
  ArrayRef<int64_t> shape = shapeOf(mask);
  if (shape.size() < 2)
    return it->second = std::nullopt;
  ArrayRef<int64_t> rows = shape.drop_back();
  SmallVector<double> row;
  for (int64_t flat = 0, count = numElements(rows); flat < count; ++flat) {
    SmallVector<int64_t> prefix = unravelIndex(flat, rows);
    if (!fuse::evaluateRow(mask, prefix, row))
      return it->second = std::nullopt;
    int64_t i = shape[shape.size() - 2] == 1 ? -1 : prefix.back();
    for (int64_t j = i + 1; i >= 0 && j < static_cast<int64_t>(row.size()); ++j)
      if (row[j] > -1e4)
        return it->second = false;
    if (i < 0 && llvm::any_of(row, [](double x) { return x > -1e4; }) &&
        row.size() > 1)
      return it->second = false; // one row for every query: not causal
  }
  return it->second = true;
}

} // namespace decode
} // namespace otc
