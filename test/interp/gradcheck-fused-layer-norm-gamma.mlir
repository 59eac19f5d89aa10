// Tests the gradients of otc.layer_norm with gamma but no beta: the gradient
// rule must hand back dx and dgamma only, in that order; h = x w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gamma {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %t: tensor<4x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %gamma: tensor<8xf32> {otc.param = "gamma"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %y, %mean, %rstd = otc.layer_norm %h gamma %gamma {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %0 = otc.mul %y, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = otc.reduce_sum %0, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
