//===- FusedBodiesTest.cpp - unit test of the fused-op kernel bodies ------===//
//
// Parses a module holding every fused op of OtcFusedOps.td (f32 and bf16,
// with and without their optional operands), emits each op's kernel body
// with emitBody and checks its work-item count and the key lines of the
// text: the index arithmetic, which pointer each optional operand reads, the
// dropout keep index of attention, and that the text uses only float math
// functions that both the host compiler and nvcc accept.
//
//===----------------------------------------------------------------------===//

#include "codegen/KernelBodies.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

using namespace mlir;

namespace {

constexpr const char kModule[] = R"mlir(
func.func @f(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
             %v: tensor<2x2x8x16xf32>, %m: tensor<8x8xf32>, %key: tensor<i64>,
             %lse: tensor<2x4x8xf32>, %x: tensor<2x3x32xbf16>,
             %g: tensor<32xbf16>, %st: tensor<2x3xf32>, %z: tensor<6x10xf32>,
             %y: tensor<6xi32>, %s: tensor<f32>, %l6: tensor<6xf32>,
             %big: tensor<1x1x4x200xf32>, %zb: tensor<2x3x10xbf16>,
             %yb: tensor<2x3xi64>) {
  %o, %ol = otc.attention %q, %k, %v mask %m key %key {causal, scale = 0.25 : f64, dropout = 0.1 : f64, stream = 7 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<8x8xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) loc("att")
  %o2, %ol2 = otc.attention %q, %k, %v {scale = 0.25 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) loc("att_plain")
  %o3, %ol3 = otc.attention %big, %big, %big {scale = 0.5 : f64} : (tensor<1x1x4x200xf32>, tensor<1x1x4x200xf32>, tensor<1x1x4x200xf32>) -> (tensor<1x1x4x200xf32>, tensor<1x1x4xf32>) loc("att_wide")
  %dq, %dk, %dv = otc.attention_grad %q, %q, %k, %v, %q, %lse mask %m key %key {causal, scale = 0.25 : f64, dropout = 0.1 : f64, stream = 7 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) loc("att_grad")
  %y1, %mean, %rstd = otc.layer_norm %x gamma %g beta %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3x32xbf16>, tensor<32xbf16>, tensor<32xbf16>) -> (tensor<2x3x32xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) loc("ln")
  %y2, %mean2, %rstd2 = otc.layer_norm %x beta %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3x32xbf16>, tensor<32xbf16>) -> (tensor<2x3x32xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) loc("ln_beta")
  %dx, %dg, %db = otc.layer_norm_grad %x, %x, %st, %st {axis = 2 : i64} : (tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3x32xbf16>, tensor<32xbf16>, tensor<32xbf16>) loc("ln_grad")
  %r1, %r2 = otc.rms_norm %x gamma %g {axis = 2 : i64, epsilon = 1.0e-06 : f64} : (tensor<2x3x32xbf16>, tensor<32xbf16>) -> (tensor<2x3x32xbf16>, tensor<2x3xf32>) loc("rms")
  %rx, %rg = otc.rms_norm_grad %x, %x gamma %g, %st {axis = 2 : i64} : (tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<32xbf16>, tensor<2x3xf32>) -> (tensor<2x3x32xbf16>, tensor<32xbf16>) loc("rms_grad")
  %ge = otc.gelu %x {approximate = "tanh"} : tensor<2x3x32xbf16> loc("gelu_tanh")
  %gn = otc.gelu %z : tensor<6x10xf32> loc("gelu")
  %gg = otc.gelu_grad %z, %z : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32> loc("gelu_grad")
  %gt = otc.gelu_grad %x, %x {approximate = "tanh"} : (tensor<2x3x32xbf16>, tensor<2x3x32xbf16>) -> tensor<2x3x32xbf16> loc("gelu_tanh_grad")
  %si = otc.silu %z : tensor<6x10xf32> loc("silu")
  %sg = otc.silu_grad %z, %z : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32> loc("silu_grad")
  %ce, %cl = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<6x10xf32>, tensor<6xi32>) -> (tensor<f32>, tensor<6xf32>) loc("ce")
  %cn, %cl2 = otc.cross_entropy %zb, %yb {reduction = "none"} : (tensor<2x3x10xbf16>, tensor<2x3xi64>) -> (tensor<2x3xbf16>, tensor<2x3xf32>) loc("ce_none")
  %cg = otc.cross_entropy_grad %s, %z, %y, %l6 {ignore_index = -100 : i64} : (tensor<f32>, tensor<6x10xf32>, tensor<6xi32>, tensor<6xf32>) -> tensor<6x10xf32> loc("ce_grad")
  %cs = otc.cross_entropy_grad %s, %z, %y, %l6 {reduction = "sum"} : (tensor<f32>, tensor<6x10xf32>, tensor<6xi32>, tensor<6xf32>) -> tensor<6x10xf32> loc("ce_grad_sum")
  return
}
)mlir";

