// Tests the gradients of otc.attention with dropout 0.1 on the
// probabilities: the mask is a pure function of the rng key, the stream and
// the element's flat index in [B, H, T, S], so finite differences see the
// same mask in every evaluation and attention_grad must redraw it exactly.
// Causal; q, k, v = x wq, x wk, x wv.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: wq {{.*}} PASS
// CHECK: wk {{.*}} PASS
// CHECK: wv {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x2x6x5xf32> {otc.input = "x"},
                   %key: tensor<i64> {otc.rng_key},
                   %t: tensor<2x2x6x4xf32> {otc.input = "t"},
                   %wq: tensor<5x4xf32> {otc.param = "wq"},
                   %wk: tensor<5x4xf32> {otc.param = "wk"},
                   %wv: tensor<5x4xf32> {otc.param = "wv"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %q = otc.matmul %x, %wq : (tensor<2x2x6x5xf32>, tensor<5x4xf32>) -> tensor<2x2x6x4xf32>
  %k = otc.matmul %x, %wk : (tensor<2x2x6x5xf32>, tensor<5x4xf32>) -> tensor<2x2x6x4xf32>
  %v = otc.matmul %x, %wv : (tensor<2x2x6x5xf32>, tensor<5x4xf32>) -> tensor<2x2x6x4xf32>
  %o, %lse = otc.attention %q, %k, %v key %key {causal, scale = 0.5 : f64, dropout = 0.1 : f64, stream = 3 : i64}
      : (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>, tensor<i64>)
      -> (tensor<2x2x6x4xf32>, tensor<2x2x6xf32>)
  %0 = otc.mul %o, %t : (tensor<2x2x6x4xf32>, tensor<2x2x6x4xf32>) -> tensor<2x2x6x4xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2, 3] : (tensor<2x2x6x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
