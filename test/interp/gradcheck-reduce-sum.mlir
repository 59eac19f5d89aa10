// Tests the gradient of otc.reduce_sum with and without keep_dims, over inner
// and outer axes.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4xf32> {otc.input = "x"},
                   %y: tensor<1x3x1xf32> {otc.input = "y"},
                   %w: tensor<2x3x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.mul %w, %w : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = otc.reduce_sum %0, [1] : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %2 = otc.mul %1, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  %4 = otc.reduce_sum %w, [0, 2] {keep_dims} : (tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
  %5 = otc.mul %4, %y : (tensor<1x3x1xf32>, tensor<1x3x1xf32>) -> tensor<1x3x1xf32>
  %6 = otc.reduce_sum %5, [0, 1, 2] {keep_dims} : (tensor<1x3x1xf32>) -> tensor<1x1x1xf32>
  %7 = otc.reshape %6 : (tensor<1x1x1xf32>) -> tensor<f32>
  %8 = otc.add %3, %7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %8 : tensor<f32>
}
