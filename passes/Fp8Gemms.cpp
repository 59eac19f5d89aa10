//===- Fp8Gemms.cpp - the GEMMs that multiply FP8 operands ----------------===//
//
// otc-fp8-gemms (Passes.td): under a configuration of precision "fp8", marks
// the otc.matmul ops that run in FP8 with ir/Fp8.h's attribute: BF16
// operands, one product (no batch once a projection's rows are stacked, as
// codegen/GemmCalls.cpp stacks them), M, N and K multiples of 16
// (cuBLASLt's FP8 rule), at most one gradient operand, and, when the pass
// is given the step-time model's verdict (otc-compile gives it), a product
// the model predicts faster in FP8 with its operands' quantization than in
// BF16. An operand computed from the loss's gradient is E5M2, any other
// E4M3.
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

struct Fp8GemmsPass : public otc::impl::Fp8GemmsBase<Fp8GemmsPass> {
  using Fp8GemmsBase::Fp8GemmsBase;
  Fp8GemmsPass() = default;
  Fp8GemmsPass(Fp8GemmPricer pays) : pays(std::move(pays)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<ConfigAttr> config = requireConfig(module, "otc-fp8-gemms");
    if (failed(config))
      return signalPassFailure();
    if (!config->fp8())
      return;
    for (auto f : module.getOps<func::FuncOp>()) {
      llvm::DenseSet<Value> grads = gradientValues(f);
      f.walk([&](MatMulOp mm) { choose(mm, grads); });
    }
  }

  void choose(MatMulOp mm, const llvm::DenseSet<Value> &grads) {
    if (!getElementTypeOrSelf(mm.getLhs().getType()).isBF16() ||
        !getElementTypeOrSelf(mm.getRhs().getType()).isBF16())
      return;
    std::optional<Fp8GemmShape> s = singleProduct(mm);
    if (!s || s->m % 16 || s->n % 16 || s->k % 16 || !s->k)
      return;
    Fp8Operands o;
    if (grads.contains(mm.getLhs()))
      o.lhs = Fp8Format::E5M2;
    if (grads.contains(mm.getRhs()))
      o.rhs = Fp8Format::E5M2;
    if (o.lhs == Fp8Format::E5M2 && o.rhs == Fp8Format::E5M2)
      return;
    if (pays && !pays(*s))
      return;
    setGemmFp8(mm, o);
  }

  Fp8GemmPricer pays;
};

} // namespace

std::unique_ptr<Pass> otc::createFp8Gemms(Fp8GemmPricer pays) {
  return std::make_unique<Fp8GemmsPass>(std::move(pays));
}
