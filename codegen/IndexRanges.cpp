//===- IndexRanges.cpp - what the integer inputs of a program index -------===//
//
// The index ranges of ABI 3: for each integer input slot, the bound its
// values must stay under (the rows of a gathered table, the classes of a
// loss), whether negative values count from the end (gathers only) and the
// ignore_index a loss exempts, derived from the kernels that read the slot.
//
//===----------------------------------------------------------------------===//

#include "codegen/IndexRanges.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

using namespace mlir;
using namespace otc;

namespace {

/// The buffer behind `v`, through views; null when `v` is computed.
static otck::BufferOp bufferBehind(Value v) {
  while (auto view = v.getDefiningOp<otck::ViewOp>())
    v = view.getSource();
  return v.getDefiningOp<otck::BufferOp>();
}

/// The memref a kernel body's value `v` is read from (null unless `v` is an
/// argument of the body, i.e. one of the kernel's inputs).
static Value kernelInputOf(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return {};
  auto k = dyn_cast<otck::KernelOp>(arg.getOwner()->getParentOp());
  if (!k || arg.getArgNumber() >= k.getInputs().size())
    return {};
  return k.getInputs()[arg.getArgNumber()];
}

/// Records in `uses` that input slot `slot` ("input:x") indexes `bound`
/// values, counted from the end too when `negative`, with `ignore` exempt;
/// the smallest bound wins.
static void noteSlotUse(llvm::StringMap<IndexUse> &uses, StringRef slot,
                        int64_t bound, bool negative,
                        std::optional<uint64_t> ignore, std::string what) {
  auto [it, fresh] = uses.try_emplace(slot);
  IndexUse &u = it->second;
  if (fresh || bound < u.bound) {
    u.bound = bound;
    u.what = std::move(what);
  }
  u.negative &= negative;
  if (ignore)
    u.ignore = static_cast<int64_t>(*ignore);
}

/// Records in `uses` what the integer input `indices` of `op`, a value of
/// its kernel body, indexes (noteSlotUse of the slot it is read from).
static void noteIndexUse(llvm::StringMap<IndexUse> &uses, Value indices,
                         int64_t bound, bool negative,
                         std::optional<uint64_t> ignore, std::string what) {
  Value input = kernelInputOf(indices);
  otck::BufferOp b = input ? bufferBehind(input) : otck::BufferOp();
  if (!b || !b.getSlot() || !b.getSlot()->starts_with("input:"))
    return;
  noteSlotUse(uses, *b.getSlot(), bound, negative, ignore, std::move(what));
}

} // namespace

llvm::StringMap<IndexUse> otc::indexUses(ModuleOp module) {
  llvm::StringMap<IndexUse> uses;
  auto rowsOf = [](Value data, int64_t rows) {
    otck::BufferOp b;
    if (Value in = kernelInputOf(data))
      b = bufferBehind(in);
    if (b && b.getSlot()) {
      auto [prefix, name] = b.getSlot()->split(':');
      if (prefix == "param" || prefix == "param_bf16")
        return "the " + std::to_string(rows) + " rows of '" + name.str() + "'";
    }
    return "the " + std::to_string(rows) + " rows of a gathered table";
  };
  auto classes = [](int64_t c) {
    return "the " + std::to_string(c) + " classes of the loss";
  };
  // Inputs the import found indexing an axis through computed offsets
  // (GatherElements, ScatterElements): counted from the end too.
  if (auto bounds = module->getAttrOfType<DictionaryAttr>(attrs::kIndexBounds))
    for (NamedAttribute b : bounds) {
      int64_t size = cast<IntegerAttr>(b.getValue()).getInt();
      noteSlotUse(uses, ("input:" + b.getName().getValue()).str(), size, true,
                  std::nullopt,
                  "the " + std::to_string(size) +
                      " elements of the axis it indexes");
    }
  // The targets otc-sparse-prediction gathers the kept rows of: the loss
  // reads them through that gather.
  if (auto p = module->getAttrOfType<DictionaryAttr>(attrs::kPredictionRows)) {
    int64_t c = p.getAs<IntegerAttr>("classes").getInt();
    noteSlotUse(
        uses, ("input:" + p.getAs<StringAttr>("targets").getValue()).str(), c,
        false,
        static_cast<uint64_t>(p.getAs<IntegerAttr>("ignore_index").getInt()),
        classes(c));
  }
  module.walk([&](Operation *op) {
    if (auto g = dyn_cast<GatherOp>(op)) {
      int64_t rows = cast<ShapedType>(g.getData().getType())
                         .getDimSize(static_cast<int64_t>(g.getAxis()));
      noteIndexUse(uses, g.getIndices(), rows, true, std::nullopt,
                   rowsOf(g.getData(), rows));
    } else if (auto g = dyn_cast<GatherGradOp>(op)) {
      int64_t rows = cast<ShapedType>(g.getResult().getType())
                         .getDimSize(static_cast<int64_t>(g.getAxis()));
      noteIndexUse(uses, g.getIndices(), rows, true, std::nullopt,
                   "the " + std::to_string(rows) + " rows of a gathered table");
    } else if (auto l = dyn_cast<CrossEntropyOp>(op)) {
      int64_t c = cast<ShapedType>(l.getLogits().getType()).getShape().back();
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<CrossEntropyGradOp>(op)) {
      int64_t c = cast<ShapedType>(l.getLogits().getType()).getShape().back();
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<CrossEntropyWithGradOp>(op)) {
      int64_t c = cast<ShapedType>(l.getLogits().getType()).getShape().back();
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<LinearCrossEntropyWithGradOp>(op)) {
      int64_t c = l.getClasses();
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<SoftmaxCrossEntropyOp>(op)) {
      int64_t c = cast<ShapedType>(l.getLogits().getType()).getDimSize(1);
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<SoftmaxCrossEntropyGradOp>(op)) {
      int64_t c = cast<ShapedType>(l.getLogits().getType()).getDimSize(1);
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<NllLossOp>(op)) {
      int64_t c = cast<ShapedType>(l.getInput().getType()).getDimSize(1);
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    } else if (auto l = dyn_cast<NllLossGradOp>(op)) {
      int64_t c = cast<ShapedType>(l.getResult().getType()).getDimSize(1);
      noteIndexUse(uses, l.getLabels(), c, false, l.getIgnoreIndex(), classes(c));
    }
  });
  return uses;
}

