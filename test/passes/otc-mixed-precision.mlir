// RUN: otc-opt %s --split-input-file --otc-configure=precision=bf16 --otc-mixed-precision | FileCheck %s
// RUN: otc-opt %s --split-input-file "--otc-configure=precision=bf16 fp32-grad-accum=true" --otc-mixed-precision | FileCheck %s --check-prefix=ACC
// RUN: otc-opt %s --split-input-file --otc-configure=precision=bf16 --otc-mixed-precision=fp32-ops=otc.tanh | FileCheck %s --check-prefix=FORCED

// Tests that parameters become BF16 working copies, that a matmul reads BF16
// and accumulates in FP32 with an explicit rounding cast, that an elementwise
// op on BF16 stays BF16 (its constant rebuilt in BF16), that a reduction runs
// in FP32, and that the loss is FP32 and the gradient BF16 (FP32 with
// fp32-grad-accum).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:.*]]: tensor<4x8xf32> {otc.input = "x"}
// CHECK-SAME: %[[W:.*]]: tensor<2x8xbf16> {otc.bf16_copy, otc.param = "w"}
// CHECK-SAME: -> (tensor<f32> {otc.loss}, tensor<2x8xbf16> {otc.grad = "w"})
// CHECK: %[[XB:.*]] = otc.cast %[[X]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: %[[Y:.*]] = otc.matmul %[[XB]], %[[W]] {transpose_rhs} : (tensor<4x8xbf16>, tensor<2x8xbf16>) -> tensor<4x2xf32>
// CHECK: %[[YB:.*]] = otc.cast %[[Y]] : (tensor<4x2xf32>) -> tensor<4x2xbf16>
// CHECK: %[[T:.*]] = otc.tanh %[[YB]] : tensor<4x2xbf16>
// CHECK: %[[C:.*]] = otc.constant dense<2.000000e+00> : tensor<bf16>
// CHECK: %[[M:.*]] = otc.mul %[[T]], %[[C]] : (tensor<4x2xbf16>, tensor<bf16>) -> tensor<4x2xbf16>
// CHECK: %[[MF:.*]] = otc.cast %[[M]] : (tensor<4x2xbf16>) -> tensor<4x2xf32>
// CHECK: %[[S:.*]] = otc.reduce_sum %[[MF]], [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
// CHECK: %[[G:.*]] = otc.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<4x2xbf16>, tensor<4x8xbf16>) -> tensor<2x8xf32>
// CHECK: %[[GB:.*]] = otc.cast %[[G]] : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: return %[[S]], %[[GB]] : tensor<f32>, tensor<2x8xbf16>
// ACC-LABEL: func.func @train_step
// ACC-SAME: -> (tensor<f32> {otc.loss}, tensor<2x8xf32> {otc.grad = "w"})
// ACC: %[[G:.*]] = otc.matmul {{.*}} -> tensor<2x8xf32>
// ACC-NEXT: return %{{.*}}, %[[G]] : tensor<f32>, tensor<2x8xf32>
// FORCED-LABEL: func.func @train_step
// FORCED: %[[YB:.*]] = otc.cast %{{.*}} : (tensor<4x2xf32>) -> tensor<4x2xbf16>
// FORCED: %[[YF:.*]] = otc.cast %[[YB]] : (tensor<4x2xbf16>) -> tensor<4x2xf32>
// FORCED: %[[T:.*]] = otc.tanh %[[YF]] : tensor<4x2xf32>
// FORCED: otc.mul %[[T]], %{{.*}} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
func.func @train_step(%x: tensor<4x8xf32> {otc.input = "x"}, %w: tensor<2x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x8xf32> {otc.grad = "w"}) {
  %y = otc.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  %t = otc.tanh %y : tensor<4x2xf32>
  %c = otc.constant dense<2.0> : tensor<f32>
  %m = otc.mul %t, %c : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %s = otc.reduce_sum %m, [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
  %g = otc.matmul %m, %x {transpose_lhs} : (tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %s, %g : tensor<f32>, tensor<2x8xf32>
}

// -----

// Tests that an op carrying otc.keep_fp32 stays FP32 (its BF16 operand
// widened), that an elementwise op with an FP32 operand computes in FP32
// (the widest precision wins), and that softmax and exp always run in FP32.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:.*]]: tensor<4xbf16> {otc.bf16_copy, otc.param = "w"}
// CHECK: %[[WF:.*]] = otc.cast %[[W]] : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: %[[K:.*]] = otc.neg %[[WF]] {otc.keep_fp32} : tensor<4xf32>
// CHECK: %[[A:.*]] = otc.add %[[K]], %[[W2:.*]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[WB:.*]] = otc.cast %[[W]] : (tensor<4xbf16>) -> tensor<4xf32>
// CHECK: otc.softmax %[[WB]] {axis = 0 : i64} : tensor<4xf32>
// CHECK: otc.exp %{{.*}} : tensor<4xf32>
// CHECK: otc.relu %{{.*}} : tensor<4xbf16>
func.func @train_step(%w: tensor<4xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<4xf32> {otc.grad = "w"}) {
  %k = otc.neg %w {otc.keep_fp32} : tensor<4xf32>
  %a = otc.add %k, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %p = otc.softmax %w {axis = 0 : i64} : tensor<4xf32>
  %e = otc.exp %a : tensor<4xf32>
  %r = otc.relu %w : tensor<4xf32>
  %q = otc.add %p, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = otc.reduce_sum %q, [0] : (tensor<4xf32>) -> tensor<f32>
  return %s, %r : tensor<f32>, tensor<4xf32>
}

// -----

// Tests that the fused ops keep their FP32 statistics: otc.layer_norm over
// BF16 data computes in BF16 but leaves mean and rstd FP32, and
// otc.layer_norm_grad reads them as FP32 while its data and results are BF16
// (the ops say so through Fp32StatisticsOpInterface).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:.*]]: tensor<2x8xbf16> {otc.bf16_copy, otc.param = "w"}
// CHECK-SAME: %[[G:.*]]: tensor<8xbf16> {otc.bf16_copy, otc.param = "g"}
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = otc.layer_norm %[[W]] gamma %[[G]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2xf32>, tensor<2xf32>)
// CHECK: otc.layer_norm_grad %[[Y]], %[[W]] gamma %[[G]], %[[MEAN]], %[[RSTD]] {axis = 1 : i64} : (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8xbf16>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>)
func.func @train_step(%w: tensor<2x8xf32> {otc.param = "w"}, %g: tensor<8xf32> {otc.param = "g"})
    -> (tensor<f32> {otc.loss}, tensor<2x8xf32> {otc.grad = "w"}, tensor<8xf32> {otc.grad = "g"}) {
  %y, %mean, %rstd = otc.layer_norm %w gamma %g {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  %s = otc.reduce_sum %y, [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
  %dx, %dg, %db = otc.layer_norm_grad %y, %w gamma %g, %mean, %rstd {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %s, %dx, %dg : tensor<f32>, tensor<2x8xf32>, tensor<8xf32>
}

// -----

// Tests that an attention's FP32 mask does not keep it in FP32: q, k and v
// from BF16 products make it BF16, and the mask, computed in FP32 from an
// input (Hugging Face's padding mask: (1 - m) times FP32's lowest), is
// rounded to BF16 once for the forward and the gradient, with values past
// BF16's largest finite magnitude held there, -inf included (a plain
// rounding would make -3.4028e38 -inf); a constant mask is rebuilt in BF16
// the same way.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[LO:.*]] = otc.constant dense<-3.38953139E+38> : tensor<f32>
// CHECK-NEXT: %[[BELOW:.*]] = otc.compare "lt", %[[MASK:.*]], %[[LO]]
// CHECK-NEXT: %[[HELD:.*]] = otc.select %[[BELOW]], %[[LO]], %[[MASK]]
// CHECK-NEXT: %[[HI:.*]] = otc.constant dense<3.38953139E+38> : tensor<f32>
// CHECK-NEXT: %[[ABOVE:.*]] = otc.compare "gt", %[[HELD]], %[[HI]]
// CHECK-NEXT: %[[HELD2:.*]] = otc.select %[[ABOVE]], %[[HI]], %[[HELD]]
// CHECK-NEXT: %[[MB:.*]] = otc.cast %[[HELD2]] : (tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xbf16>
// CHECK: %[[O:.*]], %[[L:.*]] = otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[MB]] {{.*}} -> (tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>)
// CHECK: otc.attention_grad {{.*}} mask %[[MB]]
// CHECK: %[[CM:.*]] = otc.constant dense<{{\[\[\[\[}}0.000000e+00, -3.389530e+38, -3.389530e+38, -1.000000e+00]]]]> : tensor<1x1x1x4xbf16>
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[CM]]
func.func @train_step(%x: tensor<1x2x4x2xf32> {otc.input = "x"}, %m: tensor<1x1x1x4xf32> {otc.input = "m"},
                      %w: tensor<2x2xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x2xf32> {otc.grad = "w"}) {
  %one = otc.constant dense<1.0> : tensor<f32>
  %lowest = otc.constant dense<-3.40282347e+38> : tensor<f32>
  %keep = otc.sub %one, %m : (tensor<f32>, tensor<1x1x1x4xf32>) -> tensor<1x1x1x4xf32>
  %mask = otc.mul %keep, %lowest : (tensor<1x1x1x4xf32>, tensor<f32>) -> tensor<1x1x1x4xf32>
  %q = otc.matmul %x, %w : (tensor<1x2x4x2xf32>, tensor<2x2xf32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %q, %q mask %mask {scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x1x1x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %dq, %dk, %dv = otc.attention_grad %o, %q, %q, %q, %o, %lse mask %mask {scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4xf32>, tensor<1x1x1x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  %cmask = otc.constant dense<[[[[0.0, -3.40282347e+38, 0xFF800000, -1.0]]]]> : tensor<1x1x1x4xf32>
  %o2, %lse2 = otc.attention %q, %q, %q mask %cmask {scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x1x1x4xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %s = otc.reduce_sum %o, [0, 1, 2, 3] : (tensor<1x2x4x2xf32>) -> tensor<f32>
  %s2 = otc.reduce_sum %o2, [0, 1, 2, 3] : (tensor<1x2x4x2xf32>) -> tensor<f32>
  %l = otc.add %s, %s2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = otc.reduce_sum %dq, [0, 1, 2] : (tensor<1x2x4x2xf32>) -> tensor<2xf32>
  %g2 = otc.reshape %g : (tensor<2xf32>) -> tensor<1x2xf32>
  %gw = otc.broadcast %g2 : (tensor<1x2xf32>) -> tensor<2x2xf32>
  return %l, %gw : tensor<f32>, tensor<2x2xf32>
}

// -----

// Tests that values made of constants alone (a rotary table too large to
// fold: positions x frequencies as a matmul, then cos) are computed in FP32,
// matmul included, as the import folds them, and that a BF16 reader takes
// them rounded to BF16, as it takes a constant.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = otc.matmul %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: otc.cast %[[A]]
// CHECK: %[[C:.*]] = otc.cos %[[A]] : tensor<4x8xf32>
// CHECK: %[[CB:.*]] = otc.cast %[[C]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: otc.mul %{{.*}}, %[[CB]] : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
func.func @train_step(%q: tensor<4x8xf32> {otc.input = "q"}, %w: tensor<8x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<8x8xf32> {otc.grad = "w"}) {
  %pos = otc.constant dense<[[0.0], [1.0], [2.0], [1000.0]]> : tensor<4x1xf32>
  %freq = otc.constant dense<[[1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125]]> : tensor<1x8xf32>
  %a = otc.matmul %pos, %freq : (tensor<4x1xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %c = otc.cos %a : tensor<4x8xf32>
  %y = otc.matmul %q, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = otc.mul %y, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = otc.reduce_sum %r, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<8x8xf32>
}

// -----

// Tests that a constant buffer (a rotary table's angles the exporter folded)
// stays FP32, with what is computed from it alone (cos), and that a BF16
// reader takes it rounded as it takes a constant.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[A:arg[0-9]+]]: tensor<4x8xf32> {otc.buffer, otc.param = "angles"}
// CHECK: %[[C:.*]] = otc.cos %[[A]] : tensor<4x8xf32>
// CHECK: %[[CB:.*]] = otc.cast %[[C]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK: otc.mul %{{.*}}, %[[CB]] : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
func.func @train_step(%q: tensor<4x8xf32> {otc.input = "q"}, %w: tensor<8x8xf32> {otc.param = "w"},
                      %a: tensor<4x8xf32> {otc.param = "angles", otc.buffer})
    -> (tensor<f32> {otc.loss}, tensor<8x8xf32> {otc.grad = "w"}) {
  %c = otc.cos %a : tensor<4x8xf32>
  %y = otc.matmul %q, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = otc.mul %y, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = otc.reduce_sum %r, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %s, %w : tensor<f32>, tensor<8x8xf32>
}

// -----

// Tests a gather's gradient. The gradient of an activation (a pooled row's
// gradient scattered back over the sequence, then read by an elementwise op,
// as CLIP's text tower's final norm reads it) sums in FP32 and is rounded to
// BF16, so its reader stays BF16. A parameter's (the embedding's, added to
// the tied head's gradient) stays FP32 up to the returned gradient, and is
// returned unrounded with fp32-grad-accum.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DY:.*]] = otc.cast %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: %[[W:.*]] = otc.cast %[[DY]] : (tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK: %[[A:.*]] = otc.gather_grad %[[W]], %{{.*}} {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<6x8xf32>
// CHECK: %[[AB:.*]] = otc.cast %[[A]] : (tensor<6x8xf32>) -> tensor<6x8xbf16>
// CHECK: %[[T:.*]] = otc.tanh %[[AB]] : tensor<6x8xbf16>
// CHECK: %[[P:.*]] = otc.gather_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<10x8xf32>
// CHECK-NOT: otc.cast %[[P]]
// CHECK: %[[S:.*]] = otc.add %{{.*}}, %[[P]] : (tensor<10x8xf32>, tensor<10x8xf32>) -> tensor<10x8xf32>
// CHECK: %[[SB:.*]] = otc.cast %[[S]] : (tensor<10x8xf32>) -> tensor<10x8xbf16>
// CHECK: return %{{.*}}, %[[SB]]
// ACC-LABEL: func.func @train_step
// ACC: %[[A:.*]] = otc.gather_grad {{.*}} -> tensor<6x8xf32>
// ACC-NEXT: otc.cast %[[A]] : (tensor<6x8xf32>) -> tensor<6x8xbf16>
// ACC: %[[P:.*]] = otc.gather_grad {{.*}} -> tensor<10x8xf32>
// ACC: %[[S:.*]] = otc.add %{{.*}}, %[[P]] : (tensor<10x8xf32>, tensor<10x8xf32>) -> tensor<10x8xf32>
// ACC: return %{{.*}}, %[[S]] : tensor<f32>, tensor<10x8xf32>
func.func @train_step(%x: tensor<2x4xf32> {otc.input = "x"}, %v: tensor<8x4xf32> {otc.param = "v"},
                      %rows: tensor<2xi64> {otc.input = "rows"}, %ids: tensor<6xi64> {otc.input = "ids"},
                      %head: tensor<10x8xf32> {otc.input = "head_grad"})
    -> (tensor<f32> {otc.loss}, tensor<10x8xf32> {otc.grad = "e"}) {
  %dy = otc.matmul %x, %v {transpose_rhs} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  %a = otc.gather_grad %dy, %rows {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<6x8xf32>
  %t = otc.tanh %a : tensor<6x8xf32>
  %p = otc.gather_grad %t, %ids {axis = 0 : i64} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<10x8xf32>
  %g = otc.add %head, %p : (tensor<10x8xf32>, tensor<10x8xf32>) -> tensor<10x8xf32>
  %s = otc.reduce_sum %t, [0, 1] : (tensor<6x8xf32>) -> tensor<f32>
  return %s, %g : tensor<f32>, tensor<10x8xf32>
}

// -----

// Tests that an FP32 value every reader of which rounds it to BF16 (the
// softmax's probabilities, read by three products) is rounded once, at its
// first reader, where each reader's own cast kept the FP32 value alive
// until the last of them ran; a widening cast (the BF16 parameter read by
// FP32 ops) stays beside each reader (@widening, the previous case: WF, WB).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P:.*]] = otc.softmax
// CHECK-NEXT: %[[PB:.*]] = otc.cast %[[P]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NOT: otc.cast %[[P]]
// CHECK: otc.matmul %[[PB]], %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK-NOT: otc.cast %[[P]]
// CHECK: otc.matmul %[[PB]], %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xf32>
// CHECK-NOT: otc.cast %[[P]]
// CHECK: otc.matmul %[[PB]], %{{.*}} {transpose_lhs}
func.func @train_step(%x: tensor<4x8xf32> {otc.input = "x"}, %w: tensor<8x8xf32> {otc.param = "w"},
                      %v: tensor<8x8xf32> {otc.param = "v"})
    -> (tensor<f32> {otc.loss}, tensor<8x8xf32> {otc.grad = "w"}) {
  %p = otc.softmax %x {axis = 1 : i64} : tensor<4x8xf32>
  %a = otc.matmul %p, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b = otc.matmul %p, %v : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = otc.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = otc.reduce_sum %c, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  %g = otc.matmul %p, %c {transpose_lhs} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %s, %g : tensor<f32>, tensor<8x8xf32>
}
