//===- SparsePrediction.cpp - the LM head at chosen positions alone -------===//
//
// A masked LM counts its loss at the positions it masked (BERT's 15%) and
// ignores the rest, yet its head computes logits at every position: with
// otc-compile --sparse-prediction=K the head, and every op before it that
// only the loss reads and that treats each position apart (the last
// layer's MLP, its attention's output projection), runs on K positions per
// sequence, which the runtime chooses from the targets (the counted ones,
// padded with ignored ones). See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace otc {
#define GEN_PASS_DEF_SPARSEPREDICTION
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The rows of the loss: B sequences of T positions, K of them kept.
struct Rows {
  int64_t b = 0, t = 0, k = 0;

  /// How many leading dimensions of `shape` are the rows: 2 for [B, T,
  /// ...], 1 for [B*T, ...], 0 for neither.
  unsigned lead(ArrayRef<int64_t> shape) const {
    if (shape.size() >= 2 && shape[0] == b && shape[1] == t)
      return 2;
    if (!shape.empty() && shape[0] == b * t)
      return 1;
    return 0;
  }
  unsigned lead(Value v) const { return lead(shapeOf(v)); }

  /// `v`'s type with its rows cut to the kept ones: [B, K, ...] or
  /// [B*K, ...].
  RankedTensorType kept(Value v) const {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (lead(shape) == 2)
      shape[1] = k;
    else
      shape[0] = b * k;
    return RankedTensorType::get(shape, type.getElementType());
  }
};

/// Whether `op` computes each row of its results from the same row of its
/// row operands alone (the other operands read whole, as a weight): an
/// elementwise op, a product by a matrix, a normalization, softmax or
/// reduction within the row, a reshape, slice or transpose that keeps the
/// rows. `rowOperands` gets the operands that are rows.
bool rowWise(Operation *op, const Rows &rows,
             SmallVectorImpl<Value> &rowOperands) {
  if (op->getNumResults() == 0 || op->getNumRegions() != 0)
    return false;
  for (Value r : op->getResults())
    if (!rows.lead(r))
      return false;
  Value out = op->getResult(0);
  const unsigned lead = rows.lead(out);
  const size_t rank = shapeOf(out).size();
  // An operand every row reads whole: numpy-broadcast to `out` with ones
  // (or nothing) at the rows' places.
  auto whole = [&](Value o) {
    ArrayRef<int64_t> s = shapeOf(o);
    for (size_t i = 0; i < s.size(); ++i)
      if (i + rank < lead + s.size() && s[i] != 1)
        return false;
    return true;
  };
  // An elementwise operand: the rows, shaped as `out`, or whole.
  auto rowsOrWhole = [&](Value o) {
    if (shapeOf(o).size() == rank && rows.lead(o) == lead) {
      rowOperands.push_back(o);
      return true;
    }
    return whole(o);
  };
  // The first operand is the rows, the axes the op works along are past
  // them, and the other operands are read whole.
  auto firstRowsPast = [&](int64_t axis) {
    if (rows.lead(op->getOperand(0)) != lead || axis < lead ||
        !llvm::all_of(op->getOperands().drop_front(), whole))
      return false;
    rowOperands.push_back(op->getOperand(0));
    return true;
  };
  if (op->hasTrait<OpTrait::OtcElementwise>())
    return llvm::all_of(op->getOperands(), rowsOrWhole);
  if (auto m = dyn_cast<MatMulOp>(op)) {
    // [rows..., M?, K] x [K, N]: each row of the product is its row's
    // (a [B, T] left operand would be contracted over the positions).
    if (m.getTransposeLhs() || shapeOf(m.getRhs()).size() != 2 ||
        rows.lead(m.getLhs()) != lead || shapeOf(m.getLhs()).size() != rank ||
        rank < lead + 1)
      return false;
    rowOperands.push_back(m.getLhs());
    return true;
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    // Row-major: row r is the same run of elements before and after.
    if (!rows.lead(r.getInput()))
      return false;
    rowOperands.push_back(r.getInput());
    return true;
  }
  if (auto s = dyn_cast<SliceOp>(op)) {
    for (unsigned a = 0; a < lead; ++a)
      if (s.getStarts()[a] != 0 || s.getStrides()[a] != 1 ||
          shapeOf(s.getInput())[a] != shapeOf(out)[a])
        return false;
    return firstRowsPast(lead);
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    for (unsigned a = 0; a < lead; ++a)
      if (t.getPermutation()[a] != static_cast<int64_t>(a))
        return false;
    return firstRowsPast(lead);
  }
  if (isa<LayerNormOp, RmsNormOp, SoftmaxOp, LogSoftmaxOp>(op))
    return firstRowsPast(op->getAttrOfType<IntegerAttr>("axis").getInt());
  if (isa<ReduceSumOp, ReduceMaxOp>(op)) {
    ArrayRef<int64_t> axes =
        op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
    return !axes.empty() && firstRowsPast(axes.front());
  }
  return false;
}

