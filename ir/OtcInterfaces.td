//===- OtcInterfaces.td - interfaces of otc ops ------------*- tablegen -*-===//
//
// Per-op knowledge that passes query without switching on op kinds: the
// reverse-mode gradient rule.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_INTERFACES_TD
#define OTC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Otc_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    The reverse-mode rule of an op. Given the gradients of the op's results
    (a null Value where a result receives none), builds ops that compute the
    gradients of its operands at the builder's insertion point. Operands that
    are not differentiable (indices, masks, keys) get a null Value.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operand gradients from `resultGrads` (one per result, null
        for results without a gradient). Appends exactly one Value per operand
        to `operandGrads`, null for operands without a gradient.
      }],
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // OTC_INTERFACES_TD
