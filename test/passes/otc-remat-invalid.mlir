// RUN: otc-opt %s --otc-configure --otc-differentiate | not otc-plan --memory-budget=100 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: otc-opt %s --otc-configure --otc-differentiate | not otc-plan 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// RUN: not otc-opt %s --otc-differentiate --otc-remat=policy=some 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: otc-opt %s --otc-configure --otc-differentiate | not otc-plan --memory-budget=12XB 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not otc-opt %s --otc-remat 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not otc-plan %s --memory-budget=1MiB 2>&1 | FileCheck %s --check-prefix=PLANSTEP
// RUN: otc-opt %s --otc-differentiate | not otc-plan --memory-budget=1MiB 2>&1 | FileCheck %s --check-prefix=NOCONFIG
// RUN: not otc-opt %s --otc-differentiate --otc-remat=policy=auto 2>&1 | FileCheck %s --check-prefix=NOBLOCKS

// Tests the errors of otc-remat and of otc-plan, which searches --remat=auto's
// choice above the pipeline. An impossible budget names the smallest that fits, as
// otc-compile plans it: the arena of otc-plan-buffers, every buffer 256-byte
// aligned. By hand: ten persistent slots (x, w1, its gradient and two
// moments, loss, lr, step, grad_factor, and the loss's seed gradient 1, a
// constant filled once at load) take 10 * 256 = 2560 bytes; at most two
// temporaries (2x4 f32 each) live at once, 512 more; 3072 in all.
// SMALL: error: no recomputation plan fits the memory budget of 100 bytes; the smallest that fits is 3072 bytes
// NOBUDGET: error: --remat=auto needs a memory budget
// POLICY: error: unknown recomputation policy 'some' (none, full, selective, auto)
// UNIT: error: cannot read memory budget '12XB' (e.g. 12GiB, 500MB, 1048576)
// NOSTEP: error: no @train_step: run --otc-differentiate first
// PLANSTEP: error: no @train_step: run --otc-differentiate first
// NOCONFIG: error: otc-plan needs the compile's configuration (the module's otc.config attribute: otc-compile sets it; otc-opt takes --otc-configure)
// NOBLOCKS: error: otc-remat policy=auto applies a searched choice: give blocks= (otc-compile --remat=auto and otc-plan --memory-budget search for it)

func.func @forward(%x: tensor<2x4xf32> {otc.input = "x"}, %w1: tensor<4x4xf32> {otc.param = "w1"}) -> (tensor<f32> {otc.output = "loss"}) {
  %a1 = otc.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = otc.tanh %a1 : tensor<2x4xf32>
  %l = otc.reduce_sum %t1, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
