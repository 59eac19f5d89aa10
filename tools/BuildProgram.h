//===- BuildProgram.h - running the target's build of `train` ---*- C++ -*-===//

#ifndef OTC_TOOLS_BUILDPROGRAM_H
#define OTC_TOOLS_BUILDPROGRAM_H

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace otc {

/// Runs `cmd`, printing it first (and, on a terminal, how long it has run);
/// returns false with `err` set on failure.
bool runTool(llvm::ArrayRef<std::string> cmd, std::string &err);

/// The directory of the runtime libraries: next to the tools (an
/// installation), else the build's.
std::string runtimeLibDir(const char *argv0);

} // namespace otc

#endif // OTC_TOOLS_BUILDPROGRAM_H
