// Tests the gradient of otc.sin (finite differences of the interpreter).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %w: tensor<3x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.mul %w, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = otc.sin %0 : tensor<3x4xf32>
  %2 = otc.mul %1, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
