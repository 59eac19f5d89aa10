//===- AttentionMaskBand.cpp - causal bands of attention masks -----------===//
//
// The mask classification of the attention recognizer (FuseAttention.cpp):
// a mask's constant values evaluated row by row (ConstantEvaluator.cpp)
// tell whether it hides exactly the keys after each query (causal), also
// those a window behind (a causal sliding window), or those a window away
// on either side (a bidirectional sliding window), with a cache so that the
// mask every layer reads is walked once per otc-fuse-patterns run.
//
//===----------------------------------------------------------------------===//

#include "passes/FusePatterns.h"

#include "ir/ShapeUtils.h"

#include <tuple>

using namespace mlir;
using namespace otc;
using namespace otc::fuse;

/// Classifies a mask (its rows evaluated one at a time, each value read as
/// hidden or not by `hidden`) over the mask's own shape
/// (broadcast to [.., T, S]): causal when it hides exactly j > i, with a
/// window W > 0 when also exactly j <= i - W (a causal sliding window of W
/// keys); not causal with a window W > 0 when it hides exactly the keys
/// with |i - j| >= W, at least one (a bidirectional sliding window);
/// nothing otherwise.
static std::optional<MaskBand>
classifyBand(Value mask, int64_t t, int64_t s,
             llvm::function_ref<std::optional<bool>(double)> hidden) {
  ArrayRef<int64_t> shape = shapeOf(mask);
  if (t != s || shape.size() < 2 || shape[shape.size() - 2] != t ||
      shape.back() != s)
    return std::nullopt;
  ArrayRef<int64_t> rows = shape.drop_back();
  // One pass, nothing stored (a [T, T] record would be gigabytes at long
  // sequences): on each side of the diagonal (lag i - j >= 0 behind the
  // query, j - i > 0 ahead of it) the hidden distances must be exactly
  // those from the smallest hidden one on, i.e. every visible distance is
  // below every hidden one on that side.
  struct Side {
    int64_t minHidden = -1, maxVisible = -1;
    void add(int64_t distance, bool h) {
      if (h)
        minHidden = minHidden < 0 ? distance : std::min(minHidden, distance);
      else
        maxVisible = std::max(maxVisible, distance);
    }
    bool threshold() const { return minHidden < 0 || maxVisible < minHidden; }
  } behind, ahead;
  SmallVector<double> row;
  // A constant of one value (the zeros [B, 1, T, S] a ViT's export adds
  // where it has no mask) has the same rows along every leading dimension:
  // the queries' rows of one [T, S] slice say what all of them would (a
  // walk of all B x T rows took 25 s at micro-batch 4096).
  if (auto c = mask.getDefiningOp<ConstantOp>())
    if (auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
        attr && attr.isSplat())
      rows = rows.take_back(1);
  for (int64_t flat = 0, n = numElements(rows); flat < n; ++flat) {
    SmallVector<int64_t> prefix = unravelIndex(flat, rows);
    prefix.insert(prefix.begin(), shape.size() - 1 - prefix.size(), 0);
    if (!evaluateRow(mask, prefix, row))
      return std::nullopt;
    const int64_t i = prefix.back();
    for (int64_t j = 0; j < s; ++j) {
      std::optional<bool> h = hidden(row[j]);
      if (!h)
        return std::nullopt;
      if (j > i)
        ahead.add(j - i, *h);
      else if (j == i && *h)
        return std::nullopt; // a query hidden from itself: no band
      else
        behind.add(i - j, *h);
    }
  }
  if (!behind.threshold() || !ahead.threshold())
    return std::nullopt;
  // Every key ahead hidden (none visible): causal, its window the first
  // hidden distance behind (none hidden: plain causal).
  if (ahead.maxVisible < 0)
    return MaskBand{true, std::max<int64_t>(behind.minHidden, 0)};
  // Keys ahead seen: a bidirectional window hides from the same distance
  // on both sides, and hides some key.
  if (ahead.minHidden < 0 || behind.minHidden != ahead.minHidden)
    return std::nullopt;
  return MaskBand{false, ahead.minHidden};
}

/// The classifications of the masks seen in one run of otc-fuse-patterns:
/// every layer of a model reads the same mask, whose T x T walk (seconds at
/// 4096 positions) is then done once. An entry is kept with what computes
/// the mask (op name, result type, operands, attributes), so that a value
/// at an address an erased op had is never taken for it.
namespace {
struct BandEntry {
  Operation *op = nullptr;
  std::optional<OperationName> name;
  Type type;
  SmallVector<Value> operands;
  DictionaryAttr attrs;
  std::optional<MaskBand> band;
};
thread_local llvm::DenseMap<std::tuple<void *, int, int64_t, int64_t>,
                            BandEntry>
    bandCache;
} // namespace

void fuse::clearMaskCache() {
  bandCache.clear();
  clearConstantValues();
}

void fuse::forgetMask(Operation *op) {
  SmallVector<std::tuple<void *, int, int64_t, int64_t>> keys;
  for (auto &[key, entry] : bandCache)
    if (entry.op == op)
      keys.push_back(key);
  for (auto &key : keys)
    bandCache.erase(key);
}

std::optional<MaskBand>
fuse::cachedBand(Value mask, int kind, int64_t t, int64_t s,
                 llvm::function_ref<std::optional<bool>(double)> hidden) {
  Operation *op = mask.getDefiningOp();
  if (!op)
    return classifyBand(mask, t, s, hidden);
  auto key = std::make_tuple(mask.getAsOpaquePointer(), kind, t, s);
  auto same = [&](const BandEntry &e) {
    return e.op == op && e.name == op->getName() && e.type == mask.getType() &&
           e.attrs == op->getAttrDictionary() &&
           llvm::equal(e.operands, op->getOperands());
  };
  if (auto it = bandCache.find(key); it != bandCache.end() && same(it->second))
    return it->second.band;
  std::optional<MaskBand> band = classifyBand(mask, t, s, hidden);
  BandEntry &e = bandCache[key];
  e.op = op;
  e.name = op->getName();
  e.type = mask.getType();
  e.operands.assign(op->getOperands().begin(), op->getOperands().end());
  e.attrs = op->getAttrDictionary();
  e.band = band;
  return band;
}
