//===- PackAttention.cpp - attention reads a fused QKV in place -----------===//
//
// A fused QKV projection writes [B, T, (H + 2 Hk) D]; the exported graph
// slices it into q, k and v along the last axis and splits each into heads,
// and the backward concatenates dq, dk and dv back. Each slice and the
// concatenation copy the whole projection. Attention reads [B, T, H, D]
// through strides already (layout "bthd"), so it can read q, k and v where
// the projection wrote them and write their gradients side by side the
// same way (layout "packed"). See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace otc {
#define GEN_PASS_DEF_PACKATTENTION
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The [B, T, N] value `v` ([B, T, heads, D]) is a reshape of a slice of,
/// with the slice's first element along N: when `v` takes elements
/// [first, first + heads·D) of each row of that value (converted to its
/// element type by a cast after the reshape, as mixed precision widens
/// attention's operands next to an FP32 mask), else none.
struct Part {
  Value source;
  int64_t first = 0;
};

static std::optional<Part> partOf(Value v) {
  if (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  auto reshape = v.getDefiningOp<ReshapeOp>();
  if (!reshape)
    return std::nullopt;
  auto slice = reshape.getInput().getDefiningOp<SliceOp>();
  if (!slice)
    return std::nullopt;
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(v),
                    part = shapeOf(slice.getResult());
  if (in.size() != 3 || out.size() != 4 || part.size() != 3 ||
      part[0] != in[0] || part[1] != in[1] || out[0] != in[0] ||
      out[1] != in[1] || part[2] != out[2] * out[3])
    return std::nullopt;
  ArrayRef<int64_t> starts = slice.getStarts(), strides = slice.getStrides();
  if (starts[0] != 0 || starts[1] != 0 ||
      llvm::any_of(strides, [](int64_t s) { return s != 1; }))
    return std::nullopt;
  return Part{slice.getInput(), starts[2]};
}

/// The value q, k and v of an attention (layout "bthd") are consecutive
/// parts of, in that order and filling its rows: null when they are not.
template <typename OpTy> static Value packedSource(OpTy op) {
  if (op.getLayout() != "bthd")
    return nullptr;
  std::optional<Part> q = partOf(op.getQ()), k = partOf(op.getK()),
                      v = partOf(op.getV());
  if (!q || !k || !v || q->source != k->source || q->source != v->source)
    return nullptr;
  ArrayRef<int64_t> qs = shapeOf(op.getQ()), ks = shapeOf(op.getK());
  int64_t qn = qs[2] * qs[3], kn = ks[2] * ks[3];
  if (q->first != 0 || k->first != qn || v->first != qn + kn ||
      shapeOf(q->source)[2] != qn + 2 * kn)
    return nullptr;
  return q->source;
}

struct PackAttentionPass
    : public otc::impl::PackAttentionBase<PackAttentionPass> {
  using PackAttentionBase::PackAttentionBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      packed.clear();
      SmallVector<Operation *> attention;
      for (Operation &op : f.getOps())
        if (isa<AttentionOp, AttentionGradOp>(op))
          attention.push_back(&op);
      for (Operation *op : attention) {
        if (auto a = dyn_cast<AttentionOp>(op))
          pack(a);
        else
          pack(cast<AttentionGradOp>(op));
      }
      eraseDead(f);
    }
  }

  /// `source` as [B, T, H + 2 Hk, D] heads of q's depth and element type
  /// (one reshape, and cast where the types differ, per source and type,
  /// right after the source).
  Value packedView(Value source, Value q) {
    auto qType = cast<RankedTensorType>(q.getType());
    Value &view = packed[{source, qType.getElementType()}];
    if (view)
      return view;
    OpBuilder b(source.getContext());
    b.setInsertionPointAfterValue(source);
    auto type = cast<RankedTensorType>(source.getType());
    ArrayRef<int64_t> s = type.getShape();
    int64_t depth = qType.getShape()[3];
    view = b.create<ReshapeOp>(
        source.getLoc(),
        type.clone(SmallVector<int64_t>{s[0], s[1], s[2] / depth, depth}),
        source);
    if (type.getElementType() != qType.getElementType())
      view = b.create<CastOp>(
          source.getLoc(),
          cast<RankedTensorType>(view.getType()).clone(qType.getElementType()),
          view);
    return view;
  }

  /// The packed value `op` can read instead of its q, k and v, or null.
  template <typename OpTy> Value packedOperand(OpTy op) {
    Value source = packedSource(op);
    return source ? packedView(source, op.getQ()) : Value();
  }

  void pack(AttentionOp op) {
    Value p = packedOperand(op);
    if (!p || op.getMaskGrad()) // dS is per head: q, k and v stay apart
      return;
    OpBuilder b(op);
    auto packedOp = b.create<AttentionOp>(
        op.getLoc(), op->getResultTypes(), p, p, p, op.getMask(), op.getKey(),
        op.getSinks(), op.getCausalAttr(), op.getScaleAttr(),
        op.getDropoutAttr(), op.getStreamAttr(), b.getStringAttr("packed"),
        op.getWindowAttr(), op.getSoftcapAttr(), UnitAttr(),
        op.getKeyPaddingAttr());
    op->replaceAllUsesWith(packedOp);
    op->erase();
  }

  void pack(AttentionGradOp op) {
    Value p = packedOperand(op);
    if (!p || op.getMaskGrad())
      return;
    OpBuilder b(op);
    SmallVector<Type> types = {p.getType()};
    if (Value dsinks = op.getDsinks())
      types.push_back(dsinks.getType());
    auto packedOp = b.create<AttentionGradOp>(
        op.getLoc(), types, op.getGrad(), p, p, p, op.getOutput(), op.getLse(),
        op.getMask(), op.getKey(), op.getSinks(), op.getCausalAttr(),
        op.getScaleAttr(), op.getDropoutAttr(), op.getStreamAttr(),
        b.getStringAttr("packed"), op.getWindowAttr(), op.getSoftcapAttr(),
        UnitAttr(), op.getKeyPaddingAttr());
    if (Value dsinks = op.getDsinks())
      dsinks.replaceAllUsesWith(packedOp.getDsinks());
    Value grads = packedOp.getGrads()[0];
    if (ConcatOp concat = rejoined(op)) {
      // The concatenation is the packed gradient seen as [B, T, N].
      b.setInsertionPoint(concat);
      Value joined =
          b.create<ReshapeOp>(concat.getLoc(), concat.getType(), grads);
      concat.getResult().replaceAllUsesWith(joined);
      // The concatenation and the reshapes of dq, dk and dv go before op.
      SmallVector<Operation *> parts;
      for (Value g : qkvGrads(op))
        parts.push_back(*g.getUsers().begin());
      concat->erase();
      for (Operation *part : parts)
        part->erase();
    } else {
      // Each of dq, dk and dv as a slice of it.
      b.setInsertionPointAfter(packedOp);
      int64_t first = 0;
      for (Value g : qkvGrads(op)) {
        SmallVector<int64_t> starts = {0, 0, first, 0};
        auto part = b.create<SliceOp>(op.getLoc(), g.getType(), grads,
                                      b.getDenseI64ArrayAttr(starts),
                                      b.getDenseI64ArrayAttr({1, 1, 1, 1}));
        g.replaceAllUsesWith(part.getResult());
        first += shapeOf(g)[2];
      }
    }
    op->erase();
  }

  /// dq, dk and dv of an attention gradient not packed (without the
  /// sinks' gradient).
  static SmallVector<Value, 3> qkvGrads(AttentionGradOp op) {
    return {op.getDq(), op.getDk(), op.getDv()};
  }

  /// The concatenation along the last axis of dq, dk and dv, each reshaped
  /// to rows of heads·D (so that the concatenation's rows are the packed
  /// gradient's) and read by nothing else, in that order: null when the
  /// gradients are read otherwise.
  static ConcatOp rejoined(AttentionGradOp op) {
    ConcatOp concat;
    for (auto [i, g] : llvm::enumerate(qkvGrads(op))) {
      if (!g.hasOneUse())
        return nullptr;
      auto reshape = dyn_cast<ReshapeOp>(*g.getUsers().begin());
      ArrayRef<int64_t> gs = shapeOf(g);
      if (!reshape || !reshape->hasOneUse() ||
          shapeOf(reshape.getResult()).back() != gs[2] * gs[3])
        return nullptr;
      auto c = dyn_cast<ConcatOp>(*reshape->getUsers().begin());
      if (!c || (concat && c != concat) || c.getInputs().size() != 3 ||
          c.getInputs()[i] != reshape.getResult() ||
          static_cast<int64_t>(c.getAxis()) !=
              static_cast<int64_t>(shapeOf(c.getResult()).size()) - 1)
        return nullptr;
      concat = c;
    }
    return concat;
  }

  /// Erases the otc ops left without readers (the slices, their reshapes
  /// and casts, the concatenation and its reshapes); every otc op is pure.
  static void eraseDead(func::FuncOp f) {
    SmallVector<Operation *> ops;
    for (Operation &op : f.getOps())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (isa<SliceOp, ReshapeOp, ConcatOp, CastOp>(op) && op->use_empty())
        op->erase();
  }

  llvm::DenseMap<std::pair<Value, Type>, Value> packed;
};

} // namespace
