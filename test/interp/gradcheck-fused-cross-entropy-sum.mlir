// Tests the gradient of otc.cross_entropy with reduction "sum" on rank-3
// logits [2, 3, 5] and [2, 3] labels (6 rows); logits = x w + b.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x4xf32> {otc.input = "x"},
                   %labels: tensor<2x3xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %b: tensor<5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %1 = otc.add %0, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  %loss, %lse = otc.cross_entropy %1, %labels {reduction = "sum"}
      : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %loss : tensor<f32>
}
