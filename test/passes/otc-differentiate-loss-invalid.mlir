// RUN: otc-opt %s --otc-differentiate=loss=nope --verify-diagnostics

// Tests that --loss must name a graph output.
// expected-error@+1 {{no graph output named 'nope'}}
func.func @forward(%w: tensor<3xf32> {otc.param = "w"}) -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.reduce_sum %w, [0] : (tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
