//===- ConstantValues.h - values of constants, computed once ---*- C++ -*-===//
//
// Part of otc-training-loop: the values that a step function computes from
// constants alone are computed once, at load, into persistent slots.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_CONSTANTVALUES_H
#define OTC_PASSES_CONSTANTVALUES_H

#include "mlir/IR/BuiltinOps.h"

namespace otc {

/// Moves what each of `functions` (of `module`) computes from constants
/// and "buffer:" slots (untrained FP32 initializers) alone, where something
/// else in it reads the value, into a new `@constant_values` (the buffers
/// its arguments; each result on a "const:v<n>" slot, equal computations
/// shared), the function reading the slot as a new argument instead.
/// Values over 64 MiB, and those of splat constants alone, stay.
/// otc-lower-to-buffers runs @constant_values inside @init_constants.
void hoistConstantValues(mlir::ModuleOp module,
                         llvm::ArrayRef<llvm::StringRef> functions);

} // namespace otc

#endif // OTC_PASSES_CONSTANTVALUES_H
