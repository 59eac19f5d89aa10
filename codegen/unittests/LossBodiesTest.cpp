//===- LossBodiesTest.cpp - unit test of the loss and gather bodies -------===//
//
// Emits the bodies of softmax_cross_entropy, nll_loss, their gradients and
// gather_grad on BF16 operands and checks that every pointer takes the C
// type of its value (otc_bf16 for BF16, which widens to float on load) and
// that a mean over rows that are all ignored is 0 / 0, NaN as in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "codegen/unittests/BodyTestFixture.h"


#include <string>

using namespace mlir;

namespace {

constexpr const char kModule[] = R"mlir(
func.func @f(%z: tensor<4x10xbf16>, %y: tensor<4xi64>, %s: tensor<f32>,
             %g: tensor<2x3x8xbf16>, %t: tensor<2x3xi64>) {
  %l = otc.softmax_cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32> loc("sce")
  %dz = otc.softmax_cross_entropy_grad %s, %z, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x10xbf16>, tensor<4xi64>) -> tensor<4x10xbf16> loc("sce_grad")
  %n = otc.nll_loss %z, %y {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32> loc("nll")
  %dn = otc.nll_loss_grad %s, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xbf16> loc("nll_grad")
  %e = otc.gather_grad %g, %t {axis = 0 : i64} : (tensor<2x3x8xbf16>, tensor<2x3xi64>) -> tensor<11x8xbf16> loc("gather_grad")
  return
}
)mlir";

class LossBodies : public otc::testing::BodyTest {
protected:
  LossBodies() : BodyTest(kModule) {}
};

TEST_F(LossBodies, Bf16Pointers) {
  std::string sce = body("sce");
  EXPECT_HAS(sce, "const otc_bf16* z = in0 + n * 10;");
  EXPECT_HAS(sce, "float mx = (float)z[0];");
  EXPECT_HAS(sce, "const float rl = lse - (float)z[y];");
  std::string sceGrad = body("sce_grad");
  EXPECT_HAS(sceGrad, "otc_bf16* dz = out0 + i * 10;");
  EXPECT_HAS(sceGrad, "const otc_bf16* z = in1 + i * 10;");
  EXPECT_HAS(body("nll_grad"), "otc_bf16* dx = out0 + i * 10;");
  std::string gather = body("gather_grad");
  EXPECT_HAS(gather, "otc_bf16* row = out0 + i * 8;");
  EXPECT_HAS(gather, "const otc_bf16* g = in0 + (o * 6 + p) * 8;");
  EXPECT_HAS(gather, "row[n] = row[n] + g[n];");
  for (const char *name :
       {"sce", "sce_grad", "nll", "nll_grad", "gather_grad"})
    EXPECT_LACKS(body(name), "float*");
}

TEST_F(LossBodies, MeanOfNoRowsIsNaN) {
  for (const char *name : {"sce", "nll"}) {
    std::string b = body(name);
    EXPECT_HAS(b, "out0[0] = total / (float)count;");
    EXPECT_LACKS(b, "count ?");
  }
}

} // namespace
