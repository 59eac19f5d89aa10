//===- OtckDialect.h - the otck buffer-level dialect -------------*- C++ -*-===//
//
// Declares the `otck` dialect: arena buffers, kernels and library calls.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_OTCKDIALECT_H
#define OTC_IR_OTCKDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/OtckDialect.h.inc"

#define GET_OP_CLASSES
#include "ir/OtckOps.h.inc"

namespace otc::otck {
/// Module attribute set by buffer planning: the arena's size in bytes.
constexpr const char kArenaSizeAttr[] = "otck.arena_size";
} // namespace otc::otck

#endif // OTC_IR_OTCKDIALECT_H
