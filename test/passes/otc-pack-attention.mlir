// RUN: otc-opt %s --otc-pack-attention --split-input-file | FileCheck %s

// Tests that attention whose q, k and v are a fused projection's slices, in
// that order, reads the projection itself (layout "packed"), that its
// gradient writes one packed value which replaces the concatenation of dq,
// dk and dv, or is sliced for them when something else reads them, and that
// other attention stays as it is.

// GPT-2's block: [2, 16, 96] split into three [2, 16, 4, 8]; forward and
// backward packed, no slice or concatenation left.
// CHECK-LABEL: func.func @fused_qkv
// CHECK-NEXT: %[[P:.*]] = otc.reshape %arg0 : (tensor<2x16x96xf32>) -> tensor<2x16x12x8xf32>
// CHECK-NOT: otc.slice
// CHECK: %[[O:.*]], %[[L:.*]] = otc.attention %[[P]], %[[P]], %[[P]] {causal, layout = "packed", scale = 3.500000e-01 : f64} : (tensor<2x16x12x8xf32>, tensor<2x16x12x8xf32>, tensor<2x16x12x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>)
// CHECK: %[[D:.*]] = otc.attention_grad %arg1, %[[P]], %[[P]], %[[P]], %[[O]], %[[L]] {causal, layout = "packed", scale = 3.500000e-01 : f64} : {{.*}} -> tensor<2x16x12x8xf32>
// CHECK-NEXT: %[[J:.*]] = otc.reshape %[[D]] : (tensor<2x16x12x8xf32>) -> tensor<2x16x96xf32>
// CHECK-NOT: otc.concat
// CHECK-NOT: otc.slice
// CHECK: return %[[O]], %[[J]]
func.func @fused_qkv(%qkv: tensor<2x16x96xf32>, %do: tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x96xf32>) {
  %q = otc.slice %qkv, [0, 0, 0], [1, 1, 1] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %k = otc.slice %qkv, [0, 0, 32], [1, 1, 1] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %v = otc.slice %qkv, [0, 0, 64], [1, 1, 1] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %q4 = otc.reshape %q : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %k4 = otc.reshape %k : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %v4 = otc.reshape %v : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
  %o, %lse = otc.attention %q4, %k4, %v4 {causal, layout = "bthd", scale = 0.35 : f64} : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = otc.attention_grad %do, %q4, %k4, %v4, %o, %lse {causal, layout = "bthd", scale = 0.35 : f64} : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x4x16xf32>) -> (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>)
  %rv = otc.reshape %dv : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
  %rk = otc.reshape %dk : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
  %rq = otc.reshape %dq : (tensor<2x16x4x8xf32>) -> tensor<2x16x32xf32>
  %d = otc.concat %rq, %rk, %rv {axis = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x96xf32>
  return %o, %d : tensor<2x16x4x8xf32>, tensor<2x16x96xf32>
}

// -----

// Grouped-query heads (4 query heads, 2 key and 2 value heads of 2) in BF16:
// packed as 8 heads; the gradients are read one by one, so each is a slice
// of the packed gradient at its heads (0, 4 and 6).
// CHECK-LABEL: func.func @grouped_sliced_grads
// CHECK-NEXT: %[[P:.*]] = otc.reshape %arg0 : (tensor<1x6x16xbf16>) -> tensor<1x6x8x2xbf16>
// CHECK: %[[O:.*]], %[[L:.*]] = otc.attention %[[P]], %[[P]], %[[P]] {causal, layout = "packed", scale = 5.000000e-01 : f64} : {{.*}} -> (tensor<1x6x4x2xbf16>, tensor<1x4x6xf32>)
// CHECK: %[[D:.*]] = otc.attention_grad %arg1, %[[P]], %[[P]], %[[P]], %[[O]], %[[L]]
// CHECK-NEXT: %[[DQ:.*]] = otc.slice %[[D]], [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x6x8x2xbf16>) -> tensor<1x6x4x2xbf16>
// CHECK-NEXT: %[[DK:.*]] = otc.slice %[[D]], [0, 0, 4, 0], [1, 1, 1, 1] : (tensor<1x6x8x2xbf16>) -> tensor<1x6x2x2xbf16>
// CHECK-NEXT: %[[DV:.*]] = otc.slice %[[D]], [0, 0, 6, 0], [1, 1, 1, 1] : (tensor<1x6x8x2xbf16>) -> tensor<1x6x2x2xbf16>
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
func.func @grouped_sliced_grads(%qkv: tensor<1x6x16xbf16>, %do: tensor<1x6x4x2xbf16>) -> (tensor<1x6x4x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x2x2xbf16>) {
  %q = otc.slice %qkv, [0, 0, 0], [1, 1, 1] : (tensor<1x6x16xbf16>) -> tensor<1x6x8xbf16>
  %k = otc.slice %qkv, [0, 0, 8], [1, 1, 1] : (tensor<1x6x16xbf16>) -> tensor<1x6x4xbf16>
  %v = otc.slice %qkv, [0, 0, 12], [1, 1, 1] : (tensor<1x6x16xbf16>) -> tensor<1x6x4xbf16>
  %q4 = otc.reshape %q : (tensor<1x6x8xbf16>) -> tensor<1x6x4x2xbf16>
  %k4 = otc.reshape %k : (tensor<1x6x4xbf16>) -> tensor<1x6x2x2xbf16>
  %v4 = otc.reshape %v : (tensor<1x6x4xbf16>) -> tensor<1x6x2x2xbf16>
  %o, %lse = otc.attention %q4, %k4, %v4 {causal, layout = "bthd", scale = 0.5 : f64} : (tensor<1x6x4x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x2x2xbf16>) -> (tensor<1x6x4x2xbf16>, tensor<1x4x6xf32>)
  %dq, %dk, %dv = otc.attention_grad %do, %q4, %k4, %v4, %o, %lse {causal, layout = "bthd", scale = 0.5 : f64} : (tensor<1x6x4x2xbf16>, tensor<1x6x4x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x4x2xbf16>, tensor<1x4x6xf32>) -> (tensor<1x6x4x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x2x2xbf16>)
  return %dq, %dk, %dv : tensor<1x6x4x2xbf16>, tensor<1x6x2x2xbf16>, tensor<1x6x2x2xbf16>
}

