//===- OtckOps.td - otck buffer-level dialect --------------*- tablegen -*-===//
//
// The `otck` dialect: planned code. Values are memrefs that live in one arena;
// work is either a kernel (a region holding the otc ops it computes, on
// tensors bound to its buffers) or a library call (GEMM). The code generators
// read this level only.
//
//===----------------------------------------------------------------------===//

#ifndef OTCK_OPS_TD
#define OTCK_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Otck_Dialect : Dialect {
  let name = "otck";
  let cppNamespace = "::otc::otck";
  let summary = "Buffer-level IR: arena buffers, kernels and library calls";
}

class Otck_Op<string mnemonic, list<Trait> traits = []>
    : Op<Otck_Dialect, mnemonic, traits>;

def Otck_BufferOp : Otck_Op<"buffer"> {
  let summary = "A buffer of the arena";
  let description = [{
    A persistent buffer carries `slot` (e.g. "param:fc1.weight", "grad:...",
    "input:x", "loss"): every function that names the same slot sees the same
    bytes. A buffer without `slot` is a temporary of its function. Buffer
    planning sets `offset` (bytes from the arena's start).

    ```mlir
    %w = otck.buffer {slot = "param:fc1.weight", offset = 0 : i64} : memref<32x16xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<StrAttr>:$slot, OptionalAttr<I64Attr>:$offset);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Otck_KernelOp : Otck_Op<"kernel", [AttrSizedOperandSegments,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Computes its body's otc ops from `ins` into `outs`";
  let description = [{
    The body's block arguments are the tensor values of `ins`; the values
    yielded are written to `outs`, one per output, types matching.

    ```mlir
    otck.kernel ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {
    ^bb0(%x: tensor<4xf32>):
      %y = otc.tanh %x : tensor<4xf32>
      otck.yield %y : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyStaticShapeMemRef>:$inputs,
                   Variadic<AnyStaticShapeMemRef>:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)` $body attr-dict
  }];
  let hasVerifier = 1;
}

def Otck_YieldOp : Otck_Op<"yield", [Pure, Terminator, HasParent<"KernelOp">]> {
  let summary = "The values a kernel writes to its outputs";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}

def Otck_GemmOp : Otck_Op<"gemm", [AttrSizedOperandSegments]> {
  let summary = "out = lhs x rhs through the target's GEMM library";
  let description = [{
    Same shape rules as `otc.matmul` on buffers: a library call (cuBLASLt on
    the cuda target), batch dimensions broadcast by strides. Operands are
    both f32 or both bf16 (FP32 accumulation); the result is f32, or bf16
    from bf16 operands. With `accumulate`, out = out + lhs x rhs: the sum is
    formed in FP32 and rounded once to out's type (otc-fuse-epilogues makes
    it from a gradient accumulation). With `bias` ([N], out's element
    type), bias[j] is added to column j of every row before that rounding
    (otc-fuse-epilogues makes it from a bias add after the product). With
    `addend` (out's type, another buffer), out = lhs x rhs (+ bias) +
    addend, also rounded once: cuBLASLt reads it as its C matrix and writes
    D = out (otc-fuse-epilogues makes it from a residual add after the
    product).

    With the discardable attribute `fp8 = "LHS,RHS"` (ir/Fp8.h; bf16
    operands, copied from the otc.matmul that otc-fp8-gemms marked), the
    operands are scaled per tensor, rounded to E4M3 or E5M2 and multiplied
    with FP32 accumulation, the sum divided by the two scales before the
    epilogue.

    With `lhs_fp8` and/or `rhs_fp8` (otc-fp8-copies), the operand's FP8
    values are read from that copy, which an `otck.fp8_quantize` wrote
    (ir/Fp8.h): its format, scale and layout are the copy's, and several
    GEMMs may read one copy. The BF16 operand stays an operand (its shape
    and layout describe the product, and a runtime that cannot multiply in
    FP8 runs the BF16 product from it).

    Two epilogues apply GELU in its tanh form, 0.5 v (1 + tanh(sqrt(2/pi)
    (v + 0.044715 v^3))), to the FP32 result v before its rounding; `aux`
    has out's type and the last dimension N is a multiple of 8 (cuBLASLt's
    rule for the aux matrix):
    - `gelu`: out = gelu(v) and aux = v (the pre-activation the backward
      reads), v = lhs x rhs (+ bias); from a GEMM followed by otc.gelu.
    - `dgelu`: out = v gelu'(aux), v = lhs x rhs, aux read; from a GEMM
      followed by otc.gelu_grad (no bias, no accumulate).

    With `sums` (otc-fuse-gemm-sums; a rank-1 f32 or bf16 buffer), the call
    also writes the column sums of one operand as stored, a K x W matrix:
    the left one (transposed, W = M) or, with `sums_of_rhs`, the right one
    (not transposed, W = N): sums[w] = the FP32 sum over k, plus sums[w]
    itself with `accumulate_sums`, rounded once to sums' type. A bias's
    gradient is the column sum of the output gradient that its weight's
    gradient reads, so the library forms both in one call (cuBLASLt's
    bias-gradient epilogue on cuda). Only for a plain product: 2-D
    operands, no bias, aux, addend, GELU or FP8.

    ```mlir
    otck.gemm %x, %w, %h bias %b aux(%pre : memref<64x128xbf16>) {gelu}
        : memref<64x32xbf16>, memref<32x128xbf16>, memref<64x128xbf16>,
          memref<128xbf16>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$lhs, AnyStaticShapeMemRef:$rhs,
                   AnyStaticShapeMemRef:$out,
                   Optional<AnyStaticShapeMemRef>:$bias,
                   Optional<AnyStaticShapeMemRef>:$aux,
                   Optional<AnyStaticShapeMemRef>:$addend,
                   Optional<AnyStaticShapeMemRef>:$lhs_fp8,
                   Optional<AnyStaticShapeMemRef>:$rhs_fp8,
                   Optional<AnyStaticShapeMemRef>:$sums,
                   UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                   UnitAttr:$accumulate, UnitAttr:$gelu, UnitAttr:$dgelu,
                   UnitAttr:$sums_of_rhs, UnitAttr:$accumulate_sums);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $out (`bias` $bias^)?
    (`aux` `(` $aux^ `:` type($aux) `)`)?
    (`addend` `(` $addend^ `:` type($addend) `)`)?
    (`lhs_fp8` `(` $lhs_fp8^ `:` type($lhs_fp8) `)`)?
    (`rhs_fp8` `(` $rhs_fp8^ `:` type($rhs_fp8) `)`)?
    (`sums` `(` $sums^ `:` type($sums) `)`)? attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($out) (`,` type($bias)^)?
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs,
                   "::mlir::Value":$out), [{
      build($_builder, $_state, lhs, rhs, out, /*bias=*/::mlir::Value(),
            /*aux=*/::mlir::Value(), /*addend=*/::mlir::Value(),
            /*lhs_fp8=*/::mlir::Value(), /*rhs_fp8=*/::mlir::Value(),
            /*sums=*/::mlir::Value(), /*transpose_lhs=*/false,
            /*transpose_rhs=*/false, /*accumulate=*/false, /*gelu=*/false,
            /*dgelu=*/false, /*sums_of_rhs=*/false,
            /*accumulate_sums=*/false);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The rules of `sums` (verify's part for them).
    ::mlir::LogicalResult verifySums();
    /// The buffers the call writes: out, aux under `gelu`, sums.
    ::llvm::SmallVector<::mlir::Value, 3> getWrittenBuffers();
    /// The buffers it reads: both operands, the bias, the addend, out when
    /// it accumulates, aux under `dgelu`, the sums when they accumulate,
    /// the FP8 copies.
    ::llvm::SmallVector<::mlir::Value, 8> getReadBuffers();
  }];
}

def Otck_Fp8QuantizeOp : Otck_Op<"fp8_quantize"> {
  let summary = "One FP8 copy of a BF16 buffer, read by FP8 GEMMs";
  let description = [{
    Writes `copy`, the FP8 copy of BF16 `source` (viewed as a row-major
    matrix of its last dimension's columns) in `format` ("e4m3" or
    "e5m2"): scaled per tensor by s = max / amax, amax the largest
    magnitude this op saw on its previous run (delayed; its own on its
    first), rounded to the format; then 1 / s. `layouts` says which
    layouts the copy holds: 1 the matrix as stored, 2 its transpose, 3
    both (ir/Fp8.h fp8CopyBytes: each layout's bytes at a 256-byte
    boundary, then the float 1 / s). Every `otck.gemm` that names the copy
    as `lhs_fp8` or `rhs_fp8` reads these values (otc-fp8-copies).

    ```mlir
    otck.fp8_quantize %w, %q {format = "e4m3", layouts = 3 : i64}
        : memref<64x32xbf16>, memref<4352xi8>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$source, AnyStaticShapeMemRef:$copy,
                   StrAttr:$format, I64Attr:$layouts);
  let assemblyFormat = [{
    $source `,` $copy attr-dict `:` type($source) `,` type($copy)
  }];
  let hasVerifier = 1;
}

def Otck_ViewOp : Otck_Op<"view", [Pure]> {
  let summary = "The same bytes as `source` seen with another shape";
  let description = [{
    A reshape at the buffer level: no kernel, no bytes of its own. The view
    reads and writes its source's bytes, so the source lives as long as any
    of its views is used (buffer planning follows views to their source).
    Same element type and element count. With `shards = N` the view is
    instead the running rank's part of a 1-D source split into N equal
    parts (ZeRO-1's shard of a parameter group, otc-group-params): elements
    [r E/N, (r + 1) E/N) of its E on rank r, which the program learns when
    it runs.
    ```mlir
    %v = otck.view %b : memref<2x16x64xf32> to memref<32x64xf32>
    %s = otck.view %g {shards = 4 : i64} : memref<1024xf32> to memref<256xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$source,
                   OptionalAttr<I64Attr>:$shards);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def Otck_CopyOp : Otck_Op<"copy", [AllTypesMatch<["source", "target"]>]> {
  let summary = "Copies one buffer into another of the same type";
  let arguments = (ins AnyStaticShapeMemRef:$source, AnyStaticShapeMemRef:$target);
  let assemblyFormat = "$source `,` $target attr-dict `:` type($source)";
}

#endif // OTCK_OPS_TD
