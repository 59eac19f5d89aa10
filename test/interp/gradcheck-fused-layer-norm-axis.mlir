// Tests the gradients of otc.layer_norm normalizing the last two dimensions
// (axis 1 of a rank-3 input): each of the 2 rows has 3 x 8 elements and
// gamma, beta have the normalized shape [3, 8]; h = x w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gamma {{.*}} PASS
// CHECK: beta {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x5xf32> {otc.input = "x"},
                   %t: tensor<2x3x8xf32> {otc.input = "t"},
                   %w: tensor<5x8xf32> {otc.param = "w"},
                   %gamma: tensor<3x8xf32> {otc.param = "gamma"},
                   %beta: tensor<3x8xf32> {otc.param = "beta"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.matmul %x, %w : (tensor<2x3x5xf32>, tensor<5x8xf32>) -> tensor<2x3x8xf32>
  %y, %mean, %rstd = otc.layer_norm %h gamma %gamma beta %beta {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2xf32>, tensor<2xf32>)
  %0 = otc.mul %y, %t : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2] : (tensor<2x3x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
