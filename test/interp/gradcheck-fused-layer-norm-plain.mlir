// Tests the gradient of otc.layer_norm without gamma and beta (the gradient
// op still returns dgamma and dbeta, which go unused); h = x w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<5x6xf32> {otc.input = "x"},
                   %t: tensor<5x7xf32> {otc.input = "t"},
                   %w: tensor<6x7xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.matmul %x, %w : (tensor<5x6xf32>, tensor<6x7xf32>) -> tensor<5x7xf32>
  %y, %mean, %rstd = otc.layer_norm %h {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5xf32>, tensor<5xf32>)
  %0 = otc.mul %y, %t : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
  %1 = otc.reduce_sum %0, [0, 1] : (tensor<5x7xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
