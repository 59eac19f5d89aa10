//===- FusedBodiesTest.cpp - unit test of the fused-op kernel bodies ------===//
//
// Parses a module holding the fused activations of OtcFusedOps.td (GELU in
// both forms, SiLU, CLIP's QuickGELU and their gradients, f32 and bf16),
// emits each op's
// kernel body with emitBody and checks its work-item count and the key lines
// of the text, and that the text uses only float math functions that both
// the host compiler and nvcc accept. (The other fused ops are library calls:
// test/codegen/emit-library-calls.test.)
//
//===----------------------------------------------------------------------===//

#include "test/unit/codegen/BodyTestFixture.h"

#include <regex>
#include <string>

using namespace mlir;

namespace {

constexpr const char kModule[] = R"mlir(
func.func @f(%x: tensor<2x3x32xbf16>, %z: tensor<6x10xf32>) {
  %ge = otc.gelu %x {approximate = "tanh"} : tensor<2x3x32xbf16> loc("gelu_tanh")
  %gn = otc.gelu %z : tensor<6x10xf32> loc("gelu")
  %gg = otc.gelu_grad %z, %z : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32> loc("gelu_grad")
  %gt = otc.gelu_grad %x, %x {approximate = "tanh"} : (tensor<2x3x32xbf16>, tensor<2x3x32xbf16>) -> tensor<2x3x32xbf16> loc("gelu_tanh_grad")
  %si = otc.silu %z : tensor<6x10xf32> loc("silu")
  %sg = otc.silu_grad %z, %z : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32> loc("silu_grad")
  %qg = otc.silu %x {alpha = 1.702 : f64} : tensor<2x3x32xbf16> loc("quick_gelu")
  %qd = otc.silu_grad %z, %z {alpha = 1.702 : f64} : (tensor<6x10xf32>, tensor<6x10xf32>) -> tensor<6x10xf32> loc("quick_gelu_grad")
  return
}
)mlir";

class FusedBodies : public otc::testing::BodyTest {
protected:
  FusedBodies() : BodyTest(kModule) {}
};

TEST_F(FusedBodies, Activations) {
  EXPECT_EQ(items("gelu"), 60);
  EXPECT_HAS(body("gelu"), "out0[i] = x * (5.000000000e-01f * (1.0f + "
                           "erff(x * 7.071067812e-01f)));");
  // BF16 storage, float math: the local widens where it is used.
  std::string t = body("gelu_tanh");
  EXPECT_HAS(t, "const otc_bf16 x = in0[i];");
  EXPECT_HAS(t, "out0[i] = 5.000000000e-01f * x * (1.0f + "
                "tanhf(7.978845608e-01f * (x + 4.471500000e-02f * x * x * "
                "x)));");
  // Gradients read both operands before the store: the result may alias.
  std::string g = body("gelu_grad");
  EXPECT_HAS(g, "const float a = in0[i];");
  EXPECT_HAS(g, "const float b = in1[i];");
  EXPECT_HAS(g, "out0[i] = a * (5.000000000e-01f * (1.0f + erff(b * "
                "7.071067812e-01f)) + b * 3.989422804e-01f * "
                "expf(-5.000000000e-01f * b * b));");
  // The tanh read twice is computed once.
  std::string tg = body("gelu_tanh_grad");
  EXPECT_HAS(tg, "const float t0 = tanhf(7.978845608e-01f * (b + "
                 "4.471500000e-02f * b * b * b));");
  EXPECT_HAS(tg, "out0[i] = a * (5.000000000e-01f * (1.0f + t0) + "
                 "5.000000000e-01f * b * (1.0f - t0 * t0) * "
                 "(7.978845608e-01f * (1.0f + 1.341450000e-01f * b * b)));");
  EXPECT_HAS(body("silu"), "out0[i] = x * (1.0f / (1.0f + expf(-x)));");
  std::string sg = body("silu_grad");
  EXPECT_HAS(sg, "const float t0 = 1.0f / (1.0f + expf(-b));");
  EXPECT_HAS(sg, "out0[i] = a * t0 * (1.0f + b * (1.0f - t0));");
  EXPECT_EQ(items("quick_gelu"), 192);
  // QuickGELU, x sigmoid(1.702 x), and its derivative
  // sigmoid(a x) (1 + a x (1 - sigmoid(a x))) with a x computed once.
  EXPECT_HAS(body("quick_gelu"),
             "out0[i] = x * (1.0f / (1.0f + expf(-(1.702000000e+00f * x))));");
  std::string qd = body("quick_gelu_grad");
  EXPECT_HAS(qd, "const float t0 = 1.702000000e+00f * b;");
  EXPECT_HAS(qd, "const float t1 = 1.0f / (1.0f + expf(-t0));");
  EXPECT_HAS(qd, "out0[i] = a * t1 * (1.0f + t0 * (1.0f - t1));");
}

TEST_F(FusedBodies, CudaText) {
  const char *names[] = {"gelu_tanh",      "gelu",           "gelu_grad",
                         "gelu_tanh_grad", "silu",           "silu_grad",
                         "quick_gelu",     "quick_gelu_grad"};
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
