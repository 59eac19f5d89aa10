//===- LossBodiesTest.cpp - unit test of the loss bodies ------------------===//
//
// Emits the bodies of softmax_cross_entropy, nll_loss and their gradients
// on BF16 operands and checks that every pointer takes the C type of its
// value (otc_bf16 for BF16, which widens to float on load) and that a mean
// over rows that are all ignored is 0 / 0, NaN as in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "test/unit/codegen/BodyTestFixture.h"


#include <string>

using namespace mlir;

namespace {

constexpr const char kModule[] = R"mlir(
func.func @f(%z: tensor<4x10xbf16>, %y: tensor<4xi64>, %s: tensor<f32>) {
  %l = otc.softmax_cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32> loc("sce")
  %dz = otc.softmax_cross_entropy_grad %s, %z, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x10xbf16>, tensor<4xi64>) -> tensor<4x10xbf16> loc("sce_grad")
  %n = otc.nll_loss %z, %y {ignore_index = -100 : i64} : (tensor<4x10xbf16>, tensor<4xi64>) -> tensor<f32> loc("nll")
  %dn = otc.nll_loss_grad %s, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xbf16> loc("nll_grad")
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
  for (const char *name : {"sce", "sce_grad", "nll", "nll_grad"})
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
