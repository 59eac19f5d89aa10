// RUN: otc-opt %s --split-input-file --otc-configure=grad-accum=2 --otc-training-loop | FileCheck %s

// Tests that otc-training-loop's @eval_step is the loss alone: the train
// step's arguments on the same slots, one result in the "loss" slot, only
// the ops the loss depends on (no gradient slot, no weight, no backward op),
// and the loss ops fused with their gradients replaced by their forward.

// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32> {otc.slot = "input:x"}, %[[W:.*]]: tensor<3xf32> {otc.slot = "param:w"})
// CHECK-SAME: -> (tensor<f32> {otc.slot = "loss"})
// CHECK-NEXT: %[[P:.*]] = otc.mul %[[X]], %[[W]]
// CHECK-NEXT: %[[L:.*]] = otc.reduce_sum %[[P]], [0]
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @train_step(%x: tensor<3xf32> {otc.input = "x"}, %w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = otc.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  %2 = otc.mul %x, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %2 : tensor<f32>, tensor<3xf32>
}

// -----

// The fused loss and gradient becomes otc.cross_entropy of the same logits
// and labels, with its attributes; the gradient's products are gone.
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: (%[[H:[^:]*]]: tensor<2x3xf32> {otc.slot = "input:h"}, %{{[^:]*}}: tensor<2xi64> {otc.slot = "input:ids"}, %[[Y:[^:]*]]: tensor<2xi64> {otc.slot = "input:y"}, %[[W:[^:]*]]: tensor<5x3xf32> {otc.slot = "param:w"})
// CHECK-NEXT: %[[Z:.*]] = otc.matmul %[[H]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[Z]], %[[Y]] {ignore_index = -100 : i64, reduction = "sum"} : (tensor<2x5xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2xf32>)
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @train_step(%h: tensor<2x3xf32> {otc.input = "h"}, %ids: tensor<2xi64> {otc.input = "ids"},
                      %y: tensor<2xi64> {otc.input = "y"}, %w: tensor<5x3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<5x3xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y {ignore_index = -100 : i64, reduction = "sum"} : (tensor<f32>, tensor<2x5xf32>, tensor<2xi64>) -> (tensor<2x5xf32>, tensor<f32>, tensor<2xf32>)
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<2x5xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  %de = otc.gather_grad %h, %ids {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  %g = otc.add %dw, %de : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %loss, %g : tensor<f32>, tensor<5x3xf32>
}

// -----

// The LM head and its loss in chunks (BF16 logits): the head's product in
// FP32 over all rows, rounded to BF16 as each chunk's logits are, then
// otc.cross_entropy.
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: (%[[H:[^:]*]]: tensor<2x4x6xbf16> {otc.slot = "input:h"}, %[[W:[^:]*]]: tensor<10x6xbf16> {otc.slot = "param_bf16:w"}, %[[Y:[^:]*]]: tensor<2x4xi64> {otc.slot = "input:y"})
// CHECK-NEXT: %[[P:.*]] = otc.matmul %[[H]], %[[W]] {transpose_rhs} : (tensor<2x4x6xbf16>, tensor<10x6xbf16>) -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[Z:.*]] = otc.cast %[[P]] : (tensor<2x4x10xf32>) -> tensor<2x4x10xbf16>
// CHECK-NEXT: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[Z]], %[[Y]] {ignore_index = -100 : i64} : (tensor<2x4x10xbf16>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4xf32>)
// CHECK-NEXT: return %[[L]] : tensor<f32>
// CHECK-NOT: linear_cross_entropy
func.func @train_step(%h: tensor<2x4x6xbf16> {otc.input = "h"},
                      %w: tensor<10x6xbf16> {otc.param = "w", otc.bf16_copy},
                      %y: tensor<2x4xi64> {otc.input = "y"})
    -> (tensor<f32> {otc.loss}, tensor<10x6xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %dh, %dw, %loss, %rows, %chunk = otc.linear_cross_entropy_with_grad %one, %h, %w, %y {chunk_rows = 3 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<2x4x6xbf16>, tensor<10x6xbf16>, tensor<2x4xi64>) -> (tensor<2x4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<2x4xf32>, tensor<3x10xbf16>)
  return %loss, %dw : tensor<f32>, tensor<10x6xf32>
}

// -----

// With a trained bf16 bias (the op's dbias): the head's FP32 product plus
// the bias widened to FP32, rounded to BF16, then otc.cross_entropy.
// CHECK-LABEL: func.func @zero_grads
// CHECK-LABEL: func.func @eval_step
// CHECK: %[[P:.*]] = otc.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x6xbf16>, tensor<10x6xbf16>) -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[B:.*]] = otc.cast %{{.*}} : (tensor<10xbf16>) -> tensor<10xf32>
// CHECK-NEXT: %[[S:.*]] = otc.add %[[P]], %[[B]] : (tensor<2x4x10xf32>, tensor<10xf32>) -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[Z:.*]] = otc.cast %[[S]] : (tensor<2x4x10xf32>) -> tensor<2x4x10xbf16>
// CHECK-NEXT: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[Z]]
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @train_step(%h: tensor<2x4x6xbf16> {otc.input = "h"},
                      %w: tensor<10x6xbf16> {otc.param = "w", otc.bf16_copy},
                      %b: tensor<10xbf16> {otc.param = "b", otc.bf16_copy},
                      %y: tensor<2x4xi64> {otc.input = "y"})
    -> (tensor<f32> {otc.loss}, tensor<10x6xf32> {otc.grad = "w"}, tensor<10xf32> {otc.grad = "b"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %dh, %dw, %loss, %rows, %chunk, %db = otc.linear_cross_entropy_with_grad %one, %h, %w, %y bias %b {chunk_rows = 3 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<2x4x6xbf16>, tensor<10x6xbf16>, tensor<2x4xi64>, tensor<10xbf16>) -> (tensor<2x4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<2x4xf32>, tensor<3x10xbf16>, tensor<10xf32>)
  return %loss, %dw, %db : tensor<f32>, tensor<10x6xf32>, tensor<10xf32>
}

// -----

// The head's weight held [C, V] (w_by_hidden): the eval step's product is
// h w, without the transpose.
// CHECK-LABEL: func.func @zero_grads
// CHECK-LABEL: func.func @eval_step
// CHECK: %[[P:.*]] = otc.matmul %{{.*}}, %{{.*}} : (tensor<2x4x6xf32>, tensor<6x10xf32>) -> tensor<2x4x10xf32>
// CHECK-NEXT: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[P]]
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @train_step(%h: tensor<2x4x6xf32> {otc.input = "h"},
                      %w: tensor<6x10xf32> {otc.param = "w"},
                      %y: tensor<2x4xi64> {otc.input = "y"})
    -> (tensor<f32> {otc.loss}, tensor<6x10xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %dh, %dw, %loss, %rows, %chunk = otc.linear_cross_entropy_with_grad %one, %h, %w, %y {chunk_rows = 3 : i64, w_by_hidden} : (tensor<f32>, tensor<2x4x6xf32>, tensor<6x10xf32>, tensor<2x4xi64>) -> (tensor<2x4x6xf32>, tensor<6x10xf32>, tensor<f32>, tensor<2x4xf32>, tensor<3x10xf32>)
  return %loss, %dw : tensor<f32>, tensor<6x10xf32>
}
