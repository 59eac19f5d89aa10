// Tests the gradient of otc.reshape (rank change and regrouping).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %w: tensor<2x3x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.reshape %w : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
  %1 = otc.mul %0, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %2 = otc.mul %1, %0 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<4x6xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
