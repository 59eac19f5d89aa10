// Tests the gradient of otc.gelu with approximate = "tanh" (through
// otc.gelu_grad); h = x w + b, so the derivative is taken at about 40
// different points.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<5x6xf32> {otc.input = "x"},
                   %t: tensor<5x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %b: tensor<8xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = otc.matmul %x, %w : (tensor<5x6xf32>, tensor<6x8xf32>) -> tensor<5x8xf32>
  %h = otc.add %0, %b : (tensor<5x8xf32>, tensor<8xf32>) -> tensor<5x8xf32>
  %g = otc.gelu %h {approximate = "tanh"} : tensor<5x8xf32>
  %1 = otc.mul %g, %t : (tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<5x8xf32>
  %2 = otc.reduce_sum %1, [0, 1] : (tensor<5x8xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
