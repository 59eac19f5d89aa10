// Tests gradients through RMSNorm as Llama exports it:
// h * reciprocal(sqrt(mean(pow(h, 2)) + eps)) * weight, with h = x w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: weight {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x6xf32> {otc.input = "x"},
                   %t: tensor<2x3x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %weight: tensor<8xf32> {otc.param = "weight"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %two = otc.constant dense<2.0> : tensor<f32>
  %inv_n = otc.constant dense<0.125> : tensor<f32>
  %eps = otc.constant dense<1.0e-6> : tensor<f32>
  %h = otc.matmul %x, %w : (tensor<2x3x6xf32>, tensor<6x8xf32>) -> tensor<2x3x8xf32>
  %0 = otc.pow %h, %two : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %1 = otc.reduce_sum %0, [2] {keep_dims} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %2 = otc.mul %1, %inv_n : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %3 = otc.add %2, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %4 = otc.sqrt %3 : tensor<2x3x1xf32>
  %5 = otc.reciprocal %4 : tensor<2x3x1xf32>
  %6 = otc.mul %h, %5 : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %7 = otc.mul %weight, %6 : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %8 = otc.mul %7, %t : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %9 = otc.reduce_sum %8, [0, 1, 2] : (tensor<2x3x8xf32>) -> tensor<f32>
  return %9 : tensor<f32>
}