class FusedBodies : public ::testing::Test {
protected:
  void SetUp() override {
    ctx.loadDialect<otc::OtcDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kModule, &ctx);
    ASSERT_TRUE(module) << "the test module does not parse";
  }

  /// The op located at `name`.
  Operation *find(StringRef name) {
    Operation *found = nullptr;
    module->walk([&](Operation *op) {
      if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
        if (loc.getName() == name)
          found = op;
    });
    EXPECT_TRUE(found) << name.str();
    return found;
  }

  /// The body of the op at `name` with operands in0, in1, ... and results
  /// out0, out1, ...; empty when emission fails.
  std::string body(StringRef name, bool cuda = false) {
    Operation *op = find(name);
    if (!op)
      return "";
    llvm::SmallVector<std::string> in, out;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      in.push_back("in" + std::to_string(i));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      out.push_back("out" + std::to_string(i));
    std::string text, globals;
    llvm::raw_string_ostream os(text), gos(globals);
    otc::BodyContext c{os, gos, in, out, "k0", cuda};
    if (failed(otc::emitBody(op, c)))
      return "";
    return text;
  }

  int64_t items(StringRef name) { return otc::workItems(find(name)); }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

#define EXPECT_HAS(text, line)                                                 \
  EXPECT_NE((text).find(line), std::string::npos)                              \
      << "missing: " << (line) << "\nin:\n"                                    \
      << (text)
#define EXPECT_LACKS(text, line)                                               \
  EXPECT_EQ((text).find(line), std::string::npos)                              \
      << "unexpected: " << (line) << "\nin:\n"                                 \
      << (text)

TEST_F(FusedBodies, Attention) {
  EXPECT_EQ(items("att"), 2 * 4 * 8);
  std::string b = body("att");
  // Query row (b, h, i); two query heads per kv head.
  EXPECT_HAS(b, "const int64_t bi = i / 32, hq = (i / 8) % 4, ti = i % 8;");
  EXPECT_HAS(b, "const int64_t kvb = (bi * 2 + hq / 2) * 128;");
  EXPECT_HAS(b, "const int64_t jn = ti + 1;");
  // The [8, 8] mask broadcast to [2, 4, 8, 8].
  EXPECT_HAS(b, "s = s * 2.500000000e-01f + (float)in3[ti * 8 + j];");
  EXPECT_HAS(b, "if (s == -INFINITY) continue;");
  EXPECT_HAS(b, "se = se * expf(mx - s) + 1.0f; mx = s;");
  EXPECT_HAS(b, "out1[i] = lse;");
  // Probability (b, h, i, j) is dropout element i * S + j, stream 7.
  EXPECT_HAS(b, "(uint64_t)in4[0] * 0x9E3779B97F4A7C15ull ^ "
                "((uint64_t)7ull << 32) ^ (uint64_t)(i * 8 + j);");
  EXPECT_HAS(b, "const bool keep = (double)(h >> 11) * 0x1.0p-53 >= "
                "1.000000000e-01;");
  EXPECT_HAS(b, "const float p = expf(s - lse) * ks;");
  EXPECT_HAS(b, "float acc[16];");
  EXPECT_HAS(b, "out0[i * 16 + d0 + e] = acc[e];");

  std::string plain = body("att_plain");
  EXPECT_HAS(plain, "const int64_t bi = i / 32, hq = (i / 8) % 4;\n");
  EXPECT_HAS(plain, "const int64_t jn = 8;");
  EXPECT_HAS(plain, "s = s * 2.500000000e-01f;");
  EXPECT_LACKS(plain, "keep");
  EXPECT_LACKS(plain, "in3");

  // Heads wider than a chunk take several passes of at most 128 columns.
  std::string wide = body("att_wide");
  EXPECT_HAS(wide, "for (int64_t d0 = 0; d0 < 200; d0 += 128) {");
  EXPECT_HAS(wide, "const int64_t dn = 200 - d0 < 128 ? 200 - d0 : 128;");
  EXPECT_HAS(wide, "float acc[128];");
}