struct SparsePredictionPass
    : public otc::impl::SparsePredictionBase<SparsePredictionPass> {
  using SparsePredictionBase::SparsePredictionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("otc-sparse-prediction: no @forward function");
      return signalPassFailure();
    }
    if (failed(run(module, forward)))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module, func::FuncOp forward);
};

/// The loss whose rows are cut: the one cross-entropy of the forward graph,
/// a mean over the labels that are not its ignore index.
FailureOr<Operation *> findLoss(func::FuncOp forward,
                                const std::string &positions) {
  SmallVector<Operation *> losses;
  forward.walk([&](Operation *op) {
    if (isa<CrossEntropyOp, SoftmaxCrossEntropyOp>(op))
      losses.push_back(op);
  });
  auto refuse = [&](Operation *at, const Twine &why) {
    return (at ? at->emitError() : forward.emitError())
           << "--sparse-prediction=" << positions
           << " needs the loss to be one cross-entropy, the mean over the "
              "targets that are not its ignore index (a masked LM's: "
              "--loss=cross_entropy:LOGITS:TARGETS); "
           << why;
  };
  if (losses.size() != 1)
    return refuse(nullptr, "the graph has " + Twine(losses.size()));
  Operation *loss = losses.front();
  auto ignore = loss->getAttrOfType<IntegerAttr>("ignore_index");
  auto reduction = loss->getAttrOfType<StringAttr>("reduction");
  if (!ignore)
    return refuse(loss, "it ignores no index");
  if (reduction && reduction.getValue() != "mean")
    return refuse(loss, "its reduction is '" + reduction.getValue() + "'");
  if (loss->getNumResults() > 1 && !loss->getResult(1).use_empty())
    return refuse(loss, "its log-sum-exp is read");
  return loss;
}

/// The rows of the loss's targets, \p positions of each sequence kept (or
/// auto's choice); an error at the loss where they do not fit.
FailureOr<Rows> measureRows(ModuleOp module, Operation *loss,
                            BlockArgument targets, int64_t positions) {
  FailureOr<ConfigAttr> config = requireConfig(module, "otc-sparse-prediction");
  if (failed(config))
    return failure();
  Rows rows;
  rows.b = config->getMicroBatch();
  int64_t counted = cast<ShapedType>(targets.getType()).getNumElements();
  rows.t = counted / rows.b;
  // auto: BERT's share of the positions, with room for four standard
  // deviations of its binomial count (a window over it one in 30,000).
  const double p = 0.15, mean = static_cast<double>(rows.t) * p;
  rows.k = positions == kAutoPredictPositions
               ? std::min<int64_t>(
                     rows.t - 1, static_cast<int64_t>(std::ceil(
                                     mean + 4.0 * std::sqrt(mean * (1.0 - p)))))
               : positions;
  if (rows.t * rows.b != counted || rows.t < 2 ||
      (shapeOf(targets).size() >= 2 && shapeOf(targets).front() != rows.b))
    return loss->emitError("--sparse-prediction: the targets ")
           << targets.getType() << " are not [micro-batch " << rows.b
           << ", positions]";
  if (rows.k < 1 || rows.k >= rows.t)
    return loss->emitError("--sparse-prediction=")
           << rows.k << ": the positions kept per sequence must be from 1 "
           << "to " << rows.t - 1 << " (the sequence has " << rows.t << ")";
  Value logits = loss->getOperand(0), labels = loss->getOperand(1);
  if (!rows.lead(logits) || rows.lead(labels) != rows.lead(logits))
    return loss->emitError("--sparse-prediction: the logits ")
           << logits.getType() << " are not one row per position";
  return rows;
}

