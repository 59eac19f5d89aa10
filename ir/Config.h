//===- Config.h - the configuration of a compile ------------------*- C++ -*-===//
//
// The one home of a compile's facts: micro-batch, grad-accum, precision,
// AdamW's hyper-parameters, target and device model, set on the module as
// `otc.config` (#otc.config, ir/OtcAttrs.td) right after import by
// otc-compile, or by `otc-opt --otc-configure=...` for a pass run alone.
// Passes, the planner, the emitter and plan.json read it from the module.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_CONFIG_H
#define OTC_IR_CONFIG_H

#include "ir/OtcDialect.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace otc {

/// The module attribute that holds the configuration.
constexpr char kConfigAttr[] = "otc.config";

/// The device model a target defaults to (`--device`, #otc.config's device;
/// ir/TargetRegistry.h), or "" for a target not registered.
llvm::StringRef defaultDevice(llvm::StringRef target);

/// The fields of a configuration, with the defaults of otc-compile.
struct ConfigParts {
  int64_t microBatch = 1, gradAccum = 1;
  std::string precision = "fp32";
  bool fp32GradAccum = false;
  double weightDecay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  std::string target = "cpu";
  /// Empty: the target's default device model (ir/TargetRegistry.h).
  std::string device;
  /// Data-parallel ranks (ConfigAttr's world_size).
  int64_t worldSize = 1;
  /// ZeRO-1: the AdamW moments sharded over the ranks (ConfigAttr's
  /// shard_optimizer).
  bool shardOptimizer = false;
};

/// The attribute of `parts`, or an error through `emitError` when a field is
/// out of its range (ConfigAttr's verifier).
ConfigAttr makeConfig(mlir::MLIRContext *context, const ConfigParts &parts,
                      llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// The fields of `config`.
ConfigParts partsOf(ConfigAttr config);

/// The configuration of `module`, or null when it has none.
ConfigAttr getConfig(mlir::ModuleOp module);

/// The configuration of `module`, or an error at the module saying that
/// `who` needs one (otc-compile sets it; otc-opt takes --otc-configure).
mlir::FailureOr<ConfigAttr> requireConfig(mlir::ModuleOp module,
                                          llvm::StringRef who);

/// Sets (or replaces) the configuration of `module`.
void setConfig(mlir::ModuleOp module, ConfigAttr config);

} // namespace otc

#endif // OTC_IR_CONFIG_H
