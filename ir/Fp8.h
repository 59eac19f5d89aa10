//===- Fp8.h - the FP8 formats of a GEMM's operands -------------*- C++ -*-===//
//
// Under `--precision=fp8`, otc-fp8-gemms marks each GEMM it runs in FP8
// with the discardable attribute `fp8 = "LHS,RHS"` on its otc.matmul, each
// of LHS and RHS "e4m3" (a forward operand: activation or weight) or
// "e5m2" (a gradient); otc-lower-to-buffers copies it onto the otck.gemm.
// That one fact is what the interpreter (interp/), the emitter
// (codegen/GemmCalls.cpp), the step-time model (perf/Fp8Cost.h) and
// plan.json read. The product it names: each operand scaled per tensor by
// s = max / amax (the format's largest finite value over the largest
// magnitude the operand had on the GEMM's previous call, delayed scaling,
// its own on the first call; at most 2^126, so that 1 / s stays a normal
// float; s = 1 when amax is 0 or not finite), rounded
// to the format (to nearest even, saturating at +-max), multiplied with
// FP32 accumulation and the sum divided by s_lhs s_rhs before the
// epilogue: runtime/include/otcrt/fp8.h rounds for the runtime, the
// interpreter has its own (it runs one step: every call a first one).
//
// One copy per tensor: the FP8 GEMMs of a function that read the same
// value in the same format read one FP8 copy of it, quantized once
// (otc-fp8-copies makes it an otck.fp8_quantize whose copy the GEMMs name;
// the interpreter quantizes each value and format once). The delayed amax
// is then the copy's: the amax the tensor had on the copy's previous
// quantization. Every GEMM reading the copy read that same tensor on its
// previous call too, so this is the amax each call site saw before: the
// numbers do not change. A parameter's BF16 working copy changes only in
// @zero_grads, so its FP8 copy is made there, once per optimizer step, in
// a slot "fp8_copy:<format>:<parameter>" that @micro_step reads: its amax
// is the previous step's weights', as the first micro-step's was before,
// and the later micro-steps quantized the same weights again with that
// same amax.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_FP8_H
#define OTC_IR_FP8_H

#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace otc {

/// The attribute that marks an FP8 GEMM.
constexpr char kFp8Attr[] = "fp8";

enum class Fp8Format { E4M3, E5M2 };

/// The formats of an FP8 GEMM's two operands.
struct Fp8Operands {
  Fp8Format lhs = Fp8Format::E4M3, rhs = Fp8Format::E4M3;
};

/// "e4m3" or "e5m2".
llvm::StringRef fp8FormatName(Fp8Format f);

/// The largest finite value of `f`: 448 (E4M3), 57344 (E5M2).
double fp8Max(Fp8Format f);

/// The attribute's text for `o`: "e4m3,e5m2".
std::string fp8AttrText(Fp8Operands o);

/// The formats `op` (an otc.matmul or otck.gemm) multiplies in, or nullopt
/// when it is not an FP8 GEMM (no attribute, or one that does not parse:
/// the GEMM verifiers refuse that).
std::optional<Fp8Operands> gemmFp8(mlir::Operation *op);

/// Marks `op` as an FP8 GEMM of `o`.
void setGemmFp8(mlir::Operation *op, Fp8Operands o);

/// The format named "e4m3" or "e5m2", or nullopt.
std::optional<Fp8Format> parseFp8Format(llvm::StringRef name);

/// The layouts of an FP8 copy (otck.fp8_quantize): the matrix as stored
/// (row-major, its last dimension's columns), or its transpose.
enum Fp8Layout : int64_t { kFp8AsStored = 1, kFp8Transposed = 2 };

/// The layout a GEMM reads its FP8 operand in: the left one as [M, K], the
/// right one as [N, K] (the one layout cuBLASLt's FP8 GEMMs take), so the
/// transpose of the stored matrix for a transposed left operand or a right
/// operand that is not.
Fp8Layout fp8OperandLayout(bool lhs, bool transposed);

/// The bytes of an FP8 copy of `elements` values in `layouts` (a mask of
/// Fp8Layout): each layout's bytes from a 256-byte boundary, as stored
/// first, then the float 1 / scale at the next 256-byte boundary
/// (otcrt_fp8_copy_bytes of runtime/include/otcrt/fp8.h).
int64_t fp8CopyBytes(int64_t elements, int64_t layouts);

/// Checks `op`'s fp8 attribute, when it has one: "e4m3" or "e5m2" twice,
/// not both E5M2 (cuBLASLt multiplies no such pair), and both operands
/// BF16. Emits the error at `op`.
mlir::LogicalResult verifyGemmFp8(mlir::Operation *op, mlir::Type lhsElement,
                                  mlir::Type rhsElement);

} // namespace otc

#endif // OTC_IR_FP8_H
