// RUN: otc-opt %s --otc-configure=micro-batch=2 --otc-sparse-prediction=positions=3 --split-input-file | FileCheck %s
// RUN: otc-opt %s --otc-configure=micro-batch=2 --otc-sparse-prediction=positions=-1 --split-input-file | FileCheck %s --check-prefix=AUTO

// positions=-1 (otc-compile's auto): 8 x 0.15 = 1.2 plus four standard
// deviations, 4 sqrt(1.2 x 0.85) = 4.04, rounded up: 6 of the 8.
// AUTO: %arg8: tensor<2x6xi64> {otc.input = "prediction_rows", otc.prediction_rows}
// AUTO: otc.prediction_rows = {{{.*}}positions = 6 : i64

// Tests that the loss and the ops before it that only it reads and that
// treat each position apart run on 3 positions of each of the 2 sequences
// of 8: a [2, 3] prediction_rows input; gathers of the values the cut reads
// (the attention output through its transpose, which mixes the rows'
// dimensions; the residual; the targets); [2, 8, ...] values become [2, 3,
// ...] and [16, ...] ones [6, ...]; the weights and broadcast operands are
// read whole. An operand that differs by position alone (a position table,
// [8, 16]) keeps its op out of the cut (the residual, also an output that
// stays whole); the logits output holds the kept rows.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: tensor<2x4x8x4xf32>, %arg1: tensor<2x8x16xf32>, %arg2: tensor<2x8xi64> {otc.input = "targets"}
// CHECK-SAME: %[[ROWS:arg[0-9]+]]: tensor<2x3xi64> {otc.input = "prediction_rows", otc.prediction_rows}
// CHECK-SAME: -> (tensor<2x3x10xf32> {otc.output = "logits"}, tensor<f32>, tensor<2x8x16xf32>)
// CHECK: %[[TF:.*]] = otc.reshape %arg2 : (tensor<2x8xi64>) -> tensor<16xi64>
// CHECK: %[[T:.*]] = otc.gather %[[TF]], %[[ROWS]] {axis = 0 : i64} : (tensor<16xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK: %[[A:.*]] = otc.transpose %arg0
// CHECK: %[[AF:.*]] = otc.reshape %[[A]] : (tensor<2x8x4x4xf32>) -> tensor<16x4x4xf32>
// CHECK: %[[AK:.*]] = otc.gather %[[AF]], %[[ROWS]] {axis = 0 : i64} : (tensor<16x4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4x4xf32>
// CHECK: %[[H:.*]] = otc.reshape %[[AK]] : (tensor<2x3x4x4xf32>) -> tensor<2x3x16xf32>
// CHECK: %[[P:.*]] = otc.matmul %[[H]], %arg4 : (tensor<2x3x16xf32>, tensor<16x16xf32>) -> tensor<2x3x16xf32>
// CHECK: %[[R:.*]] = otc.add %arg1, %arg5 : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[RF:.*]] = otc.reshape %[[R]] : (tensor<2x8x16xf32>) -> tensor<16x16xf32>
// CHECK: %[[RK:.*]] = otc.gather %[[RF]], %[[ROWS]] {axis = 0 : i64} : (tensor<16x16xf32>, tensor<2x3xi64>) -> tensor<2x3x16xf32>
// CHECK: %[[X:.*]] = otc.add %[[RK]], %[[P]] : (tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
// CHECK: %[[N:.*]], %{{.*}}, %{{.*}} = otc.layer_norm %[[X]] gamma %arg6 beta %arg6 {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x3x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x3x16xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[G:.*]] = otc.gelu %[[N]] : tensor<2x3x16xf32>
// CHECK: %[[Z:.*]] = otc.matmul %[[G]], %arg3 {transpose_rhs} : (tensor<2x3x16xf32>, tensor<10x16xf32>) -> tensor<2x3x10xf32>
// CHECK: %[[ZB:.*]] = otc.add %[[Z]], %arg7 : (tensor<2x3x10xf32>, tensor<10xf32>) -> tensor<2x3x10xf32>
// CHECK: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[ZB]], %[[T]] {ignore_index = -100 : i64} : (tensor<2x3x10xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK: return %[[ZB]], %[[L]], %[[R]]
module {
  func.func @forward(%arg0: tensor<2x4x8x4xf32>, %arg1: tensor<2x8x16xf32>, %arg2: tensor<2x8xi64> {otc.input = "targets"}, %arg3: tensor<10x16xf32>, %arg4: tensor<16x16xf32>, %arg5: tensor<8x16xf32>, %arg6: tensor<16xf32>, %arg7: tensor<10xf32>) -> (tensor<2x8x10xf32> {otc.output = "logits"}, tensor<f32>, tensor<2x8x16xf32>) {
    %a = otc.transpose %arg0, [0, 2, 1, 3] : (tensor<2x4x8x4xf32>) -> tensor<2x8x4x4xf32>
    %h = otc.reshape %a : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
    %p = otc.matmul %h, %arg4 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
    %r = otc.add %arg1, %arg5 : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
    %x = otc.add %r, %p : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
    %n, %mean, %rstd = otc.layer_norm %x gamma %arg6 beta %arg6 {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
    %g = otc.gelu %n : tensor<2x8x16xf32>
    %z = otc.matmul %g, %arg3 {transpose_rhs} : (tensor<2x8x16xf32>, tensor<10x16xf32>) -> tensor<2x8x10xf32>
    %zb = otc.add %z, %arg7 : (tensor<2x8x10xf32>, tensor<10xf32>) -> tensor<2x8x10xf32>
    %loss, %lse = otc.cross_entropy %zb, %arg2 {ignore_index = -100 : i64} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %zb, %loss, %r : tensor<2x8x10xf32>, tensor<f32>, tensor<2x8x16xf32>
  }
}

// -----

// The exported loss (otc-compile --no-fuse): softmax cross-entropy of
// [16, 10] rows; the rows' [16, ...] values become [6, ...], gathered by
// the rows flattened; a softmax and a reduction within the rows join.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[ROWS:arg[0-9]+]]: tensor<2x3xi64> {otc.input = "prediction_rows", otc.prediction_rows}
// CHECK: %[[FLAT:.*]] = otc.reshape %[[ROWS]] : (tensor<2x3xi64>) -> tensor<6xi64>
// CHECK: %[[HK:.*]] = otc.gather %arg0, %[[FLAT]] {axis = 0 : i64} : (tensor<16x16xf32>, tensor<6xi64>) -> tensor<6x16xf32>
// CHECK: %[[T:.*]] = otc.gather %{{.*}}, %[[ROWS]] {axis = 0 : i64} : (tensor<16xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK: %[[S:.*]] = otc.softmax %[[HK]] {axis = 1 : i64} : tensor<6x16xf32>
// CHECK: %[[M:.*]] = otc.reduce_sum %[[S]], [1] {keep_dims} : (tensor<6x16xf32>) -> tensor<6x1xf32>
// CHECK: %[[D:.*]] = otc.div %[[S]], %[[M]] : (tensor<6x16xf32>, tensor<6x1xf32>) -> tensor<6x16xf32>
// CHECK: %[[Z:.*]] = otc.matmul %[[D]], %arg1 : (tensor<6x16xf32>, tensor<16x10xf32>) -> tensor<6x10xf32>
// CHECK: %[[TF:.*]] = otc.reshape %[[T]] : (tensor<2x3xi64>) -> tensor<6xi64>
// CHECK: otc.softmax_cross_entropy %[[Z]], %[[TF]] {ignore_index = -1 : i64} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
module {
  func.func @forward(%arg0: tensor<16x16xf32>, %arg1: tensor<16x10xf32>, %arg2: tensor<2x8xi64> {otc.input = "labels"}) -> tensor<f32> {
    %s = otc.softmax %arg0 {axis = 1 : i64} : tensor<16x16xf32>
    %m = otc.reduce_sum %s, [1] {keep_dims} : (tensor<16x16xf32>) -> tensor<16x1xf32>
    %d = otc.div %s, %m : (tensor<16x16xf32>, tensor<16x1xf32>) -> tensor<16x16xf32>
    %z = otc.matmul %d, %arg1 : (tensor<16x16xf32>, tensor<16x10xf32>) -> tensor<16x10xf32>
    %t = otc.reshape %arg2 : (tensor<2x8xi64>) -> tensor<16xi64>
    %loss = otc.softmax_cross_entropy %z, %t {ignore_index = -1 : i64} : (tensor<16x10xf32>, tensor<16xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

