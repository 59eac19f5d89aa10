// Tests gradients through GELU in its exact (erf) form, as exported:
// 0.5 * h * (1 + erf(h / sqrt(2))), with h = x w + b.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %t: tensor<4x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %b: tensor<8xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %sqrt2 = otc.constant dense<1.4142135623730951> : tensor<f32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %0 = otc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %h = otc.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = otc.div %h, %sqrt2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = otc.erf %1 : tensor<4x8xf32>
  %3 = otc.add %2, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = otc.mul %h, %3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = otc.mul %4, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %6 = otc.mul %5, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = otc.reduce_sum %6, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %7 : tensor<f32>
}
