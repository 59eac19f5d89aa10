// Tests a tied embedding: the same [10, 8] table is gathered by the token
// ids and used as the output projection (matmul transpose_rhs), so its
// gradient is the sum of the gather_grad and the matmul gradient.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: wte {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%tokens: tensor<2x5xi64> {otc.input = "tokens", otc.gradcheck.int_max = 10 : i64},
                   %labels: tensor<10xi64> {otc.input = "labels", otc.gradcheck.int_max = 10 : i64},
                   %wte: tensor<10x8xf32> {otc.param = "wte"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.gather %wte, %tokens {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x5xi64>) -> tensor<2x5x8xf32>
  %1 = otc.tanh %0 : tensor<2x5x8xf32>
  %2 = otc.reshape %1 : (tensor<2x5x8xf32>) -> tensor<10x8xf32>
  %3 = otc.matmul %2, %wte {transpose_rhs} : (tensor<10x8xf32>, tensor<10x8xf32>) -> tensor<10x10xf32>
  %4 = otc.softmax_cross_entropy %3, %labels : (tensor<10x10xf32>, tensor<10xi64>) -> tensor<f32>
  return %4 : tensor<f32>
}
