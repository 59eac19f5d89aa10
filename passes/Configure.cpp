//===- Configure.cpp - otc-configure ---------------------------------------===//
//
// Sets #otc.config on the module from the pass's options (ir/Config.h), so
// that a pass that reads the configuration can run alone in otc-opt.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "passes/Passes.h"

namespace otc {
#define GEN_PASS_DEF_CONFIGURE
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

struct ConfigurePass : public otc::impl::ConfigureBase<ConfigurePass> {
  using ConfigureBase::ConfigureBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ConfigParts p;
    p.microBatch = microBatch;
    p.gradAccum = gradAccum;
    p.precision = precision;
    p.fp32GradAccum = fp32GradAccum;
    p.weightDecay = weightDecay;
    p.beta1 = beta1;
    p.beta2 = beta2;
    p.epsilon = epsilon;
    p.target = target;
    p.device = device;
    p.worldSize = worldSize;
    p.shardOptimizer = shardOptimizer;
    ConfigAttr c = makeConfig(&getContext(), p, [&] {
      return module.emitError("otc-configure: ");
    });
    if (!c)
      return signalPassFailure();
    setConfig(module, c);
  }
};

} // namespace
