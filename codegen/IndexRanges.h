//===- IndexRanges.h - what the integer inputs of a program index -*- C++ -*-===//
//
// The ranges the runtime checks integer inputs against (ABI 3 index
// ranges), derived from the kernels of a planned otck module.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_INDEXRANGES_H
#define OTC_CODEGEN_INDEXRANGES_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <optional>
#include <string>

namespace otc {

/// What the integer values of one slot index.
struct IndexUse {
  int64_t bound = 0;
  bool negative = true; ///< every consumer is a gather
  std::optional<int64_t> ignore;
  std::string what;
};

/// What the integer inputs of `module` index, by slot string ("input:x"),
/// from the kernels that read them: a gather's axis (the rows of an
/// embedding table) or a loss's classes; the smallest bound wins.
llvm::StringMap<IndexUse> indexUses(mlir::ModuleOp module);

} // namespace otc

#endif // OTC_CODEGEN_INDEXRANGES_H
