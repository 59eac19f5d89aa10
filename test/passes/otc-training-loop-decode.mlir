// RUN: otc-opt %s --split-input-file --otc-configure --otc-training-loop=decode=1 -verify-diagnostics | FileCheck %s

// Tests otc-training-loop{decode}'s @decode_step: every value that depends
// on the tokens is cut to the position (sequence axis of size 1); a
// constant broadcast along the sequence (a [T, C] position table) is read
// at the position by a gather; the attention's keys and values are added
// into their caches at the position (gather_grad: one row, still zero) and
// the attention reads
// the caches under a mask that hides the keys after the position and, with
// a window W, those at or before position - W; the logits come out [B, V].

// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: (%[[TOK:[^:]*]]: tensor<2x1xi64> {otc.slot = "decode_tokens:ids"}, %[[E:[^:]*]]: tensor<10x8xf32> {otc.slot = "param:e"}, %[[P:[^:]*]]: tensor<4x8xf32> {otc.slot = "buffer:pos"}, %[[POS:[^:]*]]: tensor<1xi64> {otc.slot = "decode_position"}, %[[KC:[^:]*]]: tensor<2x2x4x4xf32> {otc.slot = "kv_cache:0.k"}, %[[VC:[^:]*]]: tensor<2x2x4x4xf32> {otc.slot = "kv_cache:0.v"})
// CHECK-SAME: -> (tensor<2x10xf32> {otc.slot = "logits"}, tensor<2x2x4x4xf32> {otc.slot = "kv_cache:0.k"}, tensor<2x2x4x4xf32> {otc.slot = "kv_cache:0.v"})
// CHECK: %[[IOTA:.*]] = otc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK: %[[X:.*]] = otc.gather %[[E]], %[[TOK]] {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x1xi64>) -> tensor<2x1x8xf32>
// CHECK: %[[PR:.*]] = otc.gather %[[P]], %[[POS]] {axis = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
// CHECK: otc.add %[[X]], %[[PR]] : (tensor<2x1x8xf32>, tensor<1x8xf32>) -> tensor<2x1x8xf32>
// CHECK: %[[ROW:.*]] = otc.transpose {{.*}} -> tensor<2x2x1x4xf32>
// CHECK: %[[PK:.*]] = otc.gather_grad %[[ROW]], %[[POS]] {axis = 2 : i64} : (tensor<2x2x1x4xf32>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
// CHECK: %[[NK:.*]] = otc.add %[[KC]], %[[PK]] : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: %[[PV:.*]] = otc.gather_grad %[[ROW]], %[[POS]] {axis = 2 : i64}
// CHECK: %[[NV:.*]] = otc.add %[[VC]], %[[PV]]
// CHECK: otc.compare "le", %[[IOTA]], %[[POS]]
// CHECK: %[[FROM:.*]] = otc.sub %[[POS]], %{{.*}} : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
// CHECK: otc.compare "ge", %[[IOTA]], %[[FROM]]
// CHECK: %[[M:.*]] = otc.reshape %{{.*}} : (tensor<4xf32>) -> tensor<1x1x1x4xf32>
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %{{.*}}, %[[NK]], %[[NV]] mask %[[M]] {scale = 5.000000e-01 : f64} : (tensor<2x2x1x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x1x1x4xf32>) -> (tensor<2x2x1x4xf32>, tensor<2x2x1xf32>)
// CHECK: %[[Z:.*]] = otc.matmul {{.*}} -> tensor<2x1x10xf32>
// CHECK: %[[R:.*]] = otc.reshape %[[Z]] : (tensor<2x1x10xf32>) -> tensor<2x10xf32>
// CHECK: return %[[R]], %[[NK]], %[[NV]]
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"}, %pos: tensor<4x8xf32> {otc.param = "pos"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %h = otc.add %x, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %r = otc.reshape %h : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %q = otc.transpose %r, [0, 2, 1, 3] : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %o, %lse = otc.attention %q, %q, %q {causal, scale = 0.5 : f64, window = 2 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
  %t = otc.transpose %o, [0, 2, 1, 3] : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %c = otc.reshape %t : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %z = otc.matmul %c, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}

// -----

