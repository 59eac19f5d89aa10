// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that a fusion leaves none of the ops it alone made unread: the GELU
// chain and the constants only it read are gone, while the constant and the
// input that another op also reads stay, and nothing moves.
// CHECK: module attributes {otc.fused = {gelu = 1 : i64}}
// CHECK-LABEL: func.func @gelu_leaves_nothing
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[H:.*]] = otc.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = otc.gelu %[[X]] : tensor<8xf32>
// CHECK-NEXT: %[[M:.*]] = otc.mul %[[X]], %[[H]]
// CHECK-NEXT: return %[[G]], %[[M]]
func.func @gelu_leaves_nothing(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %sqrt2 = otc.constant dense<1.41421354> : tensor<f32>
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %half = otc.constant dense<5.000000e-01> : tensor<f32>
  %0 = otc.div %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = otc.erf %0 : tensor<8xf32>
  %2 = otc.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = otc.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = otc.mul %3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %5 = otc.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4, %5 : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that attention whose scores are hidden by Where over a condition
// that is no causal band leaves only its additive mask (built before the
// softmax's place) and the fused op: the select, the softmax, both products
// and the fill are gone.
// CHECK: module attributes {otc.fused = {attention = 1 : i64}}
// CHECK-LABEL: func.func @masked_attention_leaves_nothing
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x2xf32>, %[[K:.*]]: tensor<1x2x4x2xf32>, %[[V:.*]]: tensor<1x2x4x2xf32>, %[[C:.*]]: tensor<1x1x4x4xi1>)
// CHECK-NEXT: %[[F:.*]] = otc.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %[[Z:.*]] = otc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = otc.select %[[C]], %[[F]], %[[Z]]
// CHECK-NEXT: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] mask %[[M]]
// CHECK-NEXT: return %[[O]]
func.func @masked_attention_leaves_nothing(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %hide: tensor<1x1x4x4xi1>) -> tensor<1x2x4x2xf32> {
  %ninf = otc.constant dense<0xFF800000> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %hide, %ninf, %s : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that ops the input already left unread go too, each when the walk
// reaches it, with what only they read, while a value they read that
// another op reads stays; the fusion next to them is made, and the unread
// otc.gelu is not counted.
// CHECK: module attributes {otc.fused = {silu = 1 : i64}}
// CHECK-LABEL: func.func @dead_before
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[E:.*]] = otc.exp %[[X]]
// CHECK-NEXT: %[[S:.*]] = otc.silu %[[X]]
// CHECK-NEXT: return %[[E]], %[[S]]
func.func @dead_before(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c = otc.constant dense<2.000000e+00> : tensor<f32>
  %e = otc.exp %x : tensor<8xf32>
  %d0 = otc.mul %e, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %d1 = otc.sqrt %d0 : tensor<8xf32>
  %0 = otc.sigmoid %x : tensor<8xf32>
  %1 = otc.mul %x, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %d2 = otc.gelu %x : tensor<8xf32>
  return %e, %1 : tensor<8xf32>, tensor<8xf32>
}
