// Tests the gradient of otc.gather: an axis-0 embedding lookup of a [6, 4]
// table by [2, 5] random token ids (ten draws from six rows, so rows repeat
// and their gradients add up), and an axis-1 gather by constant indices with
// a repeated and a negative index.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: emb {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%tokens: tensor<2x5xi64> {otc.input = "tokens", otc.gradcheck.int_max = 6 : i64},
                   %x: tensor<2x5x4xf32> {otc.input = "x"},
                   %y: tensor<3x4xf32> {otc.input = "y"},
                   %emb: tensor<6x4xf32> {otc.param = "emb"},
                   %w: tensor<3x5xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.gather %emb, %tokens {axis = 0 : i64} : (tensor<6x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  %1 = otc.tanh %0 : tensor<2x5x4xf32>
  %2 = otc.mul %1, %x : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %3 = otc.reduce_sum %2, [0, 1, 2] : (tensor<2x5x4xf32>) -> tensor<f32>
  %idx = otc.constant dense<[4, 0, -1, 0]> : tensor<4xi64>
  %4 = otc.gather %w, %idx {axis = 1 : i64} : (tensor<3x5xf32>, tensor<4xi64>) -> tensor<3x4xf32>
  %5 = otc.tanh %4 : tensor<3x4xf32>
  %6 = otc.mul %5, %y : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %7 = otc.reduce_sum %6, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  %8 = otc.add %3, %7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %8 : tensor<f32>
}