// Packed q/k/v ([B, T, H + 2 Hk, D], sequence first; H = 2, Hk = 1): the
// position's q, k and v sliced out, their [B, 1, heads, D] rows read as
// [B, heads, 1, D], the caches [B, Hk, T, D], the output back to
// [B, 1, H, D].
// CHECK-LABEL: func.func @decode_step
// CHECK-SAME: tensor<2x1x4x4xf32> {otc.slot = "kv_cache:0.k"}
// CHECK: %[[QKV:.*]] = otc.reshape %{{.*}} : (tensor<2x1x16xf32>) -> tensor<2x1x4x4xf32>
// CHECK: %[[Q:.*]] = otc.slice %[[QKV]], [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x1x4x4xf32>) -> tensor<2x1x2x4xf32>
// CHECK: %[[K:.*]] = otc.slice %[[QKV]], [0, 0, 2, 0], [1, 1, 1, 1] : (tensor<2x1x4x4xf32>) -> tensor<2x1x1x4xf32>
// CHECK: %[[V:.*]] = otc.slice %[[QKV]], [0, 0, 3, 0]
// CHECK: %[[QH:.*]] = otc.reshape %[[Q]] : (tensor<2x1x2x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK: otc.gather_grad %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x1x1x4xf32>, tensor<1xi64>) -> tensor<2x1x4x4xf32>
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[QH]], {{.*}} {scale = 5.000000e-01 : f64} : (tensor<2x2x1x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<1x1x1x4xf32>) -> (tensor<2x2x1x4xf32>, tensor<2x2x1xf32>)
// CHECK: otc.reshape %[[O]] : (tensor<2x2x1x4xf32>) -> tensor<2x1x2x4xf32>
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"}, %w: tensor<16x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %p = otc.matmul %x, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %r = otc.reshape %p : (tensor<2x4x16xf32>) -> tensor<2x4x4x4xf32>
  %o, %lse = otc.attention %r, %r, %r {causal, layout = "packed", scale = 0.5 : f64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
  %c = otc.reshape %o : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %z = otc.matmul %c, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}

// -----

// A softmax over the sequence axis mixes positions: not decodable.
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{--generate: a softmax over the sequence axis}}
  %s = otc.softmax %x {axis = 1 : i64} : tensor<2x4x8xf32>
  %z = otc.matmul %s, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}

// -----

// Attention that is neither causal nor masked lets a position see later
// ones.
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %r = otc.reshape %x : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  // expected-error @+1 {{--generate: attention that is neither causal nor masked}}
  %o, %lse = otc.attention %r, %r, %r {layout = "bthd", scale = 0.5 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
  %c = otc.reshape %o : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %z = otc.matmul %c, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}

// -----

// A loss that is not a cross-entropy over logits.
// expected-error @+1 {{--generate needs a loss that is a cross-entropy over the logits}}
func.func @train_step(%x: tensor<3xf32> {otc.input = "x"}, %w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = otc.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<3xf32>
}

// -----

// A mask that lets queries see later keys (a bidirectional encoder's).
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %r = otc.reshape %x : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %m = otc.constant dense<0.0> : tensor<1x1x4x4xf32>
  // expected-error @+1 {{--generate: attention whose mask lets a query see later keys (bidirectional)}}
  %o, %lse = otc.attention %r, %r, %r mask %m {layout = "bthd", scale = 0.5 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<1x1x4x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
  %c = otc.reshape %o : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %z = otc.matmul %c, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}

// -----

// A causal mask of the model's (not the causal flag): its row at the
// position plus the position's own mask.
// CHECK-LABEL: func.func @decode_step
// CHECK: %[[ROW:.*]] = otc.gather %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<1x1x4x4xf32>, tensor<1xi64>) -> tensor<1x1x1x4xf32>
// CHECK: %[[M:.*]] = otc.add %[[ROW]], %{{.*}} : (tensor<1x1x1x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
// CHECK: otc.attention {{.*}} mask %[[M]]
func.func @train_step(%ids: tensor<2x4xi64> {otc.input = "ids"}, %y: tensor<2x4xi64> {otc.input = "y"},
                      %e: tensor<10x8xf32> {otc.param = "e"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %x = otc.gather %e, %ids {axis = 0 : i64} : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %r = otc.reshape %x : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %m = otc.constant dense<[[[[0.0, -3.0e38, -3.0e38, -3.0e38], [0.0, 0.0, -3.0e38, -3.0e38], [0.0, 0.0, 0.0, -3.0e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %o, %lse = otc.attention %r, %r, %r mask %m {layout = "bthd", scale = 0.5 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>, tensor<1x1x4x4xf32>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4xf32>)
  %c = otc.reshape %o : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %z = otc.matmul %c, %e {transpose_rhs} : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss, %rows = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
  return %loss, %e : tensor<f32>, tensor<10x8xf32>
}
