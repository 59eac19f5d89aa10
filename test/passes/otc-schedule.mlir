// RUN: otc-opt %s --split-input-file --otc-differentiate --otc-schedule | FileCheck %s
// RUN: not otc-opt %s --split-input-file --otc-schedule 2>&1 | FileCheck %s --check-prefix=NOSTEP

// Tests that a reduction that frees a large value runs before an unrelated
// op that allocates one: the IR computes tanh and exp (1 KiB each) and then
// reduces the tanh; the schedule reduces the tanh before computing the exp,
// so the two never live together.
// CHECK: otc.schedule = {peak_after = [[AFTER:[0-9]+]] : i64, peak_before = [[BEFORE:[0-9]+]] : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[B:.*]] = otc.tanh %arg0
// CHECK-NEXT: otc.reduce_sum %[[B]], [0]
// CHECK-NEXT: otc.exp %arg0
// NOSTEP: error: no @train_step: run --otc-differentiate first
func.func @forward(%x: tensor<256xf32> {otc.input = "x"}, %w: tensor<256xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %b = otc.tanh %x : tensor<256xf32>
  %a = otc.exp %x : tensor<256xf32>
  %c = otc.reduce_sum %b, [0] : (tensor<256xf32>) -> tensor<f32>
  %d = otc.mul %a, %c : (tensor<256xf32>, tensor<f32>) -> tensor<256xf32>
  %e = otc.mul %d, %w : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %l = otc.reduce_sum %e, [0] : (tensor<256xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
