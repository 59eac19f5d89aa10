//===- Launches.h - what the program launches for each otck op ---*- C++
//-*-===//
//
// The emitter (EmitProgram.cpp) and the step-time prediction (StepTime.cpp)
// must agree on what one otck op becomes in the program: the name of its
// span in `train --trace` (the ONNX node and what the kernel computes
// there), which kernels are zero fills that the program merges into one
// memset, and how many elements a chain moves per access. Both read these
// functions, so a predicted kernel and a traced one carry the same name and
// the prediction prices the launch the program makes (its grid is the cuda
// target's: targets/cuda/Launches.h).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_LAUNCHES_H
#define OTC_CODEGEN_LAUNCHES_H

#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

#include <optional>
#include <string>
#include <utility>

namespace otc {

/// The ONNX node an op came from ("" when none).
std::string nodeName(mlir::Location loc);

/// The name of a kernel's span in `train --trace`: "node (what)", or `what`
/// alone without a node.
std::string traceName(llvm::StringRef node, llvm::StringRef what);

/// What a chain of elementwise ops (one kernel of otc-fuse-elementwise) is
/// called: "fused " and its ops in order (the first six, then "..."), and the
/// node of the last op that has one.
std::pair<std::string, std::string> chainNodeAndWhat(otck::KernelOp k);

/// The trace name of a kernel: a library call's, a single op's or a chain's.
std::string kernelTraceName(otck::KernelOp k);

/// The trace name of a GEMM.
std::string gemmTraceName(otck::GemmOp g);

/// The trace name of an FP8 copy's quantization: "node (fp8_quantize)".
std::string fp8QuantizeTraceName(otck::Fp8QuantizeOp q);

/// (offset, bytes) when `op` is a kernel that fills one planned buffer with
/// +0 (all bits zero), as gradient zeroing does: the program writes such
/// kernels as memsets, adjacent ones merged into one.
std::optional<std::pair<int64_t, int64_t>> zeroFill(mlir::Operation &op);

/// The memsets a function's zero fills become, as the program makes them
/// (the emitter prints them, the step-time model prices them): consecutive
/// fills of adjacent buffers, with only the planned buffers' alignment
/// padding (which no buffer uses) between them, are one memset.
class ZeroFills {
public:
  /// Receives one memset: arena offset and bytes.
  using Memset = llvm::function_ref<void(int64_t offset, int64_t bytes)>;

  /// `alignment`: the planned buffers' (1 when unknown: no padding).
  explicit ZeroFills(int64_t alignment = 1) : alignment(alignment) {}
  void setAlignment(int64_t a) { alignment = a; }

  /// Takes `op` when it is a zero fill (zeroFill), into the pending memset
  /// when it starts where that one ends, else after passing the pending one
  /// to `memset`; false when `op` is no zero fill.
  bool take(mlir::Operation &op, Memset memset);
  /// Passes the pending memset, if any, to `memset`.
  void flush(Memset memset);

private:
  int64_t alignment;
  std::optional<std::pair<int64_t, int64_t>> pending;
};

/// Whether the cuda emitter writes generated kernel `k` (not a library call)
/// as a chain: more than one op, or one elementwise op with a scalar
/// expression (a chain of one).
bool emittedAsChain(otck::KernelOp k);

/// Whether every use of input `arg` of a chain kernel is a slice
/// (otc-fuse-elementwise's folded slices): its element i is never read as
/// such, only the elements at the slices' offsets.
bool readBySlicesAlone(mlir::BlockArgument arg);

/// The elements a chain kernel moves per load and store on cuda: 16 bytes
/// where it can, when every buffer it reads or writes has the domain's shape
/// (or is read through slices of unit stride along the last axis that the
/// width divides with its start, and the last dimensions) and holds f32 or
/// bf16 (buffers start 256-byte aligned): 8 elements when all are bf16,
/// else 4 (a bf16 buffer then moves 8 bytes), the last elements one by one;
/// 1 otherwise (every element one by one).
int chainVectorWidth(otck::KernelOp k);

} // namespace otc

#endif // OTC_CODEGEN_LAUNCHES_H
