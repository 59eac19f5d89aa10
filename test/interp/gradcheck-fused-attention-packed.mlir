// Tests the gradients of otc.attention with layout "packed": one fused
// projection [B, T, H + 2 Hk, D] read as q (heads 0-3), k (heads 4-5) and v
// (heads 6-7), five positions, grouped-query (four query heads, two
// key/value heads), causal; its one gradient holds dq, dk and dv side by
// side. qkv = x w, reshaped into heads of 3.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x5x6xf32> {otc.input = "x"},
                   %t: tensor<2x5x4x3xf32> {otc.input = "t"},
                   %w: tensor<6x24xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %qkv = otc.matmul %x, %w : (tensor<2x5x6xf32>, tensor<6x24xf32>) -> tensor<2x5x24xf32>
  %p = otc.reshape %qkv : (tensor<2x5x24xf32>) -> tensor<2x5x8x3xf32>
  %o, %lse = otc.attention %p, %p, %p {causal, layout = "packed", scale = 0.57735026918962584 : f64}
      : (tensor<2x5x8x3xf32>, tensor<2x5x8x3xf32>, tensor<2x5x8x3xf32>)
      -> (tensor<2x5x4x3xf32>, tensor<2x4x5xf32>)
  %0 = otc.mul %o, %t : (tensor<2x5x4x3xf32>, tensor<2x5x4x3xf32>) -> tensor<2x5x4x3xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2, 3] : (tensor<2x5x4x3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
