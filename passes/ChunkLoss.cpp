//===- ChunkLoss.cpp - the LM head and its loss in chunks of rows ---------===//
//
// After otc-fuse-loss-grad, the logits of a language model's head are
// written by one GEMM, read by otc.cross_entropy_with_grad, which writes
// their gradient over them, and that gradient by the two GEMMs of the
// head's backward: a [rows, vocabulary] buffer (GPT-2 at micro-batch 8:
// 8192 x 50,257) lives from the head to the backward's end. When nothing
// else reads the logits or their gradient, the five ops become one
// otc.linear_cross_entropy_with_grad, which computes the same numbers a
// chunk of rows at a time, so only a chunk's logits exist at once. See
// Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

namespace otc {
#define GEN_PASS_DEF_CHUNKLOSS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The head, the loss and the backward's two products, when they match.
struct Head {
  MatMulOp head;
  CastOp headCast; // the logits rounded to bf16, if so
  AddOp biasAdd;   // the logits plus a bias [V] (after the cast), if so
  Value bias;
  ColumnSumOp biasSum; // the bias's gradient: dlogits summed over the rows
  bool byHidden = false; // w stored [C, V]: logits = h w
  CrossEntropyWithGradOp loss;
  MatMulOp dh, dw;
  /// The same loss computed from the same logits elsewhere.
  SmallVector<CrossEntropyOp> again;
};

/// The ops of `loss`'s head when its logits and their gradient are read
/// by nothing else, with f32 products of f32 or bf16 operands.
std::optional<Head> match(CrossEntropyWithGradOp loss) {
  Head m;
  m.loss = loss;
  Value logits = loss.getLogits();
  // Besides the loss and its gradient, only the same loss computed again
  // (the recomputed head's forward under --remat=full): its value is ours.
  for (Operation *user : logits.getUsers()) {
    if (user == loss.getOperation())
      continue;
    auto again = dyn_cast<CrossEntropyOp>(user);
    if (!again || !again.getLse().use_empty() ||
        again.getLabels() != loss.getLabels() ||
        again.getReduction() != loss.getReduction() ||
        again.getIgnoreIndex() != loss.getIgnoreIndex() ||
        again->getBlock() != loss->getBlock())
      return std::nullopt;
    m.again.push_back(again);
  }
  Value product = logits;
  int64_t classes = shapeOf(logits).back();
  if (auto add = logits.getDefiningOp<AddOp>()) {
    // logits = product + bias, the bias one value per class broadcast over
    // the rows (BERT's decoder bias, BART's final_logits_bias).
    for (unsigned i : {0u, 1u}) {
      Value p = add->getOperand(i), bias = add->getOperand(1 - i);
      ArrayRef<int64_t> bs = shapeOf(bias);
      if (bs.empty() || bs.back() != classes || numElements(bs) != classes ||
          bs.size() > shapeOf(logits).size() || shapeOf(p) != shapeOf(logits) ||
          getElementTypeOrSelf(bias.getType()) !=
              getElementTypeOrSelf(logits.getType()))
        continue;
      m.biasAdd = add;
      m.bias = bias;
      product = p;
      break;
    }
    if (!m.biasAdd || !product.hasOneUse())
      return std::nullopt;
  }
  if ((m.headCast = product.getDefiningOp<CastOp>())) {
    product = m.headCast.getInput();
    if (!product.hasOneUse())
      return std::nullopt;
  }
  m.head = product.getDefiningOp<MatMulOp>();
  if (!m.head || m.head.getTransposeLhs())
    return std::nullopt;
  // w [V, C] read transposed (a Linear's weight), or [C, V] as it is (an
  // export's transposed copy of it).
  m.byHidden = !m.head.getTransposeRhs();
  Value h = m.head.getLhs(), w = m.head.getRhs();
  auto ht = cast<RankedTensorType>(h.getType());
  auto wt = cast<RankedTensorType>(w.getType());
  auto zt = cast<RankedTensorType>(logits.getType());
  Type e = ht.getElementType();
  if (wt.getRank() != 2 || ht.getRank() < 2 || wt.getElementType() != e ||
      zt.getElementType() != e || !(e.isF32() || e.isBF16()) ||
      (m.headCast && !getElementTypeOrSelf(product.getType()).isF32()))
    return std::nullopt;
  int64_t rows = numElements(ht.getShape().drop_back());
  int64_t hidden = ht.getShape().back();
  if (wt.getShape() != (m.byHidden ? ArrayRef<int64_t>{hidden, classes}
                                   : ArrayRef<int64_t>{classes, hidden}))
    return std::nullopt;
  // dlogits: read by dh = dlogits w (wᵀ for w [C, V]) and, through a
  // reshape to [rows, V], by dw = dlogitsᵀ h (hᵀ dlogits for w [C, V]).
  for (Operation *user : loss.getDlogits().getUsers()) {
    if (auto sum = dyn_cast<ColumnSumOp>(user)) {
      // A trained bias's gradient.
      if (!m.bias || m.biasSum || sum.getAcc() ||
          shapeOf(sum.getResult()) != ArrayRef<int64_t>{classes} ||
          !getElementTypeOrSelf(sum.getResult().getType()).isF32())
        return std::nullopt;
      m.biasSum = sum;
      continue;
    }
    auto mm = dyn_cast<MatMulOp>(user);
    if (mm && !mm.getTransposeLhs()) {
      if (m.dh || mm.getLhs() != loss.getDlogits() || mm.getRhs() != w ||
          bool(mm.getTransposeRhs()) != m.byHidden)
        return std::nullopt;
      m.dh = mm;
      continue;
    }
    Value dz = loss.getDlogits();
    if (auto r = dyn_cast<ReshapeOp>(user)) {
      if (!r.getResult().hasOneUse())
        return std::nullopt;
      dz = r.getResult();
      mm = dyn_cast<MatMulOp>(*dz.getUsers().begin());
    }
    // dlogits (as rows) on its side of dw's product, h's rows on the other.
    if (!mm || m.dw || !mm.getTransposeLhs() || mm.getTransposeRhs())
      return std::nullopt;
    Value dzSide = m.byHidden ? mm.getRhs() : mm.getLhs();
    Value hSide = m.byHidden ? mm.getLhs() : mm.getRhs();
    if (dzSide != dz || throughReshapes(hSide) != throughReshapes(h) ||
        shapeOf(hSide) != ArrayRef<int64_t>{rows, hidden})
      return std::nullopt;
    m.dw = mm;
  }
  if (!m.dh || !m.dw || shapeOf(m.dh.getResult()) != ht.getShape() ||
      !getElementTypeOrSelf(m.dh.getResult().getType()).isF32() ||
      !getElementTypeOrSelf(m.dw.getResult().getType()).isF32())
    return std::nullopt;
  return m;
}

/// The rows of a chunk: the fewest chunks of at most `budget` bytes of
/// logits, balanced, rounded up to a multiple of 64 rows.
int64_t autoChunkRows(int64_t rows, int64_t classes, int64_t elementBytes,
                      int64_t budget) {
  int64_t bytes = rows * classes * elementBytes;
  int64_t chunks = std::max<int64_t>(1, (bytes + budget - 1) / budget);
  int64_t n = (rows + chunks - 1) / chunks;
  n = (n + 63) / 64 * 64;
  return std::clamp<int64_t>(n, 1, std::max<int64_t>(rows, 1));
}

/// The rows of the chunks considered by price: the fewest balanced chunks of
/// 1 to kMaxChunks, rounded up to 64 rows, each size once, largest first.
constexpr int64_t kMaxChunks = 64;
SmallVector<int64_t> chunkCandidates(int64_t rows) {
  SmallVector<int64_t> sizes;
  for (int64_t k = 1; k <= kMaxChunks; ++k) {
    int64_t n = (rows + k - 1) / k;
    n = std::min<int64_t>(std::max<int64_t>(rows, 1), (n + 63) / 64 * 64);
    if (sizes.empty() || n < sizes.back())
      sizes.push_back(n);
  }
  return sizes;
}

struct ChunkLossPass : public otc::impl::ChunkLossBase<ChunkLossPass> {
  using ChunkLossBase::ChunkLossBase;
  ChunkLossPass(const ChunkLossOptions &options, LossChunkPricer price)
      : ChunkLossBase(options), price(std::move(price)) {}

