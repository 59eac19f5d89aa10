// Tests the gradients of otc.add, including both operands broadcast
// (numpy rules: a missing leading dim and a size-1 dim).
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
  %0 = otc.add %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = otc.add %c, %0 : (tensor<3x1xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %2 = otc.mul %1, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
