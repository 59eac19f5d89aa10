// RUN: otc-opt %s --otc-chunk-loss=chunk-rows=3 --split-input-file | FileCheck %s
// RUN: otc-opt %s --otc-chunk-loss --split-input-file | FileCheck %s --check-prefix=AUTO
// RUN: not otc-opt %s --otc-chunk-loss=chunk-mib=0 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: otc-chunk-loss: chunk-rows must be at least 0 and chunk-mib at least 1

// Tests that the LM head (a product with w transposed), its loss and
// gradient, and the head's two backward products become one
// otc.linear_cross_entropy_with_grad in chunks of rows, where the loss was:
// f32, bf16 through the product's cast, with the same loss computed again
// from the same logits (the recomputed head under --remat=full); and that
// nothing changes where the logits or their gradient have other readers.

// f32: dh and dw are the op's; the five ops are gone. The chunk is 3 rows
// (the last of the 8 rows' chunks short). By default (chunks chosen, no
// price) the 8 rows are one chunk, which saves no logits against the dw the
// call would write: nothing changes.
// CHECK-LABEL: func.func @f32
// CHECK-NEXT: %[[ONE:.*]] = otc.constant
// CHECK-NEXT: %[[DH:.*]], %[[DW:.*]], %[[L:.*]], %{{.*}}, %{{.*}} = otc.linear_cross_entropy_with_grad %[[ONE]], %arg0, %arg1, %arg2 {chunk_rows = 3 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<2x4x6xf32>, tensor<10x6xf32>, tensor<2x4xi64>) -> (tensor<2x4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<2x4xf32>, tensor<3x10xf32>)
// CHECK-NEXT: return %[[L]], %[[DH]], %[[DW]]
// AUTO-LABEL: func.func @f32
// AUTO: otc.cross_entropy_with_grad
// AUTO-NOT: otc.linear_cross_entropy_with_grad
func.func @f32(%h: tensor<2x4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x6xf32>, tensor<10x6xf32>) {
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<2x4x6xf32>, tensor<10x6xf32>) -> tensor<2x4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y {ignore_index = -100 : i64} : (tensor<f32>, tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<2x4x10xf32>, tensor<f32>, tensor<2x4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<2x4x10xf32>, tensor<10x6xf32>) -> tensor<2x4x6xf32>
  %h2 = otc.reshape %h : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %dz2 = otc.reshape %dz : (tensor<2x4x10xf32>) -> tensor<8x10xf32>
  %dw = otc.matmul %dz2, %h2 {transpose_lhs} : (tensor<8x10xf32>, tensor<8x6xf32>) -> tensor<10x6xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x6xf32>, tensor<10x6xf32>
}

// -----

// bf16: the head's f32 product rounded to bf16 logits; the chunk holds
// bf16 logits, dh and dw stay f32 (then rounded as before).
// CHECK-LABEL: func.func @bf16
// CHECK: %[[DH:.*]], %[[DW:.*]], %{{.*}}, %{{.*}}, %{{.*}} = otc.linear_cross_entropy_with_grad {{.*}} -> (tensor<4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<4xf32>, tensor<3x10xbf16>)
// CHECK-NEXT: otc.cast %[[DH]]
// CHECK-NOT: otc.matmul
func.func @bf16(%h: tensor<4x6xbf16>, %w: tensor<10x6xbf16>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x6xbf16>, tensor<10x6xf32>) {
  %p = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xbf16>, tensor<10x6xbf16>) -> tensor<4x10xf32>
  %z = otc.cast %p : (tensor<4x10xf32>) -> tensor<4x10xbf16>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xbf16>, tensor<4xi64>) -> (tensor<4x10xbf16>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xbf16>, tensor<10x6xbf16>) -> tensor<4x6xf32>
  %dhb = otc.cast %dh : (tensor<4x6xf32>) -> tensor<4x6xbf16>
  %dz2 = otc.reshape %dz : (tensor<4x10xbf16>) -> tensor<4x10xbf16>
  %dw = otc.matmul %dz2, %h {transpose_lhs} : (tensor<4x10xbf16>, tensor<4x6xbf16>) -> tensor<10x6xf32>
  return %loss, %dhb, %dw : tensor<f32>, tensor<4x6xbf16>, tensor<10x6xf32>
}

// -----

