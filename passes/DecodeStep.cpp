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
#include "passes/DecodeBuilder.h"
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

namespace otc {
namespace decode {

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
  T = shapeOf(tokens)[1];
  return success();
}

FailureOr<Value> DecodeBuilder::atPosition(Operation *user, Value v,
                                           int64_t axis) {
  if (axis < 0 || shapeOf(v)[axis] == 1)
    return v;
  if (!current.plain()) {
    if (Value offsets = rowOffsets(v, axis))
      return offsets;
    refuse(user, "a value of shape ")
        << formatShape(shapeOf(v)) << " meets the sequence merged with other "
        << "axes along axis " << axis;
    return failure();
  }
  if (shapeOf(v)[axis] != T) {
    refuse(user, "a value of shape ")
        << formatShape(shapeOf(v)) << " meets the sequence (" << T
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
  // Offsets r · n added to indices into flattened rows (a top-k's values,
  // gathered at row · n + index, frontend's TopK): the decode step's rows
  // start over at 0, also where the sequence is no merged axis (one batch
  // row), whose plain cut would keep position p's offset p · n.
  bool rowIndexOffsets =
      isa<AddOp>(op) &&
      llvm::any_of(op->getResult(0).getUsers(), [&](Operation *u) {
        auto g = dyn_cast<GatherOp>(u);
        return g && g.getIndices() == op->getResult(0) &&
               rankOf(g.getData()) == 1;
      });
  SmallVector<Value> operands;
  for (Value o : op->getOperands()) {
    if (isRow(o)) {
      operands.push_back(map.lookup(o));
      continue;
    }
    if (rowIndexOffsets)
      if (Value offsets = rowOffsets(map.lookup(o), axis - (R - rankOf(o)))) {
        operands.push_back(offsets);
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
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
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
  ArrayRef<int64_t> shape = shapeOf(c);
  SmallVector<int64_t> strides = stridesOf(shape);
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
  SmallVector<int64_t> outStrides = stridesOf(t.getShape());
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
        shapeOf(o)[axis] < 2 ||
        values.getValues<int64_t>()[stridesOf(shapeOf(o))[axis]] != md.inner)
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

LogicalResult DecodeBuilder::visit(Operation *op) {
  if (llvm::none_of(op->getOperands(), [&](Value v) { return isRow(v); })) {
    fb.clone(*op, map);
    return success();
  }
  if (failed(setCurrentMerge(op)))
    return failure();
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
  if (isa<RopeOp>(op)) {
    // Elementwise but for the pairs of the last dimension, which the
    // tables broadcast along as numpy does (cut to the position with x).
    if (seq[op->getOperand(0)] == rankOf(op->getOperand(0)) - 1)
      return refuse(op, "a rotary embedding over the sequence axis");
    return visitElementwise(op);
  }
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
  return visitAlongRows(op);
}

LogicalResult DecodeBuilder::setCurrentMerge(Operation *op) {
  std::optional<Merge> rowMerge;
  // A gather by row indices takes their merge; one of a row value by other
  // indices, the value's.
  auto gather = dyn_cast<GatherOp>(op);
  bool byRowIndices = gather && isRow(gather.getIndices());
  if (byRowIndices)
    rowMerge = mergeOf(gather.getIndices());
  for (Value o : op->getOperands()) {
    if (!isRow(o) || byRowIndices)
      continue;
    if (rowMerge && !(*rowMerge == mergeOf(o)))
      return refuse(op, "operands whose sequence axes are merged differently");
    rowMerge = mergeOf(o);
  }
  current = *rowMerge;
  return success();
}

LogicalResult DecodeBuilder::visitAlongRows(Operation *op) {
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
    if (shapeOf(sl.getResult())[s] != shapeOf(sl.getInput())[s] ||
        sl.getStarts()[s] != 0 || sl.getStrides()[s] != 1)
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
  int64_t V = shapeOf(logits).back();
  while (auto r = logits.getDefiningOp<ReshapeOp>())
    if (shapeOf(r.getInput()).back() == V)
      logits = r.getInput();
    else
      break;
  if (failed(findTokens(logits)))
    return failure();
  int64_t B = shapeOf(tokens)[0];

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
           << formatShape(shapeOf(logits)) << " are not [batch, sequence, "
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

} // namespace decode
} // namespace otc

LogicalResult otc::buildDecodeStep(ModuleOp module, func::FuncOp eval) {
  return decode::DecodeBuilder(module, eval).build();
}
