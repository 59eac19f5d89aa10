// RUN: otc-opt %s --split-input-file --otc-differentiate | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-differentiate=freeze='^b$' | FileCheck %s --check-prefix=FROZEN

// Tests that a linear layer with bias and a loss gets the gradients of both
// parameters: the weight's through one matmul with the flags folded in, the
// bias's summed over the broadcast rows.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {otc.loss}, tensor<5x3xf32> {otc.grad = "w"}, tensor<5xf32> {otc.grad = "b"})
// CHECK: %[[MM:.*]] = otc.matmul %arg0, %arg2 {transpose_rhs}
// CHECK: %[[Z:.*]] = otc.add %[[MM]], %arg3
// CHECK: %[[L:.*]] = otc.softmax_cross_entropy %[[Z]], %arg1
// CHECK: %[[ONE:.*]] = otc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DZ:.*]] = otc.softmax_cross_entropy_grad %[[ONE]], %[[Z]], %arg1
// CHECK: %[[RS:.*]] = otc.reduce_sum %[[DZ]], [0] {keep_dims} : (tensor<4x5xf32>) -> tensor<1x5xf32>
// CHECK: %[[DB:.*]] = otc.reshape %[[RS]] : (tensor<1x5xf32>) -> tensor<5xf32>
// CHECK: %[[DW:.*]] = otc.matmul %[[DZ]], %arg0 {transpose_lhs} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK: return %[[L]], %[[DW]], %[[DB]]
// FROZEN-LABEL: func.func @train_step
// FROZEN-SAME: -> (tensor<f32> {otc.loss}, tensor<5x3xf32> {otc.grad = "w"})
// FROZEN-NOT: otc.reduce_sum
// FROZEN: return
func.func @forward(%x: tensor<4x3xf32> {otc.input = "x"}, %y: tensor<4xi64> {otc.input = "y"},
                   %w: tensor<5x3xf32> {otc.param = "w"}, %b: tensor<5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = otc.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %2 = otc.softmax_cross_entropy %1, %y : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Tests that a parameter used twice (a tied embedding) gets the sum of the
// gradients along both uses.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "e"})
// CHECK: otc.constant dense<1.000000e+00>
// CHECK: %[[G1:.*]] = otc.mul %{{.*}}, %arg0
// CHECK: %[[G2:.*]] = otc.mul %{{.*}}, %arg0
// CHECK: %[[SUM:.*]] = otc.add %[[G1]], %[[G2]]
// CHECK: return %{{.*}}, %[[SUM]]
func.func @forward(%e: tensor<3xf32> {otc.param = "e"}) -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.mul %e, %e : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that a parameter without a path to the loss is not trained and that
// other outputs are dropped from the train step.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "used"})
// CHECK-NOT: otc.grad = "unused"
func.func @forward(%u: tensor<3xf32> {otc.param = "used"}, %v: tensor<3xf32> {otc.param = "unused"})
    -> (tensor<f32> {otc.output = "loss"}, tensor<3xf32> {otc.output = "aux"}) {
  %0 = otc.tanh %u : tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  %2 = otc.exp %v : tensor<3xf32>
  return %1, %2 : tensor<f32>, tensor<3xf32>
}

// -----

// Tests that dropout's backward reads the forward mask instead of drawing a new one.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[OUT:.*]], %[[MASK:.*]] = otc.dropout
// CHECK: otc.dropout_grad %{{.*}}, %[[MASK]] {ratio = 2.500000e-01 : f64}
// CHECK-NOT: otc.dropout %
func.func @forward(%w: tensor<8xf32> {otc.param = "w"}, %k: tensor<i64> {otc.rng_key}) -> (tensor<f32> {otc.output = "loss"}) {
  %0, %m = otc.dropout %w, %k {ratio = 0.25 : f64, stream = 0 : i64} : (tensor<8xf32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xi1>)
  %1 = otc.reduce_sum %0, [0] : (tensor<8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that the gradient of a gather by int32 indices (an ONNX Gather may
// take them) widens the indices to int64 for otc.gather_grad, whose kernel
// reads int64, while the forward gather keeps reading the int32 ones.
// CHECK-LABEL: func.func @train_step
// CHECK: otc.gather %arg1, %arg0 {axis = 0 : i64} : (tensor<6x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
// CHECK: %[[I:.*]] = otc.cast %arg0 : (tensor<3xi32>) -> tensor<3xi64>
// CHECK: otc.gather_grad %{{.*}}, %[[I]] {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<6x4xf32>
func.func @forward(%ids: tensor<3xi32> {otc.input = "ids"},
                   %emb: tensor<6x4xf32> {otc.param = "emb"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.gather %emb, %ids {axis = 0 : i64} : (tensor<6x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  %1 = otc.reduce_sum %0, [0, 1] : (tensor<3x4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
