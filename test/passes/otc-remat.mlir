// RUN: otc-opt %s --otc-differentiate --otc-remat=policy=none | FileCheck %s --check-prefix=NONE
// RUN: otc-opt %s --otc-differentiate --otc-remat=policy=full | FileCheck %s --check-prefix=FULL
// RUN: otc-opt %s --otc-differentiate --otc-remat=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: otc-opt %s --otc-configure --otc-differentiate | otc-plan --memory-budget=4864 | FileCheck %s --check-prefix=AUTO4864
// RUN: otc-opt %s --otc-configure --otc-differentiate | otc-plan --memory-budget=5120 | FileCheck %s --check-prefix=AUTO5120
// RUN: otc-opt %s --otc-configure --otc-differentiate | otc-plan --memory-budget=6KiB | FileCheck %s --check-prefix=AUTOBIG
// RUN: otc-opt %s --otc-differentiate "--otc-remat=policy=auto blocks=nfn" | FileCheck %s --check-prefix=BLOCKS

// Tests the policies on two residual blocks (matmul, softmax, tanh, add) and
// a head. The residual values are the cuts between blocks; `full` keeps the
// one between the blocks and recomputes the rest in the backward,
// `selective` recomputes the scores matmul and softmax only.
//
// Byte counts: every activation is 2x4 f32 = 32 bytes; persistent state is
// x (32) + w1, w2 (64 each) + gradients and Adam moments of w1, w2
// (3 * 128) = 544.
//
// FLOPs by hand: a 2x4 by 4x4 matmul is 2*8*4 = 64, softmax 5 per element
// = 40, tanh 1 per element = 8. `full` recomputes matmul, softmax and tanh of
// both blocks (the backward reads the tanh and softmax outputs): 2 * 112 =
// 224; `selective` the matmul and softmax: 2 * 104 = 208.

// NONE: otc.remat = {blocks = "nnn", policy = "none", recompute_flops = 0 : i64, recomputed = []
// NONE-LABEL: func.func @train_step
// NONE-COUNT-2: otc.softmax %
// NONE-NOT: otc.softmax %

// FULL: otc.remat = {blocks = "fff", policy = "full", recompute_flops = 224 : i64
// FULL-SAME: saved = ["otc.add"]
// FULL-LABEL: func.func @train_step
// FULL: %[[X1:.*]] = otc.add
// FULL: otc.constant dense<1.000000e+00>
// The second block is recomputed from the kept residual when its backward starts.
// FULL: %[[A2:.*]] = otc.matmul %[[X1]], %arg2 :
// FULL: otc.softmax %[[A2]]
// FULL: otc.softmax_grad
// The first block from the input.
// FULL: %[[A1:.*]] = otc.matmul %arg0, %arg1 :
// FULL: otc.softmax %[[A1]]

// SEL: otc.remat = {blocks = "sss", policy = "selective", recompute_flops = 208 : i64, recomputed = ["otc.softmax", "otc.softmax"], saved = ["otc.add", "otc.tanh", "otc.tanh"]}

// `auto` measures each candidate as otc-compile plans it: the arena of
// otc-plan-buffers (every buffer 256-byte aligned) after the rest of the
// pipeline. Fourteen persistent slots (x, w1, w2, their gradients and two
// moments each, loss, lr, step, grad_factor, and the loss's seed gradient
// 1, a constant filled once at load) take 14 * 256 = 3584 bytes; the
// temporaries after them take 7 places of 256 under nnn (5376 in all), 6
// under snn (5120) and 5 under fnn and fff (4864). The smallest budget takes the cheaper
// of the two smallest plans; a budget between the extremes recomputes the
// attention core of one block.
// AUTO4864: otc.remat = {blocks = "fnn", policy = "auto", recompute_flops = 112 : i64
// AUTO5120: otc.remat = {blocks = "snn", policy = "auto", recompute_flops = 104 : i64
// AUTOBIG: otc.remat = {blocks = "nnn", policy = "auto", recompute_flops = 0 : i64
// A choice given by hand (the second block in full: one block's 112 FLOPs).
// BLOCKS: otc.remat = {blocks = "nfn", policy = "auto", recompute_flops = 112 : i64

func.func @forward(%x: tensor<2x4xf32> {otc.input = "x"}, %w1: tensor<4x4xf32> {otc.param = "w1"},
                   %w2: tensor<4x4xf32> {otc.param = "w2"}) -> (tensor<f32> {otc.output = "loss"}) {
  %a1 = otc.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s1 = otc.softmax %a1 {axis = 1 : i64} : tensor<2x4xf32>
  %t1 = otc.tanh %s1 : tensor<2x4xf32>
  %x1 = otc.add %x, %t1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %a2 = otc.matmul %x1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %s2 = otc.softmax %a2 {axis = 1 : i64} : tensor<2x4xf32>
  %t2 = otc.tanh %s2 : tensor<2x4xf32>
  %x2 = otc.add %x1, %t2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = otc.reduce_sum %x2, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