  LossChunkPricer price;

  /// Sets `op` to chunks of `rows` rows.
  static void setChunk(LinearCrossEntropyWithGradOp op, int64_t rows) {
    op.setChunkRows(rows);
    auto t = cast<RankedTensorType>(op.getChunk().getType());
    op.getChunk().setType(
        RankedTensorType::get({rows, t.getDimSize(1)}, t.getElementType()));
  }

  /// Of the balanced chunkings, one chunk (the whole head) included, the
  /// smallest chunk whose predicted call is within `slackPercent` of the
  /// fastest's (the step-time model's price). Each chunk after the first
  /// reads and writes dw once more, which the model prices
  /// (gemmEpilogueScale); a small chunk's memory is bought with that time
  /// only as far as the slack allows.
  void chooseByPrice(LinearCrossEntropyWithGradOp op, int64_t rows) {
    SmallVector<int64_t> sizes = chunkCandidates(rows);
    SmallVector<double> seconds;
    for (int64_t n : sizes) {
      setChunk(op, n);
      seconds.push_back(price(op));
    }
    double best = *std::min_element(seconds.begin(), seconds.end());
    int64_t pick = sizes.front();
    for (size_t i = 0; i < sizes.size(); ++i)
      if (seconds[i] <= best * (1.0 + slackPercent / 100.0))
        pick = std::min(pick, sizes[i]);
    setChunk(op, pick);
  }

