//===- OtcBase.td - otc dialect definition -----------------*- tablegen -*-===//
//
// The `otc` dialect: the tensor-level IR that an ONNX model is imported into and
// that the training passes (differentiation, recomputation, precision, the training
// loop) transform. Every value is a statically shaped tensor; every op keeps the
// ONNX node it came from as its location.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_BASE_TD
#define OTC_BASE_TD

include "mlir/IR/OpBase.td"

def Otc_Dialect : Dialect {
  let name = "otc";
  let cppNamespace = "::otc";
  let summary = "Tensor-level IR of the ONNX training compiler";
  let description = [{
    Ops on statically shaped tensors with ONNX (numpy) broadcasting semantics,
    plus the ops that differentiation and the training loop introduce (gradient
    kernels of the loss and activations, the AdamW update).
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Otc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Otc_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Per-op traits the passes read instead of lists of op kinds
//===----------------------------------------------------------------------===//

/// Result element i depends only on element i of each operand (numpy
/// broadcasting for smaller ones) and is written after every operand element
/// it needs is read: the result may take a same-typed operand's buffer, and
/// the result can go straight into a slot the op reads last.
def Otc_Elementwise : NativeOpTrait<"OtcElementwise"> {
  let cppNamespace = "::mlir::OpTrait";
}

/// Precision rules of otc-mixed-precision (an op without one follows its
/// operands: BF16 when every non-constant float operand is BF16).
/// FP32 whatever its operands (reductions, softmax, exp/log/pow, losses...).
def Otc_Fp32Compute : NativeOpTrait<"OtcFp32Compute"> {
  let cppNamespace = "::mlir::OpTrait";
}
/// BF16 operands, FP32 accumulation, the result rounded to BF16 (products).
def Otc_BF16Product : NativeOpTrait<"OtcBF16Product"> {
  let cppNamespace = "::mlir::OpTrait";
}
/// FP32 sums of a gradient (a gather's gradient): the result rounded to BF16,
/// as a product's is, when the summed gradient is BF16 and the result is an
/// activation's gradient (the gradient of a BF16 value is BF16); FP32 when
/// it is a parameter's (its contributions are summed in FP32) or the
/// gradient is FP32.
def Otc_GradientSum : NativeOpTrait<"OtcGradientSum"> {
  let cppNamespace = "::mlir::OpTrait";
}
/// Left as it is (casts, which are the conversions, and constants, which
/// take their reader's precision).
def Otc_KeepPrecision : NativeOpTrait<"OtcKeepPrecision"> {
  let cppNamespace = "::mlir::OpTrait";
}

def Otc_FloatTensor : StaticShapeTensorOf<[F32, F64, BF16, F16]>;
def Otc_IntTensor : StaticShapeTensorOf<[I64, I32]>;
def Otc_BoolTensor : StaticShapeTensorOf<[I1]>;
def Otc_Tensor : StaticShapeTensorOf<[F32, F64, BF16, F16, I64, I32, I1]>;
def Otc_F32Scalar : 0DTensorOf<[F32]>;
def Otc_I64Scalar : 0DTensorOf<[I64]>;

#endif // OTC_BASE_TD
