// Tests the gradient of otc.concat: three parameters and one input joined
// along axis 1 of a rank-3 tensor; each parameter gets its own window.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: a {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: c {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x8x4xf32> {otc.input = "x"},
                   %i: tensor<2x2x4xf32> {otc.input = "i"},
                   %a: tensor<2x1x4xf32> {otc.param = "a"},
                   %b: tensor<2x3x4xf32> {otc.param = "b"},
                   %c: tensor<2x2x4xf32> {otc.param = "c"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.concat %a, %i, %b, %c {axis = 1 : i64}
      : (tensor<2x1x4xf32>, tensor<2x2x4xf32>, tensor<2x3x4xf32>, tensor<2x2x4xf32>) -> tensor<2x8x4xf32>
  %1 = otc.tanh %0 : tensor<2x8x4xf32>
  %2 = otc.mul %1, %x : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %3 = otc.reduce_sum %2, [0, 1, 2] : (tensor<2x8x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
