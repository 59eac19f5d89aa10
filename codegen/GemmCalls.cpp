//===- GemmCalls.cpp - the runtime call of an otck.gemm -------------------===//
//
// The otcrt_gemm call of a GEMM: its OtcrtGemm descriptor (transposes,
// sizes, beta, the element types, the epilogue: bias, addend, gelu, dgelu;
// row and batch strides of the row-major operands, in the field order of
// runtime/include/otcrt/abi.h) and its buffers; an FP8 GEMM's operand
// formats (ir/Fp8.h) for otcrt_gemm_fp8; the summed operand of
// otcrt_gemm_sums.
//
//===----------------------------------------------------------------------===//

#include "codegen/GemmCalls.h"
#include "ir/Fp8.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace otc;

/// The layouts of FP8 copy `copy` of `elements` values that a GEMM reads
/// in `layout`: both, when its bytes hold two (ir/Fp8.h fp8CopyBytes),
/// else that one; nullopt when its size fits neither.
static std::optional<int64_t> copyLayouts(Value copy, int64_t elements,
                                          Fp8Layout layout) {
  int64_t bytes = cast<MemRefType>(copy.getType()).getNumElements();
  if (bytes == fp8CopyBytes(elements, kFp8AsStored | kFp8Transposed))
    return kFp8AsStored | kFp8Transposed;
  if (bytes == fp8CopyBytes(elements, layout))
    return layout;
  return std::nullopt;
}

/// A GEMM that also sums an operand's rows or columns (`sums`): its slot,
/// type and accumulation, and the call's operands for it.
static LogicalResult addSums(otck::GemmOp g,
                             function_ref<std::string(Value)> name,
                             int64_t batch, GemmCall &call) {
  Value sums = g.getSums();
  if (!sums)
    return success();
  // The verifier's rules (a plain 2-D product) leave one matrix each.
  if (batch != 1)
    return g.emitOpError("sums an operand of a batch of products");
  GemmCall::Sums s;
  s.of = g.getSumsOfRhs() ? 1 : 0;
  s.type = cast<MemRefType>(sums.getType()).getElementType().isBF16()
               ? "OTC_BF16"
               : "OTC_F32";
  s.accumulate = g.getAccumulateSums();
  call.sums = s;
  call.operands = name(g.getLhs()) + ", " + name(g.getRhs()) + ", " +
                  name(g.getOut()) + ", " + name(sums);
  call.buffers = {g.getLhs(), g.getRhs(), g.getOut(), sums};
  return success();
}

/// An FP8 GEMM's operand formats and, where it reads FP8 copies, their
/// layouts, checked against the descriptor's sizes after stacking (the
/// copies hold m x k and n x k).
static LogicalResult addFp8Operands(otck::GemmOp g, int64_t batch, int64_t m,
                                    int64_t n, int64_t k, GemmCall &call) {
  std::optional<Fp8Operands> fp8 = gemmFp8(g);
  if (!fp8)
    return success();
  auto format = [](Fp8Format f) { return f == Fp8Format::E4M3 ? 0 : 1; };
  call.fp8 = std::make_pair(format(fp8->lhs), format(fp8->rhs));
  if (!g.getLhsFp8() || !g.getRhsFp8())
    return success();
  if (batch != 1)
    return g.emitOpError("reads FP8 copies for a batch of products");
  bool ta = g.getTransposeLhs(), tb = g.getTransposeRhs();
  std::optional<int64_t> la = copyLayouts(g.getLhsFp8(), m * k,
                                          fp8OperandLayout(true, ta)),
                         lb = copyLayouts(g.getRhsFp8(), n * k,
                                          fp8OperandLayout(false, tb));
  if (!la || !lb)
    return g.emitOpError("reads an FP8 copy of another size");
  call.copies = std::make_pair(*la, *lb);
  return success();
}

