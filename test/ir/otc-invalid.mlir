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

// -----

// Tests that attention rejects key/value heads that do not divide the query heads.
func.func @attention_heads(%q: tensor<1x3x4x2xf32>, %k: tensor<1x2x4x2xf32>) -> tensor<1x3x4x2xf32> {
  // expected-error@+1 {{expects k and v [B, Hk, S, D] with Hk dividing the query heads}}
  %o, %l = otc.attention %q, %k, %k {scale = 1.0 : f64} : (tensor<1x3x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x3x4x2xf32>, tensor<1x3x4xf32>)
  return %o : tensor<1x3x4x2xf32>
}

// -----

// Tests that causal attention needs as many keys as queries.
func.func @attention_causal(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x5x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{causal attention needs as many keys as queries, got 4 and 5}}
  %o, %l = otc.attention %q, %k, %k {causal, scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x5x2xf32>, tensor<1x2x5x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that mask_grad needs a mask.
func.func @attention_mask_grad_without_mask(%q: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{mask_grad needs a mask and q, k and v apart}}
  %o, %l = otc.attention %q, %q, %q {mask_grad, scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that the gradient of an attention with mask_grad returns dS as
// [B, H, T, S] of the mask's element type after dq, dk and dv.
func.func @attention_grad_dscores_shape(%q: tensor<1x2x4x2xf32>, %lse: tensor<1x2x4xf32>, %m: tensor<1x1x4x4xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{dS must be [1, 2, 4, 4] of the mask's element type}}
  %g:4 = otc.attention_grad %q, %q, %q, %q, %q, %lse mask %m {mask_grad, scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<1x1x4x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x1x4x4xf32>)
  return %g#0 : tensor<1x2x4x2xf32>
}

// -----

// Tests that the sinks are an f32 logit per query head: [H], not per
// key/value head or BF16.
func.func @attention_sinks_shape(%q: tensor<1x4x4x2xf32>, %kv: tensor<1x2x4x2xf32>, %s: tensor<2xf32>) -> tensor<1x4x4x2xf32> {
  // expected-error@+1 {{sinks must be f32 [H] = [4], got 'tensor<2xf32>'}}
  %o, %lse = otc.attention %q, %kv, %kv sinks %s {scale = 1.0 : f64} : (tensor<1x4x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4xf32>)
  return %o : tensor<1x4x4x2xf32>
}

// -----

func.func @attention_sinks_type(%q: tensor<1x2x4x2xbf16>, %s: tensor<2xbf16>) -> tensor<1x2x4x2xbf16> {
  // expected-error@+1 {{sinks must be f32 [H] = [2], got 'tensor<2xbf16>'}}
  %o, %lse = otc.attention %q, %q, %q sinks %s {scale = 1.0 : f64} : (tensor<1x2x4x2xbf16>, tensor<1x2x4x2xbf16>, tensor<1x2x4x2xbf16>, tensor<2xbf16>) -> (tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xbf16>
}

// -----

// Tests that the gradient of an attention with sinks ends with theirs.
func.func @attention_grad_sinks(%q: tensor<1x2x4x2xf32>, %lse: tensor<1x2x4xf32>, %s: tensor<2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{the last result, the sinks' gradient, must be typed as the sinks}}
  %g:3 = otc.attention_grad %q, %q, %q, %q, %q, %lse sinks %s {scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  return %g#0 : tensor<1x2x4x2xf32>
}

// -----

// Tests that a soft cap is 0 (none) or positive.
func.func @attention_softcap(%q: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{softcap must be 0 (none) or positive; got -2}}
  %o, %l = otc.attention %q, %q, %q {causal, scale = 1.0 : f64, softcap = -2.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a sliding window is not negative.
func.func @attention_window(%q: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{window must be 0 (none) or positive; got -2}}
  %o, %l = otc.attention %q, %q, %q {scale = 1.0 : f64, window = -2 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a bidirectional sliding window (not causal) needs as many
// keys as queries.
func.func @attention_window_keys(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x6x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{a sliding window needs as many keys as queries, got 4 and 6}}
  %o, %l = otc.attention %q, %k, %k {scale = 1.0 : f64, window = 2 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that attention dropout needs a key.
func.func @attention_dropout(%q: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{dropout needs a key}}
  %o, %l = otc.attention %q, %q, %q {dropout = 0.1 : f64, scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that an attention mask must broadcast to the scores.
func.func @attention_mask(%q: tensor<1x2x4x2xf32>, %m: tensor<3x4xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{mask [3, 4] does not broadcast to the scores [1, 2, 4, 4]}}
  %o, %l = otc.attention %q, %q, %q mask %m {scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<3x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a layer norm's scale must have the normalized shape.
func.func @layer_norm_scale(%x: tensor<2x3x4xf32>, %g: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error@+1 {{scale and bias must have the normalized shape [4], got [3, 4]}}
  %y, %m, %r = otc.layer_norm %x gamma %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests that rms_norm's statistics have the leading shape.
func.func @rms_norm_stats(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error@+1 {{statistics must have the shape [2, 3]}}
  %y, %r = otc.rms_norm %x {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2xf32>)
  return %y : tensor<2x3x4xf32>
}

// -----

// Tests that gelu's approximation is none or tanh.
func.func @gelu_approximate(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{approximate must be none or tanh, got 'sigmoid'}}
  %y = otc.gelu %x {approximate = "sigmoid"} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that cross_entropy's labels have the logits' leading shape.
func.func @cross_entropy_labels(%z: tensor<2x3x5xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  // expected-error@+1 {{expects logits [..., C] and labels [...] of the leading shape, got [2, 3, 5] and [6]}}
  %l, %s = otc.cross_entropy %z, %y : (tensor<2x3x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that cross_entropy_with_grad's loss matches the reduction.
func.func @cross_entropy_with_grad_reduction(%g: tensor<6xf32>, %z: tensor<6x5xf32>, %y: tensor<6xi64>) -> tensor<6x5xf32> {
  // expected-error@+1 {{loss shape does not match reduction 'none'}}
  %d, %l, %r = otc.cross_entropy_with_grad %g, %z, %y {reduction = "none"} : (tensor<6xf32>, tensor<6x5xf32>, tensor<6xi64>) -> (tensor<6x5xf32>, tensor<f32>, tensor<6xf32>)
  return %d : tensor<6x5xf32>
}

// -----

// Tests that cross_entropy_with_grad's gradient has the logits' type.
func.func @cross_entropy_with_grad_type(%g: tensor<f32>, %z: tensor<6x5xbf16>, %y: tensor<6xi64>) -> tensor<6x5xf32> {
  // expected-error@+1 {{dlogits must have the logits' type}}
  %d, %l, %r = otc.cross_entropy_with_grad %g, %z, %y : (tensor<f32>, tensor<6x5xbf16>, tensor<6xi64>) -> (tensor<6x5xf32>, tensor<f32>, tensor<6xf32>)
  return %d : tensor<6x5xf32>
}

// -----

// Tests that cross_entropy_grad's loss gradient matches the reduction.
func.func @cross_entropy_grad_reduction(%g: tensor<f32>, %z: tensor<6x5xf32>, %y: tensor<6xi64>, %s: tensor<6xf32>) -> tensor<6x5xf32> {
  // expected-error@+1 {{the loss gradient's shape does not match reduction 'none'}}
  %d = otc.cross_entropy_grad %g, %z, %y, %s {reduction = "none"} : (tensor<f32>, tensor<6x5xf32>, tensor<6xi64>, tensor<6xf32>) -> tensor<6x5xf32>
  return %d : tensor<6x5xf32>
}

// -----

// Tests that attention_grad checks its operands as attention does.
func.func @attention_grad_key(%q: tensor<1x2x4x2xf32>, %l: tensor<1x2x4xf32>) -> tensor<1x2x4x2xf32> {
  // expected-error@+1 {{dropout needs a key}}
  %dq, %dk, %dv = otc.attention_grad %q, %q, %q, %q, %q, %l {dropout = 0.1 : f64, scale = 1.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  return %dq : tensor<1x2x4x2xf32>
}

// -----

func.func @adamw_grad_f16(%p: tensor<4xf32>, %g: tensor<4xf16>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) {
  // expected-error @+1 {{grad must have the param's type, or be bf16 of its shape for f32 params, got 'tensor<4xf16>'}}
  %0:3 = otc.adamw %p, %g, %m, %v, %lr, %t, %t {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @column_sum_shape(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{result must be [8] (the input's last dimension), got 'tensor<4xf32>'}}
  %0 = otc.column_sum %x : (tensor<4x8xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @attention_layout(%q: tensor<1x2x4x2xf32>) {
  // expected-error @+1 {{layout must be "bhtd", "bthd" or "packed", got "thbd"}}
  %o, %lse = otc.attention %q, %q, %q {layout = "thbd", scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Tests that packed attention reads one value as q, k and v.
func.func @attention_packed_values(%p: tensor<1x4x6x2xf32>, %k: tensor<1x4x6x2xf32>) {
  // expected-error @+1 {{packed attention takes one value as q, k and v}}
  %o, %lse = otc.attention %p, %k, %p {layout = "packed", scale = 0.5 : f64} : (tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Tests that the heads of packed q, k and v are H + 2 Hk for the output's H:
// 6 heads cannot hold 3 query heads and two equal key and value parts.
func.func @attention_packed_heads(%p: tensor<1x4x6x2xf32>) {
  // expected-error @+1 {{packed attention expects q, k and v [B, T, H + 2 Hk, D] and an output [B, T, H, D], got [1, 4, 6, 2] and [1, 4, 3, 2]}}
  %o, %lse = otc.attention %p, %p, %p {layout = "packed", scale = 0.5 : f64} : (tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>) -> (tensor<1x4x3x2xf32>, tensor<1x3x4xf32>)
  return
}

// -----

// Tests that the key/value heads of packed attention divide its query heads:
// 3 query heads of 7 leave 2 key and 2 value heads.
func.func @attention_packed_groups(%p: tensor<1x4x7x2xf32>) {
  // expected-error @+1 {{expects k and v [B, Hk, S, D] with Hk dividing the query heads}}
  %o, %lse = otc.attention %p, %p, %p {layout = "packed", scale = 0.5 : f64} : (tensor<1x4x7x2xf32>, tensor<1x4x7x2xf32>, tensor<1x4x7x2xf32>) -> (tensor<1x4x3x2xf32>, tensor<1x3x4xf32>)
  return
}

// -----

// Tests that a packed gradient is one value typed as the packed q, k and v.
func.func @attention_grad_packed_results(%p: tensor<1x4x6x2xf32>, %o: tensor<1x4x4x2xf32>, %l: tensor<1x4x4xf32>) {
  // expected-error @+1 {{packed, the gradient is one value typed as q}}
  %dq, %dk, %dv = otc.attention_grad %o, %p, %p, %p, %o, %l {layout = "packed", scale = 0.5 : f64} : (tensor<1x4x4x2xf32>, tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>, tensor<1x4x6x2xf32>, tensor<1x4x4x2xf32>, tensor<1x4x4xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x1x2xf32>, tensor<1x4x1x2xf32>)
  return
}

// -----

// Tests that a layer norm gradient's residual must have the input's type.
func.func @layer_norm_grad_residual(%dy: tensor<2x4xf32>, %x: tensor<2x4xf32>, %m: tensor<2xf32>, %s: tensor<2xf32>, %r: tensor<2x4xbf16>) -> tensor<2x4xf32> {
  // expected-error@+1 {{residual must have the input's type}}
  %dx, %dg, %db = otc.layer_norm_grad %dy, %x, %m, %s residual %r {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x4xbf16>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx : tensor<2x4xf32>
}

// -----

// Tests that a gather gradient's grad must have the gathered shape: the
// data's dimensions around the axis with the indices' shape in its place.
func.func @gather_grad_shape(%g: tensor<2x3x8xf32>, %i: tensor<2x4xi64>) {
  // expected-error@+1 {{grad shape [2, 3, 8] should be [2, 4, 8]}}
  %0 = otc.gather_grad %g, %i {axis = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x4xi64>) -> tensor<11x8xf32>
  return
}

// -----

// Tests that a gather gradient reads int64 indices (the kernel library's).
func.func @gather_grad_indices(%g: tensor<2x3x8xf32>, %i: tensor<2x3xi32>) {
  // expected-error@+1 {{indices must be int64}}
  %0 = otc.gather_grad %g, %i {axis = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<11x8xf32>
  return
}

// -----

// Tests that a gather gradient's accumulator has the result's type (the
// call writes the result over it).
func.func @gather_grad_acc(%g: tensor<3x8xbf16>, %i: tensor<3xi64>, %a: tensor<11x8xf32>) {
  // expected-error@+1 {{acc 'tensor<11x8xf32>' must have the result's type 'tensor<11x8xbf16>'}}
  %0 = otc.gather_grad %g, %i acc %a {axis = 0 : i64} : (tensor<3x8xbf16>, tensor<3xi64>, tensor<11x8xf32>) -> tensor<11x8xbf16>
  return
}

// -----

// Tests that a column sum's accumulator has the result's type, of the
// input's element type (the library adds into a slot of the input's storage).
func.func @column_sum_acc(%x: tensor<4x8xbf16>, %a: tensor<8xf32>) {
  // expected-error@+1 {{acc must have the result's type, of the input's element type 'bf16', got 'tensor<8xf32>' for 'tensor<8xf32>'}}
  %0 = otc.column_sum %x acc %a : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that an expert weight gradient's accumulator has the result's type
// (the call writes the result over it).
func.func @expert_wgrad_acc(%dy: tensor<6x5xbf16>, %x: tensor<6x4xbf16>, %i: tensor<6xi64>, %a: tensor<3x4x5xf32>) {
  // expected-error@+1 {{acc 'tensor<3x4x5xf32>' must have the result's type 'tensor<3x4x5xbf16>'}}
  %0 = otc.expert_matmul_wgrad %dy, %x, %i acc %a : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
  return
}

// -----

// Tests that an expert product's result is FP32 or of its operands' type
// (the kernel stores FP32 sums or rounds them to the operands' BF16).
func.func @expert_matmul_result(%x: tensor<6x4xf32>, %i: tensor<6xi64>, %w: tensor<3x4x5xf32>) {
  // expected-error@+1 {{result must be f32 or the operands' type}}
  %0 = otc.expert_matmul %x, %i, %w : (tensor<6x4xf32>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<6x5xbf16>
  return
}

// -----

// Tests that a norm gradient's accumulators have their results' types.
func.func @layer_norm_grad_acc(%dy: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %m: tensor<4xf32>, %r: tensor<4xf32>, %a: tensor<8xf32>) {
  // expected-error@+1 {{dbeta_acc must have the type of the result it adds into, 'tensor<8xbf16>', got 'tensor<8xf32>'}}
  %0:3 = otc.layer_norm_grad %dy, %x, %m, %r dbeta_acc %a {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  return
}

// -----

// Tests that a gather gradient's axis lies within the result's rank.
func.func @gather_grad_axis(%g: tensor<3x8xf32>, %i: tensor<3xi64>) {
  // expected-error@+1 {{axis 2 is out of range}}
  %0 = otc.gather_grad %g, %i {axis = 2 : i64} : (tensor<3x8xf32>, tensor<3xi64>) -> tensor<11x8xf32>
  return
}

// -----

// Tests that linear_cross_entropy_with_grad's chunk is at most its rows.
func.func @linear_cross_entropy_chunk(%g: tensor<f32>, %h: tensor<6x4xf32>, %w: tensor<5x4xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  // expected-error@+1 {{chunk_rows must lie in [1, 6], got 7}}
  %dh, %dw, %l, %r, %c = otc.linear_cross_entropy_with_grad %g, %h, %w, %y {chunk_rows = 7 : i64} : (tensor<f32>, tensor<6x4xf32>, tensor<5x4xf32>, tensor<6xi64>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<f32>, tensor<6xf32>, tensor<7x5xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that linear_cross_entropy_with_grad's w is [V, C] of h's width.
func.func @linear_cross_entropy_width(%g: tensor<f32>, %h: tensor<6x4xf32>, %w: tensor<5x3xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  // expected-error@+1 {{expects h [..., C], w [V, C] ([C, V] with w_by_hidden) and labels [...] of h's leading shape}}
  %dh, %dw, %l, %r, %c = otc.linear_cross_entropy_with_grad %g, %h, %w, %y {chunk_rows = 2 : i64} : (tensor<f32>, tensor<6x4xf32>, tensor<5x3xf32>, tensor<6xi64>) -> (tensor<6x4xf32>, tensor<5x3xf32>, tensor<f32>, tensor<6xf32>, tensor<2x5xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that linear_cross_entropy_with_grad's chunk has h's element type.
func.func @linear_cross_entropy_chunk_type(%g: tensor<f32>, %h: tensor<6x4xbf16>, %w: tensor<5x4xbf16>, %y: tensor<6xi64>) -> tensor<f32> {
  // expected-error@+1 {{chunk must be [chunk_rows, V] of h's element type}}
  %dh, %dw, %l, %r, %c = otc.linear_cross_entropy_with_grad %g, %h, %w, %y {chunk_rows = 2 : i64} : (tensor<f32>, tensor<6x4xbf16>, tensor<5x4xbf16>, tensor<6xi64>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<f32>, tensor<6xf32>, tensor<2x5xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that linear_cross_entropy_with_grad's accumulator has dw's type.
func.func @linear_cross_entropy_acc_type(%g: tensor<f32>, %h: tensor<6x4xbf16>, %w: tensor<5x4xbf16>, %y: tensor<6xi64>, %acc: tensor<5x4xf32>) -> tensor<f32> {
  // expected-error@+1 {{dw_acc must have dw's type}}
  %dh, %dw, %l, %r, %c = otc.linear_cross_entropy_with_grad %g, %h, %w, %y acc %acc {chunk_rows = 2 : i64} : (tensor<f32>, tensor<6x4xbf16>, tensor<5x4xbf16>, tensor<6xi64>, tensor<5x4xf32>) -> (tensor<6x4xf32>, tensor<5x4xbf16>, tensor<f32>, tensor<6xf32>, tensor<2x5xbf16>)
  return %l : tensor<f32>
}

// -----

// Tests that k and v must have q's batch.
func.func @attention_batch(%q: tensor<2x2x4x2xf32>, %k: tensor<1x2x4x2xf32>) {
  // expected-error @+1 {{expects k and v [B, Hk, S, D] with Hk dividing the query heads, got q [2, 2, 4, 2], k [1, 2, 4, 2], v [1, 2, 4, 2]}}
  %o, %lse = otc.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<2x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<2x2x4x2xf32>, tensor<2x2x4xf32>)
  return
}

// -----

// Tests that top_k's k lies within the last dimension.
func.func @top_k_too_many(%x: tensor<3x4xf32>) -> tensor<3x5xi64> {
  // expected-error @+1 {{k = 5 must be in [1, 4] (the last dimension)}}
  %i = otc.top_k %x {k = 5 : i64} : (tensor<3x4xf32>) -> tensor<3x5xi64>
  return %i : tensor<3x5xi64>
}

// -----

// Tests that top_k's result is [..., k] indices.
func.func @top_k_shape(%x: tensor<3x4xf32>) -> tensor<3x3xi64> {
  // expected-error @+1 {{result shape [3, 3] should be [3, 2]}}
  %i = otc.top_k %x {k = 2 : i64} : (tensor<3x4xf32>) -> tensor<3x3xi64>
  return %i : tensor<3x3xi64>
}

// -----

// Tests that linear_cross_entropy_with_grad's bias is [V] of h's type.
func.func @linear_cross_entropy_bias(%g: tensor<f32>, %h: tensor<6x4xf32>, %w: tensor<5x4xf32>, %y: tensor<6xi64>, %b: tensor<4xf32>) -> tensor<f32> {
  // expected-error@+1 {{bias must be [V] of h's element type}}
  %dh, %dw, %l, %r, %c = otc.linear_cross_entropy_with_grad %g, %h, %w, %y bias %b {chunk_rows = 2 : i64} : (tensor<f32>, tensor<6x4xf32>, tensor<5x4xf32>, tensor<6xi64>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<f32>, tensor<6xf32>, tensor<2x5xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that linear_cross_entropy_with_grad's dbias is f32 [V].
func.func @linear_cross_entropy_dbias(%g: tensor<f32>, %h: tensor<6x4xbf16>, %w: tensor<5x4xbf16>, %y: tensor<6xi64>, %b: tensor<5xbf16>) -> tensor<f32> {
  // expected-error@+1 {{dbias must be f32 [V], and only with a bias}}
  %dh, %dw, %l, %r, %c, %db = otc.linear_cross_entropy_with_grad %g, %h, %w, %y bias %b {chunk_rows = 2 : i64} : (tensor<f32>, tensor<6x4xbf16>, tensor<5x4xbf16>, tensor<6xi64>, tensor<5xbf16>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<f32>, tensor<6xf32>, tensor<2x5xbf16>, tensor<5xbf16>)
  return %l : tensor<f32>
}
