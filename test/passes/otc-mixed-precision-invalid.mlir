// RUN: otc-opt %s --split-input-file --otc-configure=precision=bf16 --otc-mixed-precision -verify-diagnostics
// RUN: %not otc-opt %s --otc-configure=precision=bf16 --otc-mixed-precision=fp32-ops=otc.nosuchop 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Tests that the pass needs @train_step.
// UNKNOWN: fp32-ops: unknown op 'otc.nosuchop'
// expected-error@+1 {{no @train_step: run --otc-differentiate first}}
module {
  func.func @forward(%x: tensor<4xf32> {otc.input = "x"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Tests that parameters must be FP32 master weights.
// expected-error@+1 {{parameter argument 0 is 'tensor<4xf64>', expected f32 master weights}}
func.func @train_step(%w: tensor<4xf64> {otc.param = "w"})
    -> (tensor<f64> {otc.loss}, tensor<4xf64> {otc.grad = "w"}) {
  %s = otc.reduce_sum %w, [0] : (tensor<4xf64>) -> tensor<f64>
  return %s, %w : tensor<f64>, tensor<4xf64>
}
