//===- ProgramEmitter.h - the program emitter's state ----------*- C++ -*-===//
//
// Private to codegen/: the emitter of a planned otck module
// (EmitProgram.cpp: functions, kernels and launches; EmitLibraryCalls.cpp:
// the kernel library's calls, GEMMs and FP8 copies).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_PROGRAMEMITTER_H
#define OTC_CODEGEN_PROGRAMEMITTER_H

#include "codegen/BodyUtils.h"
#include "codegen/Codegen.h"
#include "codegen/DescriptorTables.h"
#include "codegen/Launches.h"
#include "codegen/Target.h"
#include "ir/Config.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace otc::codegen {
using namespace mlir;

class ProgramEmitter {
public:
  ProgramEmitter(const EmitOptions &options, ConfigAttr config,
                 const Target &target)
      : opts(options), config(config), target(target) {}

  LogicalResult emit(ModuleOp module, raw_ostream &os);

private:
  /// The optional functions of the program that the module has.
  struct EmittedFunctions {
    bool eval = false, decode = false, refresh = false;
  };
  /// Emits every function of the program (funcs).
  FailureOr<EmittedFunctions> emitFunctions(ModuleOp module);
  /// The file's head: includes, the BF16 prelude, the short forms.
  void emitPreamble(ModuleOp module, raw_ostream &os);
  /// The tables, the OtcProgram descriptor and main.
  void emitDescriptor(ModuleOp module, int64_t arenaBytes,
                      const DescriptorTables &tables,
                      const EmittedFunctions &emitted, raw_ostream &os);
  LogicalResult emitFunction(func::FuncOp f);
  LogicalResult emitKernel(otck::KernelOp k);
  LogicalResult emitLibraryCall(otck::KernelOp k, LibraryCallOpInterface op);
  LogicalResult emitElementwiseChain(otck::KernelOp k);
  /// A kernel's parameters (`const T *in<i>`, then `T *out<i>`) and the
  /// buffers its launch passes for them.
  void kernelArguments(otck::KernelOp k, SmallVectorImpl<std::string> &params,
                       SmallVectorImpl<std::string> &args);
  /// Emits kernel `def` (its text after the name) once and its launch over
  /// `n` work items with `args`; `what` names it in comments and the trace.
  std::string loopHead(int64_t itemElements = 1) const;
  void emitLaunch(const std::string &def, int64_t n,
                  ArrayRef<std::string> args, StringRef node, StringRef what,
                  int width = 1);
  LogicalResult emitGemm(otck::GemmOp g);
  LogicalResult emitFp8Quantize(otck::Fp8QuantizeOp q);
  void emitCopy(otck::CopyOp c);

  const EmitOptions &opts;
  /// The module's configuration: target, micro-batch, grad-accum.
  ConfigAttr config;
  /// What the target of the configuration prints differently.
  const Target &target;
  /// File-scope text: constant tables and kernels, then functions.
  std::string globalsText, kernelsText, funcsText;
  llvm::raw_string_ostream globals{globalsText}, kernels{kernelsText},
      funcs{funcsText};
  /// Names of the buffers of the function being emitted.
  DenseMap<Value, std::string> names;
  /// The program-wide name of each slot, and their definitions.
  llvm::StringMap<std::string> slotNames;
  std::string slotDefsText;
  llvm::raw_string_ostream slotDefs{slotDefsText};
  unsigned kernelCount = 0, globalCount = 0;
  /// Kernels by their text after the name (signature, loop and body).
  llvm::StringMap<std::string> kernelByText;
  /// Arena bytes to zero, gathered across consecutive zero fills.
  ZeroFills zeroFills;
  /// Data parallelism overlapped with the backward (ir/GradientBuckets.h):
  /// the ops of @micro_step after which a bucket of gradients is final.
  llvm::DenseMap<Operation *, SmallVector<int>> readyAfter;
  void emitMemset(int64_t offset, int64_t bytes) {
    target.emitMemset(funcs, offset, bytes);
  }
  void flushZero() {
    zeroFills.flush([&](int64_t o, int64_t n) { emitMemset(o, n); });
  }
};

} // namespace otc::codegen

#endif // OTC_CODEGEN_PROGRAMEMITTER_H
