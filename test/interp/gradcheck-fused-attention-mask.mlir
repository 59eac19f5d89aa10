// Tests the gradients of otc.attention with an additive mask operand and
// more keys than queries (T = 3, S = 5, not causal): the [2, 1, 3, 5] mask
// is a random input plus a [5] key-padding row with -inf on the last key,
// both broadcast; q = xq wq, k = xkv wk, v = xkv wv.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: wq {{.*}} PASS
// CHECK: wk {{.*}} PASS
// CHECK: wv {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%xq: tensor<2x2x3x6xf32> {otc.input = "xq"},
                   %xkv: tensor<2x2x5x6xf32> {otc.input = "xkv"},
                   %m: tensor<2x1x3x5xf32> {otc.input = "m"},
                   %t: tensor<2x2x3x4xf32> {otc.input = "t"},
                   %wq: tensor<6x4xf32> {otc.param = "wq"},
                   %wk: tensor<6x4xf32> {otc.param = "wk"},
                   %wv: tensor<6x4xf32> {otc.param = "wv"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %pad = otc.constant dense<[0.0, 0.0, 0.0, 0.0, 0xFF800000]> : tensor<5xf32>
  %mask = otc.add %m, %pad : (tensor<2x1x3x5xf32>, tensor<5xf32>) -> tensor<2x1x3x5xf32>
  %q = otc.matmul %xq, %wq : (tensor<2x2x3x6xf32>, tensor<6x4xf32>) -> tensor<2x2x3x4xf32>
  %k = otc.matmul %xkv, %wk : (tensor<2x2x5x6xf32>, tensor<6x4xf32>) -> tensor<2x2x5x4xf32>
  %v = otc.matmul %xkv, %wv : (tensor<2x2x5x6xf32>, tensor<6x4xf32>) -> tensor<2x2x5x4xf32>
  %o, %lse = otc.attention %q, %k, %v mask %mask {scale = 0.5 : f64}
      : (tensor<2x2x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x1x3x5xf32>)
      -> (tensor<2x2x3x4xf32>, tensor<2x2x3xf32>)
  %0 = otc.mul %o, %t : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x3x4xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2, 3] : (tensor<2x2x3x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
