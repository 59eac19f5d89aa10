// RUN: otc-opt %s --split-input-file --otc-configure --otc-training-loop | FileCheck %s

// Tests that otc-training-loop computes once what a step function computes
// from constants alone: @constant_values returns the value (here a [4, 4]
// causal table from two position constants) on a "const:v<n>" slot, shared
// by @micro_step and @eval_step, which read it as an argument instead of
// computing it; a value of splat constants alone (a broadcast of 0.5) and
// anything that reads an input stay in the steps.

// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x4xf32> {otc.slot = "const:v0"}
// CHECK-NOT: otc.compare
// CHECK: otc.broadcast
// CHECK: otc.mul %{{.*}}, %[[V]]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: tensor<4x4xf32> {otc.slot = "const:v0"}
// CHECK-NOT: otc.compare
// CHECK-LABEL: func.func @constant_values()
// CHECK-SAME: -> (tensor<4x4xf32> {otc.slot = "const:v0"})
// CHECK: %[[C:.*]] = otc.compare "le"
// CHECK: %[[T:.*]] = otc.cast %[[C]] : (tensor<4x4xi1>) -> tensor<4x4xf32>
// CHECK: return %[[T]]
// CHECK-NOT: func.func @constant_values
func.func @train_step(%x: tensor<4x4xf32> {otc.input = "x"}, %w: tensor<4x4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<4x4xf32> {otc.grad = "w"}) {
  %i = otc.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %j = otc.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %le = otc.compare "le", %j, %i : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi1>
  %t = otc.cast %le : (tensor<4x4xi1>) -> tensor<4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %h = otc.broadcast %half : (tensor<f32>) -> tensor<4x4xf32>
  %p = otc.mul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q = otc.mul %p, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = otc.mul %q, %h : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = otc.reduce_sum %r, [0, 1] : (tensor<4x4xf32>) -> tensor<f32>
  %g = otc.mul %x, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %g : tensor<f32>, tensor<4x4xf32>
}

// -----

// A table computed from an untrained buffer (a rotary table's frequencies)
// is computed once as well, @constant_values reading the buffer's slot; a
// trained parameter's values are not.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[F:[^:]*]]: tensor<4xf32> {otc.slot = "buffer:freq"}
// CHECK-SAME: %[[C:[^:]*]]: tensor<4x4xf32> {otc.slot = "const:v0"}
// CHECK-NOT: otc.cos
// CHECK: otc.mul %{{.*}}, %[[C]]
// CHECK-LABEL: func.func @constant_values
// CHECK-SAME: (%[[B:[^:]*]]: tensor<4xf32> {otc.slot = "buffer:freq"}) -> (tensor<4x4xf32> {otc.slot = "const:v0"})
// CHECK: %[[A:.*]] = otc.mul %[[B]], %{{.*}} : (tensor<4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
// CHECK: %[[K:.*]] = otc.cos %[[A]]
// CHECK: return %[[K]]
func.func @train_step(%x: tensor<4x4xf32> {otc.input = "x"}, %w: tensor<4x4xf32> {otc.param = "w"},
                      %freq: tensor<4xf32> {otc.param = "freq"})
    -> (tensor<f32> {otc.loss}, tensor<4x4xf32> {otc.grad = "w"}) {
  %pos = otc.constant dense<[[0.0], [1.0], [2.0], [3.0]]> : tensor<4x1xf32>
  %a = otc.mul %freq, %pos : (tensor<4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  %c = otc.cos %a : tensor<4x4xf32>
  %p = otc.mul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q = otc.mul %p, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %l = otc.reduce_sum %q, [0, 1] : (tensor<4x4xf32>) -> tensor<f32>
  %ww = otc.mul %w, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g = otc.mul %x, %c : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %g2 = otc.add %g, %ww : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %l, %g2 : tensor<f32>, tensor<4x4xf32>
}
