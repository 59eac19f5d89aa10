// Tests the gradients of otc.layer_norm (through otc.layer_norm_grad) over
// the last dimension with gamma and beta; h = x w, so dx must be right for
// w's gradient (the statistics depend on every element of the row).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gamma {{.*}} PASS
// CHECK: beta {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %t: tensor<4x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %gamma: tensor<8xf32> {otc.param = "gamma"},
                   %beta: tensor<8xf32> {otc.param = "beta"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %y, %mean, %rstd = otc.layer_norm %h gamma %gamma beta %beta {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %0 = otc.mul %y, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = otc.reduce_sum %0, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
