//===- Target.cpp - the list of targets ------------------------------------===//

#include "codegen/Target.h"

using namespace otc;

const Target *otc::lookupTarget(llvm::StringRef name) {
  for (const Target *t : {&cpuTarget(), &cudaTarget()})
    if (t->name() == name)
      return t;
  return nullptr;
}