TEST_F(FusedBodies, AttentionGrad) {
  // 64 query rows, then 2 x 2 x 8 key rows.
  EXPECT_EQ(items("att_grad"), 64 + 32);
  std::string b = body("att_grad");
  EXPECT_HAS(b, "if (i < 64) {");
  EXPECT_HAS(b, "const float lse = (float)in5[i];");
  EXPECT_HAS(b, "di += (float)gr[d] * (float)orow[d];");
  EXPECT_HAS(b, "s = s * 2.500000000e-01f + (float)in6[ti * 8 + j];");
  EXPECT_HAS(b, "(uint64_t)(i * 8 + j);");
  EXPECT_HAS(b, "const float ds = p * (dp * ks - di);");
  EXPECT_HAS(b, "out0[i * 16 + d0 + e] = 2.500000000e-01f * acc[e];");
  // Key rows sum over the two query heads of their group and the causal
  // query rows ti >= j.
  EXPECT_HAS(b, "const int64_t r = i - 64;");
  EXPECT_HAS(b, "const int64_t bi = r / 16, hk = (r / 8) % 2, j = r % 8;");
  EXPECT_HAS(b, "for (int64_t hq = hk * 2; hq < (hk + 1) * 2; ++hq)");
  EXPECT_HAS(b, "for (int64_t ti = j; ti < 8; ++ti) {");
  EXPECT_HAS(b, "const int64_t row = (bi * 4 + hq) * 8 + ti;");
  EXPECT_HAS(b, "const float p = expf(s - (float)in5[row]);");
  EXPECT_HAS(b, "(uint64_t)(row * 8 + j);");
  EXPECT_HAS(b, "av[e] += pk * (float)gr[d0 + e];");
  EXPECT_HAS(b, "out1[r * 16 + d0 + e] = 2.500000000e-01f * ak[e];");
  EXPECT_HAS(b, "out2[r * 16 + d0 + e] = av[e];");
}

TEST_F(FusedBodies, LayerNorm) {
  EXPECT_EQ(items("ln"), 6);
  std::string b = body("ln");
  EXPECT_HAS(b, "const otc_bf16* x = in0 + i * 32;");
  EXPECT_HAS(b, "const float mean = sum / 32.0f;");
  EXPECT_HAS(b, "const float rstd = 1.0f / sqrtf(sq / 32.0f + "
                "1.000000000e-05f);");
  EXPECT_HAS(b, "yk *= (float)in1[k];");
  EXPECT_HAS(b, "yk += (float)in2[k];");
  EXPECT_HAS(b, "out0[i * 32 + k] = yk;");
  EXPECT_HAS(b, "out1[i] = mean;");
  EXPECT_HAS(b, "out2[i] = rstd;");

  // Without gamma, beta is operand 1.
  std::string beta = body("ln_beta");
  EXPECT_LACKS(beta, "yk *=");
  EXPECT_HAS(beta, "yk += (float)in1[k];");
}

TEST_F(FusedBodies, LayerNormGrad) {
  // Six rows of dx, then 32 columns of dgamma and dbeta.
  EXPECT_EQ(items("ln_grad"), 6 + 32);
  std::string b = body("ln_grad");
  EXPECT_HAS(b, "if (i < 6) {");
  // No gamma: mean and rstd are operands 2 and 3.
  EXPECT_HAS(b, "const float gk = (float)in0[i * 32 + k], xh = "
                "((float)in1[i * 32 + k] - (float)in2[i]) * (float)in3[i];");
  EXPECT_HAS(b, "out0[i * 32 + k] = (float)in3[i] * (gk - sg - xh * sgx);");
  EXPECT_HAS(b, "const int64_t col = i - 6;");
  EXPECT_HAS(b, "dg += gv * ((float)in1[at] - (float)in2[r]) * (float)in3[r]; "
                "db += gv;");
  EXPECT_HAS(b, "out1[col] = dg;");
  EXPECT_HAS(b, "out2[col] = db;");
}

TEST_F(FusedBodies, RmsNorm) {
  EXPECT_EQ(items("rms"), 6);
  std::string b = body("rms");
  EXPECT_LACKS(b, "sum");
  EXPECT_HAS(b, "const float rstd = 1.0f / sqrtf(sq / 32.0f + "
                "1.000000000e-06f);");
  EXPECT_HAS(b, "yk *= (float)in1[k];");
  EXPECT_HAS(b, "out1[i] = rstd;");

  EXPECT_EQ(items("rms_grad"), 6 + 32);
  std::string g = body("rms_grad");
  EXPECT_HAS(g, "const float gk = (float)in0[i * 32 + k] * (float)in2[k], "
                "xh = ((float)in1[i * 32 + k]) * (float)in3[i];");
  EXPECT_HAS(g, "out0[i * 32 + k] = (float)in3[i] * (gk - xh * sgx);");
  EXPECT_HAS(g, "out1[col] = dg;");
  EXPECT_LACKS(g, "out2");
}

