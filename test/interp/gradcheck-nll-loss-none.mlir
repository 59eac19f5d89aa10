// Tests the gradient of otc.nll_loss after otc.log_softmax with reduction
// "none", weighted per row.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<8x4xf32> {otc.input = "x"},
                   %labels: tensor<8xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %b: tensor<5xf32> {otc.param = "b"},
                   %r: tensor<8xf32> {otc.input = "r"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<8x4xf32>, tensor<4x5xf32>) -> tensor<8x5xf32>
  %1 = otc.add %0, %b : (tensor<8x5xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %2 = otc.log_softmax %1 {axis = 1 : i64} : tensor<8x5xf32>
  %3 = otc.nll_loss %2, %labels {reduction = "none"} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<8xf32>
  %4 = otc.mul %3, %r : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %5 = otc.reduce_sum %4, [0] : (tensor<8xf32>) -> tensor<f32>
  return %5 : tensor<f32>
}
