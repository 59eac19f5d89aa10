//===- OtcInterfaces.td - interfaces of otc ops ------------*- tablegen -*-===//
//
// Per-op knowledge that passes query without switching on op kinds: the
// reverse-mode gradient rule, the cost, the kernel library call, the scalar
// computation of an elementwise op and the operands and results that stay
// FP32 under mixed precision.
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

def Otc_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    What one execution of an op costs: floating-point operations (a
    multiply-add counts two) and the bytes it reads and writes. Recomputation
    ranks its choices by these FLOPs, and the report sums them. The defaults
    charge one operation per result element and every operand and result
    byte once; ops that do more (products, normalizations) or nothing
    (data movement) say so.
  }];
  let methods = [
    InterfaceMethod<"FLOPs of one execution.", "int64_t", "getFlops", (ins),
      [{}], [{ return ::otc::detail::resultElements($_op); }]>,
    InterfaceMethod<"Bytes of the operands read.", "int64_t", "getBytesRead",
      (ins), [{}], [{ return ::otc::detail::operandBytes($_op); }]>,
    InterfaceMethod<"Bytes of the results written.", "int64_t",
      "getBytesWritten", (ins), [{}],
      [{ return ::otc::detail::resultBytes($_op); }]>,
  ];
}

def Otc_LibraryCallOpInterface : OpInterface<"LibraryCallOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    An op that the runtime's kernel library computes
    (runtime/include/otcrt/kernels.h): the emitters call the function named
    by getLibraryKernel (chosen from the op and the storage type of its
    data) with the arguments of getLibraryArgs, in order, followed by the
    stream. What the call launches on a GPU is the target's to say
    (perf/GridLaunchInterface.td, attached by targets/cuda/). A new library
    op touches its .td entry, these methods, the cuda target's launch model
    of it, the runtime's kernels and tests, nothing else.
  }];
  let methods = [
    InterfaceMethod<[{
        The library function, e.g. "otcrt_layer_norm_fwd_bf16".
      }], "std::string", "getLibraryKernel", (ins)>,
    InterfaceMethod<[{
        Appends the call's arguments (sizes and attributes as scalars,
        operands and results as pointers, absent optional operands as
        NULL), the stream excluded.
      }], "void", "getLibraryArgs",
      (ins "::llvm::SmallVectorImpl<::otc::LibraryArg> &":$args)>,
    InterfaceMethod<[{
        The operand whose buffer result 0 may take when the operand dies at
        the call (the kernel reads each element before writing it there).
      }], "std::optional<unsigned>", "getInPlaceOperand", (ins), [{}],
      [{ return std::nullopt; }]>,
    InterfaceMethod<[{
        The (result, operand) pairs where the call adds into the result's
        buffer, which must then be that operand's: the kernel writes the
        result over the operand (an accumulator); none for most calls.
      }], "void", "getAccumulatedResults",
      (ins "::llvm::SmallVectorImpl<std::pair<unsigned, unsigned>> &":$pairs),
      [{}], [{ }]>,
    InterfaceMethod<[{
        Appends the GEMMs (otcrt_gemm) the call makes besides its kernels,
        in order, so that the step-time prediction prices them as GEMMs;
        none for most calls.
      }], "void", "getLibraryGemms",
      (ins "::llvm::SmallVectorImpl<::otc::LibraryGemm> &":$gemms), [{}],
      [{ }]>,
  ];
}

def Otc_ScalarExpressionOpInterface
    : OpInterface<"ScalarExpressionOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    An elementwise op (Otc_Elementwise) with one result whose element i is a
    function of element i of each operand alone: that function as a
    ScalarExpr over the operands (ir/ScalarExpr.h), with the op's precision
    (which constants are float, where values widen or narrow). The emitters
    print it; fusion composes the expressions of a chain of such ops
    (composeOperand) into the expression of one kernel. Ops whose element
    needs more than that (dropout's random draw, adamw's three results)
    do not have it.
  }];
  let methods = [
    InterfaceMethod<[{
        Element i of result 0 over ScalarExpr::operand(k, ...) for element i
        of operand k (broadcast), in the operands' element types.
      }], "::otc::ScalarExpr", "getScalarExpression", (ins)>,
  ];
}

def Otc_Fp32StatisticsOpInterface : OpInterface<"Fp32StatisticsOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    Operands and results of an op that hold FP32 statistics (a fused op's
    per-row log-sum-exp, mean or rstd) or a loss and its gradient: they stay
    FP32 whatever the precision the op computes its data in. otc-mixed-
    precision converts such operands to FP32, leaves such results FP32 and
    does not count such operands when an op follows its operands'
    precision. An op names them by overriding the method it needs.
  }];
  let methods = [
    InterfaceMethod<[{
        Whether operand `index` is FP32 statistics.
      }], "bool", "isFp32StatisticsOperand", (ins "unsigned":$index), [{}],
      [{ return false; }]>,
    InterfaceMethod<[{
        Whether result `index` is FP32 statistics or a loss.
      }], "bool", "isFp32StatisticsResult", (ins "unsigned":$index), [{}],
      [{ return false; }]>,
  ];
}

#endif // OTC_INTERFACES_TD
