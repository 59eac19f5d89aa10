// Tests the gradient of otc.log_softmax along the last axis and along a middle
// axis (the loss weights every output by a random input, since the plain sum
// of a softmax is constant).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: v {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x4xf32> {otc.input = "x"},
                   %y: tensor<2x3x4xf32> {otc.input = "y"},
                   %w: tensor<2x3x4xf32> {otc.param = "w"},
                   %v: tensor<2x3x4xf32> {otc.param = "v"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.log_softmax %w {axis = 2 : i64} : tensor<2x3x4xf32>
  %1 = otc.mul %0, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = otc.reduce_sum %1, [0, 1, 2] : (tensor<2x3x4xf32>) -> tensor<f32>
  %3 = otc.log_softmax %v {axis = 1 : i64} : tensor<2x3x4xf32>
  %4 = otc.mul %3, %y : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = otc.reduce_sum %4, [0, 1, 2] : (tensor<2x3x4xf32>) -> tensor<f32>
  %6 = otc.add %2, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}
