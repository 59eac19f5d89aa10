// RUN: otc-opt %s --split-input-file | otc-opt --split-input-file | FileCheck %s

// Tests that elementwise ops with broadcasting round-trip.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<4x5xf32> {
  // CHECK: %[[S:.*]] = otc.add %{{.*}}, %{{.*}} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %0 = otc.add %a, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: otc.sub %[[S]]
  %1 = otc.sub %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: otc.mul
  %2 = otc.mul %1, %a : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  // CHECK: otc.div
  %3 = otc.div %2, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: otc.neg {{.*}} : tensor<4x5xf32>
  %4 = otc.neg %3 : tensor<4x5xf32>
  // CHECK: otc.exp
  %5 = otc.exp %4 : tensor<4x5xf32>
  // CHECK: otc.log
  %6 = otc.log %5 : tensor<4x5xf32>
  // CHECK: otc.tanh
  %7 = otc.tanh %6 : tensor<4x5xf32>
  // CHECK: otc.relu
  %8 = otc.relu %7 : tensor<4x5xf32>
  return %8 : tensor<4x5xf32>
}

// -----

// Tests that matmul keeps its transpose flags and data movement ops their attributes.
// CHECK-LABEL: func.func @linalg
func.func @linalg(%x: tensor<2x4x3xf32>, %w: tensor<5x3xf32>) -> tensor<5x2x4xf32> {
  // CHECK: otc.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x3xf32>, tensor<5x3xf32>) -> tensor<2x4x5xf32>
  %0 = otc.matmul %x, %w {transpose_rhs} : (tensor<2x4x3xf32>, tensor<5x3xf32>) -> tensor<2x4x5xf32>
  // CHECK: otc.transpose %{{.*}}, [2, 0, 1]
  %1 = otc.transpose %0, [2, 0, 1] : (tensor<2x4x5xf32>) -> tensor<5x2x4xf32>
  // CHECK: otc.reshape {{.*}} -> tensor<40xf32>
  %2 = otc.reshape %1 : (tensor<5x2x4xf32>) -> tensor<40xf32>
  // CHECK: otc.reduce_sum %{{.*}}, [0] {keep_dims}
  %3 = otc.reduce_sum %2, [0] {keep_dims} : (tensor<40xf32>) -> tensor<1xf32>
  // CHECK: otc.broadcast {{.*}} -> tensor<5x2x4xf32>
  %4 = otc.broadcast %3 : (tensor<1xf32>) -> tensor<5x2x4xf32>
  return %4 : tensor<5x2x4xf32>
}

// -----

