//===- OtcAttrs.td - otc dialect attributes ----------------*- tablegen -*-===//
//
// The configuration of a compile, which otc-compile sets on the module right
// after import (`otc.config`) and every pass, the planner, the emitter and
// plan.json read from there (ir/Config.h).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_ATTRS_TD
#define OTC_ATTRS_TD

include "ir/OtcBase.td"
include "mlir/IR/AttrTypeBase.td"

/// A float (an APFloat of double semantics) printed and parsed as a float
/// literal: the round trip is exact.
class Otc_DoubleParameter<string desc>
    : AttrOrTypeParameter<"::llvm::APFloat", desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
      double v;
      if (::mlir::failed($_parser.parseFloat(v)))
        return ::mlir::failure();
      return ::llvm::APFloat(v);
    }() }];
  let printer = [{ $_printer.printFloat($_self) }];
}

/// A bool printed and parsed as `true` or `false`.
class Otc_BoolParameter<string desc> : AttrOrTypeParameter<"bool", desc> {
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
      if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
        return true;
      if (::mlir::succeeded($_parser.parseOptionalKeyword("false")))
        return false;
      return $_parser.emitError($_parser.getCurrentLocation(),
                                "expected true or false");
    }() }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

/// A boolean parameter that is false when left out (and printed only when
/// true).
class Otc_DefaultFalseParameter<string desc> : Otc_BoolParameter<desc> {
  let defaultValue = "false";
}

def Otc_ConfigAttr : AttrDef<Otc_Dialect, "Config"> {
  let mnemonic = "config";
  let summary = "What a compile is for: batch, precision, optimizer, target";
  let description = [{
    One per module (the `otc.config` module attribute), set once after
    import:
    - `micro_batch`: samples per micro-step (the graph inputs' leading
      dimension), `grad_accum`: micro-steps per optimizer step;
    - `precision`: "fp32", "bf16" (BF16 compute with FP32 masters and
      AdamW states), or "fp8" (bf16, and the GEMMs otc-fp8-gemms picks
      multiply per-tensor scaled FP8 operands: ir/Fp8.h), with
      `fp32_grad_accum` keeping the gradients FP32 (bf16 or fp8);
    - AdamW's `weight_decay`, `beta1`, `beta2` and `epsilon`;
    - `target`: a registered target ("cpu", "cuda"; ir/TargetRegistry.h),
      and `device`, one of that target's device models, which its time is
      predicted on ("cpu"; "h100", "h200");
    - `world_size`: the data-parallel ranks the program is planned for
      (each runs the same micro-steps on its part of the batch and the
      gradients are summed over the ranks before the optimizer step; the
      prediction adds that all-reduce), 1 when left out;
    - `shard_optimizer`: ZeRO-1 over those ranks: each rank keeps 1/world_size
      of the AdamW moments and updates that part of the parameters (the
      gradients reduce-scattered, the parameters all-gathered after the
      update); false when left out.
    Example:
      #otc.config<micro_batch = 8, grad_accum = 16, precision = "bf16",
                  fp32_grad_accum = false, weight_decay = 1.000000e-01,
                  beta1 = 9.000000e-01, beta2 = 9.990000e-01,
                  epsilon = 1.000000e-08, target = "cuda", device = "h100">
  }];
  let parameters = (ins
    "int64_t":$micro_batch,
    "int64_t":$grad_accum,
    StringRefParameter<"fp32, bf16 or fp8">:$precision,
    Otc_BoolParameter<"FP32 gradients under bf16 or fp8">:$fp32_grad_accum,
    Otc_DoubleParameter<"AdamW weight decay">:$weight_decay,
    Otc_DoubleParameter<"AdamW beta1">:$beta1,
    Otc_DoubleParameter<"AdamW beta2">:$beta2,
    Otc_DoubleParameter<"AdamW epsilon">:$epsilon,
    StringRefParameter<"a registered target">:$target,
    StringRefParameter<"the device model">:$device,
    DefaultValuedParameter<"int64_t", "1", "data-parallel ranks">:$world_size,
    Otc_DefaultFalseParameter<"the AdamW moments sharded over the ranks">:$shard_optimizer
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// BF16 compute: precision "bf16", or "fp8" (BF16 everywhere but the
    /// FP8 GEMMs).
    bool bf16() const {
      return getPrecision() == "bf16" || getPrecision() == "fp8";
    }
    /// Precision "fp8": otc-fp8-gemms picks the GEMMs that run FP8.
    bool fp8() const { return getPrecision() == "fp8"; }
    double weightDecay() const { return getWeightDecay().convertToDouble(); }
    double beta1() const { return getBeta1().convertToDouble(); }
    double beta2() const { return getBeta2().convertToDouble(); }
    double epsilon() const { return getEpsilon().convertToDouble(); }
  }];
}

#endif // OTC_ATTRS_TD
