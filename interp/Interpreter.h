//===- Interpreter.h - reference interpreter of otc -------------*- C++ -*-===//
//
// Executes a function of `otc` ops on the CPU with plain, obviously-correct
// loops in double precision. It is the oracle that the generated code and the
// differentiation pass are checked against, so it deliberately shares no
// kernel code with the code generators: every op is one short function that a
// reviewer can check against the op's description in ir/OtcOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_INTERP_INTERPRETER_H
#define OTC_INTERP_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace otc::interp {

/// A tensor in the interpreter: every element held as double, whatever the
/// element type (i64/i32/i1 values stored exactly as doubles). `data` holds
/// the elements in row-major order; a 0-d tensor has an empty shape and one
/// element.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// Runs `func` (a func.func of otc ops with a single block ending in
/// func.return) on `args`; on failure emits an error at the offending op's
/// location and returns failure.
mlir::FailureOr<std::vector<Tensor>> runFunction(mlir::func::FuncOp func,
                                                 llvm::ArrayRef<Tensor> args);

/// The dropout keep decision for element `index` (flat, row-major) of a
/// dropout op with random `key`, attribute `stream` and `ratio`; exposed for
/// tests. See Interpreter.cpp for the exact formula.
bool dropoutKeep(uint64_t key, uint64_t stream, uint64_t index, double ratio);

} // namespace otc::interp

#endif // OTC_INTERP_INTERPRETER_H
