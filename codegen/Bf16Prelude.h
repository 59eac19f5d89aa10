//===- Bf16Prelude.h - BF16 storage in the generated programs ---*- C++ -*-===//
//
// The BF16 emulation prelude of the generated programs.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_BF16PRELUDE_H
#define OTC_CODEGEN_BF16PRELUDE_H

#include "mlir/IR/BuiltinOps.h"

namespace otc {

/// The source defining `otc_bf16` and its float conversions, for the cpu
/// and cuda targets alike.
const char *bf16Prelude();

/// Whether any buffer of `module` holds BF16.
bool usesBf16(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_CODEGEN_BF16PRELUDE_H
