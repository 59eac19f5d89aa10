// RUN: otc-opt %s --split-input-file --otc-lower-to-buffers --verify-diagnostics

// Tests that functions must name the arena slot of every argument.
// expected-error@+1 {{argument 0 has no otc.slot: run --otc-training-loop first}}
func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32> {otc.slot = "loss"}) {
  return %x : tensor<3xf32>
}

// -----

// Tests that functions must name the arena slot of every result.
// expected-error@+1 {{result 0 has no otc.slot}}
func.func @f(%x: tensor<3xf32> {otc.slot = "input:x"}) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}
