//===- FuseEpilogues.cpp - calls accumulate into their target -------------===//
//
// A weight gradient is a GEMM into a temporary that one kernel then adds to
// the gradient slot. The GEMM libraries add into their output themselves
// (beta = 1), so the GEMM writes the slot with `accumulate` and the
// temporary and the add kernel go away. Likewise a layer norm gradient's dx
// that one kernel adds to a residual gradient becomes the library call's
// residual operand. The LM head's chunked call adds its weight gradient into
// the slot the same way (dw_acc), and so do an embedding's gradient
// (otc.gather_grad's acc), a norm's dgamma and dbeta, a bias's gradient
// (otc.column_sum's acc) and the experts' weight gradient
// (otc.expert_matmul_wgrad's acc). See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace otc {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The other input of `k` when `k` is one otc.add of `t` and that input
/// (either order) into one output; null otherwise.
static Value addendOf(otck::KernelOp k, Value t) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()) ||
      k.getOutputs().size() != 1)
    return nullptr;
  auto add = dyn_cast<AddOp>(body.front());
  if (!add || add.getResult() != body.getTerminator()->getOperand(0))
    return nullptr;
  auto inputOf = [&](Value v) -> Value {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body ? k.getInputs()[arg.getArgNumber()]
                                          : Value();
  };
  Value a = inputOf(add.getLhs()), b = inputOf(add.getRhs());
  return a == t ? b : b == t ? a : Value();
}

/// Whether `v` is a buffer's own bytes, seen through no view.
static bool plainBuffer(Value v) {
  return otck::storageOf(v) == v &&
         llvm::none_of(v.getUsers(),
                       [](Operation *u) { return isa<otck::ViewOp>(u); });
}

