// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that GPT-NeoX's partial rotary as the TorchScript exporter writes
// it (x_rot = x[..., :2] and x_pass = x[..., 2:] of 8 features, the rope
// over x_rot with [T, 2] tables computed by cos and sin, the products'
// operands in the other order, then concat(rope, x_pass)) becomes one
// otc.rope of x with the 2-wide tables.
// CHECK-LABEL: func.func @partial_torchscript
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x4x8xf32>)
// CHECK: %[[C:.*]] = otc.cos
// CHECK: %[[S:.*]] = otc.sin
// CHECK: %[[R:.*]] = otc.rope %[[X]], %[[C]], %[[S]] : (tensor<2x2x4x8xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x8xf32>
// CHECK-NOT: otc.slice
// CHECK-NOT: otc.concat
// CHECK: return %[[R]]
func.func @partial_torchscript(%x: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %angles = otc.constant dense<0.125> : tensor<4x2xf32>
  %cos = otc.cos %angles : tensor<4x2xf32>
  %sin = otc.sin %angles : tensor<4x2xf32>
  %xr = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x2xf32>
  %xp = otc.slice %x, [0, 0, 0, 2], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x6xf32>
  %qc = otc.mul %cos, %xr : (tensor<4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %qlo = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qhi = otc.slice %xr, [0, 0, 0, 1], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qn = otc.neg %qhi : tensor<2x2x4x1xf32>
  %qrot = otc.concat %qn, %qlo {axis = 3 : i64} : (tensor<2x2x4x1xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x2xf32>
  %qs = otc.mul %sin, %qrot : (tensor<4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %qy = otc.add %qs, %qc : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %y = otc.concat %qy, %xp {axis = 3 : i64} : (tensor<2x2x4x2xf32>, tensor<2x2x4x6xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Tests that the dynamo exporter's form of a partial rotary (4 of 8
// features; x_rot and x_pass slicing two transposes of one head split,
// [1, 1, T, 4] constant tables) becomes one otc.rope, moved before the
// head transpose with its tables reshaped to [1, T, 1, 4].
// CHECK-LABEL: func.func @partial_dynamo
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x2x8xf32>)
// CHECK-DAG: %[[C:.*]] = otc.reshape %{{.*}} : (tensor<1x1x4x4xf32>) -> tensor<1x4x1x4xf32>
// CHECK-DAG: %[[S:.*]] = otc.reshape %{{.*}} : (tensor<1x1x4x4xf32>) -> tensor<1x4x1x4xf32>
// CHECK: %[[R:.*]] = otc.rope %[[X]], %[[C]], %[[S]] : (tensor<1x4x2x8xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x8xf32>
// CHECK: %[[T:.*]] = otc.transpose %[[R]], [0, 2, 1, 3]
// CHECK-NOT: otc.slice
// CHECK-NOT: otc.concat
// CHECK: return %[[T]]
func.func @partial_dynamo(%x: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<1x1x4x4xf32>
  %sin = otc.constant dense<0.25> : tensor<1x1x4x4xf32>
  %t0 = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %t1 = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %xr = otc.slice %t0, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %xp = otc.slice %t1, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %qc = otc.mul %xr, %cos : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %qlo = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x2xf32>
  %qhi = otc.slice %xr, [0, 0, 0, 2], [1, 1, 1, 1] : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x2xf32>
  %qn = otc.neg %qhi : tensor<1x2x4x2xf32>
  %qrot = otc.concat %qn, %qlo {axis = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %qs = otc.mul %qrot, %sin : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %qy = otc.add %qc, %qs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = otc.concat %qy, %xp {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests that GPT-J's rotary as the dynamo exporter writes it
// (rotate_every_two: x[..., 1::2] and x[..., ::2] by strided slices, the
// odd ones negated, both unsqueezed, concatenated over the new last axis
// and reshaped back; partial: 4 of 8 features; [1, T, 1, 4] tables over
// the [B, T, H, D] value) becomes one interleaved otc.rope of x.
// CHECK-LABEL: func.func @interleaved_partial_dynamo
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x2x8xf32>)
// CHECK: %[[R:.*]] = otc.rope %[[X]], %{{.*}}, %{{.*}} {interleaved} : (tensor<1x4x2x8xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x8xf32>
// CHECK-NOT: otc.slice
// CHECK-NOT: otc.concat
// CHECK: return %[[R]]
func.func @interleaved_partial_dynamo(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<1x4x1x4xf32>
  %sin = otc.constant dense<0.25> : tensor<1x4x1x4xf32>
  %xr = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x4x2x8xf32>) -> tensor<1x4x2x4xf32>
  %xp = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x4x2x8xf32>) -> tensor<1x4x2x4xf32>
  %qc = otc.mul %xr, %cos : (tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x4xf32>
  %qev = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 2] : (tensor<1x4x2x4xf32>) -> tensor<1x4x2x2xf32>
  %qod = otc.slice %xr, [0, 0, 0, 1], [1, 1, 1, 2] : (tensor<1x4x2x4xf32>) -> tensor<1x4x2x2xf32>
  %qn = otc.neg %qod : tensor<1x4x2x2xf32>
  %qnu = otc.reshape %qn : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2x1xf32>
  %qku = otc.reshape %qev : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2x1xf32>
  %qst = otc.concat %qnu, %qku {axis = 4 : i64} : (tensor<1x4x2x2x1xf32>, tensor<1x4x2x2x1xf32>) -> tensor<1x4x2x2x2xf32>
  %qrot = otc.reshape %qst : (tensor<1x4x2x2x2xf32>) -> tensor<1x4x2x4xf32>
  %qs = otc.mul %qrot, %sin : (tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x4xf32>
  %qy = otc.add %qc, %qs : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> tensor<1x4x2x4xf32>
  %y = otc.concat %qy, %xp {axis = 3 : i64} : (tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> tensor<1x4x2x8xf32>
  return %y : tensor<1x4x2x8xf32>
}

// -----

// Tests the interleaved form over the whole row with the operands of the
// products in the other order and tables computed by cos and sin.
// CHECK-LABEL: func.func @interleaved_torchscript
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x2x8xf32>)
// CHECK: %[[R:.*]] = otc.rope %[[X]], %{{.*}}, %{{.*}} {interleaved} : (tensor<2x4x2x8xf32>, tensor<4x1x8xf32>, tensor<4x1x8xf32>) -> tensor<2x4x2x8xf32>
// CHECK-NOT: otc.concat
// CHECK: return %[[R]]
func.func @interleaved_torchscript(%x: tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32> {
  %angles = otc.constant dense<0.125> : tensor<4x1x8xf32>
  %cos = otc.cos %angles : tensor<4x1x8xf32>
  %sin = otc.sin %angles : tensor<4x1x8xf32>
  %qc = otc.mul %x, %cos : (tensor<2x4x2x8xf32>, tensor<4x1x8xf32>) -> tensor<2x4x2x8xf32>
  %qev = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 2] : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x4xf32>
  %qod = otc.slice %x, [0, 0, 0, 1], [1, 1, 1, 2] : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x4xf32>
  %qn = otc.neg %qod : tensor<2x4x2x4xf32>
  %qnu = otc.reshape %qn : (tensor<2x4x2x4xf32>) -> tensor<2x4x2x4x1xf32>
  %qku = otc.reshape %qev : (tensor<2x4x2x4xf32>) -> tensor<2x4x2x4x1xf32>
  %qst = otc.concat %qnu, %qku {axis = 4 : i64} : (tensor<2x4x2x4x1xf32>, tensor<2x4x2x4x1xf32>) -> tensor<2x4x2x4x2xf32>
  %qrot = otc.reshape %qst : (tensor<2x4x2x4x2xf32>) -> tensor<2x4x2x8xf32>
  %qs = otc.mul %sin, %qrot : (tensor<4x1x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %qy = otc.add %qs, %qc : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return %qy : tensor<2x4x2x8xf32>
}

// -----

// Tests a near miss: the passed features come from another tensor than
// the rotated ones. The rope over the 2 rotated features is fused; the
// concatenation stays.
// CHECK-LABEL: func.func @partial_other_tensor
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x4x8xf32>, %[[Z:.*]]: tensor<2x2x4x8xf32>)
// CHECK: %[[XR:.*]] = otc.slice %[[X]]
// CHECK: %[[ZP:.*]] = otc.slice %[[Z]]
// CHECK: %[[R:.*]] = otc.rope %[[XR]], %{{.*}}, %{{.*}} : (tensor<2x2x4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x2xf32>
// CHECK: otc.concat %[[R]], %[[ZP]]
func.func @partial_other_tensor(%x: tensor<2x2x4x8xf32>, %z: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<4x2xf32>
  %sin = otc.constant dense<0.25> : tensor<4x2xf32>
  %xr = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x2xf32>
  %xp = otc.slice %z, [0, 0, 0, 2], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x6xf32>
  %qc = otc.mul %xr, %cos : (tensor<2x2x4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x2xf32>
  %qlo = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qhi = otc.slice %xr, [0, 0, 0, 1], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qn = otc.neg %qhi : tensor<2x2x4x1xf32>
  %qrot = otc.concat %qn, %qlo {axis = 3 : i64} : (tensor<2x2x4x1xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x2xf32>
  %qs = otc.mul %qrot, %sin : (tensor<2x2x4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x2xf32>
  %qy = otc.add %qc, %qs : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %y = otc.concat %qy, %xp {axis = 3 : i64} : (tensor<2x2x4x2xf32>, tensor<2x2x4x6xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Tests a near miss: feature 2 is dropped (x[..., 3:] passed), so the
// concatenation is no partial rotary of x and stays.
// CHECK-LABEL: func.func @partial_gap
// CHECK: %[[R:.*]] = otc.rope %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x2x4x2xf32>
// CHECK: otc.concat %[[R]]
func.func @partial_gap(%x: tensor<2x2x4x8xf32>) -> tensor<2x2x4x7xf32> {
  %cos = otc.constant dense<0.5> : tensor<4x2xf32>
  %sin = otc.constant dense<0.25> : tensor<4x2xf32>
  %xr = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x2xf32>
  %xp = otc.slice %x, [0, 0, 0, 3], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x5xf32>
  %qc = otc.mul %xr, %cos : (tensor<2x2x4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x2xf32>
  %qlo = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qhi = otc.slice %xr, [0, 0, 0, 1], [1, 1, 1, 1] : (tensor<2x2x4x2xf32>) -> tensor<2x2x4x1xf32>
  %qn = otc.neg %qhi : tensor<2x2x4x1xf32>
  %qrot = otc.concat %qn, %qlo {axis = 3 : i64} : (tensor<2x2x4x1xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x2xf32>
  %qs = otc.mul %qrot, %sin : (tensor<2x2x4x2xf32>, tensor<4x2xf32>) -> tensor<2x2x4x2xf32>
  %qy = otc.add %qc, %qs : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  %y = otc.concat %qy, %xp {axis = 3 : i64} : (tensor<2x2x4x2xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x4x7xf32>
  return %y : tensor<2x2x4x7xf32>
}

// -----

// Tests a near miss of the interleaved form: the even features negated
// instead of the odd ones (stack(-x[..., ::2], x[..., 1::2])) is no
// rotate_every_two; nothing is fused.
// CHECK-LABEL: func.func @interleaved_wrong_sign
// CHECK-NOT: otc.rope
// CHECK: otc.neg
func.func @interleaved_wrong_sign(%x: tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<4x1x8xf32>
  %sin = otc.constant dense<0.25> : tensor<4x1x8xf32>
  %qc = otc.mul %x, %cos : (tensor<2x4x2x8xf32>, tensor<4x1x8xf32>) -> tensor<2x4x2x8xf32>
  %qev = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 2] : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x4xf32>
  %qod = otc.slice %x, [0, 0, 0, 1], [1, 1, 1, 2] : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x4xf32>
  %qn = otc.neg %qev : tensor<2x4x2x4xf32>
  %qnu = otc.reshape %qn : (tensor<2x4x2x4xf32>) -> tensor<2x4x2x4x1xf32>
  %qku = otc.reshape %qod : (tensor<2x4x2x4xf32>) -> tensor<2x4x2x4x1xf32>
  %qst = otc.concat %qnu, %qku {axis = 4 : i64} : (tensor<2x4x2x4x1xf32>, tensor<2x4x2x4x1xf32>) -> tensor<2x4x2x4x2xf32>
  %qrot = otc.reshape %qst : (tensor<2x4x2x4x2xf32>) -> tensor<2x4x2x8xf32>
  %qs = otc.mul %qrot, %sin : (tensor<2x4x2x8xf32>, tensor<4x1x8xf32>) -> tensor<2x4x2x8xf32>
  %qy = otc.add %qc, %qs : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  return %qy : tensor<2x4x2x8xf32>
}
