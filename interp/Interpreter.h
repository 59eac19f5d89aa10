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
/// location and returns failure. With `roundBf16`, every result of BF16
/// element type is rounded to BF16 (nearest even) as it is computed, as the
/// compiled programs store such values (otc-run --round-bf16: what checks
/// a BF16 or FP8 program's IR after otc-mixed-precision); otherwise values
/// are rounded only where a cast says so. Each value is dropped once the
/// last op that reads it has run; the overload taking `args` by rvalue
/// moves them in (otc-run: a model's weights are held once, not twice).
mlir::FailureOr<std::vector<Tensor>>
runFunction(mlir::func::FuncOp func, llvm::ArrayRef<Tensor> args,
            bool roundBf16 = false);
mlir::FailureOr<std::vector<Tensor>>
runFunction(mlir::func::FuncOp func, std::vector<Tensor> &&args,
            bool roundBf16 = false);

/// The dropout keep decision for element `index` (flat, row-major) of a
/// dropout op with random `key`, attribute `stream` and `ratio`; exposed for
/// tests. See Interpreter.cpp for the exact formula.
bool dropoutKeep(uint64_t key, uint64_t stream, uint64_t index, double ratio);

/// x rounded to FP8, E4M3 (`e4m3`: 3 mantissa bits, normals from 2^-6,
/// subnormals to 2^-9, largest 448) or E5M2 (2 bits, 2^-14, 2^-16, 57344):
/// to nearest, ties to even, held at the largest finite magnitude past it
/// (infinities too), NaN kept. What an FP8 GEMM's scaled operands are
/// rounded with (interp/DataMovementOps.cpp); exposed for tests.
double roundToFp8(double x, bool e4m3);

} // namespace otc::interp

#endif // OTC_INTERP_INTERPRETER_H
