// RUN: otc-opt %s --otc-fold-shapes --split-input-file | FileCheck %s

// Tests that a GPT-style reshape target (Shape -> Gather -> Unsqueeze ->
// Concat) folds to one constant and the intermediate ops disappear.
// CHECK-LABEL: func.func @reshape_target
// CHECK-DAG: %[[C:.*]] = otc.constant dense<[2, -1, 64]> : tensor<3xi64>
// CHECK-NOT: otc.gather
// CHECK-NOT: otc.concat
// CHECK: return %[[C]]
func.func @reshape_target() -> tensor<3xi64> {
  %s = otc.constant dense<[2, 8, 64]> : tensor<3xi64>
  %i = otc.constant dense<0> : tensor<i64>
  %b = otc.gather %s, %i {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u = otc.reshape %b : (tensor<i64>) -> tensor<1xi64>
  %m = otc.constant dense<[-1, 64]> : tensor<2xi64>
  %c = otc.concat %u, %m {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  return %c : tensor<3xi64>
}

// -----

// Tests that integer arithmetic, casts, comparisons and selects on constants
// fold (integer division truncates toward zero: [7, -5] / 2 + 1).
// CHECK-LABEL: func.func @arith
// CHECK-DAG: %[[D:.*]] = otc.constant dense<[4, -1]> : tensor<2xi64>
// CHECK-DAG: %[[F:.*]] = otc.constant dense<[7.000000e+00, -5.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[S:.*]] = otc.constant dense<[7, 2]> : tensor<2xi64>
// CHECK: return %[[D]], %[[F]], %[[S]]
func.func @arith() -> (tensor<2xi64>, tensor<2xf32>, tensor<2xi64>) {
  %a = otc.constant dense<[7, -5]> : tensor<2xi64>
  %two = otc.constant dense<2> : tensor<i64>
  %d = otc.div %a, %two : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %one = otc.constant dense<1> : tensor<i64>
  %d1 = otc.add %d, %one : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %f = otc.cast %a : (tensor<2xi64>) -> tensor<2xf32>
  %z = otc.constant dense<0> : tensor<i64>
  %pos = otc.compare "gt", %a, %z : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
  %s = otc.select %pos, %a, %two : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  return %d1, %f, %s : tensor<2xi64>, tensor<2xf32>, tensor<2xi64>
}

// -----

// Tests that a scale computed from a shape (1 / sqrt(head_dim)) folds, and
// that slices, transposes and broadcasts of constants fold.
// CHECK-LABEL: func.func @float_and_movement
// CHECK-DAG: otc.constant dense<2.500000e-01> : tensor<f32>
// CHECK-DAG: otc.constant dense<{{\[}}[1, 2]]> : tensor<1x2xi64>
// CHECK-DAG: otc.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-DAG: otc.constant dense<5> : tensor<2x3xi64>
// CHECK-NOT: otc.sqrt
// CHECK-NOT: otc.slice
// CHECK-NOT: otc.transpose
// CHECK-NOT: otc.broadcast
func.func @float_and_movement() -> (tensor<f32>, tensor<1x2xi64>, tensor<2x2xi64>, tensor<2x3xi64>) {
  %hd = otc.constant dense<16> : tensor<i64>
  %f = otc.cast %hd : (tensor<i64>) -> tensor<f32>
  %s = otc.sqrt %f : tensor<f32>
  %r = otc.reciprocal %s : tensor<f32>
  %m = otc.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %sl = otc.slice %m, [0, 0], [2, 1] : (tensor<2x2xi64>) -> tensor<1x2xi64>
  %t = otc.transpose %m, [1, 0] : (tensor<2x2xi64>) -> tensor<2x2xi64>
  %tt = otc.transpose %t, [1, 0] : (tensor<2x2xi64>) -> tensor<2x2xi64>
  %five = otc.constant dense<5> : tensor<i64>
  %b = otc.broadcast %five : (tensor<i64>) -> tensor<2x3xi64>
  return %r, %sl, %tt, %b : tensor<f32>, tensor<1x2xi64>, tensor<2x2xi64>, tensor<2x3xi64>
}

// -----

// Tests that identity reshapes, casts and a select on a uniform condition
// fold to their input, and that ops on non-constants are kept.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>, %[[Y:.*]]: tensor<2x3xf32>)
// CHECK: %[[A:.*]] = otc.add %[[X]], %[[X]]
// CHECK: return %[[A]], %[[Y]]
func.func @identities(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %r = otc.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  %r2 = otc.reshape %r : (tensor<6xf32>) -> tensor<2x3xf32>
  %a = otc.add %r2, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = otc.cast %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %f = otc.constant dense<false> : tensor<2x3xi1>
  %s = otc.select %f, %x, %y : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %c, %s : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// A gather of every row in order (learned positions 0..T-1 of a T-row
// table, here written both ways: 0..3 and with negative indices) is the
// table itself; a gather of fewer rows, or of rows out of order, stays.
// CHECK-LABEL: func.func @positions
// CHECK-NOT: otc.gather
// CHECK: return %arg0, %arg0
// CHECK-LABEL: func.func @not_all_rows
// CHECK-COUNT-2: otc.gather
func.func @positions(%t: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %p = otc.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %n = otc.constant dense<[-4, -3, 2, -1]> : tensor<4xi64>
  %a = otc.gather %t, %p {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  %b = otc.gather %t, %n {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @not_all_rows(%t: tensor<4x8xf32>) -> (tensor<3x8xf32>, tensor<4x8xf32>) {
  %p = otc.constant dense<[0, 1, 2]> : tensor<3xi64>
  %q = otc.constant dense<[1, 0, 2, 3]> : tensor<4xi64>
  %a = otc.gather %t, %p {axis = 0 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  %b = otc.gather %t, %q {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  return %a, %b : tensor<3x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that a select on a uniform condition between scalars folds to a
// splat of its result's shape, however large (an exporter's all-true
// attention mask where(true, 0, min) over [B, 1, T, T]: 8 x 1 x 512 x 512
// elements, past the folders' limit for other results), and that a
// non-uniform condition over that shape is kept.
// CHECK-LABEL: func.func @uniform_select
// CHECK-DAG: %[[Z:.*]] = otc.constant dense<0.000000e+00> : tensor<8x1x512x512xf32>
// CHECK-DAG: %[[M:.*]] = otc.constant dense<-3.40282347E+38> : tensor<8x1x512x512xf32>
// CHECK: %[[K:.*]] = otc.select %arg0
// CHECK: return %[[Z]], %[[M]], %[[K]]
func.func @uniform_select(%c: tensor<8x1x512x512xi1>) -> (tensor<8x1x512x512xf32>, tensor<8x1x512x512xf32>, tensor<8x1x512x512xf32>) {
  %t = otc.constant dense<true> : tensor<8x1x512x512xi1>
  %f = otc.constant dense<false> : tensor<8x1x512x512xi1>
  %min = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %zero = otc.constant dense<0.000000e+00> : tensor<f32>
  %a = otc.select %t, %zero, %min : (tensor<8x1x512x512xi1>, tensor<f32>, tensor<f32>) -> tensor<8x1x512x512xf32>
  %b = otc.select %f, %zero, %min : (tensor<8x1x512x512xi1>, tensor<f32>, tensor<f32>) -> tensor<8x1x512x512xf32>
  %k = otc.select %c, %zero, %min : (tensor<8x1x512x512xi1>, tensor<f32>, tensor<f32>) -> tensor<8x1x512x512xf32>
  return %a, %b, %k : tensor<8x1x512x512xf32>, tensor<8x1x512x512xf32>, tensor<8x1x512x512xf32>
}
