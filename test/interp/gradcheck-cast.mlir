// Tests the gradient of otc.cast from f32 to f64 (the loss is computed in
// f64; the gradient is cast back to f32, which rounds it, so the tolerance
// is that of float32).
// RUN: otc-run %s --check-gradients --tol 1e-5 | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<3x4xf64> {otc.input = "x"},
                   %w: tensor<3x4xf32> {otc.param = "w"})
    -> (tensor<f64> {otc.output = "loss"}) {
  %0 = otc.tanh %w : tensor<3x4xf32>
  %1 = otc.cast %0 : (tensor<3x4xf32>) -> tensor<3x4xf64>
  %2 = otc.mul %1, %x : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<3x4xf64>) -> tensor<f64>
  return %3 : tensor<f64>
}
