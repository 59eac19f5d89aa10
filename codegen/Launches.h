//===- Launches.h - what the program launches for each otck op ---*- C++
//-*-===//
//
// The emitter (EmitProgram.cpp) and the step-time prediction (StepTime.cpp)
// must agree on what one otck op becomes in the program: the name of its
// span in `train --trace` (the ONNX node and what the kernel computes
// there), and which kernels are zero fills that the program merges into one
// memset. Both read these functions, so a predicted kernel and a traced one
// carry the same name.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_LAUNCHES_H
#define OTC_CODEGEN_LAUNCHES_H

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

/// (offset, bytes) when `op` is a kernel that fills one planned buffer with
/// +0 (all bits zero), as gradient zeroing does: the program writes such
/// kernels as memsets, adjacent ones merged into one.
std::optional<std::pair<int64_t, int64_t>> zeroFill(mlir::Operation &op);

/// Whether zero fill `next` starts where `pending` ends (only the planned
/// buffers' alignment padding, which no buffer uses, between them), so that
/// one memset covers both.
bool zeroFillsMerge(std::pair<int64_t, int64_t> pending,
                    std::pair<int64_t, int64_t> next, int64_t alignment);

} // namespace otc

#endif // OTC_CODEGEN_LAUNCHES_H
