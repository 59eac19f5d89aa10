// Tests gradients through LayerNorm built from primitives, the way
// exporters decompose it: mean and variance by reduce_sum / 8, then
// (h - mean) * reciprocal(sqrt(var + eps)) * gamma + beta; h = x w, so the
// gradient must also flow through the statistics to w.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gamma {{.*}} PASS
// CHECK: beta {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %t: tensor<4x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %gamma: tensor<8xf32> {otc.param = "gamma"},
                   %beta: tensor<8xf32> {otc.param = "beta"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %inv_n = otc.constant dense<0.125> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %h = otc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %0 = otc.reduce_sum %h, [1] {keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mean = otc.mul %0, %inv_n : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %d = otc.sub %h, %mean : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %1 = otc.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = otc.reduce_sum %1, [1] {keep_dims} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %var = otc.mul %2, %inv_n : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %3 = otc.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %4 = otc.sqrt %3 : tensor<4x1xf32>
  %5 = otc.reciprocal %4 : tensor<4x1xf32>
  %6 = otc.mul %d, %5 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %7 = otc.mul %6, %gamma : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %8 = otc.add %7, %beta : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %9 = otc.mul %8, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = otc.reduce_sum %9, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %10 : tensor<f32>
}
