//===- DecodeBuilder.h - the builder of @decode_step -----------*- C++ -*-===//
//
// Private to passes/DecodeStep.cpp and passes/DecodeAttention.cpp: the
// builder that cuts @eval_step to one position (see DecodeStep.h), its
// sequence-axis bookkeeping and the shape helpers both files use.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_DECODEBUILDER_H
#define OTC_PASSES_DECODEBUILDER_H

#include "ir/OtcDialect.h"
#include "passes/FusePatterns.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include <optional>
#include <string>

namespace otc {
namespace decode {

using namespace mlir;

inline int64_t rankOf(Value v) { return shapeOf(v).size(); }

/// `type` with dimension `axis` of size `size`.
inline RankedTensorType withDim(Type type, int64_t axis, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[axis] = size;
  return t.clone(shape);
}

inline StringRef slotOf(func::FuncOp f, unsigned i) {
  if (auto s = f.getArgAttrOfType<StringAttr>(i, attrs::kSlot))
    return s.getValue();
  return "";
}

/// A sequence axis merged with others (a mixture of experts' tokens
/// flattened to [B·T, C], then repeated top-k times to [B·T·k, C]): the
/// axis holds `outer` · T · `inner` elements in @eval_step, row-major, and
/// `outer` · `inner` in @decode_step (the position's). {1, 1}: the axis is
/// the sequence alone.
struct Merge {
  int64_t outer = 1, inner = 1;
  bool plain() const { return outer == 1 && inner == 1; }
  bool operator==(const Merge &o) const {
    return outer == o.outer && inner == o.inner;
  }
};

class DecodeBuilder {
public:
  DecodeBuilder(ModuleOp module, func::FuncOp eval)
      : module(module), eval(eval), fb(module.getContext()) {}

  LogicalResult build();

private:
  ModuleOp module;
  func::FuncOp eval;
  OpBuilder fb;
  Location loc = eval.getLoc();
  func::FuncOp f;
  /// The sequence length and the token input of @eval_step.
  int64_t T = 0;
  BlockArgument tokens;
  /// @eval_step's values -> @decode_step's.
  IRMapping map;
  /// The sequence axis of each token-dependent value of @eval_step, and
  /// what it is merged with, where it is (absent: nothing).
  DenseMap<Value, int64_t> seq;
  DenseMap<Value, Merge> merged;
  /// The merge of the row operands of the op being visited (visit()).
  Merge current;
  /// @decode_step's position (tensor<1xi64>) and positions 0..T-1.
  Value position, iota;
  /// Slot names of the arguments added to @decode_step, and its results.
  SmallVector<std::string> argSlots;
  SmallVector<Value> cacheResults;
  SmallVector<std::string> cacheSlots;
  int attentions = 0;

  /// Whether each mask (of @decode_step, the inputs fed) was found to hide
  /// every key after its query: true, false, or unknown (not evaluable).
  DenseMap<Value, std::optional<bool>> maskCausal;
  std::optional<bool> hidesLaterKeys(Value mask);

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    return op->emitError("--generate: ") << why;
  }

  Value addArgument(Type type, StringRef slot) {
    argSlots.push_back(slot.str());
    return f.getBody().front().addArgument(type, loc);
  }

  bool isRow(Value v) const { return seq.count(v); }
  Merge mergeOf(Value v) const { return merged.lookup(v); }

  LogicalResult findTokens(Value logits);
  LogicalResult buildBody(Value logits, Value &out);
  LogicalResult visit(Operation *op);
  /// Sets `current` to how the sequence axis of `op`'s row operands is
  /// merged (a gather's: its indices'); refuses operands merged
  /// differently.
  LogicalResult setCurrentMerge(Operation *op);
  /// The ops that work along rows (normalizations, top-k, softmax,
  /// reductions, slices), each refused over the sequence axis; any other
  /// op is refused.
  LogicalResult visitAlongRows(Operation *op);
  /// A full (token-independent) value read beside a row value whose
  /// sequence axis is `axis` of `v`: row p of `v` there when that
  /// dimension has T elements, `v` itself when it has 1.
  FailureOr<Value> atPosition(Operation *user, Value v, int64_t axis);
  LogicalResult visitElementwise(Operation *op);
  LogicalResult visitMatMul(MatMulOp op);
  LogicalResult visitReshape(ReshapeOp op);
  LogicalResult visitGather(GatherOp op);
  /// Whether gather `op` of a flattened row value reads, for each token
  /// row of its indices, within that token's elements: indices that are
  /// token-dependent indices plus row · (the token's elements), as the
  /// import of TopK and GatherElements writes them.
  bool gathersWithinRows(GatherOp op);
  /// A constant of @decode_step for `c` (@eval_step's integer constant
  /// whose axis `axis` holds the merged sequence `current`) when its
  /// values are row · stride along that axis alone: the same of the
  /// position's rows; else null.
  Value rowOffsets(Value c, int64_t axis);
  LogicalResult visitConcat(ConcatOp op);
  LogicalResult visitAttention(AttentionOp op);
  /// Refuses an attention decode_step cannot take a position at a time
  /// (neither causal nor masked, keys or a mask that depend on the tokens,
  /// a mask that lets a query see later keys, a sequence merged with other
  /// axes or on another axis than its layout's).
  LogicalResult checkDecodable(AttentionOp op);
  /// The position's queries, keys and values, heads first ([B, H, 1, D]),
  /// taken apart first when packed.
  std::array<Value, 3> positionRows(AttentionOp op);
  /// The cache of slot `slot` (an argument and a result of decode_step)
  /// with `row` added at the position.
  Value addToCache(Value row, llvm::StringRef slot);
  /// The additive mask of the position's row over the cached keys (its own
  /// window, plus the model's mask at the position), in `elementType`.
  FailureOr<Value> positionMask(AttentionOp op, Type elementType);
  LogicalResult visitExpertMatmul(ExpertMatmulOp op);
  /// Clones `op` with operands `operands` and each result's sequence axis
  /// `axes[i]` (-1: a result not read) cut to the position: size 1, or
  /// outer · inner where the axis is merged (`current`).
  Operation *cloneRow(Operation *op, ArrayRef<Value> operands,
                      ArrayRef<int64_t> axes);
  Value constantI64(ArrayRef<int64_t> shape, ArrayRef<int64_t> values);
  Value splatF32(ArrayRef<int64_t> shape, float value);
};

} // namespace decode
} // namespace otc

#endif // OTC_PASSES_DECODEBUILDER_H