// The loss computed again from the same logits (its lse unused) before the
// seed is defined: the op takes its place, the seed moves up, and the
// loss returned is the op's.
// CHECK-LABEL: func.func @again
// CHECK-NEXT: %[[ONE:.*]] = otc.constant
// CHECK-NEXT: %{{.*}}, %{{.*}}, %[[L:.*]], %{{.*}}, %{{.*}} = otc.linear_cross_entropy_with_grad %[[ONE]]
// CHECK-NOT: otc.cross_entropy
// CHECK: return %[[L]]
func.func @again(%h: tensor<4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>) {
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  %first, %lse = otc.cross_entropy %z, %y : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4xf32>)
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x6xf32>) -> tensor<4x6xf32>
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<10x6xf32>
  return %first, %dh, %dw : tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>
}

// -----

// The logits are also returned: nothing changes.
// CHECK-LABEL: func.func @logits_read
// CHECK: otc.cross_entropy_with_grad
// CHECK-NOT: otc.linear_cross_entropy_with_grad
func.func @logits_read(%h: tensor<4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>, tensor<4x6xf32>) {
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x6xf32>) -> tensor<4x6xf32>
  return %loss, %z, %dh : tensor<f32>, tensor<4x10xf32>, tensor<4x6xf32>
}

// -----

// The gradient has a third reader (no dw product): nothing changes.
// CHECK-LABEL: func.func @gradient_read
// CHECK-NOT: otc.linear_cross_entropy_with_grad
func.func @gradient_read(%h: tensor<4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>, tensor<4x6xf32>) {
  %z = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x6xf32>) -> tensor<4x6xf32>
  %t = otc.tanh %dz : tensor<4x10xf32>
  return %loss, %t, %dh : tensor<f32>, tensor<4x10xf32>, tensor<4x6xf32>
}

// -----

// A bias on the logits: a trained one [V] whose gradient is dlogits summed
// over the rows (otc.column_sum) becomes the op's bias and dbias; the add
// and the sum go.
// CHECK-LABEL: func.func @trained_bias
// CHECK: %[[DH:.*]], %[[DW:.*]], %[[L:.*]], %{{.*}}, %{{.*}}, %[[DB:.*]] = otc.linear_cross_entropy_with_grad %{{.*}}, %arg0, %arg1, %arg2 bias %arg3 {chunk_rows = 3 : i64} : (tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<4xf32>, tensor<3x10xf32>, tensor<10xf32>)
// CHECK-NOT: otc.add
// CHECK-NOT: otc.column_sum
// CHECK: return %[[L]], %[[DH]], %[[DW]], %[[DB]]
func.func @trained_bias(%h: tensor<4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<4xi64>, %b: tensor<10xf32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>, tensor<10xf32>) {
  %p = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  %z = otc.add %p, %b : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %db = otc.column_sum %dz : (tensor<4x10xf32>) -> tensor<10xf32>
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x6xf32>) -> tensor<4x6xf32>
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<10x6xf32>
  return %loss, %dh, %dw, %db : tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>, tensor<10xf32>
}

// -----

// A frozen bias [1, V] added to the bf16 logits (BART's final_logits_bias
// under --precision=bf16): the op takes it reshaped to [V], with no dbias.
// CHECK-LABEL: func.func @frozen_bias
// CHECK: %[[B:.*]] = otc.reshape %arg3 : (tensor<1x10xbf16>) -> tensor<10xbf16>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %[[L:.*]], %{{.*}}, %{{.*}} = otc.linear_cross_entropy_with_grad %{{.*}}, %arg0, %arg1, %arg2 bias %[[B]] {chunk_rows = 3 : i64} : (tensor<f32>, tensor<4x6xbf16>, tensor<10x6xbf16>, tensor<4xi64>, tensor<10xbf16>) -> (tensor<4x6xf32>, tensor<10x6xf32>, tensor<f32>, tensor<4xf32>, tensor<3x10xbf16>)
// CHECK-NOT: otc.add
func.func @frozen_bias(%h: tensor<4x6xbf16>, %w: tensor<10x6xbf16>, %y: tensor<4xi64>, %b: tensor<1x10xbf16>) -> (tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>) {
  %p = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xbf16>, tensor<10x6xbf16>) -> tensor<4x10xf32>
  %c = otc.cast %p : (tensor<4x10xf32>) -> tensor<4x10xbf16>
  %z = otc.add %c, %b : (tensor<4x10xbf16>, tensor<1x10xbf16>) -> tensor<4x10xbf16>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xbf16>, tensor<4xi64>) -> (tensor<4x10xbf16>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xbf16>, tensor<10x6xbf16>) -> tensor<4x6xf32>
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<4x10xbf16>, tensor<4x6xbf16>) -> tensor<10x6xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>
}