TEST_F(FusedBodies, Activations) {
  EXPECT_EQ(items("gelu"), 60);
  EXPECT_HAS(body("gelu"), "erff(x * 7.071067812e-01f)");
  EXPECT_HAS(body("gelu_tanh"), "const float th = tanhf(u);");
  EXPECT_HAS(body("gelu_tanh"), "out0[i] = 0.5f * x * (1.0f + th);");
  // Gradients read both operands before the store: the result may alias.
  std::string g = body("gelu_grad");
  EXPECT_HAS(g, "const float g = (float)in0[i];");
  EXPECT_HAS(g, "const float x = (float)in1[i];");
  EXPECT_HAS(g, "out0[i] = g * (cdf + x * 3.989422804e-01f * "
                "expf(-0.5f * x * x));");
  EXPECT_HAS(body("gelu_tanh_grad"), "1.0f - th * th");
  EXPECT_HAS(body("silu"), "out0[i] = x * sg;");
  EXPECT_HAS(body("silu_grad"), "out0[i] = g * sg * (1.0f + x * (1.0f - sg));");
}

TEST_F(FusedBodies, CrossEntropy) {
  EXPECT_EQ(items("ce"), 1);
  std::string b = body("ce");
  EXPECT_HAS(b, "for (int64_t n = 0; n < 6; ++n) {");
  EXPECT_HAS(b, "out1[n] = lse;");
  EXPECT_HAS(b, "const int64_t y = (int64_t)in1[n];");
  EXPECT_HAS(b, "if (y == -100) continue;");
  EXPECT_HAS(b, "out0[0] = total / (float)count;");

  // Rows of [2, 3, 10] bf16 logits, one item each.
  EXPECT_EQ(items("ce_none"), 6);
  std::string n = body("ce_none");
  EXPECT_HAS(n, "const otc_bf16* z = in0 + i * 10;");
  EXPECT_HAS(n, "out1[i] = lse;");
  EXPECT_HAS(n, "out0[i] = false ? 0.0f : lse - (float)z[y];");
}

TEST_F(FusedBodies, CrossEntropyGrad) {
  EXPECT_EQ(items("ce_grad"), 6);
  std::string b = body("ce_grad");
  EXPECT_HAS(b, "if (y == -100) {");
  EXPECT_HAS(b, "count += !((int64_t)in2[n] == -100);");
  EXPECT_HAS(b, "const float g = in0[0] / (float)count;");
  EXPECT_HAS(b, "const float lse = (float)in3[i];");
  // Each logit is read before the same element is written (in place).
  EXPECT_HAS(b, "const float zk = (float)z[k];\n"
                "        dz[k] = g * (expf(zk - lse) - (k == y ? 1.0f : "
                "0.0f));");
  std::string s = body("ce_grad_sum");
  EXPECT_HAS(s, "const float g = in0[0];");
  EXPECT_LACKS(s, "count");
}

/// The cuda flavour is the same text, and every body sticks to float math
/// that nvcc accepts in device code.
TEST_F(FusedBodies, CudaText) {
  const char *names[] = {"att",
                         "att_plain",
                         "att_wide",
                         "att_grad",
                         "ln",
                         "ln_beta",
                         "ln_grad",
                         "rms",
                         "rms_grad",
                         "gelu_tanh",
                         "gelu",
                         "gelu_grad",
                         "gelu_tanh_grad",
                         "silu",
                         "silu_grad",
                         "ce",
                         "ce_none",
                         "ce_grad",
                         "ce_grad_sum"};
  std::regex doubleMath("\\b(exp|log|sqrt|tanh|erf|pow|fabs|fmax)\\(");
  for (const char *name : names) {
    std::string cpu = body(name), cuda = body(name, /*cuda=*/true);
    EXPECT_FALSE(cuda.empty()) << name;
    EXPECT_EQ(cpu, cuda) << name;
    EXPECT_LACKS(cuda, "std::");
    EXPECT_FALSE(std::regex_search(cuda, doubleMath)) << name << "\n" << cuda;
  }
}

} // namespace
