// Tests the gradients of otc.rms_norm (through otc.rms_norm_grad): once over
// the last dimension with gamma, once without gamma over the last two
// dimensions (axis 1 of the rank-3 h2), both feeding the loss; h = x w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gamma {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x5xf32> {otc.input = "x"},
                   %t: tensor<2x3x8xf32> {otc.input = "t"},
                   %t2: tensor<2x3x8xf32> {otc.input = "t2"},
                   %w: tensor<5x8xf32> {otc.param = "w"},
                   %gamma: tensor<8xf32> {otc.param = "gamma"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.matmul %x, %w : (tensor<2x3x5xf32>, tensor<5x8xf32>) -> tensor<2x3x8xf32>
  %y, %rstd = otc.rms_norm %h gamma %gamma {axis = 2 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<2x3x8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3xf32>)
  %y2, %rstd2 = otc.rms_norm %h {axis = 1 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2xf32>)
  %0 = otc.mul %y, %t : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %1 = otc.mul %y2, %t2 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %2 = otc.add %0, %1 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %3 = otc.reduce_sum %2, [0, 1, 2] : (tensor<2x3x8xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