// -----

// An addend that is not one value per class (a [4, 10] tensor) is no
// bias: nothing changes.
// CHECK-LABEL: func.func @not_a_bias
// CHECK: otc.cross_entropy_with_grad
// CHECK-NOT: otc.linear_cross_entropy_with_grad
func.func @not_a_bias(%h: tensor<4x6xf32>, %w: tensor<10x6xf32>, %y: tensor<4xi64>, %b: tensor<4x10xf32>) -> (tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>) {
  %p = otc.matmul %h, %w {transpose_rhs} : (tensor<4x6xf32>, tensor<10x6xf32>) -> tensor<4x10xf32>
  %z = otc.add %p, %b : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x6xf32>) -> tensor<4x6xf32>
  %dw = otc.matmul %dz, %h {transpose_lhs} : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<10x6xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x6xf32>, tensor<10x6xf32>
}

// -----

// The head's weight held [C, V] (an export's transposed copy): logits =
// h w, dh = dlogits wᵀ, dw = hᵀ dlogits ([C, V]) become the op with
// w_by_hidden.
// CHECK-LABEL: func.func @w_by_hidden
// CHECK: %[[DH:.*]], %[[DW:.*]], %[[L:.*]], %{{.*}}, %{{.*}} = otc.linear_cross_entropy_with_grad %{{.*}}, %arg0, %arg1, %arg2 {chunk_rows = 3 : i64, w_by_hidden} : (tensor<f32>, tensor<2x4x6xf32>, tensor<6x10xf32>, tensor<2x4xi64>) -> (tensor<2x4x6xf32>, tensor<6x10xf32>, tensor<f32>, tensor<2x4xf32>, tensor<3x10xf32>)
// CHECK-NEXT: return %[[L]], %[[DH]], %[[DW]]
func.func @w_by_hidden(%h: tensor<2x4x6xf32>, %w: tensor<6x10xf32>, %y: tensor<2x4xi64>) -> (tensor<f32>, tensor<2x4x6xf32>, tensor<6x10xf32>) {
  %z = otc.matmul %h, %w : (tensor<2x4x6xf32>, tensor<6x10xf32>) -> tensor<2x4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<2x4x10xf32>, tensor<2x4xi64>) -> (tensor<2x4x10xf32>, tensor<f32>, tensor<2x4xf32>)
  %dh = otc.matmul %dz, %w {transpose_rhs} : (tensor<2x4x10xf32>, tensor<6x10xf32>) -> tensor<2x4x6xf32>
  %h2 = otc.reshape %h : (tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %dz2 = otc.reshape %dz : (tensor<2x4x10xf32>) -> tensor<8x10xf32>
  %dw = otc.matmul %h2, %dz2 {transpose_lhs} : (tensor<8x6xf32>, tensor<8x10xf32>) -> tensor<6x10xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x6xf32>, tensor<6x10xf32>
}

// -----

// w [C, V] read the other way by dh (dlogits w without the transpose) is
// no head of this form: nothing changes.
// CHECK-LABEL: func.func @w_by_hidden_mismatch
// CHECK: otc.cross_entropy_with_grad
// CHECK-NOT: otc.linear_cross_entropy_with_grad
func.func @w_by_hidden_mismatch(%h: tensor<4x10xf32>, %w: tensor<10x10xf32>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>, tensor<10x10xf32>) {
  %z = otc.matmul %h, %w : (tensor<4x10xf32>, tensor<10x10xf32>) -> tensor<4x10xf32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> (tensor<4x10xf32>, tensor<f32>, tensor<4xf32>)
  %dh = otc.matmul %dz, %w : (tensor<4x10xf32>, tensor<10x10xf32>) -> tensor<4x10xf32>
  %dw = otc.matmul %h, %dz {transpose_lhs} : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<10x10xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<4x10xf32>, tensor<10x10xf32>
}
