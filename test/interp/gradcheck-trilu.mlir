// Tests the gradient of otc.trilu: upper with k = 1 and lower with k = -1 on
// a batch of square matrices, and lower with k = 2 on wide matrices.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: u {{.*}} PASS
// CHECK: l {{.*}} PASS
// CHECK: n {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4x4xf32> {otc.input = "x"},
                   %y: tensor<3x5xf32> {otc.input = "y"},
                   %u: tensor<2x4x4xf32> {otc.param = "u"},
                   %l: tensor<2x4x4xf32> {otc.param = "l"},
                   %n: tensor<3x5xf32> {otc.param = "n"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.tanh %u : tensor<2x4x4xf32>
  %1 = otc.trilu %0 {upper = true, k = 1 : i64} : tensor<2x4x4xf32>
  %2 = otc.trilu %l {upper = false, k = -1 : i64} : tensor<2x4x4xf32>
  %3 = otc.mul %2, %2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %4 = otc.add %1, %3 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %5 = otc.mul %4, %x : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %6 = otc.reduce_sum %5, [0, 1, 2] : (tensor<2x4x4xf32>) -> tensor<f32>
  %7 = otc.trilu %n {upper = false, k = 2 : i64} : tensor<3x5xf32>
  %8 = otc.tanh %7 : tensor<3x5xf32>
  %9 = otc.mul %8, %y : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %10 = otc.reduce_sum %9, [0, 1] : (tensor<3x5xf32>) -> tensor<f32>
  %11 = otc.add %6, %10 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %11 : tensor<f32>
}
