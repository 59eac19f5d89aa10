// RUN: otc-opt %s --split-input-file --otc-configure --otc-training-loop | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-configure=grad-accum=4 --otc-training-loop | FileCheck %s --check-prefix=WEIGHTED

// Tests that a parameter's gradient that sums its contributions (a tied
// weight) lands in the gradient slot one contribution at a time, in the
// order their producers run: acc + (n + e) becomes (acc + e) + n, so each
// producer can add into the slot itself. Weighted (gradient accumulation),
// the sum stays whole: acc + w (n + e).
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<3xf32> {otc.slot = "input:x"}
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<3xf32> {otc.slot = "grad:w"}
// CHECK: %[[E:.*]] = otc.exp %[[X]]
// CHECK: %[[N:.*]] = otc.neg %[[X]]
// CHECK-NOT: otc.add %[[N]], %[[E]]
// CHECK: %[[S1:.*]] = otc.add %[[ACC]], %[[E]]
// CHECK: %[[S2:.*]] = otc.add %[[S1]], %[[N]]
// CHECK: return %{{.*}}, %[[S2]]
// WEIGHTED-LABEL: func.func @micro_step
// WEIGHTED: %[[SUM:.*]] = otc.add %{{.*}}, %{{.*}}
// WEIGHTED: otc.mul %[[SUM]]
func.func @train_step(%x: tensor<3xf32> {otc.input = "x"}, %w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = otc.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  %e = otc.exp %x : tensor<3xf32>
  %n = otc.neg %x : tensor<3xf32>
  %g = otc.add %n, %e : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %g : tensor<f32>, tensor<3xf32>
}

// -----

// Under mixed precision the sum is rounded once, cast(cast(a) + b): a BF16
// contribution lands as it is, an FP32 one rounded to BF16.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<3xbf16> {otc.slot = "grad:w"}
// CHECK: %[[A:.*]] = otc.cast %{{.*}} : (tensor<3xf32>) -> tensor<3xbf16>
// CHECK: %[[B:.*]] = otc.exp
// CHECK-NOT: otc.add %{{.*}} : (tensor<3xf32>, tensor<3xf32>)
// CHECK: %[[BR:.*]] = otc.cast %[[B]] : (tensor<3xf32>) -> tensor<3xbf16>
// CHECK: %[[S1:.*]] = otc.add %[[ACC]], %[[A]] : (tensor<3xbf16>, tensor<3xbf16>)
// CHECK: %[[S2:.*]] = otc.add %[[S1]], %[[BR]] : (tensor<3xbf16>, tensor<3xbf16>)
// CHECK: return %{{.*}}, %[[S2]]
func.func @train_step(%x: tensor<3xf32> {otc.input = "x"}, %w: tensor<3xbf16> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xbf16> {otc.grad = "w"}) {
  %wf = otc.cast %w : (tensor<3xbf16>) -> tensor<3xf32>
  %0 = otc.mul %x, %wf : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  %a = otc.cast %x : (tensor<3xf32>) -> tensor<3xbf16>
  %b = otc.exp %x : tensor<3xf32>
  %aw = otc.cast %a : (tensor<3xbf16>) -> tensor<3xf32>
  %s = otc.add %aw, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = otc.cast %s : (tensor<3xf32>) -> tensor<3xbf16>
  return %1, %g : tensor<f32>, tensor<3xbf16>
}

// -----

// A tied embedding under mixed precision: the LM head's BF16 gradient and
// the embedding's FP32 one (of a widened BF16 gradient) summed and rounded.
// The embedding's term, which the split rounds to BF16 by itself, becomes a
// gather gradient of BF16 storage (no widened copy, no FP32 table).
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2xi64> {otc.slot = "input:ids"}
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x3xbf16> {otc.slot = "input:dy"}
// CHECK-SAME: %[[ACC:[^:]*]]: tensor<5x3xbf16> {otc.slot = "grad:w"}
// CHECK-NOT: tensor<2x3xf32>
// CHECK: %[[E:.*]] = otc.gather_grad %[[DY]], %[[IDS]] {axis = 0 : i64} : (tensor<2x3xbf16>, tensor<2xi64>) -> tensor<5x3xbf16>
// CHECK: %[[S1:.*]] = otc.add %[[ACC]], %{{.*}} : (tensor<5x3xbf16>, tensor<5x3xbf16>)
// CHECK: %[[S2:.*]] = otc.add %[[S1]], %[[E]] : (tensor<5x3xbf16>, tensor<5x3xbf16>)
// CHECK: return %{{.*}}, %[[S2]]
func.func @train_step(%ids: tensor<2xi64> {otc.input = "ids"}, %dy: tensor<2x3xbf16> {otc.input = "dy"},
                      %w: tensor<5x3xbf16> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<5x3xbf16> {otc.grad = "w"}) {
  %wf = otc.cast %w : (tensor<5x3xbf16>) -> tensor<5x3xf32>
  %1 = otc.reduce_sum %wf, [0, 1] : (tensor<5x3xf32>) -> tensor<f32>
  %head = otc.neg %w : tensor<5x3xbf16>
  %dyw = otc.cast %dy : (tensor<2x3xbf16>) -> tensor<2x3xf32>
  %emb = otc.gather_grad %dyw, %ids {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<5x3xf32>
  %hw = otc.cast %head : (tensor<5x3xbf16>) -> tensor<5x3xf32>
  %s = otc.add %hw, %emb : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  %g = otc.cast %s : (tensor<5x3xf32>) -> tensor<5x3xbf16>
  return %1, %g : tensor<f32>, tensor<5x3xbf16>
}
