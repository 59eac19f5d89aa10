// RUN: otc-opt %s --split-input-file --otc-configure=grad-accum=4 --otc-training-loop | FileCheck %s

// Tests that with gradient accumulation, where every gradient flows from
// the cross-entropy gradient's seed (the constant 1 that otc-differentiate
// starts from), micro_step seeds it with the micro-batch's weight (the
// "grad_scale" slot) instead, and the gradients, weighted already, land in
// their slots as they are: no product with the weight, and a tied weight's
// contributions one at a time. Where the loss adds another term (whose
// gradient the seed also starts), each gradient is weighted as it lands.

// The fused loss and its gradient: the seed is the weight; the constant 1
// is gone.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<5x3xf32> {otc.slot = "grad:w"}, %[[S:[^:]*]]: tensor<f32> {otc.slot = "grad_scale"}
// CHECK-NOT: otc.constant
// CHECK: %[[DZ:.*]], %[[L:.*]], %{{.*}} = otc.cross_entropy_with_grad %[[S]], %{{.*}}, %{{.*}} {ignore_index = -100 : i64}
// CHECK-NOT: otc.mul
// CHECK: %[[A1:.*]] = otc.add %[[ACC]], %{{.*}} : (tensor<5x3xf32>, tensor<5x3xf32>)
// CHECK-NEXT: %[[A2:.*]] = otc.add %[[A1]], %{{.*}} : (tensor<5x3xf32>, tensor<5x3xf32>)
// CHECK-NEXT: return %[[L]], %[[A2]]
func.func @train_step(%h: tensor<2x3xf32> {otc.input = "h"}, %ids: tensor<2xi64> {otc.input = "ids"},
                      %y: tensor<2xi64> {otc.input = "y"}, %w: tensor<5x3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<5x3xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<2x5xf32>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<f32>, tensor<2xf32>)
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %de = otc.gather_grad %h, %ids {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  %g = otc.add %dw, %de : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %loss, %g : tensor<f32>, tensor<5x3xf32>
}

// -----

// The forward kept apart from the gradient (recomputed): the loss is an
// otc.cross_entropy of the gradient's logits and labels, so the seed is
// still the only source.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {otc.slot = "grad_scale"}
// CHECK: otc.cross_entropy_with_grad %[[S]],
// CHECK-NOT: %[[S]]
// CHECK: return
func.func @train_step(%z: tensor<2x5xf32> {otc.input = "z"}, %y: tensor<2xi64> {otc.input = "y"},
                      %w: tensor<2x5xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x5xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %zw = otc.mul %z, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %loss, %lse = otc.cross_entropy %zw, %y : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2xf32>)
  %dz, %l2, %rows = otc.cross_entropy_with_grad %one, %zw, %y : (tensor<f32>, tensor<2x5xf32>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<f32>, tensor<2xf32>)
  %dw = otc.mul %dz, %z : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %loss, %dw : tensor<f32>, tensor<2x5xf32>
}

// -----

// A loss that adds another term: the seed also starts that term's gradient,
// so the cross-entropy keeps its constant and the gradient is weighted as
// it lands.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<2x5xf32> {otc.slot = "grad:w"}, %[[S:[^:]*]]: tensor<f32> {otc.slot = "grad_scale"}
// CHECK: %[[ONE:.*]] = otc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: otc.cross_entropy_with_grad %[[ONE]],
// CHECK: %[[WG:.*]] = otc.mul %{{.*}}, %[[S]]
// CHECK: otc.add %[[ACC]], %[[WG]]
func.func @train_step(%z: tensor<2x5xf32> {otc.input = "z"}, %y: tensor<2xi64> {otc.input = "y"},
                      %w: tensor<2x5xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x5xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %zw = otc.mul %z, %w : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %dz, %ce, %rows = otc.cross_entropy_with_grad %one, %zw, %y : (tensor<f32>, tensor<2x5xf32>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<f32>, tensor<2xf32>)
  %s = otc.reduce_sum %w, [0, 1] : (tensor<2x5xf32>) -> tensor<f32>
  %loss = otc.add %ce, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dzz = otc.mul %dz, %z : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %ones = otc.constant dense<1.000000e+00> : tensor<2x5xf32>
  %dw = otc.add %dzz, %ones : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %loss, %dw : tensor<f32>, tensor<2x5xf32>
}
