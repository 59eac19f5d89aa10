// RUN: otc-opt %s --otc-fuse-reductions --split-input-file | FileCheck %s

// Tests that sums over the leading axes (every axis but the last, or a
// shorter prefix) become otc.column_sum (a library call) and that other
// reductions stay.

// A bias gradient under BF16: the widening cast is read through.
// CHECK-LABEL: func.func @bf16_bias_grad
// CHECK-NOT: otc.cast
// CHECK: %[[S:.*]] = otc.column_sum %arg0 : (tensor<4x8x16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: return %[[S]]
func.func @bf16_bias_grad(%dy: tensor<4x8x16xbf16>) -> tensor<16xf32> {
  %w = otc.cast %dy : (tensor<4x8x16xbf16>) -> tensor<4x8x16xf32>
  %s = otc.reduce_sum %w, [0, 1] : (tensor<4x8x16xf32>) -> tensor<16xf32>
  return %s : tensor<16xf32>
}

// -----

// FP32, keeping dimensions: the [16] sum is reshaped back to [1, 1, 16]; a
// cast that something else reads stays for it.
// CHECK-LABEL: func.func @keep_dims
// CHECK: %[[W:.*]] = otc.cast %arg0
// CHECK: %[[S:.*]] = otc.column_sum %arg0 : (tensor<4x8x16xbf16>) -> tensor<16xf32>
// CHECK-NEXT: %[[R:.*]] = otc.reshape %[[S]] : (tensor<16xf32>) -> tensor<1x1x16xf32>
// CHECK-NEXT: return %[[R]], %[[W]]
func.func @keep_dims(%dy: tensor<4x8x16xbf16>) -> (tensor<1x1x16xf32>, tensor<4x8x16xf32>) {
  %w = otc.cast %dy : (tensor<4x8x16xbf16>) -> tensor<4x8x16xf32>
  %s = otc.reduce_sum %w, [0, 1] {keep_dims} : (tensor<4x8x16xf32>) -> tensor<1x1x16xf32>
  return %s, %w : tensor<1x1x16xf32>, tensor<4x8x16xf32>
}

// -----

// Not over the leading axes, a full sum, or a BF16 result: unchanged.
// CHECK-LABEL: func.func @others
// CHECK-NOT: otc.column_sum
// CHECK-COUNT-3: otc.reduce_sum
func.func @others(%x: tensor<4x8xf32>, %y: tensor<4x8xbf16>) -> (tensor<4xf32>, tensor<f32>, tensor<8xbf16>) {
  %a = otc.reduce_sum %x, [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %b = otc.reduce_sum %x, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  %c = otc.reduce_sum %y, [0] : (tensor<4x8xbf16>) -> tensor<8xbf16>
  return %a, %b, %c : tensor<4xf32>, tensor<f32>, tensor<8xbf16>
}

// -----

// The batch axis only (a learned position table added to every sequence):
// the input seen as [batch, rest] (a reshape: a view at the buffer level),
// summed per column, reshaped back to the table.
// CHECK-LABEL: func.func @batch_axis
// CHECK: %[[V:.*]] = otc.reshape %arg0 : (tensor<4x8x16xbf16>) -> tensor<4x128xbf16>
// CHECK-NEXT: %[[S:.*]] = otc.column_sum %[[V]] : (tensor<4x128xbf16>) -> tensor<128xf32>
// CHECK-NEXT: %[[R:.*]] = otc.reshape %[[S]] : (tensor<128xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @batch_axis(%dy: tensor<4x8x16xbf16>) -> tensor<8x16xf32> {
  %w = otc.cast %dy : (tensor<4x8x16xbf16>) -> tensor<4x8x16xf32>
  %s = otc.reduce_sum %w, [0] : (tensor<4x8x16xf32>) -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}
