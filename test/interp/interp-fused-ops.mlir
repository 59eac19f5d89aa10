// Tests the forward values of the fused ops of ir/OtcFusedOps.td and the
// cross_entropy gradient kernel: check_fused_ops.py runs each function below
// with otc-run and compares with numpy implementations of the descriptions.
// @attention and @cross_entropy also compute the same function from the
// unfused ops (softmax, dropout, matmul, softmax_cross_entropy), which must
// agree with numpy too: in particular the fused dropout must draw exactly
// the mask of an otc.dropout on the [B, H, T, S] probabilities.
// RUN: %python %otc_src/test/interp/check_fused_ops.py --otc-run otc-run --mlir %s --work %t | FileCheck %s

// CHECK: attention PASS
// CHECK: attention_causal PASS
// CHECK: layer_norm PASS
// CHECK: rms_norm PASS
// CHECK: activations PASS
// CHECK: cross_entropy PASS
// CHECK: cross_entropy_grad PASS
// CHECK: column_sum PASS
// CHECK: attention_bthd PASS
// CHECK: attention_packed PASS
// CHECK: layer_norm_grad_residual PASS
// CHECK: cross_entropy_with_grad PASS
// CHECK: 12 passed, 0 failed

// Grouped-query (4 query heads, 2 kv heads), T = 3 queries, S = 5 keys, a
// [3, 5] mask with -inf entries, dropout 0.25.
func.func @attention(%q: tensor<2x4x3x4xf32> {otc.input = "q"},
                     %k: tensor<2x2x5x4xf32> {otc.input = "k"},
                     %v: tensor<2x2x5x4xf32> {otc.input = "v"},
                     %mask: tensor<3x5xf32> {otc.input = "mask"},
                     %key: tensor<i64> {otc.input = "key"})
    -> (tensor<2x4x3x4xf32> {otc.output = "o"}, tensor<2x4x3xf32> {otc.output = "lse"},
        tensor<2x4x3x4xf32> {otc.output = "o_unfused"}) {
  %o, %lse = otc.attention %q, %k, %v mask %mask key %key {scale = 0.5 : f64, dropout = 0.25 : f64, stream = 9 : i64}
      : (tensor<2x4x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<3x5xf32>, tensor<i64>)
      -> (tensor<2x4x3x4xf32>, tensor<2x4x3xf32>)
  // The same from primitives: repeat each kv head for its two query heads.
  %k5 = otc.reshape %k : (tensor<2x2x5x4xf32>) -> tensor<2x2x1x5x4xf32>
  %kb = otc.broadcast %k5 : (tensor<2x2x1x5x4xf32>) -> tensor<2x2x2x5x4xf32>
  %kr = otc.reshape %kb : (tensor<2x2x2x5x4xf32>) -> tensor<2x4x5x4xf32>
  %v5 = otc.reshape %v : (tensor<2x2x5x4xf32>) -> tensor<2x2x1x5x4xf32>
  %vb = otc.broadcast %v5 : (tensor<2x2x1x5x4xf32>) -> tensor<2x2x2x5x4xf32>
  %vr = otc.reshape %vb : (tensor<2x2x2x5x4xf32>) -> tensor<2x4x5x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s0 = otc.matmul %q, %kr {transpose_rhs} : (tensor<2x4x3x4xf32>, tensor<2x4x5x4xf32>) -> tensor<2x4x3x5xf32>
  %s1 = otc.mul %s0, %half : (tensor<2x4x3x5xf32>, tensor<f32>) -> tensor<2x4x3x5xf32>
  %s2 = otc.add %s1, %mask : (tensor<2x4x3x5xf32>, tensor<3x5xf32>) -> tensor<2x4x3x5xf32>
  %p = otc.softmax %s2 {axis = 3 : i64} : tensor<2x4x3x5xf32>
  %pd, %dmask = otc.dropout %p, %key {ratio = 0.25 : f64, stream = 9 : i64}
      : (tensor<2x4x3x5xf32>, tensor<i64>) -> (tensor<2x4x3x5xf32>, tensor<2x4x3x5xi1>)
  %ou = otc.matmul %pd, %vr : (tensor<2x4x3x5xf32>, tensor<2x4x5x4xf32>) -> tensor<2x4x3x4xf32>
  return %o, %lse, %ou : tensor<2x4x3x4xf32>, tensor<2x4x3xf32>, tensor<2x4x3x4xf32>
}

