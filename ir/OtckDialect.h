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
/// Module attribute set by buffer planning: every buffer's offset is a
/// multiple of it, and the bytes up to the next multiple after a buffer are
/// padding no buffer uses.
constexpr const char kAlignmentAttr[] = "otck.alignment";

/// The buffer whose bytes `v` (a buffer or a chain of views of one) are.
mlir::Value storageOf(mlir::Value v);

/// Calls `fn` for every op that uses the bytes of `buffer`: its users and,
/// through views, theirs (the views themselves excluded).
void forEachByteUser(mlir::Value buffer,
                     llvm::function_ref<void(mlir::Operation *)> fn);
} // namespace otc::otck

#endif // OTC_IR_OTCKDIALECT_H
