//===- Passes.h - otc passes -------------------------------------*- C++ -*-===//
//
// Declarations of the otc passes (generated from Passes.td) and the buffer
// liveness helpers that planning and the report share. passes/Pipeline.h
// assembles the passes into the compiler's pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_PASSES_H
#define OTC_PASSES_PASSES_H

#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace otc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// A temporary buffer with its live range [first, last] in op positions of
/// its function. A buffer written in place over a dying input starts one op
/// after the kernel that writes it (its bytes are the input's until then).
struct BufferInterval {
  otck::BufferOp buffer;
  unsigned first, last;
  int64_t size;
};

/// Live ranges of the temporaries of `f` (after lowering), by first use.
llvm::SmallVector<BufferInterval> temporaryLiveRanges(mlir::func::FuncOp f);

/// Whether kernel `k` is a chain of ops with scalar expressions (the
/// ScalarExpressionOpInterface) that all produce, like its outputs, one
/// static shape: element i of every output depends only on element i of
/// the inputs of that shape and on the broadcast element of the others.
bool isElementwiseKernel(otck::KernelOp k);

/// Checks that no two buffers that are live at the same time overlap in the
/// arena. Emits an error at the first offending buffer.
mlir::LogicalResult verifyBufferPlan(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_PASSES_PASSES_H