/// "prediction_rows", or with a number where an input has that name.
std::string freeInputName(func::FuncOp forward) {
  auto taken = [&](StringRef n) {
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (auto a = forward.getArgAttrOfType<StringAttr>(i, attrs::kInput);
          a && a.getValue() == n)
        return true;
    return false;
  };
  std::string name = "prediction_rows";
  for (int i = 1; taken(name); ++i)
    name = "prediction_rows_" + std::to_string(i);
  return name;
}

/// The loss, the ops cut to the kept rows before it, and the values they
/// read (`candidates`: the cut's own, and those gathered).
struct Cut {
  func::FuncOp forward;
  Operation *loss;
  Rows rows;
  llvm::SetVector<Operation *> ops;
  llvm::SetVector<Value> candidates;

  /// Walking back from the loss: an op joins the cut when it is row-wise
  /// and every reader of its results has joined (or is the loss, or the
  /// return); the rows it reads join the candidates.
  void grow();
  /// Maps each candidate the cut does not make to a gather of its kept
  /// rows by \p rowIds, the [B, K] input.
  void gather(OpBuilder &b, Value rowIds, IRMapping &map);
  /// The cut's ops and the loss again on the kept rows; the old ones go.
  void recompute(OpBuilder &b, IRMapping &map);
};

void Cut::grow() {
  Block &body = forward.getBody().front();
  Operation *ret = body.getTerminator();
  candidates.insert(loss->getOperand(0));
  candidates.insert(loss->getOperand(1));
  auto readByCut = [&](Value v) {
    return llvm::all_of(v.getUsers(), [&](Operation *u) {
      return u == loss || u == ret || ops.contains(u);
    });
  };
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (&op == loss || llvm::none_of(op.getResults(), [&](Value r) {
          return candidates.contains(r);
        }))
      continue;
    SmallVector<Value> rowOperands;
    if (!rowWise(&op, rows, rowOperands) ||
        !llvm::all_of(op.getResults(), readByCut))
      continue;
    ops.insert(&op);
    candidates.insert(rowOperands.begin(), rowOperands.end());
  }
}

void Cut::gather(OpBuilder &b, Value rowIds, IRMapping &map) {
  Block &body = forward.getBody().front();
  Location loc =
      NameLoc::get(b.getStringAttr("sparse_prediction"), forward.getLoc());
  Value flatIds; // [B*K], for the [B*T, ...] values
  for (Value v : candidates) {
    Operation *def = v.getDefiningOp();
    if (def && (ops.contains(def) || def == loss))
      continue;
    if (def)
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&body);
    auto type = cast<RankedTensorType>(v.getType());
    Value data = v, ids = rowIds;
    if (rows.lead(v) == 2) {
      SmallVector<int64_t> flat = {rows.b * rows.t};
      llvm::append_range(flat, type.getShape().drop_front(2));
      data = b.create<ReshapeOp>(
          loc, RankedTensorType::get(flat, type.getElementType()), v);
    } else {
      if (!flatIds) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&body);
        flatIds = b.create<ReshapeOp>(
            loc, RankedTensorType::get({rows.b * rows.k}, b.getI64Type()),
            rowIds);
      }
      ids = flatIds;
    }
    map.map(v, b.create<GatherOp>(loc, rows.kept(v), data, ids,
                                  b.getI64IntegerAttr(0))
                   .getResult());
  }
}

