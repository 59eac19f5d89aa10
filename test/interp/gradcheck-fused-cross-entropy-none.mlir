// Tests the gradient of otc.cross_entropy with reduction "none" on rank-3
// logits [2, 4, 5] with ignore_index 0: the [2, 4] per-row losses are
// weighted by t before the sum, so each row's gradient scale is grad[r];
// ignored rows get none. logits = x w + b.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4x4xf32> {otc.input = "x"},
                   %labels: tensor<2x4xi64> {otc.input = "labels", otc.gradcheck.int_max = 5 : i64},
                   %t: tensor<2x4xf32> {otc.input = "t"},
                   %w: tensor<4x5xf32> {otc.param = "w"},
                   %b: tensor<5xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<2x4x4xf32>, tensor<4x5xf32>) -> tensor<2x4x5xf32>
  %1 = otc.add %0, %b : (tensor<2x4x5xf32>, tensor<5xf32>) -> tensor<2x4x5xf32>
  %loss, %lse = otc.cross_entropy %1, %labels {reduction = "none", ignore_index = 0 : i64}
      : (tensor<2x4x5xf32>, tensor<2x4xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  %2 = otc.mul %loss, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = otc.reduce_sum %2, [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
