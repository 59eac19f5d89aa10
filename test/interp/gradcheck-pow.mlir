// Tests the gradient of otc.pow for both operands: a positive base exp(a)
// [3, 4] raised to a broadcast exponent b [4]; and a base c of any sign
// raised to the constant 3, whose exponent gradient (log of a negative
// base, NaN) must not leak into the result.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: c {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %a: tensor<3x4xf32> {otc.param = "a"},
                   %b: tensor<4xf32> {otc.param = "b"},
                   %c: tensor<3x4xf32> {otc.param = "c"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %three = otc.constant dense<3.0> : tensor<f32>
  %0 = otc.exp %a : tensor<3x4xf32>
  %1 = otc.pow %0, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %2 = otc.pow %c, %three : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %3 = otc.add %1, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.mul %3, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %5 = otc.reduce_sum %4, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %5 : tensor<f32>
}
