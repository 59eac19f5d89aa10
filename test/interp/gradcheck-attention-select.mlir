// Tests gradients through causal self-attention: q, k, v = x wq, x wk, x wv;
// softmax(q k^T / sqrt(8) + mask) v, projected by wo. Here the causal mask is selected, as torch exports masked_fill:
// keep = trilu(ones, lower) == 1, select(keep == 0, -1e9, scores) written as
// compare "eq" against 0 and select.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: wq {{.*}} PASS
// CHECK: wk {{.*}} PASS
// CHECK: wv {{.*}} PASS
// CHECK: wo {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4x8xf32> {otc.input = "x"},
                   %t: tensor<2x4x8xf32> {otc.input = "t"},
                   %wq: tensor<8x8xf32> {otc.param = "wq"},
                   %wk: tensor<8x8xf32> {otc.param = "wk"},
                   %wv: tensor<8x8xf32> {otc.param = "wv"},
                   %wo: tensor<8x8xf32> {otc.param = "wo"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %scale = otc.constant dense<0.35355339059327373> : tensor<f32>
  %q = otc.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %k = otc.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %v = otc.matmul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %scores = otc.matmul %q, %k {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %scaled = otc.mul %scores, %scale : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %ones = otc.constant dense<1.0> : tensor<4x4xf32>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %big = otc.constant dense<-1.0e9> : tensor<f32>
  %keep = otc.trilu %ones {upper = false, k = 0 : i64} : tensor<4x4xf32>
  %drop = otc.compare "eq", %keep, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %masked = otc.select %drop, %big, %scaled : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = otc.softmax %masked {axis = 2 : i64} : tensor<2x4x4xf32>
  %ctx = otc.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = otc.matmul %ctx, %wo {transpose_rhs} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %0 = otc.mul %out, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %1 = otc.reduce_sum %0, [0, 1, 2] : (tensor<2x4x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
