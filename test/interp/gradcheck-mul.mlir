// Tests the gradients of otc.mul, including a value multiplied by itself and
// broadcast operands.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: c {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %a: tensor<3x4xf32> {otc.param = "a"},
                   %b: tensor<4xf32> {otc.param = "b"},
                   %c: tensor<3x1xf32> {otc.param = "c"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.mul %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = otc.mul %c, %0 : (tensor<3x1xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %2 = otc.mul %1, %a : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
