//===- DecodeStep.cpp - one position at a time, keys and values cached ----===//
//
// See DecodeStep.h. The restriction rests on causality: in a model whose
// every attention is causal, the value of any token-dependent tensor at
// position t depends on the tokens up to t alone, so that the forward of
// position p is the forward of the whole sequence with every token-
// dependent value cut to its row p, provided each attention sees the keys
// and values of the positions before p, which earlier calls left in its
// cache.
//
//===----------------------------------------------------------------------===//

#include "passes/DecodeStep.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/FusePatterns.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

using namespace mlir;
using namespace otc;

namespace {

static ArrayRef<int64_t> dims(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static int64_t rankOf(Value v) { return dims(v).size(); }

/// The elements between neighbours along each axis of `shape`.
static SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// `type` with dimension `axis` of size `size`.
static RankedTensorType withDim(Type type, int64_t axis, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[axis] = size;
  return t.clone(shape);
}

static StringRef slotOf(func::FuncOp f, unsigned i) {
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
  LogicalResult visitExpertMatmul(ExpertMatmulOp op);
  /// Clones `op` with operands `operands` and each result's sequence axis
  /// `axes[i]` (-1: a result not read) cut to the position: size 1, or
  /// outer · inner where the axis is merged (`current`).
  Operation *cloneRow(Operation *op, ArrayRef<Value> operands,
                      ArrayRef<int64_t> axes);
  Value constantI64(ArrayRef<int64_t> shape, ArrayRef<int64_t> values);
  Value splatF32(ArrayRef<int64_t> shape, float value);
};

Value DecodeBuilder::constantI64(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> values) {
  auto t = RankedTensorType::get(shape, fb.getI64Type());
  return fb.create<ConstantOp>(loc, DenseElementsAttr::get(t, values));
}

Value DecodeBuilder::splatF32(ArrayRef<int64_t> shape, float value) {
  auto t = RankedTensorType::get(shape, fb.getF32Type());
  return fb.create<ConstantOp>(
      loc, DenseElementsAttr::get(t, fb.getF32FloatAttr(value)));
}

/// The token input: the integer input that an embedding gathers by.
LogicalResult DecodeBuilder::findTokens(Value logits) {
  SmallVector<Value> work = {logits};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    if (!def)
      continue;
    if (auto g = dyn_cast<GatherOp>(def))
      if (auto arg = dyn_cast<BlockArgument>(g.getIndices());
          arg && slotOf(eval, arg.getArgNumber()).starts_with("input:") &&
          rankOf(arg) == 2) {
        if (tokens && tokens != arg)
          return eval.emitError("--generate: two token inputs ('")
                 << slotOf(eval, tokens.getArgNumber()) << "' and '"
                 << slotOf(eval, arg.getArgNumber()) << "')";
        tokens = arg;
      }
    for (Value o : def->getOperands())
      work.push_back(o);
  }
  if (!tokens)
    return eval.emitError("--generate: the logits read no token input (an "
                          "integer input [batch, sequence] gathered by an "
                          "embedding)");
  T = dims(tokens)[1];
  return success();
}

FailureOr<Value> DecodeBuilder::atPosition(Operation *user, Value v,
                                           int64_t axis) {
  if (axis < 0 || dims(v)[axis] == 1)
    return v;
  if (!current.plain()) {
    if (Value offsets = rowOffsets(v, axis))
      return offsets;
    refuse(user, "a value of shape ")
        << formatShape(dims(v)) << " meets the sequence merged with other "
        << "axes along axis " << axis;
    return failure();
  }
  if (dims(v)[axis] != T) {
    refuse(user, "a value of shape ")
        << formatShape(dims(v)) << " meets the sequence (" << T
        << " positions) along axis " << axis;
    return failure();
  }
  return fb.create<GatherOp>(loc, withDim(v.getType(), axis, 1), v, position,
                             fb.getI64IntegerAttr(axis))
      .getResult();
}

Operation *DecodeBuilder::cloneRow(Operation *op, ArrayRef<Value> operands,
                                   ArrayRef<int64_t> axes) {
  Operation *n = fb.clone(*op, map);
  for (auto [i, v] : llvm::enumerate(operands))
    n->setOperand(i, v);
  for (auto [i, r] : llvm::enumerate(n->getResults())) {
    if (axes[i] < 0)
      continue;
    r.setType(withDim(r.getType(), axes[i], current.outer * current.inner));
    seq[op->getResult(i)] = axes[i];
    if (!current.plain())
      merged[op->getResult(i)] = current;
  }
  return n;
}

/// Ops with numpy broadcasting (or same-shaped operands): the result's
/// sequence axis is that of its row operands, right-aligned.
LogicalResult DecodeBuilder::visitElementwise(Operation *op) {
  int64_t R = rankOf(op->getResult(0)), axis = -1;
  for (Value o : op->getOperands())
    if (isRow(o)) {
      int64_t a = seq[o] + R - rankOf(o);
      if (axis >= 0 && a != axis)
        return refuse(op, "operands whose sequence axes differ");
      axis = a;
    }
  SmallVector<Value> operands;
  for (Value o : op->getOperands()) {
    if (isRow(o)) {
      operands.push_back(map.lookup(o));
      continue;
    }
    FailureOr<Value> v = atPosition(op, map.lookup(o), axis - (R - rankOf(o)));
    if (failed(v))
      return failure();
    operands.push_back(*v);
  }
  SmallVector<int64_t> axes(op->getNumResults(), axis);
  cloneRow(op, operands, axes);
  return success();
}

LogicalResult DecodeBuilder::visitMatMul(MatMulOp op) {
  if (isRow(op.getRhs()) || !isRow(op.getLhs()))
    return refuse(op, "a product whose right operand depends on the tokens "
                      "(an attention left unfused?)");
  int64_t s = seq[op.getLhs()], r = rankOf(op.getLhs());
  if (op.getTransposeLhs() || s == r - 1)
    return refuse(op, "a product that sums over the sequence");
  int64_t R = rankOf(op.getResult()), axis = s + R - r;
  // Only a batch axis of the right operand lines up with the sequence.
  Value rhs = map.lookup(op.getRhs());
  int64_t rr = rankOf(op.getRhs()), a = axis - (R - rr);
  if (axis < R - 2 && a >= 0 && a < rr - 2) {
    FailureOr<Value> row = atPosition(op, rhs, a);
    if (failed(row))
      return failure();
    rhs = *row;
  }
  cloneRow(op, {map.lookup(op.getLhs()), rhs}, {axis});
  return success();
}

/// The output axis that holds the sequence: the one whose elements span
/// the sequence's stride in the flat order (the elements after it, merged
/// inner ones included) and a multiple of the sequence's extent. Merged
/// with the outer and inner elements that axis takes beside it.
LogicalResult DecodeBuilder::visitReshape(ReshapeOp op) {
  ArrayRef<int64_t> in = dims(op.getInput()), out = dims(op.getResult());
  int64_t s = seq[op.getInput()];
  int64_t after = current.inner;
  for (int64_t i = s + 1, e = in.size(); i < e; ++i)
    after *= in[i];
  int64_t below = 1; // the elements after output axis i
  for (int64_t i = out.size(); i-- > 0;) {
    if (after % below == 0 && (out[i] * below) % (T * after) == 0) {
      Merge m{out[i] * below / (T * after), after / below};
      current = m;
      cloneRow(op, {map.lookup(op.getInput())}, {i});
      return success();
    }
    below *= out[i];
    if (below > after)
      break;
  }
  return refuse(op, "a reshape from ")
         << formatShape(in) << " to " << formatShape(out)
         << " that splits the sequence axis";
}

Value DecodeBuilder::rowOffsets(Value c, int64_t axis) {
  DenseElementsAttr values;
  auto def = c.getDefiningOp<ConstantOp>();
  if (!def || !(values = dyn_cast<DenseElementsAttr>(def.getValue())) ||
      !values.getElementType().isInteger(64))
    return {};
  ArrayRef<int64_t> shape = dims(c);
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  auto all = values.getValues<int64_t>();
  int64_t rows = shape[axis], stride = 0;
  if (rows > 1)
    stride = all[strides[axis]];
  for (int64_t flat = 0, e = values.getNumElements(); flat < e; ++flat)
    if (all[flat] != (flat / strides[axis]) % rows * stride)
      return {};
  int64_t decodeRows = current.outer * current.inner;
  auto t = withDim(c.getType(), axis, decodeRows);
  SmallVector<int64_t> out(t.getNumElements());
  SmallVector<int64_t> outStrides = rowMajorStrides(t.getShape());
  for (int64_t flat = 0, e = out.size(); flat < e; ++flat)
    out[flat] = (flat / outStrides[axis]) % decodeRows * stride;
  return fb.create<ConstantOp>(loc, DenseElementsAttr::get(t, ArrayRef(out)))
      .getResult();
}

bool DecodeBuilder::gathersWithinRows(GatherOp op) {
  // Data [outer · T · inner] (each token's inner elements in turn) and
  // indices whose sequence axis is merged with the same outer elements
  // alone: token row r's offsets are r · inner.
  Value data = op.getData(), indices = op.getIndices();
  auto add = indices.getDefiningOp<AddOp>();
  Merge md = mergeOf(data), mi = mergeOf(indices);
  if (rankOf(data) != 1 || !add || seq[data] != 0 || mi.inner != 1 ||
      mi.outer != md.outer)
    return false;
  for (Value o : {add.getLhs(), add.getRhs()}) {
    if (isRow(o))
      continue;
    auto def = o.getDefiningOp<ConstantOp>();
    auto values = def ? dyn_cast<DenseElementsAttr>(def.getValue()) : nullptr;
    int64_t axis = seq[indices] + rankOf(o) - rankOf(indices);
    if (!values || !values.getElementType().isInteger(64) || axis < 0 ||
        dims(o)[axis] < 2 ||
        values.getValues<int64_t>()[rowMajorStrides(dims(o))[axis]] !=
            md.inner)
      return false;
  }
  return true;
}

LogicalResult DecodeBuilder::visitGather(GatherOp op) {
  int64_t axis = op.getAxis();
  if (axis < 0)
    axis += rankOf(op.getData());
  if (isRow(op.getIndices())) {
    if (isRow(op.getData()) && !gathersWithinRows(op))
      return refuse(op, "a gather of token-dependent values by token-"
                        "dependent indices");
    cloneRow(op, {map.lookup(op.getData()), map.lookup(op.getIndices())},
             {axis + seq[op.getIndices()]});
    return success();
  }
  int64_t s = seq[op.getData()];
  if (s == axis)
    return refuse(op, "a gather along the sequence axis");
  int64_t out = s < axis ? s : s + rankOf(op.getIndices()) - 1;
  cloneRow(op, {map.lookup(op.getData()), map.lookup(op.getIndices())},
           {out});
  return success();
}

LogicalResult DecodeBuilder::visitConcat(ConcatOp op) {
  int64_t axis = -1;
  for (Value o : op.getInputs())
    if (isRow(o))
      axis = seq[o];
  if (axis == static_cast<int64_t>(op.getAxis()))
    return refuse(op, "a concatenation along the sequence axis")
           << (current.plain() ? "" : " merged with other axes");
  SmallVector<Value> operands;
  for (Value o : op.getInputs()) {
    if (isRow(o)) {
      if (seq[o] != axis)
        return refuse(op, "operands whose sequence axes differ");
      operands.push_back(map.lookup(o));
      continue;
    }
    FailureOr<Value> v = atPosition(op, map.lookup(o), axis);
    if (failed(v))
      return failure();
    operands.push_back(*v);
  }
  cloneRow(op, operands, {axis});
  return success();
}

/// Writes the position's keys and values into the caches and attends to
/// the cached positions up to p (and after p - window).
LogicalResult DecodeBuilder::visitAttention(AttentionOp op) {
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
  StringRef layout = op.getLayout();
  int64_t seqAxis = layout == "bhtd" ? 2 : 1;
  Value q = map.lookup(op.getQ()), k = map.lookup(op.getK()),
        v = map.lookup(op.getV());
  if (seq[op.getQ()] != seqAxis || seq[op.getK()] != seqAxis ||
      seq[op.getV()] != seqAxis)
    return refuse(op, "attention whose sequence axis is not its layout's");
  if (layout == "packed") {
    // [B, 1, H + 2 Hk, D]: the queries, keys and values side by side.
    ArrayRef<int64_t> p = dims(q);
    int64_t h = dims(op.getOutput())[2], hk = (p[2] - h) / 2;
    Value packed = q;
    auto part = [&](int64_t first, int64_t heads) {
      auto t = RankedTensorType::get({p[0], 1, heads, p[3]},
                                     getElementTypeOrSelf(q.getType()));
      return fb.create<SliceOp>(loc, t, packed,
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
    ArrayRef<int64_t> r = dims(row);
    auto t = RankedTensorType::get({r[0], r[2], 1, r[3]},
                                   getElementTypeOrSelf(row.getType()));
    return fb.create<ReshapeOp>(loc, t, row).getResult();
  };
  q = headsFirst(q);
  k = headsFirst(k);
  v = headsFirst(v);
  const int64_t cacheAxis = 2;
  Type i1 = fb.getI1Type();
  std::string n = std::to_string(attentions++);
  // The position's row added into the cache, whose row p is still zero
  // (the caches are zeroed for a sequence, each position written once):
  // cache + gather_grad(row at p), which otc-fuse-epilogues turns into the
  // scatter adding into the cache slot, touching that row alone.
  auto cached = [&](Value row, StringRef which) {
    Type type = withDim(row.getType(), cacheAxis, T);
    std::string slot = "kv_cache:" + n + "." + which.str();
    Value old = addArgument(type, slot);
    Value put = fb.create<GatherGradOp>(loc, type, row, position, Value(),
                                        fb.getI64IntegerAttr(cacheAxis));
    Value updated = fb.create<AddOp>(loc, type, old, put);
    cacheResults.push_back(updated);
    cacheSlots.push_back(slot);
    return updated;
  };
  Value kc = cached(k, "k"), vc = cached(v, "v");
  // The keys up to p (and, with a window W, after p - W) are seen: an
  // additive [1, 1, 1, T] mask, 0 where seen.
  RankedTensorType maskType = RankedTensorType::get({T}, fb.getF32Type());
  float hidden = std::numeric_limits<float>::lowest();
  Value seen = fb.create<CompareOp>(loc, RankedTensorType::get({T}, i1), iota,
                                    position, fb.getStringAttr("le"));
  Value zero = splatF32({T}, 0.0f), lowest = splatF32({T}, hidden);
  Value mask = fb.create<SelectOp>(loc, maskType, seen, zero, lowest);
  if (int64_t w = op.getWindow()) {
    Value from = fb.create<SubOp>(
        loc, position.getType(), position, constantI64({1}, {w - 1}));
    Value inWindow = fb.create<CompareOp>(
        loc, RankedTensorType::get({T}, i1), iota, from,
        fb.getStringAttr("ge"));
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
      mask = fb.create<CastOp>(
          loc, RankedTensorType::get({1, 1, 1, T}, e), mask);
    SmallVector<int64_t> shape = {1, 1, 1, T};
    auto b = broadcastShapes(dims(*row), shape);
    if (!b)
      return refuse(op, "a mask that does not broadcast to [1, 1, 1, ")
             << T << "]";
    mask = fb.create<AddOp>(loc, RankedTensorType::get(*b, e), *row, mask);
  }
  // The mask in the attention's precision (BF16 under mixed precision).
  Type qe = getElementTypeOrSelf(q.getType());
  if (getElementTypeOrSelf(mask.getType()) != qe)
    mask = fb.create<CastOp>(
        loc, cast<RankedTensorType>(mask.getType()).clone(qe), mask);
  RankedTensorType outType = cast<RankedTensorType>(q.getType());
  ArrayRef<int64_t> qs = dims(q);
  auto lseType = RankedTensorType::get(
      {qs[0], qs[1], 1}, getElementTypeOrSelf(op.getLse().getType()));
  auto att = fb.create<AttentionOp>(
      loc, TypeRange{outType, lseType}, q, kc, vc, mask, /*key=*/Value(),
      /*causal=*/UnitAttr(), op.getScaleAttr(), fb.getF64FloatAttr(0.0),
      op.getStreamAttr(), fb.getStringAttr("bhtd"), fb.getI64IntegerAttr(0),
      op.getSoftcapAttr());
  // Back to the model's [B, 1, H, D] where it keeps sequence first.
  Value output = att.getOutput();
  if (layout != "bhtd")
    output = fb.create<ReshapeOp>(
        loc, withDim(op.getOutput().getType(), seqAxis, 1), output);
  map.map(op.getOutput(), output);
  map.map(op.getLse(), att.getLse());
  seq[op.getOutput()] = seqAxis;
  seq[op.getLse()] = 2;
  return success();
}

/// Row n of the result is row n of `x` times the matrix of expert ids[n]:
/// both cut to the position along their rows, the experts' weights whole.
LogicalResult DecodeBuilder::visitExpertMatmul(ExpertMatmulOp op) {
  if (!isRow(op.getX()) || !isRow(op.getIds()) || isRow(op.getW()) ||
      seq[op.getX()] != 0 || seq[op.getIds()] != 0)
    return refuse(op, "experts' products whose rows and expert indices are "
                      "not both the token rows");
  cloneRow(op, {map.lookup(op.getX()), map.lookup(op.getIds()),
                map.lookup(op.getW())},
           {0});
  return success();
}

/// Evaluates `mask` ([.., T, S] additive, of constants once the inputs are
/// fed) row by row: whether every key after its query is hidden.
std::optional<bool> DecodeBuilder::hidesLaterKeys(Value mask) {
  auto [it, fresh] = maskCausal.try_emplace(mask);
  if (!fresh)
    return it->second;
  ArrayRef<int64_t> shape = dims(mask);
  if (shape.size() < 2)
    return it->second = std::nullopt;
  ArrayRef<int64_t> rows = shape.drop_back();
  SmallVector<double> row;
  for (int64_t flat = 0, count = numElements(rows); flat < count; ++flat) {
    SmallVector<int64_t> prefix = unravelIndex(flat, rows);
    if (!fuse::evaluateRow(mask, prefix, row))
      return it->second = std::nullopt;
    int64_t i = shape[shape.size() - 2] == 1 ? -1 : prefix.back();
    for (int64_t j = i + 1; i >= 0 && j < static_cast<int64_t>(row.size());
         ++j)
      if (row[j] > -1e4)
        return it->second = false;
    if (i < 0 && llvm::any_of(row, [](double x) { return x > -1e4; }) &&
        row.size() > 1)
      return it->second = false; // one row for every query: not causal
  }
  return it->second = true;
}

LogicalResult DecodeBuilder::visit(Operation *op) {
  if (llvm::none_of(op->getOperands(), [&](Value v) { return isRow(v); })) {
    fb.clone(*op, map);
    return success();
  }
  std::optional<Merge> rowMerge;
  auto gather = dyn_cast<GatherOp>(op);
  if (gather && isRow(gather.getIndices()))
    rowMerge = mergeOf(gather.getIndices());
  for (Value o : op->getOperands()) {
    if (!isRow(o) || gather)
      continue;
    if (rowMerge && !(*rowMerge == mergeOf(o)))
      return refuse(op, "operands whose sequence axes are merged differently");
    rowMerge = mergeOf(o);
  }
  current = *rowMerge;
  if (auto d = dyn_cast<DropoutOp>(op)) {
    // Sampling runs the model as in evaluation.
    map.map(d.getOutput(), map.lookup(d.getInput()));
    seq[d.getOutput()] = seq[d.getInput()];
    if (!current.plain())
      merged[d.getOutput()] = current;
    return success();
  }
  if (op->hasTrait<OpTrait::OtcElementwise>())
    return visitElementwise(op);
  if (auto m = dyn_cast<MatMulOp>(op))
    return visitMatMul(m);
  if (auto r = dyn_cast<ReshapeOp>(op))
    return visitReshape(r);
  if (auto g = dyn_cast<GatherOp>(op))
    return visitGather(g);
  if (auto c = dyn_cast<ConcatOp>(op))
    return visitConcat(c);
  if (auto a = dyn_cast<AttentionOp>(op))
    return visitAttention(a);
  if (auto e = dyn_cast<ExpertMatmulOp>(op))
    return visitExpertMatmul(e);
  if (auto t = dyn_cast<TransposeOp>(op)) {
    int64_t s = seq[t.getInput()];
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t out = llvm::find(perm, s) - perm.begin();
    cloneRow(op, {map.lookup(t.getInput())}, {out});
    return success();
  }
  if (auto b = dyn_cast<BroadcastOp>(op)) {
    int64_t out = seq[b.getInput()] + rankOf(b.getResult()) -
                  rankOf(b.getInput());
    cloneRow(op, {map.lookup(b.getInput())}, {out});
    return success();
  }
  auto rowOperandsBelow = [&](int64_t axis) {
    return seq[op->getOperand(0)] < axis &&
           llvm::all_of(op->getOperands().drop_front(),
                        [&](Value v) { return !isRow(v); });
  };
  auto keepOthers = [&]() {
    SmallVector<Value> operands;
    for (Value o : op->getOperands())
      operands.push_back(map.lookup(o));
    return operands;
  };
  if (isa<LayerNormOp, RmsNormOp>(op)) {
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    if (!rowOperandsBelow(axis))
      return refuse(op, "a normalization over the sequence axis");
    SmallVector<int64_t> axes(op->getNumResults(), seq[op->getOperand(0)]);
    cloneRow(op, keepOthers(), axes);
    return success();
  }
  if (isa<TopKOp>(op)) {
    if (seq[op->getOperand(0)] == rankOf(op->getOperand(0)) - 1)
      return refuse(op, "a top-k over the sequence axis");
    cloneRow(op, keepOthers(), {seq[op->getOperand(0)]});
    return success();
  }
  if (isa<SoftmaxOp, LogSoftmaxOp>(op)) {
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    if (seq[op->getOperand(0)] == axis)
      return refuse(op, "a softmax over the sequence axis");
    cloneRow(op, keepOthers(), {seq[op->getOperand(0)]});
    return success();
  }
  if (isa<ReduceSumOp, ReduceMaxOp>(op)) {
    int64_t s = seq[op->getOperand(0)];
    ArrayRef<int64_t> axes =
        op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
    if (llvm::is_contained(axes, s))
      return refuse(op, "a reduction over the sequence axis");
    int64_t out = s;
    if (!op->hasAttr("keep_dims"))
      out -= llvm::count_if(axes, [&](int64_t a) { return a < s; });
    cloneRow(op, keepOthers(), {out});
    return success();
  }
  if (auto sl = dyn_cast<SliceOp>(op)) {
    int64_t s = seq[sl.getInput()];
    if (dims(sl.getResult())[s] != dims(sl.getInput())[s] ||
        sl.getStarts()[s] != 0 ||
        sl.getStrides()[s] != 1)
      return refuse(op, "a slice of the sequence axis");
    cloneRow(op, keepOthers(), {s});
    return success();
  }
  return refuse(op, "'")
         << op->getName() << "' on a value that depends on the tokens";
}

LogicalResult DecodeBuilder::buildBody(Value logits, Value &out) {
  // The ops the logits depend on, in order.
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> work = {logits};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !needed.insert(def).second)
      continue;
    for (Value o : def->getOperands())
      work.push_back(o);
  }
  Block &entry = f.getBody().front();
  fb.setInsertionPointToEnd(&entry);
  // Arguments: @eval_step's parameters and buffers (and random key) as
  // they are, the tokens at the position, the position.
  for (unsigned i = 0, e = eval.getNumArguments(); i < e; ++i) {
    BlockArgument arg = eval.getArgument(i);
    StringRef slot = slotOf(eval, i);
    if (!slot.starts_with("input:")) {
      map.map(arg, addArgument(arg.getType(), slot));
      continue;
    }
    if (arg == tokens) {
      Value t = addArgument(withDim(arg.getType(), 1, 1),
                            ("decode_tokens:" + slot.drop_front(6)).str());
      map.map(arg, t);
      seq[arg] = 1;
      continue;
    }
    if (arg.use_empty() ||
        llvm::none_of(arg.getUsers(),
                      [&](Operation *u) { return needed.contains(u); }))
      continue;
    auto t = cast<RankedTensorType>(arg.getType());
    if (!t.getElementType().isInteger() || t.getRank() != 2 ||
        t.getDimSize(1) != T)
      return eval.emitError("--generate: input '")
             << slot.drop_front(6) << "' of " << formatShape(t.getShape())
             << " is not the tokens nor a [batch, " << T
             << "] mask, which sampling would feed ones";
    map.map(arg, fb.create<ConstantOp>(
                        loc, DenseElementsAttr::get(
                                 t, IntegerAttr::get(t.getElementType(), 1))));
  }
  position = addArgument(RankedTensorType::get({1}, fb.getI64Type()),
                         "decode_position");
  SmallVector<int64_t> positions(T);
  for (int64_t i = 0; i < T; ++i)
    positions[i] = i;
  iota = constantI64({T}, positions);
  for (Operation &op : eval.getBody().front().without_terminator())
    if (needed.contains(&op) && failed(visit(&op)))
      return failure();
  if (!isRow(logits))
    return eval.emitError("--generate: the logits do not depend on the tokens");
  out = map.lookup(logits);
  return success();
}

LogicalResult DecodeBuilder::build() {
  auto ret = cast<func::ReturnOp>(eval.getBody().front().getTerminator());
  auto ce = ret.getOperand(0).getDefiningOp<CrossEntropyOp>();
  if (!ce)
    return eval.emitError("--generate needs a loss that is a cross-entropy "
                          "over the logits (fused: not under --no-fuse)");
  // Logits flattened to [rows, V] for the loss: the [.., T, V] they were.
  Value logits = ce.getLogits();
  int64_t V = dims(logits).back();
  while (auto r = logits.getDefiningOp<ReshapeOp>())
    if (dims(r.getInput()).back() == V)
      logits = r.getInput();
    else
      break;
  if (failed(findTokens(logits)))
    return failure();
  int64_t B = dims(tokens)[0];

  OpBuilder mb(module.getBodyRegion());
  mb.setInsertionPointToEnd(module.getBody());
  f = mb.create<func::FuncOp>(loc, "decode_step",
                              mb.getFunctionType({}, {}));
  f.addEntryBlock();
  Value out;
  if (failed(buildBody(logits, out))) {
    f.erase();
    return failure();
  }
  // [B, V] FP32 logits of the position.
  if (cast<RankedTensorType>(out.getType()).getNumElements() != B * V ||
      seq[logits] == rankOf(logits) - 1 || !mergeOf(logits).plain()) {
    f.erase();
    return eval.emitError("--generate: logits of ")
           << formatShape(dims(logits)) << " are not [batch, sequence, "
           << "vocabulary]";
  }
  auto logitsType = RankedTensorType::get({B, V}, fb.getF32Type());
  out = fb.create<ReshapeOp>(
      loc, logitsType.clone(getElementTypeOrSelf(out.getType())), out);
  if (out.getType() != logitsType)
    out = fb.create<CastOp>(loc, logitsType, out);
  SmallVector<Value> results = {out};
  SmallVector<std::string> resultSlots = {"logits"};
  results.append(cacheResults);
  resultSlots.append(cacheSlots);
  fb.create<func::ReturnOp>(loc, results);

  Block &entry = f.getBody().front();
  SmallVector<Type> argTypes(entry.getArgumentTypes()), resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());
  f.setFunctionType(mb.getFunctionType(argTypes, resultTypes));
  for (auto [i, slot] : llvm::enumerate(argSlots))
    f.setArgAttr(i, attrs::kSlot, mb.getStringAttr(slot));
  for (auto [i, slot] : llvm::enumerate(resultSlots))
    f.setResultAttr(i, attrs::kSlot, mb.getStringAttr(slot));
  // What the slice cloned but nothing reads (the attentions' old lse).
  eraseDeadOps(entry);
  return success();
}

} // namespace

LogicalResult otc::buildDecodeStep(ModuleOp module, func::FuncOp eval) {
  return DecodeBuilder(module, eval).build();
}