struct FuseEpiloguesPass
    : public otc::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  using FuseEpiloguesBase::FuseEpiloguesBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      SmallVector<otck::GemmOp> gemms(f.getBody().getOps<otck::GemmOp>());
      for (otck::GemmOp g : gemms) {
        if (!fuseBias(g))
          fuseAccumulation(g);
        if (!fuseGelu(g) && !fuseGeluGrad(g))
          fuseAddend(g);
      }
      // Only add kernels are erased below, never these.
      SmallVector<otck::KernelOp> norms;
      for (otck::KernelOp k : f.getBody().getOps<otck::KernelOp>())
        if (isa_and_nonnull<LayerNormGradOp, RmsNormGradOp>(bodyOp(k)))
          norms.push_back(k);
      for (otck::KernelOp k : norms) {
        if (auto grad = dyn_cast<LayerNormGradOp>(bodyOp(k)))
          fuseNormResidual(k, grad);
        else if (auto grad = dyn_cast<RmsNormGradOp>(bodyOp(k)))
          fuseNormResidual(k, grad);
      }
      // Library calls whose results one kernel only adds into a gradient
      // slot add into the slot themselves.
      SmallVector<otck::KernelOp> calls;
      for (otck::KernelOp k : f.getBody().getOps<otck::KernelOp>())
        if (isa_and_nonnull<LinearCrossEntropyWithGradOp, GatherGradOp,
                            LayerNormGradOp, RmsNormGradOp, ColumnSumOp,
                            ExpertMatmulWgradOp>(bodyOp(k)))
          calls.push_back(k);
      for (otck::KernelOp k : calls)
        fuseSlotAccumulation(k);
    }
  }

  /// The one kernel after `g` that reads its temporary result `t`, if `t`
  /// has no other reader.
  static otck::KernelOp soleReader(Operation *g, Value t) {
    otck::KernelOp reader;
    for (Operation *user : t.getUsers()) {
      if (user == g)
        continue;
      auto k = dyn_cast<otck::KernelOp>(user);
      if (!k || reader || k->getBlock() != g->getBlock() ||
          !g->isBeforeInBlock(k))
        return nullptr;
      reader = k;
    }
    return reader;
  }

  /// The one kernel after `producer` (in its block) that reads `t`'s bytes,
  /// seen through any view, when nothing else but `producer` uses them.
  static otck::KernelOp soleByteReader(Operation *producer, Value t) {
    otck::KernelOp reader;
    bool other = false;
    otck::forEachByteUser(t, [&](Operation *u) {
      if (u == producer)
        return;
      auto k = dyn_cast<otck::KernelOp>(u);
      other |= !k || (reader && reader != k) ||
               k->getBlock() != producer->getBlock() ||
               !producer->isBeforeInBlock(k);
      reader = k;
    });
    return other ? otck::KernelOp() : reader;
  }

  /// The other input of `k` when `k` is one otc.add, without broadcast, of
  /// `t`'s bytes and another buffer's (either order); null otherwise.
  static Value addedTo(otck::KernelOp k, Value t) {
    auto add = singleOp<AddOp>(k);
    if (!add || add.getLhs().getType() != add.getType() ||
        add.getRhs().getType() != add.getType())
      return nullptr;
    Value lhs = inputOf(k, add.getLhs()), rhs = inputOf(k, add.getRhs());
    if (!lhs || !rhs)
      return nullptr;
    Value other = otck::storageOf(lhs) == t ? rhs : lhs;
    if (otck::storageOf(other == lhs ? rhs : lhs) != t ||
        otck::storageOf(other) == t)
      return nullptr;
    return other;
  }

  /// y = product + bias ([N], either order) becomes the GEMM's bias
  /// epilogue writing y. Only GEMMs whose result has the operands' element
  /// type (the library has no bias form for a BF16 product into FP32).
  bool fuseBias(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    auto tt = cast<MemRefType>(t.getType());
    if (!tmp || tmp.getSlot() || g.getAccumulate() || g.getBias() ||
        tt.getElementType() != g.getLhs().getType().getElementType() ||
        tt.getRank() < 2)
      return false;
    otck::KernelOp k = soleReader(g, t);
    Value bias = k ? addendOf(k, t) : Value();
    if (!bias || bias == t || k.getOutputs()[0].getType() != t.getType())
      return false;
    Value out = k.getOutputs()[0];
    auto bt = cast<MemRefType>(bias.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != tt.getShape().back() ||
        bt.getElementType() != tt.getElementType())
      return false;
    // y is a buffer's own bytes (views of it may follow: the checks below
    // see through them).
    if (otck::storageOf(out) != out)
      return false;
    // The GEMM writes y where it stands: nothing in between may touch y or
    // write the bias; y is none of the GEMM's operands.
    for (Value v : {g.getLhs(), g.getRhs()})
      if (otck::storageOf(v) == out)
        return false;
    // Only the readers and writers of y and of the bias's bytes can be in
    // the way: those between the GEMM and the add.
    Value biasStorage = otck::storageOf(bias);
    Block *block = g->getBlock();
    auto between = [&](Operation *u) {
      Operation *op = block->findAncestorOpInBlock(*u);
      return op && g->isBeforeInBlock(op) && op->isBeforeInBlock(k);
    };
    bool blocked = false;
    otck::forEachByteUser(out, [&](Operation *u) {
      blocked |= between(u);
    });
    otck::forEachByteUser(biasStorage, [&](Operation *u) {
      Operation *op = block->findAncestorOpInBlock(*u);
      if (blocked || !between(u))
        return;
      for (Value o : otck::writtenBy(op))
        blocked |= otck::storageOf(o) == biasStorage;
    });
    if (blocked)
      return false;
    // A buffer declared after the GEMM (next to the add) moves up to it: a
    // copy before the GEMM replaces it (moving an op would renumber the
    // whole block for the next isBeforeInBlock; inserting one does not).
    for (Value v : {out, bias})
      if (Operation *def = v.getDefiningOp(); def && g->isBeforeInBlock(def)) {
        OpBuilder b(g);
        Operation *copy = b.clone(*def);
        def->replaceAllUsesWith(copy);
        def->erase();
        if (v == out)
          out = copy->getResult(0);
        else
          bias = copy->getResult(0);
      }
    g.getOutMutable().assign(out);
    g.getBiasMutable().assign(bias);
    k.erase();
    if (t.use_empty())
      tmp.erase();
    return true;
  }

  void fuseAccumulation(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot() || g.getAccumulate())
      return;
    // acc = acc + t, written over acc, by the temporary's only reader.
    otck::KernelOp add = soleReader(g, t);
    Value acc = add ? addendOf(add, t) : Value();
    if (!acc || add.getOutputs()[0] != acc || acc.getType() != t.getType() ||
        !plainBuffer(acc))
      return;
    // The GEMM reads acc's value where it stands: nothing in between may
    // read or write it; nor may the GEMM's operands be acc.
    if (otck::storageOf(g.getLhs()) == acc ||
        otck::storageOf(g.getRhs()) == acc)
      return;
    if (!untouchedBetween(g, add, acc))
      return;
    g.getOutMutable().assign(acc);
    g.setAccumulate(true);
    add.erase();
    if (t.use_empty())
      tmp.erase();
  }

  /// Whether nothing between `from` and `to` (in their block) reads or
  /// writes `acc`.
  static bool untouchedBetween(Operation *from, Operation *to, Value acc) {
    Block *block = from->getBlock();
    for (Operation *u : acc.getUsers())
      if (Operation *op = block->findAncestorOpInBlock(*u);
          op && from->isBeforeInBlock(op) && op->isBeforeInBlock(to))
        return false;
    return true;
  }

  /// The library call of kernel `k` adds into the gradient slots its
  /// results only land in:
  ///  - the chunked LM head's weight gradient (dw_acc, beta = 1 from its
  ///    first chunk), so no [V, C] temporary lives from the loss to the end
  ///    of the backward;
  ///  - an embedding's gradient (acc), touching only the rows its indices
  ///    pick, so the table-sized temporary is neither cleared, written nor
  ///    read;
  ///  - a norm's dgamma and dbeta (dgamma_acc, dbeta_acc);
  ///  - a bias's gradient (column_sum's acc), also where its FP32 sums were
  ///    rounded to the slot's type by a kernel of their own, when the slot
  ///    has the summed tensor's type (the library adds in FP32 and rounds
  ///    once);
  ///  - the experts' weight gradient (expert_matmul_wgrad's acc): rounded
  ///    to its operands' BF16 slot in between as a bias's, or into an FP32
  ///    slot as it is, so that no [E, K, O] temporary is left.
  void fuseSlotAccumulation(otck::KernelOp k) {
    Operation *op = bodyOp(k);
    if (auto head = dyn_cast<LinearCrossEntropyWithGradOp>(op)) {
      addIntoSlot(k, head.getDw(), head.getDwAccMutable());
    } else if (auto gather = dyn_cast<GatherGradOp>(op)) {
      addIntoSlot(k, gather.getResult(), gather.getAccMutable());
    } else if (auto norm = dyn_cast<LayerNormGradOp>(op)) {
      addIntoSlot(k, norm.getDgamma(), norm.getDgammaAccMutable());
      addIntoSlot(k, norm.getDbeta(), norm.getDbetaAccMutable());
    } else if (auto norm = dyn_cast<RmsNormGradOp>(op)) {
      addIntoSlot(k, norm.getDgamma(), norm.getDgammaAccMutable());
    } else if (auto sum = dyn_cast<ColumnSumOp>(op)) {
      addIntoSlot(k, sum.getResult(), sum.getAccMutable(),
                  /*roundedTo=*/getElementTypeOrSelf(sum.getInput().getType()));
    } else if (auto wgrad = dyn_cast<ExpertMatmulWgradOp>(op)) {
      addIntoSlot(k, wgrad.getResult(), wgrad.getAccMutable(),
                  /*roundedTo=*/getElementTypeOrSelf(wgrad.getX().getType()),
                  /*unroundedSlot=*/true);
    }
  }

  /// Where kernel `k` writes `result` (a result of its one library op) to a
  /// temporary that only a later kernel `acc = acc + temporary` reads: `k`
  /// writes the result over `acc` and reads `acc` as the op's accumulator
  /// operand `accOperand` (optional and absent so far; a new block
  /// argument), the add kernel and the temporary go. With `roundedTo`, a
  /// kernel of one cast may round the temporary to that type in between:
  /// the result then takes `acc`'s type and the cast goes too; `acc`'s
  /// element type must be `roundedTo`, or with `unroundedSlot` also the
  /// temporary's own where nothing rounds it. Only when nothing in between
  /// touches `acc`, and `acc` is none of `k`'s operands.
  void addIntoSlot(otck::KernelOp k, Value result,
                   MutableOperandRange accOperand, Type roundedTo = nullptr,
                   bool unroundedSlot = false) {
    if (!accOperand.empty())
      return;
    unsigned index = cast<OpResult>(result).getResultNumber();
    auto yield = cast<otck::YieldOp>(k.getBody().front().getTerminator());
    if (yield->getOperand(index) != result)
      return;
    Value t = k.getOutputs()[index];
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot())
      return;
    // The kernels after `k` see the temporary through views of any shape
    // (a position table's [T, C] gradient is the column sum of [B, T·C]),
    // but whole.
    auto elements = [](Value v) {
      return llvm::cast<MemRefType>(v.getType()).getNumElements();
    };
    otck::KernelOp add = soleByteReader(k, t);
    // A kernel that only rounds the temporary into another temporary.
    otck::KernelOp round;
    Value rounded;
    if (auto cast = roundedTo && add ? singleOp<CastOp>(add) : CastOp()) {
      auto out = add.getOutputs()[0].getDefiningOp<otck::BufferOp>();
      if (out && !out.getSlot() && add.getInputs().size() == 1 &&
          otck::storageOf(add.getInputs()[0]) == t &&
          elements(add.getInputs()[0]) == elements(t) &&
          getElementTypeOrSelf(cast.getType()) == roundedTo) {
        round = add;
        rounded = round.getOutputs()[0];
        add = soleByteReader(round, rounded);
      }
    }
    Value added = round ? rounded : t;
    Value acc = add ? addedTo(add, added) : Value();
    if (!acc || add.getOutputs()[0] != acc ||
        elements(acc) != elements(added) ||
        getElementTypeOrSelf(acc.getType()) !=
            getElementTypeOrSelf(added.getType()) ||
        (roundedTo && !unroundedSlot &&
         getElementTypeOrSelf(acc.getType()) != roundedTo) ||
        !plainBuffer(acc) || !untouchedBetween(k, add, acc) ||
        llvm::any_of(k->getOperands(),
                     [&](Value v) { return otck::storageOf(v) == acc; }))
      return;
    // The slot as `k` writes its result: in the temporary's shape (a view
    // of it when the rounding kernel saw the temporary in another).
    auto tType = cast<MemRefType>(t.getType());
    auto accType = MemRefType::get(
        tType.getShape(), cast<MemRefType>(acc.getType()).getElementType());
    Value accAtK = viewAtGemm(k, acc, accType);
    auto tensorType =
        RankedTensorType::get(accType.getShape(), accType.getElementType());
    k->setOperand(k.getOutputs().getBeginOperandIndex() + index, accAtK);
    k.getInputsMutable().append(accAtK);
    result.setType(tensorType);
    accOperand.assign(
        k.getBody().front().addArgument(tensorType, result.getLoc()));
    add.erase();
    if (round) {
      round.erase();
      eraseIfUnused(rounded);
    }
    eraseIfUnused(t);
  }

  /// The value `g` (a GEMM or a kernel) may name for the bytes of `v` seen
  /// as `type`: `v` itself when it has that type and exists at `g`, else a
  /// view of its storage made just before `g` (null when the storage does
  /// not exist there).
  static Value viewAtGemm(Operation *g, Value v, MemRefType type) {
    auto existsAtGemm = [&](Value x) {
      Operation *def = x.getDefiningOp();
      return !def || def->getBlock() != g->getBlock() ||
             def->isBeforeInBlock(g);
    };
    if (v.getType() == type && existsAtGemm(v))
      return v;
    Value storage = otck::storageOf(v);
    if (!existsAtGemm(storage))
      return nullptr;
    if (storage.getType() == type)
      return storage;
    OpBuilder b(g);
    return b.create<otck::ViewOp>(g->getLoc(), type, storage);
  }

  /// Erases `v` (a buffer or a view) when nothing but unused views of it
  /// remain.
  static void eraseIfUnused(Value v) {
    for (Operation *u : llvm::make_early_inc_range(v.getUsers()))
      if (auto view = dyn_cast<otck::ViewOp>(u))
        eraseIfUnused(view.getResult());
    if (v.use_empty())
      v.getDefiningOp()->erase();
  }

  /// The one op of a kernel's body (null when there are several).
  static Operation *bodyOp(otck::KernelOp k) {
    Block &body = k.getBody().front();
    return llvm::hasSingleElement(body.without_terminator()) ? &body.front()
                                                             : nullptr;
  }

  /// The one op of a kernel's body whose result the kernel writes to its
  /// single output, if it is an `OpT`.
  template <typename OpT> static OpT singleOp(otck::KernelOp k) {
    Block &body = k.getBody().front();
    if (!llvm::hasSingleElement(body.without_terminator()) ||
        k.getOutputs().size() != 1)
      return nullptr;
    auto op = dyn_cast<OpT>(body.front());
    if (!op || op->getResult(0) != body.getTerminator()->getOperand(0))
      return nullptr;
    return op;
  }

  /// The buffer bound to a kernel's block argument `v` (null for a value
  /// computed in the body).
  static Value inputOf(otck::KernelOp k, Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &k.getBody().front()
               ? k.getInputs()[arg.getArgNumber()]
               : Value();
  }

  /// Whether `g` can carry a GELU epilogue on its result `t`: the product
  /// has the operands' element type, and the matrix's rows are whole
  /// multiples of 8 elements (cuBLASLt's rule for the aux matrix).
  static bool epilogueShape(otck::GemmOp g, Value t) {
    auto tt = cast<MemRefType>(t.getType());
    return !g.getAccumulate() && !g.getGelu() && !g.getDgelu() &&
           tt.getElementType() == g.getLhs().getType().getElementType() &&
           tt.getRank() >= 2 && tt.getShape().back() % 8 == 0;
  }

  /// The buffer `g` (a GEMM or a kernel) writes in place of kernel `k`'s
  /// output `y` (the same bytes seen with `t`'s type): y's buffer, declared
  /// before `g` if it was declared after it. Null when y cannot be written
  /// there.
  static Value moveOutputUp(Operation *g, Value y, MemRefType type) {
    Value ys = otck::storageOf(y);
    Operation *def = ys.getDefiningOp();
    if (def && def->getBlock() == g->getBlock() && g->isBeforeInBlock(def)) {
      if (!isa<otck::BufferOp>(def))
        return nullptr;
      OpBuilder b(g);
      Operation *copy = b.clone(*def);
      def->replaceAllUsesWith(copy);
      def->erase();
      ys = copy->getResult(0);
    }
    return viewAtGemm(g, ys, type);
  }

  /// y = gelu_tanh(t) right after the GEMM (+ bias) that writes t becomes
  /// the GEMM's gelu epilogue writing y, with t as its aux output (the
  /// pre-activation stays for whoever reads it later, e.g. the backward).
  /// Only when nothing between the two touches y or writes t.
  bool fuseGelu(otck::GemmOp g) {
    Value t = g.getOut();
    if (otck::storageOf(t) != t || !epilogueShape(g, t))
      return false;
    auto tt = cast<MemRefType>(t.getType());
    // The first kernel after the GEMM that computes gelu_tanh of t's bytes.
    otck::KernelOp k;
    otck::forEachByteUser(t, [&](Operation *u) {
      auto other = dyn_cast<otck::KernelOp>(u);
      if (!other || other->getBlock() != g->getBlock() ||
          !g->isBeforeInBlock(other) || (k && k->isBeforeInBlock(other)))
        return;
      auto gelu = singleOp<GeluOp>(other);
      Value in = gelu ? inputOf(other, gelu.getInput()) : Value();
      if (gelu && gelu.getApproximate() == "tanh" && in &&
          otck::storageOf(in) == t)
        k = other;
    });
    if (!k)
      return false;
    Value y = k.getOutputs()[0];
    auto yt = cast<MemRefType>(y.getType());
    Value ys = otck::storageOf(y);
    if (yt.getElementType() != tt.getElementType() ||
        yt.getNumElements() != tt.getNumElements() || ys == t ||
        otck::storageOf(g.getLhs()) == ys ||
        otck::storageOf(g.getRhs()) == ys ||
        (g.getBias() && otck::storageOf(g.getBias()) == ys))
      return false;
    if (otck::usedBetween(g, k, ys, /*touch=*/true) ||
        otck::usedBetween(g, k, t, /*touch=*/false))
      return false;
    Value out = moveOutputUp(g, y, tt);
    if (!out)
      return false;
    g.getOutMutable().assign(out);
    g.getAuxMutable().assign(t);
    g.setGelu(true);
    k.erase();
    return true;
  }

  /// Moves GEMM `g` down to just before `k` (same block, `g` first) when
  /// no op in between writes the bytes `g` reads or touches those it
  /// writes: the values it computes are then the same.
  static bool sinkTo(otck::GemmOp g, Operation *k) {
    SmallVector<Value> written = otck::writtenBy(g);
    for (Value v : g->getOperands()) {
      Value s = otck::storageOf(v);
      bool writes = llvm::any_of(
          written, [&](Value w) { return otck::storageOf(w) == s; });
      if (otck::usedBetween(g, k, s, /*touch=*/writes))
        return false;
    }
    g->moveBefore(k);
    return true;
  }

  /// dx = gelu_tanh_grad(t, x) of a GEMM's result t that nothing else reads
  /// becomes the GEMM's dgelu epilogue writing dx, reading x as its aux
  /// (the dGELU form of the backward of gelu's input). Only when nothing
  /// between the two touches dx or writes x.
  bool fuseGeluGrad(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot() || g.getBias() || !epilogueShape(g, t))
      return false;
    auto tt = cast<MemRefType>(t.getType());
    otck::KernelOp k = soleByteReader(g, t);
    if (!k)
      return false;
    auto grad = singleOp<GeluGradOp>(k);
    if (!grad || grad.getApproximate() != "tanh")
      return false;
    Value dy = inputOf(k, grad.getGrad()), x = inputOf(k, grad.getInput());
    if (!dy || !x || otck::storageOf(dy) != t || otck::storageOf(x) == t)
      return false;
    Value dx = k.getOutputs()[0];
    Value xs = otck::storageOf(x), dxs = otck::storageOf(dx);
    auto xt = cast<MemRefType>(x.getType()),
         dxt = cast<MemRefType>(dx.getType());
    if (xt.getElementType() != tt.getElementType() ||
        dxt.getElementType() != tt.getElementType() ||
        xt.getNumElements() != tt.getNumElements() ||
        dxt.getNumElements() != tt.getNumElements() || dxs == t ||
        otck::storageOf(g.getLhs()) == dxs ||
        otck::storageOf(g.getRhs()) == dxs)
      return false;
    // x written between the two (a recomputed pre-activation, placed by the
    // schedule after the product that computes its gradient): the GEMM
    // moves down to the kernel when nothing in between is in its way.
    if (otck::usedBetween(g, k, xs, /*touch=*/false) && !sinkTo(g, k))
      return false;
    if (otck::usedBetween(g, k, dxs, /*touch=*/true) ||
        otck::usedBetween(g, k, xs, /*touch=*/false))
      return false;
    Value aux = viewAtGemm(g, x, tt);
    if (!aux)
      return false;
    Value out = moveOutputUp(g, dx, tt);
    if (!out)
      return false;
    g.getOutMutable().assign(out);
    g.getAuxMutable().assign(aux);
    g.setDgelu(true);
    k.erase();
    eraseIfUnused(t);
    return true;
  }

  /// y = t + a right after the GEMM (+ bias) that writes t, with a of t's
  /// shape in another buffer (a residual connection), becomes the GEMM's
  /// addend: cuBLASLt reads a as its C and writes y, one rounding, no add
  /// kernel. When y is a itself (written over it), the GEMM accumulates
  /// into it instead. Only when nothing between the two touches y or
  /// writes a.
  bool fuseAddend(otck::GemmOp g) {
    Value t = g.getOut();
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    auto tt = cast<MemRefType>(t.getType());
    if (!tmp || tmp.getSlot() || g.getAddend() || g.getAccumulate() ||
        g.getGelu() || g.getDgelu() || tt.getRank() < 2 ||
        tt.getElementType() != g.getLhs().getType().getElementType())
      return false;
    otck::KernelOp k = soleByteReader(g, t);
    Value a = k ? addedTo(k, t) : Value();
    if (!a)
      return false;
    Value y = k.getOutputs()[0];
    auto yt = cast<MemRefType>(y.getType());
    auto at = cast<MemRefType>(a.getType());
    Value as = otck::storageOf(a), ys = otck::storageOf(y);
    if (yt.getElementType() != tt.getElementType() ||
        at.getElementType() != tt.getElementType() ||
        yt.getNumElements() != tt.getNumElements() ||
        at.getNumElements() != tt.getNumElements() || ys == t ||
        otck::storageOf(g.getLhs()) == ys ||
        otck::storageOf(g.getRhs()) == ys ||
        (g.getBias() && otck::storageOf(g.getBias()) == ys))
      return false;
    bool inPlace = as == ys;
    if (inPlace && a != y)
      return false; // Over a's bytes seen another way: leave it.
    if (otck::usedBetween(g, k, ys, /*touch=*/true) ||
        otck::usedBetween(g, k, as, /*touch=*/false))
      return false;
    Value addend = inPlace ? Value() : viewAtGemm(g, a, tt);
    if (!inPlace && !addend)
      return false;
    Value out = moveOutputUp(g, y, tt);
    if (!out)
      return false;
    g.getOutMutable().assign(out);
    if (inPlace)
      g.setAccumulate(true);
    else
      g.getAddendMutable().assign(addend);
    k.erase();
    eraseIfUnused(t);
    return true;
  }

  /// y = t + r right after the layer or RMS norm gradient kernel `k1` that
  /// writes
  /// its dx into the temporary t, with r of t's shape and type in another
  /// buffer (the residual stream's gradient), becomes the library call's
  /// residual operand: k1 reads r and writes dx = r + the input gradient to
  /// y, one rounding, no add kernel. y may be r's own buffer (the library
  /// allows dx to be the residual's buffer). Only when nothing between the
  /// two touches y or writes r, and y is none of k1's other operands.
  template <typename NormGradOp>
  bool fuseNormResidual(otck::KernelOp k1, NormGradOp grad) {
    if (grad.getResidual())
      return false;
    Block &body = k1.getBody().front();
    Operation *yield = body.getTerminator();
    // The output that receives dx.
    std::optional<unsigned> dxIndex;
    for (OpOperand &o : yield->getOpOperands())
      if (o.get() == grad.getDx())
        dxIndex = dxIndex ? std::optional<unsigned>() : o.getOperandNumber();
    if (!dxIndex)
      return false;
    Value t = k1.getOutputs()[*dxIndex];
    auto tmp = t.getDefiningOp<otck::BufferOp>();
    if (!tmp || tmp.getSlot())
      return false;
    auto tt = cast<MemRefType>(t.getType());
    // The one later kernel that reads t's bytes.
    otck::KernelOp k2 = soleByteReader(k1, t);
    Value r = k2 ? addedTo(k2, t) : Value();
    if (!r)
      return false;
    Value y = k2.getOutputs()[0];
    auto yt = cast<MemRefType>(y.getType());
    auto rt = cast<MemRefType>(r.getType());
    Value rs = otck::storageOf(r), ys = otck::storageOf(y);
    if (yt.getElementType() != tt.getElementType() ||
        rt.getElementType() != tt.getElementType() ||
        yt.getNumElements() != tt.getNumElements() ||
        rt.getNumElements() != tt.getNumElements() || ys == t)
      return false;
    // y may be r's bytes (dx written over the residual), but none of the
    // other inputs' or outputs' of k1.
    for (Value v : k1.getInputs())
      if (otck::storageOf(v) == ys)
        return false;
    for (auto [i, v] : llvm::enumerate(k1.getOutputs()))
      if (i != *dxIndex && otck::storageOf(v) == ys)
        return false;
    if (otck::usedBetween(k1, k2, ys, /*touch=*/true) ||
        otck::usedBetween(k1, k2, rs, /*touch=*/false))
      return false;
    // The body's residual operand has the norm input's type.
    auto argType = RankedTensorType::get(tt.getShape(), tt.getElementType());
    if (argType != grad.getInput().getType())
      return false;
    if (Operation *def = ys.getDefiningOp();
        def && def->getBlock() == k1->getBlock() &&
        k1->isBeforeInBlock(def) && !isa<otck::BufferOp>(def))
      return false;
    Value residual = viewAtGemm(k1, r, tt);
    if (!residual)
      return false;
    // Over the residual: the same view of r's bytes for both.
    Value out = ys == rs ? residual : moveOutputUp(k1, y, tt);
    if (!out) {
      eraseIfUnused(residual);
      return false;
    }
    k1->setOperand(k1.getOutputs().getBeginOperandIndex() + *dxIndex, out);
    k1.getInputsMutable().append(residual);
    BlockArgument arg = body.addArgument(argType, grad.getLoc());
    grad.getResidualMutable().assign(arg);
    k2.erase();
    eraseIfUnused(t);
    return true;
  }
};

} // namespace
