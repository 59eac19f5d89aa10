// Tests the gradients of otc.matmul with batch dims broadcast on both sides (2x1 against 3).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x3x5xf32> {otc.input = "x"},
                   %a: tensor<2x1x3x4xf32> {otc.param = "a"},
                   %b: tensor<3x4x5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %a, %b : (tensor<2x1x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x3x5xf32>
  %1 = otc.mul %0, %x : (tensor<2x3x3x5xf32>, tensor<2x3x3x5xf32>) -> tensor<2x3x3x5xf32>
  %2 = otc.reduce_sum %1, [0, 1, 2, 3] : (tensor<2x3x3x5xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
