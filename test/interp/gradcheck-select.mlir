// Tests the gradient of otc.select with broadcasting: a [3, 4] condition
// choosing between a [4] and a [3, 1] operand, then a [4] condition choosing
// between a [3, 4] value and a 0-d parameter. The conditions come from
// otc.compare on inputs and stop the gradient.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: s {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %c: tensor<3x4xf32> {otc.input = "c"},
                   %m: tensor<4xf32> {otc.input = "m"},
                   %a: tensor<4xf32> {otc.param = "a"},
                   %b: tensor<3x1xf32> {otc.param = "b"},
                   %s: tensor<f32> {otc.param = "s"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %zero = otc.constant dense<0.0> : tensor<f32>
  %0 = otc.compare "gt", %c, %zero : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xi1>
  %1 = otc.select %0, %a, %b : (tensor<3x4xi1>, tensor<4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %2 = otc.tanh %1 : tensor<3x4xf32>
  %3 = otc.compare "le", %m, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %4 = otc.select %3, %2, %s : (tensor<4xi1>, tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %5 = otc.mul %4, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %6 = otc.reduce_sum %5, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %6 : tensor<f32>
}
