// Tests the gradients of otc.div for numerator and denominator, with a
// broadcast denominator kept away from zero (d * d + 1).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: d {{.*}} PASS
// CHECK: e {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf32> {otc.input = "x"},
                   %a: tensor<3x4xf32> {otc.param = "a"},
                   %d: tensor<4xf32> {otc.param = "d"},
                   %e: tensor<3x1xf32> {otc.param = "e"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %one = otc.constant dense<1.0> : tensor<f32>
  %dd = otc.mul %d, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %den = otc.add %dd, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %0 = otc.div %a, %den : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %1 = otc.div %e, %den : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %2 = otc.add %0, %1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
