//===- Functions.cpp - the module's functions a phase needs ---------------===//

#include "ir/Functions.h"

using namespace mlir;

func::FuncOp otc::requireFunction(ModuleOp module, StringRef name,
                                  StringRef why) {
  auto f = module.lookupSymbol<func::FuncOp>(name);
  if (!f)
    module.emitError("no @") << name << why;
  return f;
}

func::FuncOp otc::requireTrainStep(ModuleOp module) {
  return requireFunction(module, "train_step",
                         ": run --otc-differentiate first");
}
