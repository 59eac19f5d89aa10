// Tests the gradient of otc.log on positive inputs (w * w + 1).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x5xf32> {otc.input = "x"},
                   %w: tensor<4x5xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %one = otc.constant dense<1.0> : tensor<f32>
  %0 = otc.mul %w, %w : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %1 = otc.add %0, %one : (tensor<4x5xf32>, tensor<f32>) -> tensor<4x5xf32>
  %2 = otc.log %1 : tensor<4x5xf32>
  %3 = otc.mul %2, %x : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %4 = otc.reduce_sum %3, [0, 1] : (tensor<4x5xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
