//===- Fp8Gemms.cpp - the GEMMs that multiply FP8 operands ----------------===//
//
// otc-fp8-gemms (Passes.td): under a configuration of precision "fp8",
// marks the otc.matmul ops that run in FP8 with ir/Fp8.h's attribute: BF16
// operands, one product (no batch once a projection's rows are stacked, as
// codegen/GemmCalls.cpp stacks them), M, N and K multiples of 16
// (cuBLASLt's FP8 rule), at most one gradient operand, and, when the pass
// is given the step-time model's prices (otc-compile gives them), a
// product the model predicts faster in FP8 with its share of its operands'
// quantization than in BF16. An operand computed from the loss's gradient
// is E5M2, any other E4M3.
//
// The quantization is priced as the program makes it (ir/Fp8.h, otc-fp8-
// copies): one copy per value and format, shared by every FP8 GEMM of the
// function that reads it, and a trained parameter's (read through its BF16
// working copy) made once per optimizer step, so 1 / grad-accum of it per
// micro-step. Each chosen reader pays an even share of its copy;
// chooseFp8Gemms drops the candidates that do not pay until all that
// remain do.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/Fp8.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace otc {
#define GEN_PASS_DEF_FP8GEMMS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// Whether `op` computes a gradient from the loss's: the ops that start
/// the backward of a loss (otc.cross_entropy_grad, otc.nll_loss_grad, ...,
/// otc.cross_entropy_with_grad) are named so.
bool startsGradient(Operation *op) {
  StringRef name = op->getName().stripDialect();
  return name.ends_with("_grad") || name.contains("with_grad");
}

/// The values of `f` computed from a gradient: the results of an op that
/// starts one or reads one.
llvm::DenseSet<Value> gradientValues(func::FuncOp f) {
  llvm::DenseSet<Value> grads;
  f.walk([&](Operation *op) {
    bool grad = startsGradient(op) ||
                llvm::any_of(op->getOperands(),
                             [&](Value v) { return grads.contains(v); });
    if (grad)
      grads.insert(op->getResults().begin(), op->getResults().end());
  });
  return grads;
}

/// The product M x N x K of `mm` as one GEMM, or nullopt when it has a
/// batch (rows of a projection stacked, as the emitter stacks them).
std::optional<Fp8GemmShape> singleProduct(MatMulOp mm) {
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()).getShape(); };
  ArrayRef<int64_t> a = shape(mm.getLhs()), b = shape(mm.getRhs()),
                    c = shape(mm.getResult());
  int64_t m = c[c.size() - 2], n = c[c.size() - 1];
  int64_t k = mm.getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
  int64_t batch = numElements(c.drop_back(2));
  int64_t batchA = numElements(a.drop_back(2)),
          batchB = numElements(b.drop_back(2));
  if (batch > 1 && !mm.getTransposeLhs() && batchB == 1 && batchA == batch) {
    m *= batch;
    batch = 1;
  }
  if (batch != 1)
    return std::nullopt;
  return Fp8GemmShape{m, n, k};
}

/// The trained parameters of `f` read through a BF16 working copy (its
/// arguments with otc.param, otc.bf16_copy and a gradient result): their
/// FP8 copies are made once per optimizer step.
llvm::DenseSet<Value> stepWeights(func::FuncOp f) {
  llvm::DenseSet<StringRef> trained;
  for (unsigned i = 0, e = f.getNumResults(); i < e; ++i)
    if (auto n = f.getResultAttrOfType<StringAttr>(i, attrs::kGrad))
      trained.insert(n.getValue());
  llvm::DenseSet<Value> weights;
  for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
    auto n = f.getArgAttrOfType<StringAttr>(i, attrs::kParam);
    if (n && f.getArgAttr(i, attrs::kBf16Copy) &&
        trained.contains(n.getValue()))
      weights.insert(f.getArgument(i));
  }
  return weights;
}

struct Fp8GemmsPass : public otc::impl::Fp8GemmsBase<Fp8GemmsPass> {
  using Fp8GemmsBase::Fp8GemmsBase;
  Fp8GemmsPass() = default;
  Fp8GemmsPass(Fp8Prices prices) : prices(std::move(prices)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ConfigAttr> config = requireConfig(module, "otc-fp8-gemms");
    if (failed(config))
      return signalPassFailure();
    if (!config->fp8())
      return;
    for (auto f : module.getOps<func::FuncOp>())
      runOn(f, config->getGradAccum());
  }

