//===- TypeBytes.h - bytes of otc types in memory ----------------*- C++ -*-===//
//
// How many bytes a value takes in the arena, the one definition that buffer
// planning, the cost model, recomputation, the report, plan.json, the
// emitter and the interpreter share: an element takes its bit width rounded
// up to bytes, an i1 one byte.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_TYPEBYTES_H
#define OTC_IR_TYPEBYTES_H

#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "mlir/IR/Value.h"

#include <cstdint>

namespace otc {

/// Bytes one element of `elementType` occupies (i1 takes a byte).
int64_t storageBytes(mlir::Type elementType);

/// Bytes a statically shaped tensor or memref type occupies.
int64_t byteSize(mlir::ShapedType type);

/// Bytes of a tensor or memref value.
int64_t byteSize(mlir::Value value);

} // namespace otc

#endif // OTC_IR_TYPEBYTES_H
