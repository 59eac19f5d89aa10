// Tests the gradients of otc.attention (through otc.attention_grad) with a
// causal sliding window of 2 keys (each query sees itself and the key
// before it): q, k, v = x wq, x wk, x wv per head ([B, H, T, E] x [E, D]),
// so dq, dk and dv all reach a parameter; the output is weighted by t.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: wq {{.*}} PASS
// CHECK: wk {{.*}} PASS
// CHECK: wv {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x2x5x6xf32> {otc.input = "x"},
                   %t: tensor<2x2x5x4xf32> {otc.input = "t"},
                   %wq: tensor<6x4xf32> {otc.param = "wq"},
                   %wk: tensor<6x4xf32> {otc.param = "wk"},
                   %wv: tensor<6x4xf32> {otc.param = "wv"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %q = otc.matmul %x, %wq : (tensor<2x2x5x6xf32>, tensor<6x4xf32>) -> tensor<2x2x5x4xf32>
  %k = otc.matmul %x, %wk : (tensor<2x2x5x6xf32>, tensor<6x4xf32>) -> tensor<2x2x5x4xf32>
  %v = otc.matmul %x, %wv : (tensor<2x2x5x6xf32>, tensor<6x4xf32>) -> tensor<2x2x5x4xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.5 : f64, window = 2 : i64}
      : (tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>)
      -> (tensor<2x2x5x4xf32>, tensor<2x2x5xf32>)
  %0 = otc.mul %o, %t : (tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2, 3] : (tensor<2x2x5x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