// Tests the loss, dropout, gradient-kernel and optimizer ops.
// CHECK-LABEL: func.func @training_ops
func.func @training_ops(%z: tensor<4x10xf32>, %y: tensor<4xi64>, %k: tensor<i64>,
                        %p: tensor<3xf32>, %lr: tensor<f32>) -> tensor<f32> {
  // CHECK: otc.constant dense<1.000000e+00> : tensor<f32>
  %one = otc.constant dense<1.0> : tensor<f32>
  // CHECK: otc.dropout %{{.*}}, %{{.*}} {ratio = 1.000000e-01 : f64, stream = 0 : i64}
  %d, %m = otc.dropout %z, %k {ratio = 0.1 : f64, stream = 0 : i64} : (tensor<4x10xf32>, tensor<i64>) -> (tensor<4x10xf32>, tensor<4x10xi1>)
  // CHECK: otc.dropout_grad
  %dg = otc.dropout_grad %d, %m {ratio = 0.1 : f64} : (tensor<4x10xf32>, tensor<4x10xi1>) -> tensor<4x10xf32>
  // CHECK: otc.softmax_cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64}
  %l = otc.softmax_cross_entropy %dg, %y {ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  // CHECK: otc.softmax_cross_entropy_grad
  %g = otc.softmax_cross_entropy_grad %one, %z, %y : (tensor<f32>, tensor<4x10xf32>, tensor<4xi64>) -> tensor<4x10xf32>
  // CHECK: otc.relu_grad
  %r = otc.relu_grad %g, %z : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK: otc.tanh_grad
  %t = otc.tanh_grad %r, %z : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
  // CHECK: otc.adamw {{.*}} {beta1 = 9.000000e-01 : f64
  %np, %nm, %nv = otc.adamw %p, %p, %p, %p, %lr, %lr, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %l : tensor<f32>
}

// -----

// Tests that the fused ops and their gradient ops round-trip with their
// optional operands (mask, key, gamma, beta) and attributes.
// CHECK-LABEL: func.func @fused
func.func @fused(%q: tensor<2x4x8x4xf32>, %kv: tensor<2x2x8x4xf32>, %m: tensor<8x8xf32>, %key: tensor<i64>,
                 %x: tensor<2x8x6xf32>, %g: tensor<6xf32>, %z: tensor<2x8x5xf32>, %y: tensor<2x8xi64>, %one: tensor<f32>) -> tensor<f32> {
  // CHECK: %[[O:.*]], %[[L:.*]] = otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} key %{{.*}} {causal, dropout = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64}
  %o, %lse = otc.attention %q, %kv, %kv mask %m key %key {causal, dropout = 0.1 : f64, scale = 0.5 : f64, stream = 2 : i64} : (tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<8x8xf32>, tensor<i64>) -> (tensor<2x4x8x4xf32>, tensor<2x4x8xf32>)
  // CHECK: otc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[L]] key
  %dq, %dk, %dv = otc.attention_grad %o, %q, %kv, %kv, %o, %lse key %key {causal, dropout = 0.1 : f64, scale = 0.5 : f64, stream = 2 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8xf32>, tensor<i64>) -> (tensor<2x4x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
  // Packed: one [B, T, H + 2 Hk, D] value as q, k and v (4 query heads, 2
  // key and 2 value heads), one gradient.
  // CHECK: %[[PO:.*]], %[[PL:.*]] = otc.attention %[[P:.*]], %[[P]], %[[P]] {causal, layout = "packed", scale = 5.000000e-01 : f64}
  %pqkv = otc.reshape %q : (tensor<2x4x8x4xf32>) -> tensor<2x8x4x4xf32>
  %pkv = otc.concat %pqkv, %pqkv {axis = 2 : i64} : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x8x4xf32>
  %po, %plse = otc.attention %pkv, %pkv, %pkv {causal, layout = "packed", scale = 0.5 : f64} : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x4x8xf32>)
  // CHECK: otc.attention_grad %[[PO]], %[[P]], %[[P]], %[[P]], %[[PO]], %[[PL]] {causal, layout = "packed", scale = 5.000000e-01 : f64} : {{.*}} -> tensor<2x8x8x4xf32>
  %pd = otc.attention_grad %po, %pkv, %pkv, %pkv, %po, %plse {causal, layout = "packed", scale = 0.5 : f64} : (tensor<2x8x4x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x8x8x4xf32>
  // CHECK: otc.layer_norm %{{.*}} gamma %{{.*}} beta %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %ln, %mean, %rstd = otc.layer_norm %x gamma %g beta %g {axis = 2 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8x6xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<2x8x6xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK: otc.layer_norm %{{.*}} {axis = 1 : i64
  %ln2, %mean2, %rstd2 = otc.layer_norm %x {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8x6xf32>) -> (tensor<2x8x6xf32>, tensor<2xf32>, tensor<2xf32>)
  // CHECK: otc.layer_norm_grad
  %dx, %dg, %db = otc.layer_norm_grad %ln, %x gamma %g, %mean, %rstd {axis = 2 : i64} : (tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<6xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8x6xf32>, tensor<6xf32>, tensor<6xf32>)
  // CHECK: otc.rms_norm %{{.*}} gamma
  %rn, %rr = otc.rms_norm %x gamma %g {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x8x6xf32>, tensor<6xf32>) -> (tensor<2x8x6xf32>, tensor<2x8xf32>)
  // CHECK: otc.rms_norm_grad
  %rdx, %rdg = otc.rms_norm_grad %rn, %x gamma %g, %rr {axis = 2 : i64} : (tensor<2x8x6xf32>, tensor<2x8x6xf32>, tensor<6xf32>, tensor<2x8xf32>) -> (tensor<2x8x6xf32>, tensor<6xf32>)
  // CHECK: otc.gelu %{{.*}} {approximate = "tanh"}
  %ge = otc.gelu %x {approximate = "tanh"} : tensor<2x8x6xf32>
  // CHECK: otc.gelu_grad
  %gg = otc.gelu_grad %ge, %x {approximate = "tanh"} : (tensor<2x8x6xf32>, tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  // CHECK: otc.silu
  %si = otc.silu %x : tensor<2x8x6xf32>
  // CHECK: otc.silu_grad
  %sg = otc.silu_grad %si, %x : (tensor<2x8x6xf32>, tensor<2x8x6xf32>) -> tensor<2x8x6xf32>
  // CHECK: %[[LOSS:.*]], %[[LSE:.*]] = otc.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64}
  %loss, %zl = otc.cross_entropy %z, %y {ignore_index = -1 : i64} : (tensor<2x8x5xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  // CHECK: otc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[LSE]]
  %dz = otc.cross_entropy_grad %one, %z, %y, %zl {ignore_index = -1 : i64} : (tensor<f32>, tensor<2x8x5xf32>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x5xf32>
  return %loss : tensor<f32>
}

// -----

// Tests that a gather gradient round-trips with and without its accumulator.
// CHECK-LABEL: func.func @gather_grad
func.func @gather_grad(%g: tensor<2x3x8xbf16>, %i: tensor<2x3xi64>, %a: tensor<11x8xbf16>) -> (tensor<11x8xbf16>, tensor<11x8xbf16>) {
  // CHECK: otc.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<2x3x8xbf16>, tensor<2x3xi64>) -> tensor<11x8xbf16>
  %0 = otc.gather_grad %g, %i {axis = 0 : i64} : (tensor<2x3x8xbf16>, tensor<2x3xi64>) -> tensor<11x8xbf16>
  // CHECK: otc.gather_grad %{{.*}}, %{{.*}} acc %{{.*}} {axis = 0 : i64} : (tensor<2x3x8xbf16>, tensor<2x3xi64>, tensor<11x8xbf16>) -> tensor<11x8xbf16>
  %1 = otc.gather_grad %g, %i acc %a {axis = 0 : i64} : (tensor<2x3x8xbf16>, tensor<2x3xi64>, tensor<11x8xbf16>) -> tensor<11x8xbf16>
  return %0, %1 : tensor<11x8xbf16>, tensor<11x8xbf16>
}

// -----

// Tests that the norm gradients and the column sum round-trip with their
// accumulators.
// CHECK-LABEL: func.func @accumulators
func.func @accumulators(%dy: tensor<4x8xbf16>, %x: tensor<4x8xbf16>, %g: tensor<8xbf16>, %m: tensor<4xf32>,
                        %r: tensor<4xf32>, %a: tensor<8xbf16>, %b: tensor<8xbf16>) -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) {
  // CHECK: otc.layer_norm_grad %{{.*}}, %{{.*}} gamma %{{.*}}, %{{.*}}, %{{.*}} dgamma_acc %{{.*}} dbeta_acc %{{.*}} {axis = 1 : i64}
  %0:3 = otc.layer_norm_grad %dy, %x gamma %g, %m, %r dgamma_acc %a dbeta_acc %b {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
  // CHECK: otc.rms_norm_grad %{{.*}}, %{{.*}} gamma %{{.*}}, %{{.*}} dgamma_acc %{{.*}} {axis = 1 : i64}
  %1:2 = otc.rms_norm_grad %dy, %x gamma %g, %r dgamma_acc %a {axis = 1 : i64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>, tensor<4xf32>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  // CHECK: otc.column_sum %{{.*}} acc %{{.*}} : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  %2 = otc.column_sum %dy acc %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  return %0#1, %1#1, %2 : tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>
}
