// Tests the gradient of otc.dropout (ratio 0.3): the mask is a pure function
// of the key, so finite differences see the same mask in every evaluation.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<6x8xf32> {otc.input = "x"},
                   %key: tensor<i64> {otc.rng_key},
                   %w: tensor<6x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.tanh %w : tensor<6x8xf32>
  %1, %mask = otc.dropout %0, %key {ratio = 0.3 : f64, stream = 7 : i64}
      : (tensor<6x8xf32>, tensor<i64>) -> (tensor<6x8xf32>, tensor<6x8xi1>)
  %2 = otc.mul %1, %x : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<6x8xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
