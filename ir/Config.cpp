//===- Config.cpp - the configuration of a compile -------------------------===//
//
// The verifier of #otc.config and the helpers of ir/Config.h.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/TargetRegistry.h"

#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace otc;

LogicalResult
ConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   int64_t microBatch, int64_t gradAccum, StringRef precision,
                   bool fp32GradAccum, llvm::APFloat weightDecayValue,
                   llvm::APFloat beta1Value, llvm::APFloat beta2Value,
                   llvm::APFloat epsilonValue, StringRef target,
                   StringRef device, int64_t worldSize, bool shardOptimizer) {
  double weightDecay = weightDecayValue.convertToDouble(),
         beta1 = beta1Value.convertToDouble(),
         beta2 = beta2Value.convertToDouble(),
         epsilon = epsilonValue.convertToDouble();
  if (microBatch < 1)
    return emitError() << "micro_batch must be at least 1, got " << microBatch;
  if (gradAccum < 1)
    return emitError() << "grad_accum must be at least 1, got " << gradAccum;
  if (worldSize < 1)
    return emitError() << "world_size must be at least 1, got " << worldSize;
  if (shardOptimizer && worldSize < 2)
    return emitError() << "shard_optimizer needs a world_size of 2 or more, "
                          "got "
                       << worldSize;
  if (precision != "fp32" && precision != "bf16" && precision != "fp8")
    return emitError()
           << "precision must be \"fp32\", \"bf16\" or \"fp8\", got \""
           << precision << "\"";
  if (fp32GradAccum && precision == "fp32")
    return emitError() << "fp32_grad_accum needs precision \"bf16\" or "
                          "\"fp8\"";
  if (!(weightDecay >= 0) || !std::isfinite(weightDecay))
    return emitError() << "weight_decay must be finite and non-negative, got "
                       << weightDecay;
  for (auto [name, beta] : {std::pair{"beta1", beta1}, {"beta2", beta2}})
    if (!(beta >= 0 && beta < 1))
      return emitError() << name << " must lie in [0, 1), got " << beta;
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    return emitError() << "epsilon must be finite and positive, got "
                       << epsilon;
  const TargetEntry *entry = lookupTargetEntry(target);
  if (!entry)
    return emitError() << "unknown target \"" << target
                       << "\" (registered: " << registeredTargetNames() << ")";
  if (!entry->device(device)) {
    InFlightDiagnostic d = emitError();
    d << "target \"" << target << "\" has no device \"" << device
      << "\" (its devices:";
    for (const TargetDevice &known : entry->devices)
      d << " " << known.name;
    return d << ")";
  }
  return success();
}

StringRef otc::defaultDevice(StringRef target) {
  const TargetEntry *entry = lookupTargetEntry(target);
  return entry ? entry->defaultDevice() : StringRef();
}

ConfigAttr otc::makeConfig(MLIRContext *context, const ConfigParts &p,
                           function_ref<InFlightDiagnostic()> emitError) {
  std::string device =
      !p.device.empty() ? p.device : defaultDevice(p.target).str();
  return ConfigAttr::getChecked(
      emitError, context, p.microBatch, p.gradAccum, StringRef(p.precision),
      p.fp32GradAccum, llvm::APFloat(p.weightDecay), llvm::APFloat(p.beta1),
      llvm::APFloat(p.beta2), llvm::APFloat(p.epsilon), StringRef(p.target),
      StringRef(device), p.worldSize, p.shardOptimizer);
}

ConfigParts otc::partsOf(ConfigAttr c) {
  ConfigParts p;
  p.microBatch = c.getMicroBatch();
  p.gradAccum = c.getGradAccum();
  p.worldSize = c.getWorldSize();
  p.shardOptimizer = c.getShardOptimizer();
  p.precision = c.getPrecision().str();
  p.fp32GradAccum = c.getFp32GradAccum();
  p.weightDecay = c.weightDecay();
  p.beta1 = c.beta1();
  p.beta2 = c.beta2();
  p.epsilon = c.epsilon();
  p.target = c.getTarget().str();
  p.device = c.getDevice().str();
  return p;
}

ConfigAttr otc::getConfig(ModuleOp module) {
  return module ? module->getAttrOfType<ConfigAttr>(kConfigAttr) : ConfigAttr();
}

FailureOr<ConfigAttr> otc::requireConfig(ModuleOp module, StringRef who) {
  if (ConfigAttr c = getConfig(module))
    return c;
  return module.emitError()
         << who << " needs the compile's configuration (the module's "
         << kConfigAttr
         << " attribute: otc-compile sets it; otc-opt takes --otc-configure)";
}

void otc::setConfig(ModuleOp module, ConfigAttr config) {
  module->setAttr(kConfigAttr, config);
}
