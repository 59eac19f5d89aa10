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
}

class Otc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Otc_Dialect, mnemonic, traits>;

def Otc_FloatTensor : StaticShapeTensorOf<[F32, F64, BF16, F16]>;
def Otc_IntTensor : StaticShapeTensorOf<[I64, I32]>;
def Otc_BoolTensor : StaticShapeTensorOf<[I1]>;
def Otc_Tensor : StaticShapeTensorOf<[F32, F64, BF16, F16, I64, I32, I1]>;
def Otc_F32Scalar : 0DTensorOf<[F32]>;
def Otc_I64Scalar : 0DTensorOf<[I64]>;

#endif // OTC_BASE_TD
