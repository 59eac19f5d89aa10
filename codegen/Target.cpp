//===- Target.cpp - the emitter of a registered target --------------------===//

#include "codegen/Target.h"
#include "ir/TargetRegistry.h"

using namespace otc;

const Target *otc::lookupTarget(llvm::StringRef name) {
  const TargetEntry *entry = lookupTargetEntry(name);
  return entry ? entry->emitter : nullptr;
}
