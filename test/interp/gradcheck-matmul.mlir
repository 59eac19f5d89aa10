// Tests the gradients of otc.matmul on 2-d operands.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x5xf32> {otc.input = "x"},
                   %a: tensor<3x4xf32> {otc.param = "a"},
                   %b: tensor<4x5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  %1 = otc.mul %0, %x : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = otc.reduce_sum %1, [0, 1] : (tensor<3x5xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
