// RUN: otc-opt %s --split-input-file --verify-diagnostics

// Tests that operands that do not broadcast are rejected.
func.func @bad_broadcast(%a: tensor<4x5xf32>, %b: tensor<4xf32>) -> tensor<4x5xf32> {
  // expected-error@+1 {{operand shapes [4, 5] and [4] do not broadcast}}
  %0 = otc.add %a, %b : (tensor<4x5xf32>, tensor<4xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Tests that a result shape other than the broadcast one is rejected.
func.func @bad_result(%a: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<5xf32> {
  // expected-error@+1 {{result shape [5] is not the broadcast shape [4, 5]}}
  %0 = otc.mul %a, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that matmul checks its contracting dimensions.
func.func @bad_matmul(%a: tensor<4x3xf32>, %b: tensor<5x2xf32>) -> tensor<4x2xf32> {
  // expected-error@+1 {{contracting dimensions differ: [4, 3] x [5, 2]}}
  %0 = otc.matmul %a, %b : (tensor<4x3xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// Tests that the transpose flags change the expected result shape.
func.func @bad_matmul_flags(%a: tensor<4x3xf32>, %b: tensor<5x3xf32>) -> tensor<4x3xf32> {
  // expected-error@+1 {{result shape [4, 3] should be [4, 5]}}
  %0 = otc.matmul %a, %b {transpose_rhs} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that a transpose permutation must be a permutation.
func.func @bad_perm(%a: tensor<4x3xf32>) -> tensor<3x4xf32> {
  // expected-error@+1 {{permutation is not a permutation of [0, rank)}}
  %0 = otc.transpose %a, [1, 1] : (tensor<4x3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Tests that reshape keeps the element count.
func.func @bad_reshape(%a: tensor<4x3xf32>) -> tensor<5xf32> {
  // expected-error@+1 {{cannot reshape [4, 3] to [5]}}
  %0 = otc.reshape %a : (tensor<4x3xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

// Tests that reduce_sum axes must be sorted and in range.
func.func @bad_axes(%a: tensor<4x3xf32>) -> tensor<f32> {
  // expected-error@+1 {{axes must be sorted, unique and within the rank}}
  %0 = otc.reduce_sum %a, [1, 0] : (tensor<4x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that dropout rejects a ratio of 1.
func.func @bad_ratio(%a: tensor<4xf32>, %k: tensor<i64>) -> tensor<4xf32> {
  // expected-error@+1 {{ratio must be in [0, 1), got 1}}
  %0, %m = otc.dropout %a, %k {ratio = 1.0 : f64, stream = 0 : i64} : (tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xi1>)
  return %0 : tensor<4xf32>
}

// -----

// Tests that the loss expects 2-D logits and matching labels.
func.func @bad_loss(%z: tensor<4x10xf32>, %y: tensor<3xi64>) -> tensor<f32> {
  // expected-error@+1 {{expects logits [N, C] and labels [N], got [4, 10] and [3]}}
  %0 = otc.softmax_cross_entropy %z, %y : (tensor<4x10xf32>, tensor<3xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that dynamic shapes are rejected: shapes are bound at import.
func.func @dynamic(%a: tensor<?x3xf32>) -> tensor<?x3xf32> {
  // expected-error@+1 {{must be statically shaped tensor}}
  %0 = otc.tanh %a : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