  void runOnOperation() override {
    if (chunkRows < 0 || chunkBytes < 1) {
      getOperation().emitError("otc-chunk-loss: chunk-rows must be at least "
                               "0 and chunk-mib at least 1");
      return signalPassFailure();
    }
    SmallVector<CrossEntropyWithGradOp> losses;
    getOperation().walk(
        [&](CrossEntropyWithGradOp op) { losses.push_back(op); });
    for (CrossEntropyWithGradOp loss : losses) {
      std::optional<Head> m = match(loss);
      if (!m)
        continue;
      Value h = m->head.getLhs(), w = m->head.getRhs();
      auto zt = cast<RankedTensorType>(loss.getLogits().getType());
      int64_t rows = numElements(shapeOf(loss.getLabels()));
      int64_t classes = zt.getShape().back();
      bool byPrice = chunkRows == 0 && price;
      int64_t chunk =
          chunkRows > 0 ? std::min<int64_t>(chunkRows, std::max<int64_t>(rows, 1))
          : byPrice     ? std::max<int64_t>(rows, 1)
                        : autoChunkRows(rows, classes,
                                        storageBytes(zt.getElementType()),
                                        int64_t(chunkBytes) << 20);
      // The fused op takes the place of the first of the losses, so that
      // each of their users comes after it; its operands must exist there
      // (a constant seed moves up).
      Operation *at = loss;
      for (CrossEntropyOp again : m->again)
        if (again->isBeforeInBlock(at))
          at = again;
      bool available = true;
      for (Value v :
           {Value(loss.getGrad()), h, w, Value(loss.getLabels()), m->bias}) {
        if (!v)
          continue;
        Operation *def = v.getDefiningOp();
        if (!def || def->getBlock() != at->getBlock() ||
            def->isBeforeInBlock(at))
          continue;
        if (matchPattern(v, m_Constant()) && def->getNumOperands() == 0)
          def->moveBefore(at);
        else
          available = false;
      }
      if (!available)
        continue;
      // A dw rounded to bf16 right away is the call's result in bf16: each
      // chunk's sum is rounded as it is added, and no f32 [V, C] buffer
      // exists (Llama 3's: 1 GiB).
      Value dw = m->dw.getResult();
      CastOp dwCast;
      Type t = zt.getElementType();
      if (dw.hasOneUse() && t.isBF16())
        if ((dwCast = dyn_cast<CastOp>(*dw.getUsers().begin())) &&
            getElementTypeOrSelf(dwCast.getResult().getType()) != t)
          dwCast = nullptr;
      Type dwType = dwCast ? dwCast.getResult().getType() : dw.getType();
      OpBuilder b(at);
      // The bias as [V] (BART's [1, V] buffer reshaped).
      Value bias = m->bias;
      ReshapeOp biasRows;
      if (bias && shapeOf(bias).size() != 1) {
        biasRows = b.create<ReshapeOp>(
            loss.getLoc(),
            RankedTensorType::get({classes}, zt.getElementType()), bias);
        bias = biasRows.getResult();
      }
      Type dbiasType = m->biasSum ? m->biasSum.getResult().getType() : Type();
      auto fused = b.create<LinearCrossEntropyWithGradOp>(
          loss.getLoc(), m->dh.getResult().getType(), dwType,
          loss.getLoss().getType(), loss.getRowLoss().getType(),
          RankedTensorType::get({chunk, classes}, zt.getElementType()),
          dbiasType, loss.getGrad(), h, w, loss.getLabels(),
          /*dw_acc=*/Value(), bias, b.getI64IntegerAttr(chunk),
          m->byHidden ? b.getUnitAttr() : UnitAttr(), loss.getReductionAttr(),
          loss.getIgnoreIndexAttr());
      if (byPrice)
        chooseByPrice(fused, std::max<int64_t>(rows, 1));
      // Where the chunk is chosen, only where it pays: the logits saved must
      // outweigh the [V, C] dw the call writes, which the head's own dw
      // product may not need (it adds into the gradient's slot).
      if (chunkRows == 0) {
        int64_t element = storageBytes(zt.getElementType());
        int64_t saved = (rows - fused.getChunkRows()) * classes * element;
        auto dwt = cast<RankedTensorType>(fused.getDw().getType());
        int64_t dwBytes =
            dwt.getNumElements() * storageBytes(dwt.getElementType());
        if (saved <= dwBytes) {
          fused.erase();
          if (biasRows)
            biasRows.erase();
          continue;
        }
      }
      for (CrossEntropyOp again : m->again) {
        again.getLoss().replaceAllUsesWith(fused.getLoss());
        again.erase();
      }
      m->dh.getResult().replaceAllUsesWith(fused.getDh());
      if (dwCast) {
        dwCast.getResult().replaceAllUsesWith(fused.getDw());
        dwCast.erase();
      } else {
        m->dw.getResult().replaceAllUsesWith(fused.getDw());
      }
      loss.getLoss().replaceAllUsesWith(fused.getLoss());
      loss.getRowLoss().replaceAllUsesWith(fused.getRowLoss());
      auto dwReshape = (m->byHidden ? m->dw.getRhs() : m->dw.getLhs())
                           .getDefiningOp<ReshapeOp>();
      Value hRows = m->byHidden ? m->dw.getLhs() : m->dw.getRhs();
      m->dw.erase();
      if (dwReshape)
        dwReshape->erase();
      // h seen as rows, if nothing else reads that view.
      while (auto r = hRows.getDefiningOp<ReshapeOp>()) {
        if (!r.getResult().use_empty())
          break;
        hRows = r.getInput();
        r.erase();
      }
      m->dh.erase();
      if (m->biasSum) {
        m->biasSum.getResult().replaceAllUsesWith(fused.getDbias());
        m->biasSum.erase();
      }
      loss.erase();
      if (m->biasAdd)
        m->biasAdd.erase();
      if (m->headCast)
        m->headCast.erase();
      m->head.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> otc::createChunkLoss(const ChunkLossOptions &options,
                                           LossChunkPricer price) {
  return std::make_unique<ChunkLossPass>(options, std::move(price));
}
