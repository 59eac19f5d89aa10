// Tests the gradients of a small MLP chaining every differentiable op:
// matmul (plain, transposed), broadcast add, relu, tanh, dropout, exp/log,
// neg, sub, div, transpose, reshape, reduce_sum and a mean softmax
// cross-entropy with ignore_index. w1 has more than 64 elements, so 64 random
// ones are checked.
// RUN: otc-run %s --check-gradients --seed 3 | FileCheck %s

// CHECK: w1 96 64 {{.*}} PASS
// CHECK: b1 {{.*}} PASS
// CHECK: w2 {{.*}} PASS
// CHECK: b2 {{.*}} PASS
// CHECK: s {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x8xf32> {otc.input = "x"},
                   %labels: tensor<6xi64> {otc.input = "labels", otc.gradcheck.int_max = 4 : i64},
                   %key: tensor<i64> {otc.rng_key},
                   %w1: tensor<12x8xf32> {otc.param = "w1"},
                   %b1: tensor<12xf32> {otc.param = "b1"},
                   %w2: tensor<12x4xf32> {otc.param = "w2"},
                   %b2: tensor<4xf32> {otc.param = "b2"},
                   %s: tensor<1x4xf32> {otc.param = "s"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %one = otc.constant dense<1.0> : tensor<f32>
  %xr = otc.reshape %x : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %h0 = otc.matmul %xr, %w1 {transpose_rhs} : (tensor<6x8xf32>, tensor<12x8xf32>) -> tensor<6x12xf32>
  %h1 = otc.add %h0, %b1 : (tensor<6x12xf32>, tensor<12xf32>) -> tensor<6x12xf32>
  %h2 = otc.relu %h1 : tensor<6x12xf32>
  %h3 = otc.tanh %h1 : tensor<6x12xf32>
  %h4 = otc.sub %h2, %h3 : (tensor<6x12xf32>, tensor<6x12xf32>) -> tensor<6x12xf32>
  %h5, %mask = otc.dropout %h4, %key {ratio = 0.3 : f64, stream = 1 : i64}
      : (tensor<6x12xf32>, tensor<i64>) -> (tensor<6x12xf32>, tensor<6x12xi1>)
  %ht = otc.transpose %h5, [1, 0] : (tensor<6x12xf32>) -> tensor<12x6xf32>
  %z0 = otc.matmul %ht, %w2 {transpose_lhs} : (tensor<12x6xf32>, tensor<12x4xf32>) -> tensor<6x4xf32>
  %z1 = otc.add %z0, %b2 : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %e = otc.exp %s : tensor<1x4xf32>
  %e1 = otc.add %e, %one : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %l = otc.log %e1 : tensor<1x4xf32>
  %z2 = otc.div %z1, %e1 : (tensor<6x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
  %n = otc.neg %l : tensor<1x4xf32>
  %z3 = otc.mul %z2, %n : (tensor<6x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
  %ce = otc.softmax_cross_entropy %z3, %labels {ignore_index = 3 : i64}
      : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
  %reg0 = otc.mul %b2, %b2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %reg1 = otc.reduce_sum %reg0, [0] {keep_dims} : (tensor<4xf32>) -> tensor<1xf32>
  %reg2 = otc.reshape %reg1 : (tensor<1xf32>) -> tensor<f32>
  %loss = otc.add %ce, %reg2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