  void runOn(func::FuncOp f, int64_t gradAccum) {
    llvm::DenseSet<Value> grads = gradientValues(f), weights = stepWeights(f);
    SmallVector<std::pair<MatMulOp, Fp8Operands>> gemms;
    SmallVector<Fp8Candidate> candidates;
    SmallVector<Fp8CopyUse> copies;
    llvm::DenseMap<std::pair<Value, int>, unsigned> copyOf;
    f.walk([&](MatMulOp mm) {
      std::optional<Fp8GemmShape> s;
      std::optional<Fp8Operands> o = candidate(mm, grads, s);
      if (!o)
        return;
      Fp8Candidate c;
      c.shape = *s;
      for (bool lhs : {true, false}) {
        Value v = lhs ? mm.getLhs() : mm.getRhs();
        Fp8Format format = lhs ? o->lhs : o->rhs;
        auto [it, made] =
            copyOf.try_emplace({v, static_cast<int>(format)},
                               static_cast<unsigned>(copies.size()));
        if (made) {
          Fp8CopyUse use;
          use.elements = cast<ShapedType>(v.getType()).getNumElements();
          // Made in @zero_grads where the step's micro-steps read it.
          if (weights.contains(v) && gradAccum > 1)
            use.perMicroStep = 1.0 / double(gradAccum);
          copies.push_back(use);
        }
        c.copy[lhs ? 0 : 1] = it->second;
        c.layout[lhs ? 0 : 1] = fp8OperandLayout(
            lhs, lhs ? mm.getTransposeLhs() : mm.getTransposeRhs());
      }
      gemms.push_back({mm, *o});
      candidates.push_back(c);
    });
    SmallVector<bool> chosen(candidates.size(), true);
    if (prices)
      chosen = chooseFp8Gemms(copies, candidates, prices);
    for (auto [g, take] : llvm::zip(gemms, chosen))
      if (take)
        setGemmFp8(g.first, g.second);
  }

  /// The formats `mm` would multiply in (its shape in `s`), or nullopt
  /// when it cannot run FP8.
  static std::optional<Fp8Operands>
  candidate(MatMulOp mm, const llvm::DenseSet<Value> &grads,
            std::optional<Fp8GemmShape> &s) {
    if (!getElementTypeOrSelf(mm.getLhs().getType()).isBF16() ||
        !getElementTypeOrSelf(mm.getRhs().getType()).isBF16())
      return std::nullopt;
    s = singleProduct(mm);
    if (!s || s->m % 16 || s->n % 16 || s->k % 16 || !s->k)
      return std::nullopt;
    Fp8Operands o;
    if (grads.contains(mm.getLhs()))
      o.lhs = Fp8Format::E5M2;
    if (grads.contains(mm.getRhs()))
      o.rhs = Fp8Format::E5M2;
    if (o.lhs == Fp8Format::E5M2 && o.rhs == Fp8Format::E5M2)
      return std::nullopt;
    return o;
  }

  Fp8Prices prices;
};

} // namespace

SmallVector<bool> otc::chooseFp8Gemms(ArrayRef<Fp8CopyUse> copies,
                                      ArrayRef<Fp8Candidate> candidates,
                                      const Fp8Prices &prices) {
  SmallVector<bool> chosen(candidates.size(), true);
  SmallVector<double> bf16, fp8;
  for (const Fp8Candidate &c : candidates) {
    bf16.push_back(prices.product(c.shape, /*fp8=*/false));
    fp8.push_back(prices.product(c.shape, /*fp8=*/true));
  }
  for (bool dropped = true; dropped;) {
    dropped = false;
    // Each copy's chosen readers (an operand each) and their layouts.
    SmallVector<int64_t> readers(copies.size(), 0), layouts(copies.size(), 0);
    for (auto [c, take] : llvm::zip(candidates, chosen))
      for (int side : {0, 1})
        if (take) {
          ++readers[c.copy[side]];
          layouts[c.copy[side]] |= c.layout[side];
        }
    auto share = [&](unsigned copy) {
      int count = (layouts[copy] & 1) + ((layouts[copy] >> 1) & 1);
      return prices.quantize(copies[copy].elements, count) *
             copies[copy].perMicroStep / double(readers[copy]);
    };
    for (auto [i, c] : llvm::enumerate(candidates)) {
      if (!chosen[i])
        continue;
      double cost = fp8[i] + share(c.copy[0]) + share(c.copy[1]);
      if (cost < bf16[i])
        continue;
      chosen[i] = false;
      dropped = true;
    }
  }
  return chosen;
}

std::unique_ptr<Pass> otc::createFp8Gemms(Fp8Prices prices) {
  return std::make_unique<Fp8GemmsPass>(std::move(prices));
}
