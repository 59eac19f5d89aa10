// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that ViT's patch embedding bias, added in the convolution's layout
// ([B, HW, C] -> [B, C, H, W] + [1, C, 1, 1] -> [B, HW, C]), is added in
// the GEMM's layout instead: the bias reshaped to [1, 1, C], no transpose
// left.
// CHECK-LABEL: func.func @vit_patch_bias
// CHECK-SAME: (%[[Y:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = otc.reshape %[[B]] : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
// CHECK: %[[R2:.*]] = otc.reshape %[[R]] : (tensor<1x8x1x1xf32>) -> tensor<1x1x8xf32>
// CHECK: %[[S:.*]] = otc.add %[[Y]], %[[R2]] : (tensor<2x4x8xf32>, tensor<1x1x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: otc.transpose
// CHECK: return %[[S]]
func.func @vit_patch_bias(%y: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %x = otc.reshape %t : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %bb = otc.reshape %b : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
  %a = otc.add %x, %bb : (tensor<2x8x2x2xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32>
  %r = otc.reshape %a : (tensor<2x8x2x2xf32>) -> tensor<2x8x4xf32>
  %o = otc.transpose %r, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests the same round trip without reshapes, the bias first.
// CHECK-LABEL: func.func @no_reshape
// CHECK-SAME: (%[[Y:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<1x8x1xf32>)
// CHECK: %[[R:.*]] = otc.reshape %[[B]] : (tensor<1x8x1xf32>) -> tensor<1x1x8xf32>
// CHECK: %[[S:.*]] = otc.add %[[Y]], %[[R]]
// CHECK-NOT: otc.transpose
// CHECK: return %[[S]]
func.func @no_reshape(%y: tensor<2x4x8xf32>, %b: tensor<1x8x1xf32>) -> tensor<2x4x8xf32> {
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %a = otc.add %b, %t : (tensor<1x8x1xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = otc.transpose %a, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests near misses, all kept as they are: the NCHW sum read by something
// else too; a bias along H, an axis the reshape made (not one of y's); a
// transpose back that is no inverse across reshapes; a reshape back to
// another shape.
// CHECK-LABEL: func.func @near_misses
// CHECK-COUNT-8: otc.transpose
// CHECK: return
func.func @near_misses(%y: tensor<2x4x8xf32>, %b: tensor<1x8x1x1xf32>, %h: tensor<1x1x2x1xf32>, %z: tensor<2x4x4xf32>, %c: tensor<1x4x1x1xf32>) -> (tensor<2x4x8xf32>, tensor<2x8x2x2xf32>, tensor<2x4x8xf32>, tensor<4x2x4xf32>, tensor<2x4x8xf32>) {
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %x = otc.reshape %t : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %a = otc.add %x, %b : (tensor<2x8x2x2xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32>
  %r = otc.reshape %a : (tensor<2x8x2x2xf32>) -> tensor<2x8x4xf32>
  %o = otc.transpose %r, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %t2 = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %x2 = otc.reshape %t2 : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %a2 = otc.add %x2, %h : (tensor<2x8x2x2xf32>, tensor<1x1x2x1xf32>) -> tensor<2x8x2x2xf32>
  %r2 = otc.reshape %a2 : (tensor<2x8x2x2xf32>) -> tensor<2x8x4xf32>
  %o2 = otc.transpose %r2, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %t3 = otc.transpose %z, [0, 2, 1] : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %x3 = otc.reshape %t3 : (tensor<2x4x4xf32>) -> tensor<2x4x2x2xf32>
  %a3 = otc.add %x3, %c : (tensor<2x4x2x2xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x2x2xf32>
  %r3 = otc.reshape %a3 : (tensor<2x4x2x2xf32>) -> tensor<2x4x4xf32>
  %f3 = otc.transpose %r3, [1, 0, 2] : (tensor<2x4x4xf32>) -> tensor<4x2x4xf32>
  %t4 = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %x4 = otc.reshape %t4 : (tensor<2x8x4xf32>) -> tensor<2x8x2x2xf32>
  %a4 = otc.add %x4, %b : (tensor<2x8x2x2xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32>
  %r4 = otc.reshape %a4 : (tensor<2x8x2x2xf32>) -> tensor<2x32xf32>
  %s4 = otc.reshape %r4 : (tensor<2x32xf32>) -> tensor<2x8x4xf32>
  %o4 = otc.transpose %s4, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o, %a, %o2, %f3, %o4 : tensor<2x4x8xf32>, tensor<2x8x2x2xf32>, tensor<2x4x8xf32>, tensor<4x2x4xf32>, tensor<2x4x8xf32>
}

// -----

// Tests Whisper's Conv1d layers, gelu(conv(x) + b) in [B, C, T] between
// the GEMM's [B, T, C] and the permutes after. The second layer's permute
// back to [B, T, C] inverts the first: the bias is added in the GEMM's
// layout, the gelu follows it there, and no transpose is left. The first
// layer's output goes on to [T, B, C] (the next convolution's rows): one
// transpose by the composed permutation [1, 0, 2] instead of two. A scalar
// multiply moves too; an activation that something else reads stays.
// CHECK-LABEL: func.func @conv1d_gelu
// CHECK-SAME: (%[[Y:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<1x8x1xf32>)
// CHECK: %[[R:.*]] = otc.reshape %[[B]] : (tensor<1x8x1xf32>) -> tensor<1x1x8xf32>
// CHECK: %[[S:.*]] = otc.add %[[Y]], %[[R]] : (tensor<2x4x8xf32>, tensor<1x1x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = otc.gelu %[[S]] : tensor<2x4x8xf32>
// CHECK: %[[M:.*]] = otc.mul %[[G]], %{{.*}} : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// CHECK-NOT: otc.transpose
// CHECK: return %[[M]]
// CHECK-LABEL: func.func @conv1d_gelu_onward
// CHECK-SAME: (%[[Y:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<1x8x1xf32>)
// CHECK: %[[S:.*]] = otc.add %[[Y]], %{{.*}} : (tensor<2x4x8xf32>, tensor<1x1x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = otc.gelu %[[S]] : tensor<2x4x8xf32>
// CHECK: %[[T:.*]] = otc.transpose %[[G]], [1, 0, 2] : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
// CHECK-NOT: otc.transpose
// CHECK: return %[[T]]
// CHECK-LABEL: func.func @conv1d_gelu_read_twice
// CHECK-COUNT-2: otc.transpose
// CHECK: return
func.func @conv1d_gelu(%y: tensor<2x4x8xf32>, %b: tensor<1x8x1xf32>) -> tensor<2x4x8xf32> {
  %half = otc.constant dense<0.5> : tensor<f32>
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %a = otc.add %t, %b : (tensor<2x8x4xf32>, tensor<1x8x1xf32>) -> tensor<2x8x4xf32>
  %g = otc.gelu %a : tensor<2x8x4xf32>
  %m = otc.mul %g, %half : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  %o = otc.transpose %m, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
func.func @conv1d_gelu_onward(%y: tensor<2x4x8xf32>, %b: tensor<1x8x1xf32>) -> tensor<4x2x8xf32> {
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %a = otc.add %t, %b : (tensor<2x8x4xf32>, tensor<1x8x1xf32>) -> tensor<2x8x4xf32>
  %g = otc.gelu %a : tensor<2x8x4xf32>
  %o = otc.transpose %g, [2, 0, 1] : (tensor<2x8x4xf32>) -> tensor<4x2x8xf32>
  return %o : tensor<4x2x8xf32>
}
func.func @conv1d_gelu_read_twice(%y: tensor<2x4x8xf32>, %b: tensor<1x8x1xf32>) -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>) {
  %t = otc.transpose %y, [0, 2, 1] : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %a = otc.add %t, %b : (tensor<2x8x4xf32>, tensor<1x8x1xf32>) -> tensor<2x8x4xf32>
  %g = otc.gelu %a : tensor<2x8x4xf32>
  %o = otc.transpose %g, [0, 2, 1] : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  return %o, %g : tensor<2x4x8xf32>, tensor<2x8x4xf32>
}
