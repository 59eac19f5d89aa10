// RUN: otc-opt %s --split-input-file --otc-configure --otc-training-loop --verify-diagnostics
// RUN: not otc-opt %s --split-input-file --otc-configure=grad-accum=0 --otc-training-loop 2>&1 | FileCheck %s --check-prefix=ACCUM

// ACCUM: otc-configure: grad_accum must be at least 1, got 0

// Tests that the pass needs the output of otc-differentiate.
// expected-error@+1 {{no @train_step: run --otc-differentiate first}}
module {
  func.func @forward() {
    return
  }
}

// -----

// Tests that every train-step argument must say what it is.
// expected-error@+1 {{argument 0 is neither an input, a parameter nor the random key}}
func.func @train_step(%x: tensor<3xf32>) -> (tensor<f32> {otc.loss}) {
  %0 = otc.reduce_sum %x, [0] : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
