//===- Functions.h - the module's functions a phase needs -------*- C++ -*-===//
//
// The lookup of a function a pass, the emitter or a tool cannot go on
// without (@train_step after otc-differentiate, the planned @micro_step),
// with its one error when the module lacks it.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_FUNCTIONS_H
#define OTC_IR_FUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace otc {

/// The function @`name` of `module`; null after an error at the module,
/// "no @<name><why>" (`why`: " to emit", ": run --otc-differentiate
/// first").
mlir::func::FuncOp requireFunction(mlir::ModuleOp module, llvm::StringRef name,
                                   llvm::StringRef why);

/// The module's @train_step, which the phases after otc-differentiate
/// rewrite; null after the error that says to run it first.
mlir::func::FuncOp requireTrainStep(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_IR_FUNCTIONS_H
