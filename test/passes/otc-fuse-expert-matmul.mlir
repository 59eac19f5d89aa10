// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-fuse-patterns=remarks=true -verify-diagnostics -o /dev/null

// Tests that Hugging Face's `batched_mm` experts (the experts' weights
// gathered per row, [N, O, K], times each row as a column) become one
// otc.expert_matmul of the rows as [N, K] with the experts stored [E, O, K]
// (transpose_rhs), and that the gathered [N, O, K] tensor is gone.
// CHECK-LABEL: func.func @batched_mm_transposed
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf32>, %[[IDS:.*]]: tensor<6xi64>, %[[W:.*]]: tensor<3x5x4xf32>)
// CHECK-NOT: otc.gather
// CHECK: %[[R:.*]] = otc.reshape %{{.*}} : (tensor<6x4x1xf32>) -> tensor<6x4xf32>
// CHECK: %[[Y:.*]] = otc.expert_matmul %[[R]], %[[IDS]], %[[W]] {transpose_rhs} : (tensor<6x4xf32>, tensor<6xi64>, tensor<3x5x4xf32>) -> tensor<6x5xf32>
// CHECK: otc.reshape %[[Y]] : (tensor<6x5xf32>) -> tensor<6x5x1xf32>
// CHECK-NOT: otc.matmul
func.func @batched_mm_transposed(%x: tensor<6x4xf32>, %ids: tensor<6xi64>, %w: tensor<3x5x4xf32>) -> tensor<6x5xf32> {
  %g = otc.gather %w, %ids {axis = 0 : i64} : (tensor<3x5x4xf32>, tensor<6xi64>) -> tensor<6x5x4xf32>
  %c = otc.reshape %x : (tensor<6x4xf32>) -> tensor<6x4x1xf32>
  %p = otc.matmul %g, %c : (tensor<6x5x4xf32>, tensor<6x4x1xf32>) -> tensor<6x5x1xf32>
  %y = otc.reshape %p : (tensor<6x5x1xf32>) -> tensor<6x5xf32>
  return %y : tensor<6x5xf32>
}

// -----

// Tests the other orientation (a row times [K, O] experts) with indices of
// rank 2 in int32, as a [tokens, top-k] routing writes them: the indices
// are widened and flattened, the rows flattened to [N, K].
// CHECK-LABEL: func.func @row_times_experts
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x1x4xf32>, %[[IDS:.*]]: tensor<2x3xi32>, %[[W:.*]]: tensor<3x4x5xf32>)
// CHECK-DAG: %[[R:.*]] = otc.reshape %[[X]] : (tensor<2x3x1x4xf32>) -> tensor<6x4xf32>
// CHECK-DAG: %[[I64:.*]] = otc.cast %[[IDS]] : (tensor<2x3xi32>) -> tensor<2x3xi64>
// CHECK-DAG: %[[FLAT:.*]] = otc.reshape %[[I64]] : (tensor<2x3xi64>) -> tensor<6xi64>
// CHECK: otc.expert_matmul %[[R]], %[[FLAT]], %[[W]] : (tensor<6x4xf32>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<6x5xf32>
// CHECK-NOT: otc.gather
func.func @row_times_experts(%x: tensor<2x3x1x4xf32>, %ids: tensor<2x3xi32>, %w: tensor<3x4x5xf32>) -> tensor<2x3x1x5xf32> {
  %g = otc.gather %w, %ids {axis = 0 : i64} : (tensor<3x4x5xf32>, tensor<2x3xi32>) -> tensor<2x3x4x5xf32>
  %p = otc.matmul %x, %g : (tensor<2x3x1x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x1x5xf32>
  return %p : tensor<2x3x1x5xf32>
}

// -----

// Tests that a product of gathered matrices with several columns per row
// is not an expert product (each row would need [K, 2] of its own), and
// that the remark says why.
// CHECK-LABEL: func.func @two_columns
// CHECK: otc.gather
// CHECK: otc.matmul
// CHECK-NOT: otc.expert_matmul
func.func @two_columns(%x: tensor<6x4x2xf32>, %ids: tensor<6xi64>, %w: tensor<3x5x4xf32>) -> tensor<6x5x2xf32> {
  %g = otc.gather %w, %ids {axis = 0 : i64} : (tensor<3x5x4xf32>, tensor<6xi64>) -> tensor<6x5x4xf32>
  // expected-remark@+1 {{not fused: expert product: each row must multiply its own expert's matrix as a single row or column}}
  %p = otc.matmul %g, %x : (tensor<6x5x4xf32>, tensor<6x4x2xf32>) -> tensor<6x5x2xf32>
  return %p : tensor<6x5x2xf32>
}

// -----

// Tests that matrices gathered along another axis than the experts' stay
// as they are, with a remark naming the axis.
// CHECK-LABEL: func.func @gathered_along_axis_1
// CHECK: otc.gather
// CHECK-NOT: otc.expert_matmul
func.func @gathered_along_axis_1(%x: tensor<5x4x1xf32>, %ids: tensor<6xi64>, %w: tensor<5x3x4xf32>) -> tensor<5x6x1xf32> {
  %g = otc.gather %w, %ids {axis = 1 : i64} : (tensor<5x3x4xf32>, tensor<6xi64>) -> tensor<5x6x4xf32>
  // expected-remark@+1 {{not fused: expert product: the weights are gathered along axis 1, not the experts'}}
  %p = otc.matmul %g, %x : (tensor<5x6x4xf32>, tensor<5x4x1xf32>) -> tensor<5x6x1xf32>
  return %p : tensor<5x6x1xf32>
}
