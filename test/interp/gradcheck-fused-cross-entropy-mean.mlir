// Tests the gradient of otc.cross_entropy (through otc.cross_entropy_grad)
// with reduction "mean" and ignore_index: rows labelled 2 count neither in
// the sum nor in the divisor; logits = x w + b.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<8x4xf32> {otc.input = "x"},
                   %labels: tensor<8xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %b: tensor<5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<8x4xf32>, tensor<4x5xf32>) -> tensor<8x5xf32>
  %1 = otc.add %0, %b : (tensor<8x5xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %loss, %lse = otc.cross_entropy %1, %labels {ignore_index = 2 : i64}
      : (tensor<8x5xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8xf32>)
  return %loss : tensor<f32>
}
