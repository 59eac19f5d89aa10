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

// Few results of long sums, which a generated kernel would run as a few
// serial loops: Whisper's Conv1d bias gradient ([B, C, T] over B and T: 768
// results of 48,000) is transposed to [B, T, C] and summed per column; a
// full sum (CLIP's logit_scale gradient) is one column of all the elements.
// Many results (row sums of 20,000 rows) stay generated.
// CHECK-LABEL: func.func @few_long_sums
// CHECK: %[[T:.*]] = otc.transpose %arg0, [0, 2, 1] : (tensor<16x768x3000xbf16>) -> tensor<16x3000x768xbf16>
// CHECK-NEXT: %[[B:.*]] = otc.column_sum %[[T]] : (tensor<16x3000x768xbf16>) -> tensor<768xf32>
// CHECK: %[[V:.*]] = otc.reshape %arg1 : (tensor<256x256xf32>) -> tensor<65536x1xf32>
// CHECK-NEXT: %[[S:.*]] = otc.column_sum %[[V]] : (tensor<65536x1xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[R:.*]] = otc.reshape %[[S]] : (tensor<1xf32>) -> tensor<f32>
// CHECK: otc.reduce_sum %arg2, [1] : (tensor<20000x2048xf32>) -> tensor<20000xf32>
func.func @few_long_sums(%dy: tensor<16x768x3000xbf16>, %g: tensor<256x256xf32>, %r: tensor<20000x2048xf32>) -> (tensor<768xf32>, tensor<f32>, tensor<20000xf32>) {
  %w = otc.cast %dy : (tensor<16x768x3000xbf16>) -> tensor<16x768x3000xf32>
  %b = otc.reduce_sum %w, [0, 2] : (tensor<16x768x3000xf32>) -> tensor<768xf32>
  %s = otc.reduce_sum %g, [0, 1] : (tensor<256x256xf32>) -> tensor<f32>
  %t = otc.reduce_sum %r, [1] : (tensor<20000x2048xf32>) -> tensor<20000xf32>
  return %b, %s, %t : tensor<768xf32>, tensor<f32>, tensor<20000xf32>
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

// -----

// An embedding's gradient computed in FP32 from a widened BF16 gradient and
// only rounded back to BF16 reads and writes BF16 (the library sums in FP32
// either way): both casts go. With another reader of the FP32 result, or a
// gradient that was not widened, nothing changes.
// CHECK-LABEL: func.func @bf16_embedding_grad
// CHECK-NOT: otc.cast
// CHECK: %[[G:.*]] = otc.gather_grad %arg0, %arg1 {axis = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>) -> tensor<50x16xbf16>
// CHECK-NEXT: return %[[G]]
func.func @bf16_embedding_grad(%dy: tensor<2x4x16xbf16>, %ids: tensor<2x4xi64>) -> tensor<50x16xbf16> {
  %w = otc.cast %dy : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
  %g = otc.gather_grad %w, %ids {axis = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<50x16xf32>
  %r = otc.cast %g : (tensor<50x16xf32>) -> tensor<50x16xbf16>
  return %r : tensor<50x16xbf16>
}

// -----

// CHECK-LABEL: func.func @embedding_grad_read_in_fp32
// CHECK: otc.cast %arg0 : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
// CHECK: otc.gather_grad %{{.*}} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<50x16xf32>
// CHECK: otc.cast %{{.*}} : (tensor<50x16xf32>) -> tensor<50x16xbf16>
// CHECK: otc.gather_grad %arg2, %arg1 {axis = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<50x16xf32>
// CHECK-NEXT: otc.cast
func.func @embedding_grad_read_in_fp32(%dy: tensor<2x4x16xbf16>, %ids: tensor<2x4xi64>, %dz: tensor<2x4x16xf32>)
    -> (tensor<50x16xbf16>, tensor<50x16xf32>, tensor<50x16xbf16>) {
  %w = otc.cast %dy : (tensor<2x4x16xbf16>) -> tensor<2x4x16xf32>
  %g = otc.gather_grad %w, %ids {axis = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<50x16xf32>
  %r = otc.cast %g : (tensor<50x16xf32>) -> tensor<50x16xbf16>
  %h = otc.gather_grad %dz, %ids {axis = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<50x16xf32>
  %q = otc.cast %h : (tensor<50x16xf32>) -> tensor<50x16xbf16>
  return %r, %g, %q : tensor<50x16xbf16>, tensor<50x16xf32>, tensor<50x16xbf16>
}

// -----

// Expert products of BF16 rows and experts whose FP32 result only a cast to
// BF16 reads (mixed precision's rounding of a product) store BF16
// themselves: the forward product and the backward's dx (experts read
// transposed), each in either layout; the casts go.
// CHECK-LABEL: func.func @bf16_expert_products
// CHECK-NOT: otc.cast
// CHECK: %[[Y:.*]] = otc.expert_matmul %arg0, %arg1, %arg2 : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xbf16>
// CHECK-NEXT: %[[DX:.*]] = otc.expert_matmul %arg3, %arg1, %arg2 {transpose_rhs} : (tensor<6x5xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x4xbf16>
// CHECK-NEXT: return %[[Y]], %[[DX]]
func.func @bf16_expert_products(%x: tensor<6x4xbf16>, %ids: tensor<6xi64>, %w: tensor<3x4x5xbf16>, %dy: tensor<6x5xbf16>)
    -> (tensor<6x5xbf16>, tensor<6x4xbf16>) {
  %y = otc.expert_matmul %x, %ids, %w : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xf32>
  %r = otc.cast %y : (tensor<6x5xf32>) -> tensor<6x5xbf16>
  %dx = otc.expert_matmul %dy, %ids, %w {transpose_rhs} : (tensor<6x5xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x4xf32>
  %q = otc.cast %dx : (tensor<6x4xf32>) -> tensor<6x4xbf16>
  return %r, %q : tensor<6x5xbf16>, tensor<6x4xbf16>
}

// -----

// Near misses, each left as it is: an FP32 result that another op reads
// too (in FP32), FP32 operands rounded to BF16 (the
// kernel rounds only to its operands' type), a cast to f16, and the weight
// gradient (it goes into its slot in otc-fuse-epilogues instead).
// CHECK-LABEL: func.func @expert_products_kept
// CHECK: %[[Y:.*]] = otc.expert_matmul %arg0, %arg1, %arg2 : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xf32>
// CHECK-NEXT: otc.cast %[[Y]] : (tensor<6x5xf32>) -> tensor<6x5xbf16>
// CHECK-NEXT: otc.neg %[[Y]]
// CHECK: %[[Z:.*]] = otc.expert_matmul %arg3, %arg1, %arg4 : (tensor<6x4xf32>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: otc.cast %[[Z]] : (tensor<6x5xf32>) -> tensor<6x5xbf16>
// CHECK: %[[H:.*]] = otc.expert_matmul %arg0, %arg1, %arg2 : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xf32>
// CHECK-NEXT: otc.cast %[[H]] : (tensor<6x5xf32>) -> tensor<6x5xf16>
// CHECK: %[[DW:.*]] = otc.expert_matmul_wgrad %arg5, %arg0, %arg1 : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
// CHECK-NEXT: otc.cast %[[DW]] : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
func.func @expert_products_kept(%x: tensor<6x4xbf16>, %ids: tensor<6xi64>, %w: tensor<3x4x5xbf16>,
                                %xf: tensor<6x4xf32>, %wf: tensor<3x4x5xf32>, %dy: tensor<6x5xbf16>)
    -> (tensor<6x5xbf16>, tensor<6x5xf32>, tensor<6x5xbf16>, tensor<6x5xf16>, tensor<3x4x5xbf16>) {
  %y = otc.expert_matmul %x, %ids, %w : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xf32>
  %r = otc.cast %y : (tensor<6x5xf32>) -> tensor<6x5xbf16>
  %s = otc.neg %y : tensor<6x5xf32>
  %z = otc.expert_matmul %xf, %ids, %wf : (tensor<6x4xf32>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<6x5xf32>
  %q = otc.cast %z : (tensor<6x5xf32>) -> tensor<6x5xbf16>
  %h = otc.expert_matmul %x, %ids, %w : (tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<6x5xf32>
  %k = otc.cast %h : (tensor<6x5xf32>) -> tensor<6x5xf16>
  %dw = otc.expert_matmul_wgrad %dy, %x, %ids : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
  %d = otc.cast %dw : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
  return %r, %s, %q, %k, %d : tensor<6x5xbf16>, tensor<6x5xf32>, tensor<6x5xbf16>, tensor<6x5xf16>, tensor<3x4x5xbf16>
}
