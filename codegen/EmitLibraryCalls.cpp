//===- EmitLibraryCalls.cpp - the program's kernel library calls ----------===//
//
// The part of the program emitter (ProgramEmitter.h) that prints calls of
// the kernel library (otcrt/kernels.def, checked by codegen/KernelAbi before
// they are printed): library-call ops, GEMMs and the FP8 copies' quantize
// calls.
//
//===----------------------------------------------------------------------===//

#include "codegen/DescriptorTables.h"
#include "codegen/GemmCalls.h"
#include "codegen/KernelAbi.h"
#include "codegen/ProgramEmitter.h"
#include "ir/Fp8.h"
#include "ir/ShapeUtils.h"

#include "llvm/ADT/StringExtras.h"

#include <functional>

using namespace mlir;
using namespace otc;

namespace otc::codegen {

/// What a pointer to `buffer`'s elements points to, as the kernel library's
/// signatures name it (codegen/KernelAbi.h).
static std::string bufferPointee(Value buffer) {
  Type t = cast<MemRefType>(buffer.getType()).getElementType();
  if (t.isF32())
    return "float";
  if (t.isBF16())
    return "otcrt_bf16";
  if (t.isF64())
    return "double";
  if (t.isInteger(64))
    return "int64_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(8))
    return "uint8_t";
  std::string text;
  llvm::raw_string_ostream os(text);
  t.print(os);
  return text;
}

/// A call of the runtime's kernel library (runtime/include/otcrt/kernels.h)
/// with the arguments the op lists: scalars as literals, operands and results
/// as their buffers (BF16 ones as otcrt_bf16), a struct as a local constant
/// passed by address, then the stream (the runtime's on the cuda target,
/// nullptr on the cpu target). A non-zero status
/// stops the program with the kernel's and the node's names.
LogicalResult ProgramEmitter::emitLibraryCall(otck::KernelOp k,
                                              LibraryCallOpInterface lib) {
  Operation *op = lib.getOperation();
  auto pointer = [&](Value buffer, int64_t offset) {
    auto t = cast<MemRefType>(buffer.getType());
    std::string name = names[buffer];
    std::string p =
        t.getElementType().isBF16() ? "(otcrt_bf16 *)" + name : name;
    return offset ? "(" + p + " + " + std::to_string(offset) + ")" : p;
  };
  std::string decls;
  unsigned structs = 0;
  std::function<std::string(const LibraryArg &)> print =
      [&](const LibraryArg &a) -> std::string {
    switch (a.kind) {
    case LibraryArg::Int:
      return std::to_string(a.value);
    case LibraryArg::Float:
      return floatLiteral(a.real);
    case LibraryArg::Null:
      return "nullptr";
    case LibraryArg::Operand: {
      auto arg = cast<BlockArgument>(op->getOperand(a.index));
      return pointer(k.getInputs()[arg.getArgNumber()], a.offset);
    }
    case LibraryArg::Result:
      return pointer(k.getOutputs()[a.index], a.offset);
    case LibraryArg::Struct: {
      std::string name = "s" + std::to_string(structs++);
      SmallVector<std::string> fields;
      for (const LibraryArg &f : a.fields)
        fields.push_back(print(f));
      decls += "    const " + a.structType + " " + name + " = {" +
               llvm::join(fields, ", ") + "};\n";
      return "&" + name;
    }
    }
    llvm_unreachable("unknown library argument");
  };
  // A result the call adds into is written over its accumulator.
  SmallVector<std::pair<unsigned, unsigned>> accumulated;
  lib.getAccumulatedResults(accumulated);
  for (auto [result, operand] : accumulated) {
    auto arg = cast<BlockArgument>(op->getOperand(operand));
    if (k.getInputs()[arg.getArgNumber()] != k.getOutputs()[result])
      return op->emitError("result ")
             << result << " adds into operand " << operand
             << " and must be written over its buffer";
  }
  SmallVector<LibraryArg> libArgs;
  lib.getLibraryArgs(libArgs);
  SmallVector<std::string> args;
  for (const LibraryArg &a : libArgs)
    args.push_back(print(a));
  args.push_back(target.streamArgument().str());

  std::string kernel = lib.getLibraryKernel();
  // The call as the kernel library declares it (otcrt/kernels.def).
  SmallVector<KernelArg> abiArgs;
  for (const LibraryArg &a : libArgs) {
    switch (a.kind) {
    case LibraryArg::Int:
      abiArgs.push_back(KernelArg::integer(a.value));
      break;
    case LibraryArg::Float:
      abiArgs.push_back(KernelArg::floating());
      break;
    case LibraryArg::Null:
      abiArgs.push_back(KernelArg::null());
      break;
    case LibraryArg::Operand: {
      auto arg = cast<BlockArgument>(op->getOperand(a.index));
      abiArgs.push_back(
          KernelArg::pointer(bufferPointee(k.getInputs()[arg.getArgNumber()])));
      break;
    }
    case LibraryArg::Result:
      abiArgs.push_back(
          KernelArg::pointer(bufferPointee(k.getOutputs()[a.index])));
      break;
    case LibraryArg::Struct:
      abiArgs.push_back(KernelArg::pointer(a.structType));
      break;
    }
  }
  abiArgs.push_back(KernelArg::pointer("void"));
  if (std::string wrong = checkKernelCall(kernel, abiArgs); !wrong.empty())
    return op->emitError("the kernel library call differs from its "
                         "signature: ")
           << wrong;
  std::string node = nodeName(op->getLoc());
  std::string opName = op->getName().getStringRef().str();
  std::string call;
  llvm::raw_string_ostream callOs(call);
  callOs << "OTC_CALL(" << cString(traceName(node, opName)) << ", OTC_LIB("
         << kernel;
  for (const std::string &a : args)
    callOs << ", " << a;
  callOs << "));";
  if (decls.empty())
    funcs << "  " << call << "\n";
  else
    funcs << "  {\n" << decls << "    " << call << "\n  }\n";
  return success();
}

/// An otcrt_gemm call (otcrt_gemm_fp8 for an FP8 GEMM, its operands'
/// formats after the descriptor; otcrt_gemm_sums for one that sums an
/// operand, the sums' arguments after C): its descriptor as a static constant
/// in a block of its own, then the call, whose non-zero status stops the
/// program naming the node, as for the kernel library.
LogicalResult ProgramEmitter::emitGemm(otck::GemmOp g) {
  FailureOr<std::optional<GemmCall>> call =
      gemmCall(g, [&](Value v) -> std::string { return names[v]; });
  if (failed(call))
    return failure();
  if (!*call)
    return success();
  // An FP8 GEMM passes its operands' formats after the descriptor, and
  // then, reading FP8 copies (otc-fp8-copies), each copy and its layouts.
  const auto &fp8 = (*call)->fp8;
  const auto &copies = (*call)->copies;
  const auto &sums = (*call)->sums;
  const char *function = copies ? "otcrt_gemm_fp8_copies"
                         : fp8  ? "otcrt_gemm_fp8"
                         : sums ? "otcrt_gemm_sums"
                                : "otcrt_gemm";
  SmallVector<KernelArg> abiArgs = {KernelArg::pointer("OtcrtGemm")};
  std::string formats;
  if (fp8) {
    abiArgs.push_back(KernelArg::integer(fp8->first));
    abiArgs.push_back(KernelArg::integer(fp8->second));
    formats =
        std::to_string(fp8->first) + ", " + std::to_string(fp8->second) + ", ";
  }
  if (copies) {
    for (auto [copy, layouts] :
         {std::make_pair(g.getLhsFp8(), copies->first),
          std::make_pair(g.getRhsFp8(), copies->second)}) {
      abiArgs.push_back(KernelArg::pointer(bufferPointee(copy)));
      abiArgs.push_back(KernelArg::integer(layouts));
      formats += names[copy] + ", " + std::to_string(layouts) + ", ";
    }
  }
  for (Value v : (*call)->buffers)
    abiArgs.push_back(v ? KernelArg::pointer(bufferPointee(v))
                        : KernelArg::null());
  // otcrt_gemm_sums: which operand, the sums' type, accumulate_sums.
  std::string after;
  if (sums) {
    for (int64_t v : {int64_t(sums->of), int64_t(0), int64_t(sums->accumulate)})
      abiArgs.push_back(KernelArg::integer(v));
    after = ", " + std::to_string(sums->of) + ", " + sums->type + ", " +
            std::to_string(sums->accumulate);
  }
  abiArgs.push_back(KernelArg::pointer("void"));
  if (std::string wrong = checkKernelCall(function, abiArgs); !wrong.empty())
    return g.emitError("the GEMM call differs from its signature: ") << wrong;
  funcs << "  {\n    static const OtcrtGemm g = " << (*call)->descriptor
        << ";\n    OTC_CALL(" << cString(gemmTraceName(g)) << ", OTC_LIB("
        << function << ", &g, " << formats << (*call)->operands << after << ", "
        << target.streamArgument() << "));\n  }\n";
  return success();
}

/// An otcrt_fp8_quantize call: the copy's descriptor (the source as a
/// row-major matrix of its last dimension's columns, the format and the
/// layouts) as a static constant, the call site its delayed amax belongs
/// to, then the call.
LogicalResult ProgramEmitter::emitFp8Quantize(otck::Fp8QuantizeOp q) {
  MemRefType source = q.getSource().getType();
  int64_t cols = source.getShape().back();
  int64_t rows = cols ? source.getNumElements() / cols : 0;
  std::optional<Fp8Format> format = parseFp8Format(q.getFormat());
  if (!format)
    return q.emitOpError("has no FP8 format");
  SmallVector<KernelArg> abiArgs = {
      KernelArg::pointer("OtcrtFp8Quantize"),
      KernelArg::pointer(bufferPointee(q.getSource())),
      KernelArg::pointer(bufferPointee(q.getCopy())),
      KernelArg::pointer("void")};
  if (std::string wrong = checkKernelCall("otcrt_fp8_quantize", abiArgs);
      !wrong.empty())
    return q.emitError("the FP8 quantize call differs from its signature: ")
           << wrong;
  funcs << "  {\n    static const OtcrtFp8Quantize q = {" << rows << ", "
        << cols << ", " << (*format == Fp8Format::E4M3 ? 0 : 1) << ", "
        << q.getLayouts() << "};\n    OTC_CALL("
        << cString(fp8QuantizeTraceName(q))
        << ", OTC_LIB(otcrt_fp8_quantize, &q, " << names[q.getSource()] << ", "
        << names[q.getCopy()] << ", " << target.streamArgument()
        << "));\n  }\n";
  return success();
}

} // namespace otc::codegen