void Cut::recompute(OpBuilder &b, IRMapping &map) {
  SmallVector<Operation *> old(ops.rbegin(), ops.rend());
  old.push_back(loss);
  for (Operation *op : old) {
    b.setInsertionPoint(op);
    Operation *copy = b.clone(*op, map);
    for (auto [r, c] : llvm::zip(op->getResults(), copy->getResults()))
      if (rows.lead(r))
        c.setType(rows.kept(r));
  }
  loss->getResult(0).replaceAllUsesWith(map.lookup(loss->getResult(0)));
  // An output the cut computes is the kept rows' now (Hugging Face's
  // sparse prediction returns those logits too).
  Operation *ret = forward.getBody().front().getTerminator();
  for (OpOperand &o : ret->getOpOperands())
    if (Operation *def = o.get().getDefiningOp();
        def && (def == loss || ops.contains(def)))
      o.set(map.lookup(o.get()));
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }
  forward.setFunctionType(
      b.getFunctionType(forward.getArgumentTypes(), ret->getOperandTypes()));
}

LogicalResult SparsePredictionPass::run(ModuleOp module, func::FuncOp forward) {
  FailureOr<Operation *> loss = findLoss(
      forward, positions == kAutoPredictPositions ? std::string("auto")
                                                  : std::to_string(positions));
  if (failed(loss))
    return failure();
  // The graph input the labels are, through reshapes.
  auto targets =
      dyn_cast<BlockArgument>(throughReshapes((*loss)->getOperand(1)));
  auto targetsName = targets ? forward.getArgAttrOfType<StringAttr>(
                                   targets.getArgNumber(), attrs::kInput)
                             : StringAttr();
  if (!targetsName)
    return (*loss)->emitError("--sparse-prediction: the loss's targets are "
                              "computed, not a graph input the runtime can "
                              "choose the positions from");
  FailureOr<Rows> rows = measureRows(module, *loss, targets, positions);
  if (failed(rows))
    return failure();
  auto ignore = (*loss)->getAttrOfType<IntegerAttr>("ignore_index");
  const int64_t classes = shapeOf((*loss)->getOperand(0)).back();
  Cut cut{forward, *loss, *rows, {}, {}};
  cut.grow();

  // The positions input: [B, K] rows of the micro-batch's B*T.
  OpBuilder b(module.getContext());
  std::string name = freeInputName(forward);
  unsigned at = forward.getNumArguments();
  forward.insertArgument(
      at, RankedTensorType::get({rows->b, rows->k}, b.getI64Type()),
      b.getDictionaryAttr(
          {b.getNamedAttr(attrs::kInput, b.getStringAttr(name)),
           b.getNamedAttr(attrs::kPredictionRows, b.getUnitAttr())}),
      forward.getLoc());
  IRMapping map;
  cut.gather(b, forward.getArgument(at), map);
  cut.recompute(b, map);

  // What the runtime and the index ranges need: the positions input, the
  // targets it is chosen from, their classes and ignore index.
  module->setAttr(
      attrs::kPredictionRows,
      b.getDictionaryAttr(
          {b.getNamedAttr("input", b.getStringAttr(name)),
           b.getNamedAttr("targets", targetsName),
           b.getNamedAttr("positions", b.getI64IntegerAttr(rows->k)),
           b.getNamedAttr("of", b.getI64IntegerAttr(rows->t)),
           b.getNamedAttr("ops", b.getI64IntegerAttr(cut.ops.size())),
           b.getNamedAttr("classes", b.getI64IntegerAttr(classes)),
           b.getNamedAttr("ignore_index", ignore)}));
  return success();
}

} // namespace
