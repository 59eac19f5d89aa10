//===- Passes.h - otc passes -------------------------------------*- C++ -*-===//
//
// Declarations of the otc passes (generated from Passes.td) and the kernel
// classification that fusion and the emitter share; passes/Liveness.h holds
// the buffers' live ranges, passes/Pipeline.h assembles the passes into the
// compiler's pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_PASSES_H
#define OTC_PASSES_PASSES_H

#include "ir/Functions.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/Pass.h"

#include <functional>
#include <memory>

namespace otc {

/// The predicted seconds of one op on the compile's device, as the step-time
/// model (perf/, above the passes) prices it: what otc-chunk-loss asks of
/// an otc.linear_cross_entropy_with_grad for each chunk it considers.
using LossChunkPricer = std::function<double(mlir::Operation *)>;

/// A product of one GEMM, M x N over depth K.
struct Fp8GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

/// The step-time model's prices (perf/Fp8Cost.h) that otc-fp8-gemms
/// chooses by: the seconds of a product in FP8 (its operands' copies
/// already made) or in BF16, and of one quantization of `elements` values
/// into `layouts` layouts (1 or 2: otck.fp8_quantize).
struct Fp8Prices {
  std::function<double(const Fp8GemmShape &, bool fp8)> product;
  std::function<double(int64_t elements, int layouts)> quantize;
  explicit operator bool() const { return product && quantize; }
};
using Fp8GemmPricer = Fp8Prices;

/// An FP8 copy that candidate GEMMs may share (ir/Fp8.h): its values, and
/// the times it is made per micro-step (1; 1 / grad-accum for a
/// parameter's, made once per optimizer step).
struct Fp8CopyUse {
  int64_t elements = 0;
  double perMicroStep = 1.0;
};

/// A GEMM that can run FP8: its product, and for its left and right
/// operands the copy it would read (an index of the copies) in its layout
/// (ir/Fp8.h Fp8Layout).
struct Fp8Candidate {
  Fp8GemmShape shape;
  unsigned copy[2] = {0, 0};
  int64_t layout[2] = {1, 1};
};

/// The candidates that run FP8: the largest set in which each candidate's
/// FP8 product plus its share of its operands' copies (a copy's price, for
/// the layouts its chosen readers need, times perMicroStep, split evenly
/// among them) is below its BF16 product. Starting from every candidate,
/// those that do not pay are dropped until none is (dropping one can only
/// raise the others' shares).
llvm::SmallVector<bool> chooseFp8Gemms(llvm::ArrayRef<Fp8CopyUse> copies,
                                       llvm::ArrayRef<Fp8Candidate> candidates,
                                       const Fp8Prices &prices);

/// otc-sparse-prediction's `positions` that asks it to choose K from the
/// sequence's T: BERT's share 0.15, its mean plus four standard deviations.
constexpr int64_t kAutoPredictPositions = -1;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// otc-chunk-loss choosing its chunk by `price` (Passes.td).
std::unique_ptr<mlir::Pass> createChunkLoss(const ChunkLossOptions &options,
                                            LossChunkPricer price);

/// otc-fp8-gemms choosing by `prices` (Passes.td).
std::unique_ptr<mlir::Pass> createFp8Gemms(Fp8Prices prices);

/// Whether kernel `k` is a chain of ops with scalar expressions (the
/// ScalarExpressionOpInterface) and slices of its inputs that all produce,
/// like its outputs, one static shape: element i of every output depends
/// only on element i of the inputs of that shape, the broadcast element of
/// the others and the element at a slice's offset of a sliced one (slices
/// alone are a copy, not such a chain).
bool isElementwiseKernel(otck::KernelOp k);

/// Erases the ops of `block` whose results nothing reads, last first.
inline void eraseDeadOps(mlir::Block &block) {
  llvm::SmallVector<mlir::Operation *> ops;
  for (mlir::Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (mlir::Operation *op : llvm::reverse(ops))
    if (mlir::isOpTriviallyDead(op))
      op->erase();
}

} // namespace otc

#endif // OTC_PASSES_PASSES_H
