// Tests the gradient of otc.nll_loss after otc.log_softmax with reduction
// "mean" and ignore_index 1 (rows labelled 1 count for nothing, also not in the
// mean).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<8x4xf32> {otc.input = "x"},
                   %labels: tensor<8xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %b: tensor<5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<8x4xf32>, tensor<4x5xf32>) -> tensor<8x5xf32>
  %1 = otc.add %0, %b : (tensor<8x5xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %2 = otc.log_softmax %1 {axis = 1 : i64} : tensor<8x5xf32>
  %3 = otc.nll_loss %2, %labels {ignore_index = 1 : i64} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}
