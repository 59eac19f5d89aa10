//===- GemmCalls.h - the runtime call of an otck.gemm ------------*- C++ -*-===//
//
// The otcrt_gemm_* call text of a GEMM, shared by the program emitter.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_GEMMCALLS_H
#define OTC_CODEGEN_GEMMCALLS_H

#include "ir/OtckDialect.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>

namespace otc {

/// `fn(args)` computing `g` (no trailing `;`), each buffer named by `name`;
/// empty for an empty batch. A batch of products that share their right
/// operand, the left one not transposed, is one product of batch x M rows.
/// Fails with an error on `g` for type combinations the library lacks.
mlir::FailureOr<std::string>
gemmCall(otck::GemmOp g, llvm::function_ref<std::string(mlir::Value)> name);

} // namespace otc

#endif // OTC_CODEGEN_GEMMCALLS_H
