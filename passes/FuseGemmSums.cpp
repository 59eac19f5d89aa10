//===- FuseGemmSums.cpp - a bias's gradient inside its weight's GEMM ------===//
//
// A linear layer's bias gradient is the column sum of its output gradient
// dy, and its weight gradient is a GEMM reading dy as its K x W operand:
// the library forms the sums while it streams dy for the product
// (otck.gemm's `sums`), so the kernel that reads all of dy once more for
// the sums goes. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "ir/Fp8.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace otc {
#define GEN_PASS_DEF_FUSEGEMMSUMS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// A kernel of one otc.column_sum: what it sums and where.
struct ColumnSumKernel {
  otck::KernelOp kernel;
  /// The summed buffer (as the kernel sees it) and the sums' buffer.
  Value x, out;
  /// Rows and columns of the sum (x as [rows, cols]).
  int64_t rows = 0, cols = 0;
  /// The kernel adds into `out` (column_sum's acc is `out` itself).
  bool accumulates = false;
};

/// The column sum kernel `k` is, if it is one.
std::optional<ColumnSumKernel> columnSumKernel(otck::KernelOp k) {
  Block &body = k.getBody().front();
  if (!llvm::hasSingleElement(body.without_terminator()) ||
      k.getOutputs().size() != 1)
    return std::nullopt;
  auto sum = dyn_cast<ColumnSumOp>(body.front());
  if (!sum || body.getTerminator()->getOperand(0) != sum.getResult())
    return std::nullopt;
  auto inputOf = [&](Value v) -> Value {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &body ? k.getInputs()[arg.getArgNumber()]
                                          : Value();
  };
  ColumnSumKernel c;
  c.kernel = k;
  c.x = inputOf(sum.getInput());
  c.out = k.getOutputs()[0];
  if (!c.x)
    return std::nullopt;
  if (Value acc = sum.getAcc()) {
    // Only a sum added into its own output (a gradient slot).
    if (otck::storageOf(inputOf(acc)) != otck::storageOf(c.out) ||
        inputOf(acc).getType() != c.out.getType())
      return std::nullopt;
    c.accumulates = true;
  }
  auto xType = cast<MemRefType>(c.x.getType());
  auto outType = cast<MemRefType>(c.out.getType());
  if (xType.getRank() < 2 || outType.getRank() != 1)
    return std::nullopt;
  c.cols = xType.getShape().back();
  c.rows = c.cols ? xType.getNumElements() / c.cols : 0;
  if (outType.getDimSize(0) != c.cols)
    return std::nullopt;
  return c;
}

/// Whether `g` is a plain 2-D product that could carry sums.
bool plainProduct(otck::GemmOp g) {
  return !g.getSums() && !g.getBias() && !g.getAux() && !g.getAddend() &&
         !g.getGelu() && !g.getDgelu() && !g.getLhsFp8() &&
         !g->hasAttr(kFp8Attr) && g.getLhs().getType().getRank() == 2 &&
         g.getRhs().getType().getRank() == 2 &&
         g.getOut().getType().getRank() == 2;
}

/// Which operand of `g` is `c`'s summed matrix as [K, W]: 0 the left one
/// (transposed), 1 the right one (not transposed); nullopt for neither.
std::optional<int> summedOperand(otck::GemmOp g, const ColumnSumKernel &c) {
  Value storage = otck::storageOf(c.x);
  auto asKw = [&](Value v) {
    ArrayRef<int64_t> s = cast<MemRefType>(v.getType()).getShape();
    return otck::storageOf(v) == storage && s[0] == c.rows && s[1] == c.cols;
  };
  if (g.getTransposeLhs() && asKw(g.getLhs()))
    return 0;
  if (!g.getTransposeRhs() && asKw(g.getRhs()))
    return 1;
  return std::nullopt;
}

/// Whether `v` is defined before `op` (or outside its block).
bool existsAt(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

struct FuseGemmSumsPass : public otc::impl::FuseGemmSumsBase<FuseGemmSumsPass> {
  using FuseGemmSumsBase::FuseGemmSumsBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      SmallVector<ColumnSumKernel> sums;
      for (otck::KernelOp k : f.getBody().getOps<otck::KernelOp>())
        if (std::optional<ColumnSumKernel> c = columnSumKernel(k))
          sums.push_back(*c);
      for (const ColumnSumKernel &c : sums)
        fuse(c);
    }
  }

  /// Moves `c`'s sums into the nearest GEMM that can take them.
  void fuse(const ColumnSumKernel &c) {
    Operation *k = c.kernel;
    Block *block = k->getBlock();
    Value xStorage = otck::storageOf(c.x), outStorage = otck::storageOf(c.out);
    otck::GemmOp best;
    int bestOperand = 0;
    size_t bestDistance = 0;
    size_t kIndex = indexOf(k);
    for (otck::GemmOp g : block->getOps<otck::GemmOp>()) {
      if (!plainProduct(g))
        continue;
      std::optional<int> operand = summedOperand(g, c);
      if (!operand || !existsAt(c.out, g) ||
          otck::storageOf(g.getOut()) == outStorage ||
          otck::storageOf(g.getOut()) == xStorage ||
          otck::storageOf(g.getLhs()) == outStorage ||
          otck::storageOf(g.getRhs()) == outStorage)
        continue;
      // x holds the same values at both, and nothing in between sees the
      // sums' buffer change place.
      if (otck::usedBetween(k, g, xStorage, /*touch=*/false) ||
          otck::usedBetween(k, g, outStorage, /*touch=*/true))
        continue;
      size_t gIndex = indexOf(g);
      size_t distance = gIndex > kIndex ? gIndex - kIndex : kIndex - gIndex;
      if (!best || distance < bestDistance) {
        best = g;
        bestOperand = *operand;
        bestDistance = distance;
      }
    }
    if (!best)
      return;
    best.getSumsMutable().assign(c.out);
    best.setSumsOfRhs(bestOperand == 1);
    best.setAccumulateSums(c.accumulates);
    k->erase();
  }

  /// The position of `op` in its block.
  static size_t indexOf(Operation *op) {
    size_t i = 0;
    for (Operation &o : *op->getBlock()) {
      if (&o == op)
        return i;
      ++i;
    }
    return i;
  }
};

} // namespace
