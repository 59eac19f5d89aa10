// Tests the gradient of otc.broadcast from a missing leading dim, from a
// size-1 dim and from a scalar.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: s {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x4xf32> {otc.input = "x"},
                   %a: tensor<4xf32> {otc.param = "a"},
                   %b: tensor<3x1xf32> {otc.param = "b"},
                   %s: tensor<f32> {otc.param = "s"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.broadcast %a : (tensor<4xf32>) -> tensor<2x3x4xf32>
  %1 = otc.broadcast %b : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %2 = otc.broadcast %s : (tensor<f32>) -> tensor<2x3x4xf32>
  %3 = otc.mul %0, %1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %4 = otc.add %3, %2 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %5 = otc.mul %4, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %6 = otc.reduce_sum %5, [0, 1, 2] : (tensor<2x3x4xf32>) -> tensor<f32>
  return %6 : tensor<f32>
}
