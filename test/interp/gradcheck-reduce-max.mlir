// Tests the gradient of otc.reduce_max (random inputs, so no ties): over the
// middle axis without keep_dims, and over axes 0 and 2 with keep_dims.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: v {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4xf32> {otc.input = "x"},
                   %y: tensor<1x3x1xf32> {otc.input = "y"},
                   %w: tensor<2x3x4xf32> {otc.param = "w"},
                   %v: tensor<2x3x4xf32> {otc.param = "v"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.reduce_max %w, [1] : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %1 = otc.mul %0, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %2 = otc.reduce_sum %1, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %3 = otc.reduce_max %v, [0, 2] {keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  %4 = otc.mul %3, %y : (tensor<1x3x1xf32>, tensor<1x3x1xf32>) -> tensor<1x3x1xf32>
  %5 = otc.reduce_sum %4, [0, 1, 2] : (tensor<1x3x1xf32>) -> tensor<f32>
  %6 = otc.add %2, %5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %6 : tensor<f32>
}
