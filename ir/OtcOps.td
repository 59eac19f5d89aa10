//===- OtcOps.td - otc tensor ops --------------------------*- tablegen -*-===//
//
// The ops of the `otc` dialect. Binary elementwise ops broadcast like ONNX
// (numpy rules); everything is statically shaped once symbolic dimensions are
// bound at import.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_OPS_TD
#define OTC_OPS_TD

include "ir/OtcBase.td"
include "ir/OtcInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

defvar Grad = DeclareOpInterfaceMethods<Otc_GradientOpInterface>;
/// The default cost (one FLOP per result element) and one with its own count.
defvar Cost = Otc_CostOpInterface;
defvar CostFlops = DeclareOpInterfaceMethods<Otc_CostOpInterface, ["getFlops"]>;
/// Own FLOPs and own bytes read: ops that read only part of an operand.
defvar CostFlopsRead = DeclareOpInterfaceMethods<Otc_CostOpInterface, ["getFlops", "getBytesRead"]>;
/// The scalar computation of an elementwise op (ir/OtcScalarExpressions.cpp).
defvar Scalar = DeclareOpInterfaceMethods<Otc_ScalarExpressionOpInterface>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Otc_ConstantOp : Otc_Op<"constant",
    [Otc_KeepPrecision, CostFlops, ConstantLike, Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "A constant tensor";
  let description = [{
    ```mlir
    %0 = otc.constant dense<[1, 2]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Otc_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Otc_Op<mnemonic, !listconcat(traits, [Pure, Grad, Cost, Otc_Elementwise, Scalar])> {
  let description = [{
    Elementwise with ONNX (numpy) broadcasting: the result shape is the
    broadcast of the operand shapes, element types agree.
  }];
  let arguments = (ins Otc_Tensor:$lhs, Otc_Tensor:$rhs);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_AddOp : Otc_BinaryOp<"add", [Commutative]> { let summary = "lhs + rhs"; }
def Otc_SubOp : Otc_BinaryOp<"sub"> { let summary = "lhs - rhs"; }
def Otc_MulOp : Otc_BinaryOp<"mul", [Commutative]> { let summary = "lhs * rhs"; }
def Otc_DivOp : Otc_BinaryOp<"div"> { let summary = "lhs / rhs"; }

class Otc_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Otc_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType, Cost, Otc_Elementwise, Scalar])> {
  let arguments = (ins Otc_FloatTensor:$input);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Otc_NegOp : Otc_UnaryOp<"neg", [Grad]> { let summary = "-x"; }
def Otc_ExpOp : Otc_UnaryOp<"exp", [Otc_Fp32Compute, Grad]> { let summary = "e^x"; }
def Otc_LogOp : Otc_UnaryOp<"log", [Otc_Fp32Compute, Grad]> { let summary = "natural logarithm"; }
def Otc_TanhOp : Otc_UnaryOp<"tanh", [Grad]> { let summary = "hyperbolic tangent"; }
def Otc_ReluOp : Otc_UnaryOp<"relu", [Grad]> { let summary = "max(x, 0)"; }
def Otc_SqrtOp : Otc_UnaryOp<"sqrt", [Otc_Fp32Compute, Grad]> { let summary = "square root"; }
def Otc_ReciprocalOp : Otc_UnaryOp<"reciprocal", [Otc_Fp32Compute, Grad]> { let summary = "1 / x"; }
def Otc_ErfOp : Otc_UnaryOp<"erf", [Grad]> { let summary = "the error function"; }
def Otc_SigmoidOp : Otc_UnaryOp<"sigmoid", [Grad]> { let summary = "1 / (1 + e^-x)"; }
// FP32 whatever the operand: rotary angles reach position x frequency (up
// to 1e5 radians), which BF16 would round by hundreds of radians.
def Otc_CosOp : Otc_UnaryOp<"cos", [Otc_Fp32Compute, Grad]> { let summary = "cosine"; }
def Otc_SinOp : Otc_UnaryOp<"sin", [Otc_Fp32Compute, Grad]> { let summary = "sine"; }

def Otc_PowOp : Otc_BinaryOp<"pow", [Otc_Fp32Compute]> { let summary = "lhs ^ rhs (floats)"; }

def Otc_CompareOp : Otc_Op<"compare", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "Elementwise comparison with broadcasting, an i1 result";
  let description = [{
    `predicate` is one of "eq", "ne", "lt", "le", "gt", "ge". Operands share an
    element type; the result has the broadcast shape and element type i1.
  }];
  let arguments = (ins Otc_Tensor:$lhs, Otc_Tensor:$rhs, StrAttr:$predicate);
  let results = (outs Otc_BoolTensor:$result);
  let assemblyFormat =
      "$predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_SelectOp : Otc_Op<"select", [Otc_Elementwise, Scalar, Cost, Pure, Grad]> {
  let summary = "condition ? lhs : rhs, elementwise with broadcasting";
  let arguments = (ins Otc_BoolTensor:$condition, Otc_Tensor:$lhs, Otc_Tensor:$rhs);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$condition `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_CastOp : Otc_Op<"cast", [Otc_Elementwise, Scalar, Otc_KeepPrecision, CostFlops, Pure, Grad]> {
  let summary = "Converts each element to the result's element type";
  let description = [{
    Float to integer truncates toward zero; anything to i1 is `x != 0`.
  }];
  let arguments = (ins Otc_Tensor:$input);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and data movement
//===----------------------------------------------------------------------===//

def Otc_MatMulOp : Otc_Op<"matmul", [Otc_BF16Product, CostFlops, Pure, Grad]> {
  let summary = "Batched matrix product with optional transposed operands";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` when `transpose_lhs`), `rhs` is
    `[..., K, N]` (`[..., N, K]` when `transpose_rhs`); both have rank >= 2
    and their leading (batch) dimensions broadcast. The result is
    `[batch..., M, N]`. Under precision fp8, otc-fp8-gemms marks the
    products that multiply FP8 operands with `fp8 = "LHS,RHS"` (ir/Fp8.h).

    ```mlir
    %y = otc.matmul %x, %w {transpose_rhs} : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$lhs, Otc_FloatTensor:$rhs,
                   UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Otc_TransposeOp : Otc_Op<"transpose", [CostFlops, Pure, Grad]> {
  let summary = "Permutes dimensions: result dim i is input dim permutation[i]";
  let arguments = (ins Otc_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$input `,` $permutation attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_ReshapeOp : Otc_Op<"reshape", [CostFlops, Pure, Grad]> {
  let summary = "Same elements in row-major order, another static shape";
  let arguments = (ins Otc_Tensor:$input);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_BroadcastOp : Otc_Op<"broadcast", [CostFlops, Pure, Grad]> {
  let summary = "Broadcasts the input (numpy rules) to the result shape";
  let arguments = (ins Otc_Tensor:$input);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_ReduceSumOp : Otc_Op<"reduce_sum", [Otc_Fp32Compute, CostFlops, Pure, Grad]> {
  let summary = "Sum over the given axes";
  let description = [{
    Sums `input` over `axes` (sorted, unique, non-negative). With
    `keep_dims` the reduced dimensions stay with size 1.
  }];
  let arguments = (ins Otc_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                   UnitAttr:$keep_dims);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $axes attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_ReduceMaxOp : Otc_Op<"reduce_max", [Otc_Fp32Compute, CostFlops, Pure, Grad]> {
  let summary = "Maximum over the given axes";
  let description = [{
    Like `reduce_sum`. The gradient goes to every element equal to the
    maximum, shared equally among ties.
  }];
  let arguments = (ins Otc_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                   UnitAttr:$keep_dims);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $axes attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_ConcatOp : Otc_Op<"concat", [CostFlops, Pure, Grad]> {
  let summary = "Joins tensors along `axis`";
  let arguments = (ins Variadic<Otc_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_SliceOp : Otc_Op<"slice", [CostFlopsRead, Pure, Grad]> {
  let summary = "A strided window: result[i] = input[starts + i * strides]";
  let description = [{
    One start and one positive stride per dimension; the result shape says
    how many elements each dimension takes.
  }];
  let arguments = (ins Otc_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$strides);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$input `,` $starts `,` $strides attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_SliceGradOp : Otc_Op<"slice_grad", [CostFlops, Pure]> {
  let summary = "Gradient of slice: zeros of the result shape with `grad` placed at the window";
  let arguments = (ins Otc_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$strides);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $starts `,` $strides attr-dict `:` functional-type(operands, results)";
}

def Otc_GatherOp : Otc_Op<"gather", [CostFlopsRead, Pure, Grad]> {
  let summary = "ONNX Gather: picks slices of `data` along `axis` by index";
  let description = [{
    result shape = data[:axis] + indices.shape + data[axis+1:]. Negative
    indices count from the end of the axis.
  }];
  let arguments = (ins Otc_Tensor:$data, Otc_IntTensor:$indices, I64Attr:$axis);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Otc_GatherGradOp : Otc_Op<"gather_grad",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                               ["getAccumulatedResults"]>, Grad,
     Otc_GradientSum,
     DeclareOpInterfaceMethods<Otc_CostOpInterface,
                               ["getFlops", "getBytesRead", "getBytesWritten"]>,
     Pure]> {
  let summary = "Gradient of gather: `grad` summed into zeros of the data shape at the indices";
  let description = [{
    With the result (the gathered data's shape) viewed as [outer, axis_len,
    inner] around `axis` and `grad` as [outer, positions, inner]:
    result[o, a, n] = the sum of grad[o, p, n] over the positions p of the
    int64 `indices` whose value is a (counted from the end when negative);
    an index outside the axis adds nothing. The sums are taken in FP32
    whatever the storage (the result is then rounded once to its type: BF16
    grad and result after otc-fuse-reductions, which reads a widened BF16
    gradient as it is). The runtime's kernel library computes it
    (otcrt_gather_grad_*), deterministically however skewed the indices (an
    embedding's gradient on real text).

    With `acc` (the result's type), the result is `acc` with each row that
    some index picks replaced by its value plus that row's sum, rounded
    once; rows no index picks are `acc`'s. otc-fuse-epilogues forms it for
    a gradient slot (`acc = acc + gather_grad`), and the kernel then adds
    into the slot's buffer, touching only the picked rows
    (LibraryCallOpInterface::getAccumulatedResults): no table-sized
    temporary is cleared, written or read.

    ```mlir
    %dw = otc.gather_grad %g, %ids {axis = 0 : i64} : (tensor<8x1024x768xf32>, tensor<8x1024xi64>) -> tensor<50257x768xf32>
    %dw2 = otc.gather_grad %g, %ids acc %slot {axis = 0 : i64} : (tensor<8x1024x768xf32>, tensor<8x1024xi64>, tensor<50257x768xf32>) -> tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_IntTensor:$indices,
                   Optional<Otc_FloatTensor>:$acc, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $indices (`acc` $acc^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The bytes of the result's rows the indices can pick (at most one
    /// row per position): what the sums write, and read first into `acc`.
    int64_t getPickedRowBytes();
  }];
}

def Otc_ExpertMatmulOp : Otc_Op<"expert_matmul",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface, ["getLibraryGemms"]>,
     Grad, Otc_BF16Product,
     DeclareOpInterfaceMethods<Otc_CostOpInterface, ["getFlops"]>,
     Pure]> {
  let summary = "Each row times the matrix of the expert its index names";
  let description = [{
    `x` is [N, K], `ids` [N] int64, `w` [E, K, O] ([E, O, K] with
    `transpose_rhs`): `result[n, :] = x[n, :] W_e` with e = ids[n] (counted
    from the end when negative) and W_e = w[e] (its transpose with
    `transpose_rhs`), accumulated in FP32. It is a mixture of experts'
    `gather(w, ids)` followed by a batched product of each row with its own
    gathered matrix (the `batched_mm` experts of Hugging Face's exports),
    without the [N, K, O] gathered tensor: the kernel library groups the
    rows by expert (a stable sort by index) and runs one product per
    expert. A row whose index lies outside [-E, E) gets zeros (the
    reference interpreter reports it, as a gather's; a router's top-k never
    picks one).

    The result is FP32, or of the operands' type (BF16): the FP32 sums
    rounded once as the kernel stores them, the bits of the FP32 result
    followed by a cast. otc-fuse-reductions forms the BF16 result where
    mixed precision only rounds the FP32 one (its one use), so neither the
    FP32 [N, O] tensor nor the cast is left.

    ```mlir
    %y = otc.expert_matmul %x, %ids, %w {transpose_rhs} : (tensor<64x32xf32>, tensor<64xi64>, tensor<4x16x32xf32>) -> tensor<64x16xf32>
    %z = otc.expert_matmul %xb, %ids, %wb : (tensor<64x32xbf16>, tensor<64xi64>, tensor<4x32x16xbf16>) -> tensor<64x16xbf16>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$x, Otc_IntTensor:$ids,
                   Otc_FloatTensor:$w, UnitAttr:$transpose_rhs);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$x `,` $ids `,` $w attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// E, K and O: the experts, the rows' length and the result's.
    int64_t getExperts();
    int64_t getDepth();
    int64_t getWidth();
  }];
}

def Otc_ExpertMatmulWgradOp : Otc_Op<"expert_matmul_wgrad",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                               ["getLibraryGemms", "getAccumulatedResults"]>,
     Otc_BF16Product,
     DeclareOpInterfaceMethods<Otc_CostOpInterface, ["getFlops"]>,
     Pure]> {
  let summary = "The experts' matrices' gradient of otc.expert_matmul";
  let description = [{
    `dy` is [N, O], `x` [N, K], `ids` [N] int64; the result has the
    experts' shape, [E, K, O] ([E, O, K] with `transpose_rhs`): for each
    expert e, the sum over the rows n with ids[n] = e of x[n]^T dy[n]
    (transposed with `transpose_rhs`), accumulated in FP32, in row order on
    the cpu target; an expert no row picks gets zeros, and a row whose index
    lies outside [-E, E) adds nothing. The result is FP32 or of the
    operands' type (the sums rounded once).

    With `acc` (the result's type: FP32, or the operands' BF16), the result
    is `acc` plus the FP32 sums, rounded once (an expert no row picks keeps
    `acc`'s values). otc-fuse-epilogues forms it where the sums are only
    added into a gradient slot (`acc = acc + wgrad`, or under mixed
    precision `acc = acc + cast(wgrad)`), and the kernel then adds into the
    slot's buffer (LibraryCallOpInterface::getAccumulatedResults): no
    [E, K, O] temporary, FP32 or rounded, is written or read.

    ```mlir
    %dw = otc.expert_matmul_wgrad %dy, %x, %ids {transpose_rhs} : (tensor<64x16xf32>, tensor<64x32xf32>, tensor<64xi64>) -> tensor<4x16x32xf32>
    %dw2 = otc.expert_matmul_wgrad %dyb, %xb, %ids acc %slot : (tensor<64x16xbf16>, tensor<64x32xbf16>, tensor<64xi64>, tensor<4x32x16xbf16>) -> tensor<4x32x16xbf16>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$dy, Otc_FloatTensor:$x,
                   Otc_IntTensor:$ids, Optional<Otc_FloatTensor>:$acc,
                   UnitAttr:$transpose_rhs);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$dy `,` $x `,` $ids (`acc` $acc^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_TopKOp : Otc_Op<"top_k", [CostFlops, Pure]> {
  let summary = "The indices of the k largest elements of each row (last dimension)";
  let description = [{
    `result[..., j]` is the index along the last dimension of the (j+1)-th
    largest element of the row: descending by value, equal values by
    ascending index (PyTorch's and ONNX's order); NaN counts as larger than
    every number. The values are a gather of the input at these indices
    (the importer's TopK), through which the gradient flows; the indices
    themselves have none.
  }];
  let arguments = (ins Otc_FloatTensor:$input, I64Attr:$k);
  let results = (outs Otc_IntTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_TriluOp : Otc_Op<"trilu", [Cost, Pure, Grad, SameOperandsAndResultType]> {
  let summary = "Keeps the upper (or lower) triangle of the last two dimensions";
  let description = [{
    With `upper`, keeps elements with j - i >= k, else those with j - i <= k;
    the rest become zero.
  }];
  let arguments = (ins Otc_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Otc_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Otc_SoftmaxOp : Otc_Op<"softmax", [Otc_Fp32Compute, CostFlops, Pure, Grad, SameOperandsAndResultType]> {
  let summary = "softmax along `axis` (non-negative)";
  let arguments = (ins Otc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Otc_SoftmaxGradOp : Otc_Op<"softmax_grad", [Otc_Fp32Compute, CostFlops, Pure]> {
  let summary = "y * (grad - sum(grad * y, axis)) with y the softmax output";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$output, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $output attr-dict `:` functional-type(operands, results)";
}

def Otc_LogSoftmaxOp : Otc_Op<"log_softmax", [Otc_Fp32Compute, CostFlops, Pure, Grad, SameOperandsAndResultType]> {
  let summary = "log of softmax along `axis` (non-negative)";
  let arguments = (ins Otc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Otc_LogSoftmaxGradOp : Otc_Op<"log_softmax_grad", [Otc_Fp32Compute, CostFlops, Pure]> {
  let summary = "grad - exp(y) * sum(grad, axis) with y the log_softmax output";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$output, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $output attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

def Otc_DropoutOp : Otc_Op<"dropout", [Cost, Pure, Grad]> {
  let summary = "Training-mode dropout with a replayable mask";
  let description = [{
    Keeps each element with probability `1 - ratio` and scales kept ones by
    `1 / (1 - ratio)`. The mask is a pure function of (`key`, `stream`,
    element index), so it is reproduced exactly wherever the op is evaluated
    again; the backward reads the `mask` result instead of redrawing it.
    `key` is a per-micro-step value supplied by the runtime.
  }];
  let arguments = (ins Otc_FloatTensor:$input, Otc_I64Scalar:$key,
                   F64Attr:$ratio, I64Attr:$stream);
  let results = (outs Otc_FloatTensor:$output, Otc_BoolTensor:$mask);
  let assemblyFormat =
      "$input `,` $key attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_DropoutGradOp : Otc_Op<"dropout_grad", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "grad * mask / (1 - ratio)";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_BoolTensor:$mask, F64Attr:$ratio);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $mask attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses and gradient kernels
//===----------------------------------------------------------------------===//

def Otc_SoftmaxCrossEntropyOp : Otc_Op<"softmax_cross_entropy", [Otc_Fp32Compute, CostFlops, Pure, Grad]> {
  let summary = "Softmax cross-entropy of [N, C] logits against [N] labels";
  let description = [{
    loss_n = -log softmax(logits_n)[labels_n]. Rows whose label equals
    `ignore_index` contribute nothing. `reduction` is "mean" (over the rows
    not ignored; 0-d result), "sum" (0-d) or "none" ([N]).
  }];
  let arguments = (ins Otc_FloatTensor:$logits, Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$loss);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_SoftmaxCrossEntropyGradOp : Otc_Op<"softmax_cross_entropy_grad", [Otc_Fp32Compute, CostFlops, Pure]> {
  let summary = "Gradient of softmax_cross_entropy with respect to the logits";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$logits,
                   Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $logits `,` $labels attr-dict `:` functional-type(operands, results)";
}

def Otc_NllLossOp : Otc_Op<"nll_loss", [Otc_Fp32Compute, Cost, Pure, Grad]> {
  let summary = "Negative log-likelihood of [N, C] log-probabilities against [N] labels";
  let description = [{
    loss_n = -input[n, labels_n]; `reduction` and `ignore_index` as in
    softmax_cross_entropy.
  }];
  let arguments = (ins Otc_FloatTensor:$input, Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$loss);
  let assemblyFormat =
      "$input `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_NllLossGradOp : Otc_Op<"nll_loss_grad", [Otc_Fp32Compute, Cost, Pure]> {
  let summary = "Gradient of nll_loss with respect to its [N, C] input (the result type)";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $labels attr-dict `:` functional-type(operands, results)";
}

def Otc_ReluGradOp : Otc_Op<"relu_grad", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "grad where input > 0, else 0";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$input);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $input attr-dict `:` functional-type(operands, results)";
}

def Otc_TanhGradOp : Otc_Op<"tanh_grad", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "grad * (1 - y * y) where y = tanh(x)";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$output);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $output attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Otc_AdamWOp : Otc_Op<"adamw", [Otc_Fp32Compute, Otc_Elementwise, CostFlops, Pure]> {
  let summary = "One AdamW update of a parameter";
  let description = [{
    With t = `step` (1-based), s = `grad_factor` and g = s * `grad`:
      m' = beta1 m + (1 - beta1) g,  v' = beta2 v + (1 - beta2) g^2,
      p' = p - lr * (m' / (1 - beta1^t) / (sqrt(v' / (1 - beta2^t)) + epsilon)
                     + weight_decay * p).
    The factor is the gradient clipping's and the batch ramp's, which the
    runtime computes on the device from the gradients' norm; a factor that
    is not finite (a NaN or infinite norm) skips the update: p, m and v are
    kept. A BF16 gradient of FP32 parameters is read widened (exactly), so
    mixed precision needs no FP32 copy of the gradients. With the optional
    fourth result, `copy`, the updated FP32 parameter is also written
    rounded to BF16 in the same pass (the working copy the steps read;
    otc-group-params makes it).
  }];
  let arguments = (ins Otc_FloatTensor:$param, Otc_FloatTensor:$grad,
                   Otc_FloatTensor:$m, Otc_FloatTensor:$v,
                   Otc_F32Scalar:$lr, Otc_F32Scalar:$step,
                   Otc_F32Scalar:$grad_factor,
                   F64Attr:$beta1, F64Attr:$beta2, F64Attr:$epsilon,
                   F64Attr:$weight_decay);
  let results = (outs Otc_FloatTensor:$new_param, Otc_FloatTensor:$new_m,
                 Otc_FloatTensor:$new_v, Optional<Otc_FloatTensor>:$copy);
  let assemblyFormat =
      "$param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_factor attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

include "ir/OtcFusedOps.td"

#endif // OTC_OPS_TD
