// RUN: otc-opt %s --split-input-file --otc-differentiate --verify-diagnostics

// Tests that a function without a scalar float output has no loss.
// expected-error@+1 {{no scalar float output to use as the loss}}
func.func @forward(%w: tensor<3xf32> {otc.param = "w"}) -> (tensor<3xf32> {otc.output = "y"}) {
  %0 = otc.tanh %w : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// Tests that two scalar outputs need --loss to choose.
// expected-error@+1 {{several scalar float outputs: name the loss with --loss=OUTPUT}}
func.func @forward(%w: tensor<3xf32> {otc.param = "w"}) -> (tensor<f32> {otc.output = "a"}, tensor<f32> {otc.output = "b"}) {
  %0 = otc.reduce_sum %w, [0] : (tensor<3xf32>) -> tensor<f32>
  return %0, %0 : tensor<f32>, tensor<f32>
}

// -----

// Tests that an op without a gradient rule on the path to the loss is an error naming it.
func.func @forward(%w: tensor<3xf32> {otc.param = "w"}) -> (tensor<f32> {otc.output = "loss"}) {
  // expected-error@+1 {{no gradient rule for 'otc.relu_grad' on the path from a parameter to the loss}}
  %0 = otc.relu_grad %w, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that a module without @forward is rejected.
// expected-error@+1 {{no @forward to differentiate}}
module {
  func.func @other() {
    return
  }
}
