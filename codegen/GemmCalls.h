//===- GemmCalls.h - the runtime call of an otck.gemm ------------*- C++ -*-===//
//
// The otcrt_gemm call of a GEMM (runtime/include/otcrt/abi.h): its OtcrtGemm
// descriptor and its operands, which the program emitter prints as a static
// const descriptor and a checked library call.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_GEMMCALLS_H
#define OTC_CODEGEN_GEMMCALLS_H

#include "ir/OtckDialect.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace otc {

/// One otcrt_gemm (or otcrt_gemm_fp8) call.
struct GemmCall {
  /// The OtcrtGemm initializer, `{0, 1, 4, ...}`.
  std::string descriptor;
  /// The pointer arguments after the descriptor, less the stream: A, B, C,
  /// bias, addend, aux (`nullptr` where the call has none).
  std::string operands;
  /// Those buffers in order (null where the call passes `nullptr`).
  std::vector<mlir::Value> buffers;
  /// An FP8 GEMM (ir/Fp8.h): otcrt_gemm_fp8 with the OtcrtFp8Format of A
  /// and B (otcrt/fp8.h: 0 E4M3, 1 E5M2), as the library sees them (the
  /// operands of the GEMM op in order).
  std::optional<std::pair<int, int>> fp8;
  /// An FP8 GEMM reading FP8 copies (otck.gemm's lhs_fp8 and rhs_fp8):
  /// otcrt_gemm_fp8_copies with each copy's layouts (ir/Fp8.h Fp8Layout).
  std::optional<std::pair<int64_t, int64_t>> copies;
  /// A GEMM that also sums one operand (otck.gemm's sums): otcrt_gemm_sums,
  /// its operands A, B, C and the sums (in `operands` and `buffers`), then
  /// these three arguments in order.
  struct Sums {
    /// OtcrtGemmSumsOf: 0 the left operand, 1 the right one.
    int of = 0;
    /// The sums' OtcDType ("OTC_F32", "OTC_BF16").
    std::string type;
    bool accumulate = false;
  };
  std::optional<Sums> sums;
};

/// The call computing `g`, each buffer named by `name`; nullopt for an
/// empty batch (nothing to call). A batch of products that share their
/// right operand, the left one not transposed, is one product of batch x M
/// rows. Fails with an error on `g` for type combinations the library lacks.
mlir::FailureOr<std::optional<GemmCall>>
gemmCall(otck::GemmOp g, llvm::function_ref<std::string(mlir::Value)> name);

} // namespace otc

#endif // OTC_CODEGEN_GEMMCALLS_H
