// Tests the gradient of otc.erf.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %w: tensor<3x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.erf %w : tensor<3x4xf32>
  %1 = otc.mul %0, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %2 = otc.reduce_sum %1, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
