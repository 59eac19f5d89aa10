// Tests the gradient of otc.slice: a strided window (strides 2 and 3) of a
// [5, 8] parameter, and a unit-stride window of a rank-3 one; elements
// outside the windows get zero gradient.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: v {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3xf32> {otc.input = "x"},
                   %y: tensor<1x2x3xf32> {otc.input = "y"},
                   %w: tensor<5x8xf32> {otc.param = "w"},
                   %v: tensor<2x3x4xf32> {otc.param = "v"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.slice %w, [1, 1], [2, 3] : (tensor<5x8xf32>) -> tensor<2x3xf32>
  %1 = otc.tanh %0 : tensor<2x3xf32>
  %2 = otc.mul %1, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %4 = otc.slice %v, [1, 1, 1], [1, 1, 1] : (tensor<2x3x4xf32>) -> tensor<1x2x3xf32>
  %5 = otc.mul %4, %y : (tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
  %6 = otc.reduce_sum %5, [0, 1, 2] : (tensor<1x2x3xf32>) -> tensor<f32>
  %7 = otc.add %3, %6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %7 : tensor<f32>
}