// -----

// Slices in another order (k first), and attention stored [B, H, T, D]:
// left as they are.
// CHECK-LABEL: func.func @not_packed
// CHECK-COUNT-3: otc.slice
// CHECK: otc.attention {{.*}} {layout = "bthd", scale = 5.000000e-01 : f64}
// CHECK: otc.attention %arg1, %arg1, %arg1 {scale = 5.000000e-01 : f64}
// CHECK-NOT: packed
func.func @not_packed(%qkv: tensor<1x4x12xf32>, %x: tensor<1x2x4x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) {
  %k = otc.slice %qkv, [0, 0, 0], [1, 1, 1] : (tensor<1x4x12xf32>) -> tensor<1x4x4xf32>
  %q = otc.slice %qkv, [0, 0, 4], [1, 1, 1] : (tensor<1x4x12xf32>) -> tensor<1x4x4xf32>
  %v = otc.slice %qkv, [0, 0, 8], [1, 1, 1] : (tensor<1x4x12xf32>) -> tensor<1x4x4xf32>
  %q4 = otc.reshape %q : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %k4 = otc.reshape %k : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %v4 = otc.reshape %v : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %o, %lse = otc.attention %q4, %k4, %v4 {layout = "bthd", scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4xf32>)
  %o2, %lse2 = otc.attention %x, %x, %x {scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o, %o2 : tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// BF16 slices widened for FP32 attention (mixed precision next to an FP32
// mask): the whole projection is reshaped and widened once.
// CHECK-LABEL: func.func @widened
// CHECK-NEXT: %[[R:.*]] = otc.reshape %arg0 : (tensor<1x4x12xbf16>) -> tensor<1x4x6x2xbf16>
// CHECK-NEXT: %[[P:.*]] = otc.cast %[[R]] : (tensor<1x4x6x2xbf16>) -> tensor<1x4x6x2xf32>
// CHECK-NOT: otc.slice
// CHECK-NOT: otc.cast
// CHECK: otc.attention %[[P]], %[[P]], %[[P]] mask %arg1 {layout = "packed", scale = 5.000000e-01 : f64}
func.func @widened(%qkv: tensor<1x4x12xbf16>, %m: tensor<1x1x1x4xf32>) -> tensor<1x4x2x2xf32> {
  %q = otc.slice %qkv, [0, 0, 0], [1, 1, 1] : (tensor<1x4x12xbf16>) -> tensor<1x4x4xbf16>
  %k = otc.slice %qkv, [0, 0, 4], [1, 1, 1] : (tensor<1x4x12xbf16>) -> tensor<1x4x4xbf16>
  %v = otc.slice %qkv, [0, 0, 8], [1, 1, 1] : (tensor<1x4x12xbf16>) -> tensor<1x4x4xbf16>
  %q4 = otc.reshape %q : (tensor<1x4x4xbf16>) -> tensor<1x4x2x2xbf16>
  %k4 = otc.reshape %k : (tensor<1x4x4xbf16>) -> tensor<1x4x2x2xbf16>
  %v4 = otc.reshape %v : (tensor<1x4x4xbf16>) -> tensor<1x4x2x2xbf16>
  %qf = otc.cast %q4 : (tensor<1x4x2x2xbf16>) -> tensor<1x4x2x2xf32>
  %kf = otc.cast %k4 : (tensor<1x4x2x2xbf16>) -> tensor<1x4x2x2xf32>
  %vf = otc.cast %v4 : (tensor<1x4x2x2xbf16>) -> tensor<1x4x2x2xf32>
  %o, %lse = otc.attention %qf, %kf, %vf mask %m {layout = "bthd", scale = 0.5 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x1x1x4xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x4x2x2xf32>
}
