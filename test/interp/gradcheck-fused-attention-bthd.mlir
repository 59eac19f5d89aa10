// Tests the gradients of otc.attention with layout "bthd": q, k, v and the
// output stored [B, T, H, D] (five positions, four query heads, so a swap of
// the two would show), grouped-query (two key/value heads), causal.
// q = xq wq, k = xkv wk, v = xkv wv.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: wq {{.*}} PASS
// CHECK: wk {{.*}} PASS
// CHECK: wv {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%xq: tensor<2x5x4x6xf32> {otc.input = "xq"},
                   %xkv: tensor<2x5x2x6xf32> {otc.input = "xkv"},
                   %t: tensor<2x5x4x3xf32> {otc.input = "t"},
                   %wq: tensor<6x3xf32> {otc.param = "wq"},
                   %wk: tensor<6x3xf32> {otc.param = "wk"},
                   %wv: tensor<6x3xf32> {otc.param = "wv"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %q = otc.matmul %xq, %wq : (tensor<2x5x4x6xf32>, tensor<6x3xf32>) -> tensor<2x5x4x3xf32>
  %k = otc.matmul %xkv, %wk : (tensor<2x5x2x6xf32>, tensor<6x3xf32>) -> tensor<2x5x2x3xf32>
  %v = otc.matmul %xkv, %wv : (tensor<2x5x2x6xf32>, tensor<6x3xf32>) -> tensor<2x5x2x3xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, layout = "bthd", scale = 0.57735026918962584 : f64}
      : (tensor<2x5x4x3xf32>, tensor<2x5x2x3xf32>, tensor<2x5x2x3xf32>)
      -> (tensor<2x5x4x3xf32>, tensor<2x4x5xf32>)
  %0 = otc.mul %o, %t : (tensor<2x5x4x3xf32>, tensor<2x5x4x3xf32>) -> tensor<2x5x4x3xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2, 3] : (tensor<2x5x4x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
