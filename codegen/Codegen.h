//===- Codegen.h - code generation from planned otck IR -----------*- C++ -*-===//
//
// The emitter that turns a planned buffer-level module (after
// otc-plan-buffers) into the source of the training program (plan.json and
// the predicted step are perf/).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_CODEGEN_H
#define OTC_CODEGEN_CODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace otc {

struct EmitOptions {
  /// The model file, recorded in the program.
  std::string modelPath;
};

/// Emits the whole program (C++ for the cpu target, CUDA C++ for cuda) for
/// the target, micro-batch and grad-accum of the module's configuration
/// (ir/Config.h). Fails with an error at the op it cannot emit, or when the
/// module has no configuration.
mlir::LogicalResult emitProgram(mlir::ModuleOp module,
                                const EmitOptions &options,
                                llvm::raw_ostream &os);

} // namespace otc

#endif // OTC_CODEGEN_CODEGEN_H
