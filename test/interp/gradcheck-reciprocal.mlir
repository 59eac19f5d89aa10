// Tests the gradient of otc.reciprocal on inputs away from 0 (w * w + 0.5).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %w: tensor<3x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %half = otc.constant dense<0.5> : tensor<f32>
  %0 = otc.mul %w, %w : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = otc.add %0, %half : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %2 = otc.reciprocal %1 : tensor<3x4xf32>
  %3 = otc.mul %2, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
