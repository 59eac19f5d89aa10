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

/// Whether the step-time model (perf/Fp8Cost.h) predicts the GEMM of a
/// shape faster in FP8, its operands' quantization included, than in BF16:
/// what otc-fp8-gemms asks of each candidate.
using Fp8GemmPricer = std::function<bool(const Fp8GemmShape &)>;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// otc-chunk-loss choosing its chunk by `price` (Passes.td).
std::unique_ptr<mlir::Pass> createChunkLoss(const ChunkLossOptions &options,
                                            LossChunkPricer price);

/// otc-fp8-gemms choosing by `pays` (Passes.td).
std::unique_ptr<mlir::Pass> createFp8Gemms(Fp8GemmPricer pays);

/// Whether kernel `k` is a chain of ops with scalar expressions (the
/// ScalarExpressionOpInterface) that all produce, like its outputs, one
/// static shape: element i of every output depends only on element i of
/// the inputs of that shape and on the broadcast element of the others.
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
