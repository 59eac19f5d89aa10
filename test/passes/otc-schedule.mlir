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

// -----

// Tests that an op making a returned value (a parameter's gradient, written
// into its slot whenever it is computed) counts no allocation, and that the
// loss gradient's seed (computed from a constant) waits until the backward
// needs it. Three linear layers: each weight gradient runs as soon as its
// operands are ready, freeing the activation it reads (before, all three
// ran at the end, keeping every layer's input live: an expert's weight
// gradient, gigabytes, put off the whole recomputed forward of a mixture of
// experts). The peak counts the [8, 512] f32 activations, 16 KiB each, not
// the 1 MiB gradients: differentiated, h1, h2, the seed and dh2 live
// together at dh2 (4 x 16384); scheduled, h1, h2 and the seed at the seed
// (3 x 16384, and the constant's 4 bytes its reshape still views).
// CHECK: otc.schedule = {peak_after = 49156 : i64, peak_before = 65536 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H1:.*]] = otc.matmul %arg0, %arg1
// CHECK-NEXT: %[[H2:.*]] = otc.matmul %[[H1]], %arg2
// CHECK-NEXT: otc.matmul %[[H2]], %arg3
// CHECK-NEXT: otc.reduce_sum
// CHECK-NEXT: otc.constant
// CHECK-NEXT: otc.reshape
// CHECK-NEXT: %[[SEED:.*]] = otc.broadcast
// CHECK-NEXT: %[[DW3:.*]] = otc.matmul %[[H2]], %[[SEED]] {transpose_lhs}
// CHECK-NEXT: %[[DH2:.*]] = otc.matmul %[[SEED]], %arg3 {transpose_rhs}
// CHECK-NEXT: %[[DW2:.*]] = otc.matmul %[[H1]], %[[DH2]] {transpose_lhs}
// CHECK-NEXT: %[[DH1:.*]] = otc.matmul %[[DH2]], %arg2 {transpose_rhs}
// CHECK-NEXT: %[[DW1:.*]] = otc.matmul %arg0, %[[DH1]] {transpose_lhs}
// CHECK-NEXT: return %{{.*}}, %[[DW1]], %[[DW2]], %[[DW3]]
func.func @forward(%x: tensor<8x512xf32> {otc.input = "x"}, %w1: tensor<512x512xf32> {otc.param = "w1"}, %w2: tensor<512x512xf32> {otc.param = "w2"}, %w3: tensor<512x512xf32> {otc.param = "w3"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h1 = otc.matmul %x, %w1 : (tensor<8x512xf32>, tensor<512x512xf32>) -> tensor<8x512xf32>
  %h2 = otc.matmul %h1, %w2 : (tensor<8x512xf32>, tensor<512x512xf32>) -> tensor<8x512xf32>
  %h3 = otc.matmul %h2, %w3 : (tensor<8x512xf32>, tensor<512x512xf32>) -> tensor<8x512xf32>
  %l = otc.reduce_sum %h3, [0, 1] : (tensor<8x512xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
