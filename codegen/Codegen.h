//===- Codegen.h - code generation from planned otck IR ----------*- C++ -*-===//
//
// The emitters that turn a planned buffer-level module (after
// otc-plan-buffers) into the source of the training program, and the writer
// of plan.json.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_CODEGEN_H
#define OTC_CODEGEN_CODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace otc {

enum class Target { Cpu, Cuda };

struct EmitOptions {
  Target target = Target::Cpu;
  /// The model file, recorded in the program.
  std::string modelPath;
  int64_t microBatch = 0;
  int64_t gradAccum = 1;
};

/// Emits the whole program (C++ for the cpu target, CUDA C++ for cuda).
/// Fails with an error at the op it cannot emit.
mlir::LogicalResult emitProgram(mlir::ModuleOp module,
                                const EmitOptions &options,
                                llvm::raw_ostream &os);

/// What plan.json reports beyond what the planned module holds.
struct PlanInfo {
  std::string target;
  std::string precision = "fp32";
  int64_t microBatch = 0;
  int64_t gradAccum = 1;
  /// Bytes the target allocates outside the arena (GEMM workspace).
  int64_t workspaceBytes = 0;
  /// Forward values the backward reads (kept, not recomputed).
  std::vector<std::string> saved;
  /// Tokens (or samples) per optimizer step, for FLOPs per token.
  int64_t samplesPerStep = 0;
};

/// Writes plan.json for a planned module.
mlir::LogicalResult writePlanJson(mlir::ModuleOp module, const PlanInfo &info,
                                  llvm::raw_ostream &os);

} // namespace otc

#endif // OTC_CODEGEN_CODEGEN_H
