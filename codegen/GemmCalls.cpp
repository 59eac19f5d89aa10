//===- GemmCalls.cpp - the runtime call of an otck.gemm -------------------===//
//
// Which otcrt_gemm_* function computes a GEMM (by its operand and result
// types and its epilogue: bias, addend, gelu, dgelu) and its arguments:
// sizes, row and batch strides of the row-major operands, beta, and the
// epilogue's buffers, in the order runtime/include/otcrt/abi.h declares.
//
//===----------------------------------------------------------------------===//

#include "codegen/GemmCalls.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace otc;

FailureOr<std::string>
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
  bool bf16 = in.isBF16();
  auto operand = [&](Value v) {
    return bf16 ? "(const uint16_t *)" + name(v) : name(v);
  };
  std::string fn = !bf16               ? "otcrt_gemm_f32"
                   : outType.isBF16() ? "otcrt_gemm_bf16_bf16"
                                      : "otcrt_gemm_bf16";
  Value bias = g.getBias(), aux = g.getAux(), addend = g.getAddend();
  bool gelu = g.getGelu(), dgelu = g.getDgelu();
  if (bias || aux || addend) {
    if (fn == "otcrt_gemm_bf16")
      return g.emitOpError("has no epilogue form for a bf16 product into f32");
    const char *kind = gelu     ? "gelu"
                       : dgelu  ? "dgelu"
                       : addend ? "add"
                                : "bias";
    fn = std::string("otcrt_gemm_") + kind +
         (bf16 ? "_bf16_bf16" : "_f32");
  }
  // BF16 buffers are named as another pointer type: cast them.
  auto cast = [&](StringRef name, bool isConst) {
    return bf16 ? (isConst ? "(const uint16_t *)" : "(uint16_t *)") +
                      name.str()
                : name.str();
  };
  std::string out = outType.isBF16() ? "(uint16_t *)" + name(g.getOut())
                                     : name(g.getOut());
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
    return std::string();
  // A batch of row-major products sharing rhs, lhs not transposed, is one
  // product of batch x m rows: the rows of every entry follow each other in
  // lhs and out alike (a projection of [B, T, C] activations). One larger
  // GEMM, no batch for the library's heuristics or epilogues.
  if (batch > 1 && !ta && *sb == 0 && *sa == m * k) {
    m *= batch;
    batch = 1;
    sa = 0;
  }
  std::string call;
  llvm::raw_string_ostream os(call);
  os << fn << "(" << ta << ", " << tb << ", " << m << ", " << n << ", " << k << ", 1.0f, "
        << operand(g.getLhs()) << ", " << a.back() << ", " << *sa << ", "
        << operand(g.getRhs()) << ", " << b.back() << ", " << *sb << ", "
        << (g.getAccumulate() || addend ? "1.0f, " : "0.0f, ")
        << out << ", " << n << ", " << m * n << ", " << batch;
  // The bias (NULL for a GELU epilogue or an addend without one), then the
  // addend or the aux matrix (written by gelu, read by dgelu).
  if (bias)
    os << ", " << cast(name(bias), true);
  else if (gelu || addend)
    os << ", nullptr";
  if (addend)
    os << ", " << cast(name(addend), true);
  if (aux)
    os << ", " << cast(name(aux), dgelu);
  os << ")";
  return call;
}
