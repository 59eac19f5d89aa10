// RUN: otc-opt %s --otc-fuse-loss-grad --split-input-file | FileCheck %s

// Tests that a cross-entropy and its gradient become one
// otc.cross_entropy_with_grad where the loss was, the constant seed moved
// up, and that the pair stays apart when the gradient cannot be computed with
// the loss.

// The seed is a constant defined after the loss: it moves up, the fused op
// takes the loss's place, and the lse is gone.
// CHECK-LABEL: func.func @fused
// CHECK-NEXT: %[[ONE:.*]] = otc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[D:.*]], %[[L:.*]], %{{.*}} = otc.cross_entropy_with_grad %[[ONE]], %arg0, %arg1 {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x8xbf16>, tensor<4xi64>) -> (tensor<4x8xbf16>, tensor<f32>, tensor<4xf32>)
// CHECK-NEXT: %[[T:.*]] = otc.tanh %[[D]]
// CHECK-NEXT: return %[[L]], %[[T]]
// CHECK-NOT: otc.cross_entropy_grad
func.func @fused(%z: tensor<4x8xbf16>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x8xbf16>) {
  %loss, %lse = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : (tensor<4x8xbf16>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz = otc.cross_entropy_grad %one, %z, %y, %lse {ignore_index = -100 : i64} : (tensor<f32>, tensor<4x8xbf16>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xbf16>
  %t = otc.tanh %dz : tensor<4x8xbf16>
  return %loss, %t : tensor<f32>, tensor<4x8xbf16>
}

// -----

// A per-row seed passed in (reduction none) already exists at the loss.
// CHECK-LABEL: func.func @argument_seed
// CHECK-NEXT: %[[D:.*]], %[[L:.*]], %{{.*}} = otc.cross_entropy_with_grad %arg2, %arg0, %arg1 {reduction = "none"}
// CHECK-NEXT: return %[[L]], %[[D]]
func.func @argument_seed(%z: tensor<4x8xf32>, %y: tensor<4xi64>, %g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %loss, %lse = otc.cross_entropy %z, %y {reduction = "none"} : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>)
  %dz = otc.cross_entropy_grad %g, %z, %y, %lse {reduction = "none"} : (tensor<4xf32>, tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  return %loss, %dz : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// The seed is computed from the loss: the gradient must wait for it.
// CHECK-LABEL: func.func @seed_after_loss
// CHECK: otc.cross_entropy %
// CHECK: otc.cross_entropy_grad
// CHECK-NOT: otc.cross_entropy_with_grad
func.func @seed_after_loss(%z: tensor<4x8xf32>, %y: tensor<4xi64>) -> tensor<4x8xf32> {
  %loss, %lse = otc.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  %g = otc.mul %loss, %loss : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dz = otc.cross_entropy_grad %g, %z, %y, %lse : (tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  return %dz : tensor<4x8xf32>
}

// -----

// The lse is also a result, and the gradient reads other (recomputed)
// logits: neither pair fuses.
// CHECK-LABEL: func.func @not_alone
// CHECK-NOT: otc.cross_entropy_with_grad
func.func @not_alone(%z: tensor<4x8xf32>, %z2: tensor<4x8xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = otc.constant dense<1.0> : tensor<f32>
  %loss, %lse = otc.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  %dz = otc.cross_entropy_grad %one, %z, %y, %lse : (tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  %loss2, %lse2 = otc.cross_entropy %z, %y : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  %dz2 = otc.cross_entropy_grad %one, %z2, %y, %lse2 : (tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32>) -> tensor<4x8xf32>
  return %lse, %dz, %dz2 : tensor<4xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
