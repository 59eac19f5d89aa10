//===- Target.h - what each target of the training program owns -----------===//
//
// A target (cpu, cuda) is the one place that knows how its training program
// differs: the headers and launch macros of the emitted source, how a
// generated kernel is declared and loops over its items, how a function
// binds the runtime's stream, how memory is cleared and copied, what a
// library call is given as its stream, whether generated kernels move 16
// bytes per access and record bad indices, the source's file name, and the
// compile and link line of `train`. The emitter asks the target of the
// module's #otc.config instead of branching on its name. The targets
// themselves live in targets/<t>/ (targets/Targets.h), each registering its
// Target in ir/TargetRegistry.h beside its device models.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_CODEGEN_TARGET_H
#define OTC_CODEGEN_TARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace otc {

/// The files of one build of `train`.
struct BuildPaths {
  /// The emitted source, and the program to write.
  std::string source, program;
  /// The folder holding the runtime's libraries (libotcrt_<target>.a).
  std::string runtimeLibDir;
  /// The device's GPU architecture (perf/DeviceModel.h's `arch`, "90"), or
  /// empty.
  std::string arch;
};

class Target {
public:
  virtual ~Target() = default;

  /// The --target name.
  virtual llvm::StringRef name() const = 0;
  /// The emitted source's file name in the output folder.
  virtual llvm::StringRef sourceFile() const = 0;

  //===--- The emitted source ---------------------------------------------===//

  /// Headers after the standard ones every program includes.
  virtual void emitIncludes(llvm::raw_ostream &os) const = 0;
  /// OTC_LAUNCH and OTC_LAUNCH_PACKETS (a generated kernel over `n` items,
  /// by items or by packets of `w`) and what they need.
  virtual void emitLaunchMacros(llvm::raw_ostream &os) const = 0;
  /// What precedes a generated kernel's name in its definition.
  virtual llvm::StringRef kernelQualifier() const = 0;
  /// What precedes a generated table's declaration (`const T name[]`).
  virtual llvm::StringRef tableQualifier() const = 0;
  /// The loop of a generated kernel over its `items`, index `i`, opened;
  /// each item covers `itemElements` elements (a run, copiesRuns).
  virtual std::string loopHead(int64_t itemElements = 1) const = 0;
  /// The first statements of each program function.
  virtual void emitFunctionPrologue(llvm::raw_ostream &os) const = 0;
  /// Clears `bytes` of the arena from `offset`.
  virtual void emitMemset(llvm::raw_ostream &os, int64_t offset,
                          int64_t bytes) const = 0;
  /// Copies `bytes` from buffer `from` to buffer `to`.
  virtual void emitCopy(llvm::raw_ostream &os, llvm::StringRef to,
                        llvm::StringRef from, int64_t bytes) const = 0;
  /// The stream argument of a library call or GEMM.
  virtual llvm::StringRef streamArgument() const = 0;
  /// Whether generated elementwise kernels read and write 16-byte packets
  /// where their buffers allow (Launches.h: chainVectorWidth).
  virtual bool packsElementwise() const = 0;
  /// Whether a generated slice, transpose or concat copies a run of
  /// contiguous elements an item (copyRunElements) for the host compiler
  /// to vectorize, where it does not pack.
  virtual bool copiesRuns() const = 0;

  //===--- Building `train` -----------------------------------------------===//

  /// The command that compiles the source and links it with the runtime,
  /// or why it cannot run here (no compiler, no runtime library).
  virtual llvm::Expected<std::vector<std::string>>
  buildCommand(const BuildPaths &paths) const = 0;
};

/// The emitter of the registered target named `name`, or null.
const Target *lookupTarget(llvm::StringRef name);

} // namespace otc

#endif // OTC_CODEGEN_TARGET_H
