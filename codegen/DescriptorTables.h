//===- DescriptorTables.h - the tables of a program's descriptor -*- C++ -*-===//
//
// The static tables a generated program's OtcProgram descriptor points at
// (runtime/include/otcrt/abi.h): the slot table and its shapes, the ranges of
// the integer inputs that index a table, ZeRO-1's groups (version 6) and the
// gradient buckets (version 7). The program emitter (EmitProgram.cpp) writes
// them after the functions and the descriptor itself after them.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_DESCRIPTORTABLES_H
#define OTC_CODEGEN_DESCRIPTORTABLES_H

#include "ir/Config.h"
#include "ir/GradientBuckets.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace otc {

/// The tables' text (kShape*, kSlots, kIndexRanges, and where they apply
/// kShards and kBucketRanges) and what the descriptor needs of them.
struct DescriptorTables {
  std::string text;
  size_t numSlots = 0, numIndexRanges = 0, numBucketRanges = 0;
  /// Whether kShards is there (ZeRO-1).
  bool shards = false;
};

/// The tables of planned `module` under `config`, with `buckets` (its
/// gradient buckets, ir/GradientBuckets.h); fails, with an error at the
/// module, on a slot the ABI cannot describe or a sharded optimizer without
/// its groups, and with an internal error at the op where a function
/// writes a BUFFER slot (checkpoints keep a buffer's CRC-32 alone, and a
/// resume reloads it from the initial parameters).
mlir::FailureOr<DescriptorTables>
emitDescriptorTables(mlir::ModuleOp module, ConfigAttr config,
                     llvm::ArrayRef<GradientBucket> buckets);

/// `s` as a C string literal.
std::string cString(llvm::StringRef s);

} // namespace otc

#endif // OTC_CODEGEN_DESCRIPTORTABLES_H
