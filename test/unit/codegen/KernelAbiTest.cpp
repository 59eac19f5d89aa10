//===- KernelAbiTest.cpp - the kernel library's one table of signatures ---===//
//
// The signatures read from otcrt/kernels.def, against their declarations
// in otcrt/kernels.h and otcrt/abi.h as written there (copied out by hand
// below); the check of an emitted call (a count, an integer too wide for an
// int32_t, a pointer of the wrong storage, an unknown function), and the
// calls the fused ops list (LibraryCallOpInterface) against the table.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelAbi.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace otc;

namespace {

std::string typesOf(const KernelSignature &s) {
  std::string out;
  for (const KernelParam &p : s.params)
    out += (out.empty() ? "" : ", ") + p.type +
           (p.pointer ? "" : std::string(" ")) + p.name;
  return s.result + " " + s.function + "(" + out + ")";
}

TEST(KernelAbi, SignaturesAsTheHeaderDeclaresThem) {
  const KernelSignature *ln =
      lookupKernelSignature("otcrt_layer_norm_fwd_bf16");
  ASSERT_TRUE(ln);
  EXPECT_EQ(typesOf(*ln),
            "int otcrt_layer_norm_fwd_bf16(int64_t rows, int64_t cols, float "
            "eps, const otcrt_bf16 *x, const otcrt_bf16 *gamma, const "
            "otcrt_bf16 *beta, otcrt_bf16 *y, float *mean, float *rstd, void "
            "*stream)");
  const KernelSignature *ce =
      lookupKernelSignature("otcrt_cross_entropy_bwd_f32");
  ASSERT_TRUE(ce);
  EXPECT_EQ(typesOf(*ce),
            "int otcrt_cross_entropy_bwd_f32(int64_t rows, int64_t classes, "
            "const float *dloss, const float *logits, const int64_t *labels, "
            "const float *lse, int32_t has_ignore, int64_t ignore_index, "
            "int32_t reduction, float *dlogits, void *stream)");
  const KernelSignature *lce =
      lookupKernelSignature("otcrt_linear_cross_entropy_bf16");
  ASSERT_TRUE(lce);
  ASSERT_EQ(lce->params.size(), 22u);
  EXPECT_EQ(lce->params[7].type, "int32_t");        // w_layout
  EXPECT_EQ(lce->params[14].pointee, "otcrt_bf16"); // bias: h's type
  EXPECT_EQ(lce->params[18].type, "void *");        // dw: its own dw_type
  EXPECT_EQ(lce->params[19].pointee, "float");      // dbias
  EXPECT_EQ(lce->params[20].pointee, "otcrt_bf16"); // chunk
  const KernelSignature *gemm = lookupKernelSignature("otcrt_gemm");
  ASSERT_TRUE(gemm);
  EXPECT_EQ(typesOf(*gemm),
            "int otcrt_gemm(const OtcrtGemm *g, const void *a, const void *b, "
            "void *c, const void *bias, const void *addend, void *aux, void "
            "*stream)");
  const KernelSignature *gemmFp8 = lookupKernelSignature("otcrt_gemm_fp8");
  ASSERT_TRUE(gemmFp8);
  EXPECT_EQ(typesOf(*gemmFp8),
            "int otcrt_gemm_fp8(const OtcrtGemm *g, int32_t a_format, int32_t "
            "b_format, const void *a, const void *b, void *c, const void "
            "*bias, const void *addend, void *aux, void *stream)");
  const KernelSignature *record =
      lookupKernelSignature("otcrt_kernel_error_record");
  ASSERT_TRUE(record);
  EXPECT_EQ(typesOf(*record), "OtcrtKernelError * otcrt_kernel_error_record()");
  // One storage type per function: no otcrt_gemm_f32, no otcrt_layer_norm_fwd.
  EXPECT_FALSE(lookupKernelSignature("otcrt_gemm_f32"));
  EXPECT_FALSE(lookupKernelSignature("otcrt_layer_norm_fwd"));
  // The rotary embedding: data of the storage type, float tables.
  const KernelSignature *rope = lookupKernelSignature("otcrt_rope_bf16");
  ASSERT_TRUE(rope);
  EXPECT_EQ(typesOf(*rope),
            "int otcrt_rope_bf16(int64_t n0, int64_t n1, int64_t n2, int64_t "
            "dim, int64_t rot, int64_t c0, int64_t c1, int64_t c2, const "
            "otcrt_bf16 *x, const float *cos, const float *sin, int32_t "
            "transposed, int32_t interleaved, otcrt_bf16 *y, void *stream)");
  // The shared FP8 copies (otc-fp8-copies): the quantization, and the
  // product reading two copies.
  const KernelSignature *quantize = lookupKernelSignature("otcrt_fp8_quantize");
  ASSERT_TRUE(quantize);
  EXPECT_EQ(typesOf(*quantize),
            "int otcrt_fp8_quantize(const OtcrtFp8Quantize *q, const void *x, "
            "void *copy, void *stream)");
  const KernelSignature *copies =
      lookupKernelSignature("otcrt_gemm_fp8_copies");
  ASSERT_TRUE(copies);
  EXPECT_EQ(copies->params.size(), 14u);
  const KernelSignature *sums = lookupKernelSignature("otcrt_gemm_sums");
  ASSERT_TRUE(sums);
  EXPECT_EQ(typesOf(*sums),
            "int otcrt_gemm_sums(const OtcrtGemm *g, const void *a, const "
            "void *b, void *c, void *sums, int32_t sums_of, int32_t "
            "sums_type, int32_t accumulate_sums, void *stream)");
  // 16 functions per storage type and 11 single ones.
  EXPECT_EQ(kernelSignatures().size(), 16u * 2 + 11);
}

std::vector<KernelArg> columnSumArgs() {
  return {KernelArg::integer(8), KernelArg::integer(16),
          KernelArg::pointer("otcrt_bf16"), KernelArg::pointer("float"),
          KernelArg::pointer("void")};
}

TEST(KernelAbi, CallsChecked) {
  EXPECT_EQ(checkKernelCall("otcrt_column_sum_bf16", columnSumArgs()), "");
  // The f32 function takes float data.
  EXPECT_EQ(checkKernelCall("otcrt_column_sum_f32", columnSumArgs()),
            "otcrt_column_sum_f32: argument 3 (const float *x, "
            "otcrt/kernels.def) is a pointer to otcrt_bf16");
  std::vector<KernelArg> shorter = columnSumArgs();
  shorter.pop_back();
  EXPECT_EQ(checkKernelCall("otcrt_column_sum_bf16", shorter),
            "otcrt_column_sum_bf16 takes 5 arguments (otcrt/kernels.def), "
            "the call passes 4");
  std::vector<KernelArg> swapped = columnSumArgs();
  std::swap(swapped[1], swapped[2]);
  EXPECT_EQ(checkKernelCall("otcrt_column_sum_bf16", swapped),
            "otcrt_column_sum_bf16: argument 2 (int64_t cols, "
            "otcrt/kernels.def) is a pointer to otcrt_bf16");
  EXPECT_EQ(checkKernelCall("otcrt_column_sums_bf16", columnSumArgs()),
            "otcrt_column_sums_bf16 is not a function of the kernel library "
            "(otcrt/kernels.def)");
  // An int32_t parameter takes no value beyond its range; NULL only a
  // pointer; a float a float.
  std::vector<KernelArg> ce = {
      KernelArg::integer(4),       KernelArg::integer(10),
      KernelArg::pointer("float"), KernelArg::pointer("int64_t"),
      KernelArg::integer(1),       KernelArg::integer(-100),
      KernelArg::integer(0),       KernelArg::pointer("float"),
      KernelArg::null(),           KernelArg::pointer("void")};
  EXPECT_EQ(checkKernelCall("otcrt_cross_entropy_fwd_f32", ce), "");
  ce[4] = KernelArg::integer(int64_t(1) << 31);
  EXPECT_EQ(checkKernelCall("otcrt_cross_entropy_fwd_f32", ce),
            "otcrt_cross_entropy_fwd_f32: argument 5 (int32_t has_ignore, "
            "otcrt/kernels.def) is the integer 2147483648");
  ce[4] = KernelArg::integer(1);
  ce[5] = KernelArg::integer(int64_t(1) << 40); // int64_t ignore_index
  EXPECT_EQ(checkKernelCall("otcrt_cross_entropy_fwd_f32", ce), "");
  ce[0] = KernelArg::floating();
  EXPECT_NE(checkKernelCall("otcrt_cross_entropy_fwd_f32", ce), "");
  ce[0] = KernelArg::null();
  EXPECT_NE(checkKernelCall("otcrt_cross_entropy_fwd_f32", ce), "");
}

/// The fused ops' calls as they list them (LibraryCallOpInterface), their
/// operands' and results' element types standing for the buffers'.
class OpCalls : public ::testing::Test {
protected:
  void SetUp() override {
    ctx.loadDialect<OtcDialect, mlir::func::FuncDialect>();
  }
  std::string check(const char *text) {
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (!module)
      return "does not parse";
    std::string result = "no library call";
    module->walk([&](LibraryCallOpInterface lib) {
      mlir::Operation *op = lib.getOperation();
      auto pointee = [](mlir::Type t) -> std::string {
        t = mlir::getElementTypeOrSelf(t);
        if (t.isF32())
          return "float";
        if (t.isBF16())
          return "otcrt_bf16";
        if (t.isInteger(64))
          return "int64_t";
        return "other";
      };
      llvm::SmallVector<LibraryArg> libArgs;
      lib.getLibraryArgs(libArgs);
      std::vector<KernelArg> args;
      for (const LibraryArg &a : libArgs) {
        switch (a.kind) {
        case LibraryArg::Int:
          args.push_back(KernelArg::integer(a.value));
          break;
        case LibraryArg::Float:
          args.push_back(KernelArg::floating());
          break;
        case LibraryArg::Null:
          args.push_back(KernelArg::null());
          break;
        case LibraryArg::Operand:
          args.push_back(
              KernelArg::pointer(pointee(op->getOperand(a.index).getType())));
          break;
        case LibraryArg::Result:
          args.push_back(
              KernelArg::pointer(pointee(op->getResult(a.index).getType())));
          break;
        case LibraryArg::Struct:
          args.push_back(KernelArg::pointer(a.structType));
          break;
        }
      }
      args.push_back(KernelArg::pointer("void"));
      result = checkKernelCall(lib.getLibraryKernel(), args);
    });
    return result;
  }
  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(OpCalls, MatchTheTable) {
  EXPECT_EQ(check(R"(
func.func @f(%x: tensor<2x4x3x8xbf16>, %c: tensor<1x4x1x8xf32>) {
  %y = otc.rope %x, %c, %c {transposed} : (tensor<2x4x3x8xbf16>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<2x4x3x8xbf16>
  return
})"),
            "");
  // Partial interleaved rotary: 4 of 8 features rotate.
  EXPECT_EQ(check(R"(
func.func @f(%x: tensor<2x4x3x8xf32>, %c: tensor<1x4x1x4xf32>) {
  %y = otc.rope %x, %c, %c {interleaved} : (tensor<2x4x3x8xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<2x4x3x8xf32>
  return
})"),
            "");
  EXPECT_EQ(check(R"(
func.func @f(%x: tensor<2x3x4xbf16>, %g: tensor<3x4xbf16>) {
  %y, %m, %r = otc.layer_norm %x gamma %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xbf16>, tensor<3x4xbf16>) -> (tensor<2x3x4xbf16>, tensor<2xf32>, tensor<2xf32>)
  return
})"),
            "");
  EXPECT_EQ(check(R"(
func.func @f(%z: tensor<6x5xf32>, %y: tensor<6xi64>) {
  %l, %s = otc.cross_entropy %z, %y : (tensor<6x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return
})"),
            "");
  EXPECT_EQ(check(R"(
func.func @f(%q: tensor<1x2x4x2xbf16>) {
  %o, %l = otc.attention %q, %q, %q {causal, scale = 1.0 : f64} : (tensor<1x2x4x2xbf16>, tensor<1x2x4x2xbf16>, tensor<1x2x4x2xbf16>) -> (tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>)
  return
})"),
            "");
}

} // namespace