func.func @attention_causal(%q: tensor<1x2x4x3xf32> {otc.input = "q"},
                            %k: tensor<1x2x4x3xf32> {otc.input = "k"},
                            %v: tensor<1x2x4x3xf32> {otc.input = "v"})
    -> (tensor<1x2x4x3xf32> {otc.output = "o"}, tensor<1x2x4xf32> {otc.output = "lse"}) {
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.7 : f64}
      : (tensor<1x2x4x3xf32>, tensor<1x2x4x3xf32>, tensor<1x2x4x3xf32>)
      -> (tensor<1x2x4x3xf32>, tensor<1x2x4xf32>)
  return %o, %lse : tensor<1x2x4x3xf32>, tensor<1x2x4xf32>
}

// Over the last two dims with gamma and beta, and over the last dim without.
func.func @layer_norm(%x: tensor<2x3x4xf32> {otc.input = "x"},
                      %gamma: tensor<3x4xf32> {otc.input = "gamma"},
                      %beta: tensor<3x4xf32> {otc.input = "beta"})
    -> (tensor<2x3x4xf32> {otc.output = "y"}, tensor<2xf32> {otc.output = "mean"},
        tensor<2xf32> {otc.output = "rstd"}, tensor<2x3x4xf32> {otc.output = "y2"},
        tensor<2x3xf32> {otc.output = "mean2"}, tensor<2x3xf32> {otc.output = "rstd2"}) {
  %y, %mean, %rstd = otc.layer_norm %x gamma %gamma beta %beta {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2xf32>, tensor<2xf32>)
  %y2, %mean2, %rstd2 = otc.layer_norm %x {axis = 2 : i64, epsilon = 0.1 : f64}
      : (tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %y, %mean, %rstd, %y2, %mean2, %rstd2
      : tensor<2x3x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

func.func @rms_norm(%x: tensor<2x3x4xf32> {otc.input = "x"},
                    %gamma: tensor<4xf32> {otc.input = "gamma"})
    -> (tensor<2x3x4xf32> {otc.output = "y"}, tensor<2x3xf32> {otc.output = "rstd"},
        tensor<2x3x4xf32> {otc.output = "y2"}, tensor<2xf32> {otc.output = "rstd2"}) {
  %y, %rstd = otc.rms_norm %x gamma %gamma {axis = 2 : i64, epsilon = 1.0e-06 : f64}
      : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>)
  %y2, %rstd2 = otc.rms_norm %x {axis = 1 : i64, epsilon = 0.1 : f64}
      : (tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2xf32>)
  return %y, %rstd, %y2, %rstd2 : tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3x4xf32>, tensor<2xf32>
}

func.func @activations(%x: tensor<3x5xf32> {otc.input = "x"},
                       %g: tensor<3x5xf32> {otc.input = "g"})
    -> (tensor<3x5xf32> {otc.output = "gelu"}, tensor<3x5xf32> {otc.output = "gelu_tanh"},
        tensor<3x5xf32> {otc.output = "silu"}, tensor<3x5xf32> {otc.output = "gelu_grad"},
        tensor<3x5xf32> {otc.output = "gelu_tanh_grad"}, tensor<3x5xf32> {otc.output = "silu_grad"}) {
  %0 = otc.gelu %x : tensor<3x5xf32>
  %1 = otc.gelu %x {approximate = "tanh"} : tensor<3x5xf32>
  %2 = otc.silu %x : tensor<3x5xf32>
  %3 = otc.gelu_grad %g, %x : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %4 = otc.gelu_grad %g, %x {approximate = "tanh"} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %5 = otc.silu_grad %g, %x : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
}

// Rank-3 logits; the mean ignores label 1, the unfused mean runs
// softmax_cross_entropy on the [6, 5] reshape.
func.func @cross_entropy(%z: tensor<2x3x5xf32> {otc.input = "z"},
                         %labels: tensor<2x3xi64> {otc.input = "labels"})
    -> (tensor<f32> {otc.output = "mean"}, tensor<2x3xf32> {otc.output = "lse"},
        tensor<f32> {otc.output = "sum"}, tensor<2x3xf32> {otc.output = "none"},
        tensor<f32> {otc.output = "mean_unfused"}) {
  %mean, %lse = otc.cross_entropy %z, %labels {ignore_index = 1 : i64}
      : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  %sum, %lse1 = otc.cross_entropy %z, %labels {reduction = "sum"}
      : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  %none, %lse2 = otc.cross_entropy %z, %labels {reduction = "none", ignore_index = 1 : i64}
      : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  %z2 = otc.reshape %z : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
  %l2 = otc.reshape %labels : (tensor<2x3xi64>) -> tensor<6xi64>
  %ref = otc.softmax_cross_entropy %z2, %l2 {ignore_index = 1 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %mean, %lse, %sum, %none, %ref : tensor<f32>, tensor<2x3xf32>, tensor<f32>, tensor<2x3xf32>, tensor<f32>
}

// The gradient kernel on a given lse (not recomputed from the logits).
func.func @cross_entropy_grad(%g: tensor<f32> {otc.input = "g"},
                              %gn: tensor<2x3xf32> {otc.input = "gn"},
                              %z: tensor<2x3x5xf32> {otc.input = "z"},
                              %labels: tensor<2x3xi64> {otc.input = "labels"},
                              %lse: tensor<2x3xf32> {otc.input = "lse"})
    -> (tensor<2x3x5xf32> {otc.output = "mean"}, tensor<2x3x5xf32> {otc.output = "sum"},
        tensor<2x3x5xf32> {otc.output = "none"}) {
  %0 = otc.cross_entropy_grad %g, %z, %labels, %lse {ignore_index = 1 : i64}
      : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
  %1 = otc.cross_entropy_grad %g, %z, %labels, %lse {reduction = "sum"}
      : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
  %2 = otc.cross_entropy_grad %gn, %z, %labels, %lse {reduction = "none", ignore_index = 1 : i64}
      : (tensor<2x3xf32>, tensor<2x3x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
  return %0, %1, %2 : tensor<2x3x5xf32>, tensor<2x3x5xf32>, tensor<2x3x5xf32>
}

// The loss and its gradient in one op (otc-fuse-loss-grad's): mean with
// ignored rows, sum, and none.
func.func @cross_entropy_with_grad(%g: tensor<f32> {otc.input = "g"},
                                   %gn: tensor<2x3xf32> {otc.input = "gn"},
                                   %z: tensor<2x3x5xf32> {otc.input = "z"},
                                   %labels: tensor<2x3xi64> {otc.input = "labels"})
    -> (tensor<2x3x5xf32> {otc.output = "dmean"}, tensor<f32> {otc.output = "mean"},
        tensor<2x3xf32> {otc.output = "rows"}, tensor<2x3x5xf32> {otc.output = "dsum"},
        tensor<f32> {otc.output = "sum"}, tensor<2x3x5xf32> {otc.output = "dnone"},
        tensor<2x3xf32> {otc.output = "none"}) {
  %d0, %l0, %r0 = otc.cross_entropy_with_grad %g, %z, %labels {ignore_index = 1 : i64}
      : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<2x3x5xf32>, tensor<f32>, tensor<2x3xf32>)
  %d1, %l1, %r1 = otc.cross_entropy_with_grad %g, %z, %labels {reduction = "sum"}
      : (tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<2x3x5xf32>, tensor<f32>, tensor<2x3xf32>)
  %d2, %l2, %r2 = otc.cross_entropy_with_grad %gn, %z, %labels {reduction = "none", ignore_index = 1 : i64}
      : (tensor<2x3xf32>, tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<2x3x5xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %d0, %l0, %r0, %d1, %l1, %d2, %l2 : tensor<2x3x5xf32>, tensor<f32>, tensor<2x3xf32>, tensor<2x3x5xf32>, tensor<f32>, tensor<2x3x5xf32>, tensor<2x3xf32>
}

// Column sums of [3, 2, 5] into [5], from f32 and from bf16 storage.
func.func @column_sum(%x: tensor<3x2x5xf32> {otc.input = "x"},
                      %y: tensor<3x2x5xbf16> {otc.input = "y"},
                      %slot: tensor<5xf32> {otc.input = "slot"})
    -> (tensor<5xf32> {otc.output = "sum"}, tensor<5xf32> {otc.output = "sum_bf16"},
        tensor<5xf32> {otc.output = "sum_into"}) {
  %s = otc.column_sum %x : (tensor<3x2x5xf32>) -> tensor<5xf32>
  %t = otc.column_sum %y : (tensor<3x2x5xbf16>) -> tensor<5xf32>
  %u = otc.column_sum %x acc %slot : (tensor<3x2x5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %s, %t, %u : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}

// Layout "bthd": q [1, 5, 4, 3] (B, T, H, D), k and v [1, 5, 2, 3]
// (grouped-query), causal; the output [1, 5, 4, 3], lse still [1, 4, 5].
func.func @attention_bthd(%q: tensor<1x5x4x3xf32> {otc.input = "q"},
                          %k: tensor<1x5x2x3xf32> {otc.input = "k"},
                          %v: tensor<1x5x2x3xf32> {otc.input = "v"})
    -> (tensor<1x5x4x3xf32> {otc.output = "o"}, tensor<1x4x5xf32> {otc.output = "lse"}) {
  %o, %lse = otc.attention %q, %k, %v {causal, layout = "bthd", scale = 0.7 : f64}
      : (tensor<1x5x4x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>)
      -> (tensor<1x5x4x3xf32>, tensor<1x4x5xf32>)
  return %o, %lse : tensor<1x5x4x3xf32>, tensor<1x4x5xf32>
}

// Layout "packed": one [1, 5, 8, 3] tensor holds q (heads 0-3), k (4-5) and
// v (6-7); causal. The packed gradient, and the same from three slices
// through layout "bthd" and a concatenation: both equal to numpy's dq, dk,
// dv side by side.
func.func @attention_packed(%qkv: tensor<1x5x8x3xf32> {otc.input = "qkv"},
                            %do: tensor<1x5x4x3xf32> {otc.input = "do"})
    -> (tensor<1x5x4x3xf32> {otc.output = "o"}, tensor<1x4x5xf32> {otc.output = "lse"},
        tensor<1x5x8x3xf32> {otc.output = "d"}, tensor<1x5x8x3xf32> {otc.output = "d_bthd"}) {
  %o, %lse = otc.attention %qkv, %qkv, %qkv {causal, layout = "packed", scale = 0.7 : f64}
      : (tensor<1x5x8x3xf32>, tensor<1x5x8x3xf32>, tensor<1x5x8x3xf32>)
      -> (tensor<1x5x4x3xf32>, tensor<1x4x5xf32>)
  %d = otc.attention_grad %do, %qkv, %qkv, %qkv, %o, %lse {causal, layout = "packed", scale = 0.7 : f64}
      : (tensor<1x5x4x3xf32>, tensor<1x5x8x3xf32>, tensor<1x5x8x3xf32>, tensor<1x5x8x3xf32>, tensor<1x5x4x3xf32>, tensor<1x4x5xf32>)
      -> tensor<1x5x8x3xf32>
  %q = otc.slice %qkv, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x5x8x3xf32>) -> tensor<1x5x4x3xf32>
  %k = otc.slice %qkv, [0, 0, 4, 0], [1, 1, 1, 1] : (tensor<1x5x8x3xf32>) -> tensor<1x5x2x3xf32>
  %v = otc.slice %qkv, [0, 0, 6, 0], [1, 1, 1, 1] : (tensor<1x5x8x3xf32>) -> tensor<1x5x2x3xf32>
  %dq, %dk, %dv = otc.attention_grad %do, %q, %k, %v, %o, %lse {causal, layout = "bthd", scale = 0.7 : f64}
      : (tensor<1x5x4x3xf32>, tensor<1x5x4x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x4x3xf32>, tensor<1x4x5xf32>)
      -> (tensor<1x5x4x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>)
  %db = otc.concat %dq, %dk, %dv {axis = 2 : i64} : (tensor<1x5x4x3xf32>, tensor<1x5x2x3xf32>, tensor<1x5x2x3xf32>) -> tensor<1x5x8x3xf32>
  return %o, %lse, %d, %db : tensor<1x5x4x3xf32>, tensor<1x4x5xf32>, tensor<1x5x8x3xf32>, tensor<1x5x8x3xf32>
}

// The layer norm gradient with a residual added to dx, and the same as
// layer_norm_grad then otc.add: both equal to numpy's dx + r; RMS norm's
// with a residual too.
func.func @layer_norm_grad_residual(%x: tensor<3x5xf32> {otc.input = "x"},
                                    %gamma: tensor<5xf32> {otc.input = "gamma"},
                                    %dy: tensor<3x5xf32> {otc.input = "dy"},
                                    %r: tensor<3x5xf32> {otc.input = "r"},
                                    %sg: tensor<5xf32> {otc.input = "sg"},
                                    %sb: tensor<5xf32> {otc.input = "sb"})
    -> (tensor<3x5xf32> {otc.output = "fused"}, tensor<3x5xf32> {otc.output = "unfused"},
        tensor<5xf32> {otc.output = "dgamma"}, tensor<5xf32> {otc.output = "dgamma_into"},
        tensor<5xf32> {otc.output = "dbeta_into"}, tensor<5xf32> {otc.output = "rms_dgamma_into"},
        tensor<3x5xf32> {otc.output = "rms_residual"}) {
  %y, %mean, %rstd = otc.layer_norm %x gamma %gamma {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<3x5xf32>, tensor<5xf32>) -> (tensor<3x5xf32>, tensor<3xf32>, tensor<3xf32>)
  %dx, %dg, %db = otc.layer_norm_grad %dy, %x gamma %gamma, %mean, %rstd residual %r {axis = 1 : i64}
      : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3x5xf32>)
      -> (tensor<3x5xf32>, tensor<5xf32>, tensor<5xf32>)
  %dx2, %dg2, %db2 = otc.layer_norm_grad %dy, %x gamma %gamma, %mean, %rstd {axis = 1 : i64}
      : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<3xf32>)
      -> (tensor<3x5xf32>, tensor<5xf32>, tensor<5xf32>)
  %sum = otc.add %dx2, %r : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  // dgamma and dbeta added into slots; RMS norm's dgamma too.
  %dx3, %dg3, %db3 = otc.layer_norm_grad %dy, %x gamma %gamma, %mean, %rstd dgamma_acc %sg dbeta_acc %sb {axis = 1 : i64}
      : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<3xf32>, tensor<5xf32>, tensor<5xf32>)
      -> (tensor<3x5xf32>, tensor<5xf32>, tensor<5xf32>)
  %ry, %rrstd = otc.rms_norm %x gamma %gamma {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<3x5xf32>, tensor<5xf32>) -> (tensor<3x5xf32>, tensor<3xf32>)
  %rdx, %rdg = otc.rms_norm_grad %dy, %x gamma %gamma, %rrstd dgamma_acc %sg {axis = 1 : i64}
      : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<5xf32>)
      -> (tensor<3x5xf32>, tensor<5xf32>)
  // RMS norm's dx with the residual added.
  %rrdx, %rrdg = otc.rms_norm_grad %dy, %x gamma %gamma, %rrstd residual %r {axis = 1 : i64}
      : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3xf32>, tensor<3x5xf32>)
      -> (tensor<3x5xf32>, tensor<5xf32>)
  return %dx, %sum, %dg, %dg3, %db3, %rdg, %rrdx : tensor<3x5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<3x5xf32>
}