FailureOr<std::optional<GemmCall>>
otc::gemmCall(otck::GemmOp g, function_ref<std::string(Value)> name) {
  ArrayRef<int64_t> a = g.getLhs().getType().getShape(),
                    b = g.getRhs().getType().getShape(),
                    c = g.getOut().getType().getShape();
  Type in = g.getLhs().getType().getElementType(),
       outType = g.getOut().getType().getElementType();
  if (in != g.getRhs().getType().getElementType() ||
      !(in.isF32() || in.isBF16()) ||
      !(outType.isF32() || (outType.isBF16() && in.isBF16())))
    return g.emitOpError("only f32 x f32 into f32 and bf16 x bf16 into f32 "
                         "or bf16 GEMMs are supported by this emitter");
  Value bias = g.getBias(), aux = g.getAux(), addend = g.getAddend();
  bool gelu = g.getGelu(), dgelu = g.getDgelu();
  if ((bias || aux || addend) && in != outType)
    return g.emitOpError("has no epilogue form for a bf16 product into f32");
  const char *epilogue = gelu     ? "OTCRT_GEMM_GELU"
                         : dgelu  ? "OTCRT_GEMM_DGELU"
                         : addend ? "OTCRT_GEMM_ADD"
                         : bias   ? "OTCRT_GEMM_BIAS"
                                  : "OTCRT_GEMM_NONE";
  auto dtype = [](Type t) { return t.isBF16() ? "OTC_BF16" : "OTC_F32"; };
  int64_t m = c[c.size() - 2], n = c[c.size() - 1];
  bool ta = g.getTransposeLhs(), tb = g.getTransposeRhs();
  int64_t k = ta ? a[a.size() - 2] : a[a.size() - 1];
  int64_t batch = numElements(c.drop_back(2));
  // Batch strides: an operand either spans the whole batch or is shared.
  auto strideOf = [&](ArrayRef<int64_t> s) -> std::optional<int64_t> {
    int64_t mat = s[s.size() - 2] * s[s.size() - 1];
    int64_t nb = numElements(s.drop_back(2));
    if (nb == 1)
      return 0;
    if (nb == batch)
      return mat;
    return std::nullopt;
  };
  std::optional<int64_t> sa = strideOf(a), sb = strideOf(b);
  if (!sa || !sb)
    return g.emitOpError("partially broadcast batch dimensions are not "
                         "supported yet");
  if (!batch)
    return std::optional<GemmCall>();
  // A batch of row-major products sharing rhs, lhs not transposed, is one
  // product of batch x m rows: the rows of every entry follow each other in
  // lhs and out alike (a projection of [B, T, C] activations). One larger
  // GEMM, no batch for the library's heuristics or epilogues.
  if (batch > 1 && !ta && *sb == 0 && *sa == m * k) {
    m *= batch;
    batch = 1;
    sa = 0;
  }
  GemmCall call;
  // The fields of OtcrtGemm in order: transposes, sizes, alpha and beta,
  // the types of A/B, C and bias/aux, the epilogue, leading dimensions and
  // batch strides (aux and the addend are laid out like C).
  llvm::raw_string_ostream d(call.descriptor);
  d << "{" << ta << ", " << tb << ", " << m << ", " << n << ", " << k << ", "
    << batch << ", 1.0f, " << (g.getAccumulate() || addend ? "1.0f" : "0.0f")
    << ", " << dtype(in) << ", " << dtype(outType) << ", " << dtype(outType)
    << ", " << epilogue << ", " << a.back() << ", " << b.back() << ", " << n
    << ", " << *sa << ", " << *sb << ", " << m * n << "}";
  auto orNull = [&](Value v) { return v ? name(v) : std::string("nullptr"); };
  call.operands = name(g.getLhs()) + ", " + name(g.getRhs()) + ", " +
                  name(g.getOut()) + ", " + orNull(bias) + ", " +
                  orNull(addend) + ", " + orNull(aux);
  call.buffers = {g.getLhs(), g.getRhs(), g.getOut(), bias, addend, aux};
  if (failed(addSums(g, name, batch, call)))
    return failure();
  if (failed(addFp8Operands(g, batch, m, n, k, call)))
    return failure();
  return std::optional<GemmCall>(std::move(call));
}
