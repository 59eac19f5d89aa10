// Tests gradients through GELU in its tanh form (GPT-2's "gelu_new"):
// 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * pow(h, 3)))), with
// h = x w + b; pow has a negative base and a constant exponent here.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: w {{.*}} PASS
// CHECK: b {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<4x6xf32> {otc.input = "x"},
                   %t: tensor<4x8xf32> {otc.input = "t"},
                   %w: tensor<6x8xf32> {otc.param = "w"},
                   %b: tensor<8xf32> {otc.param = "b"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %three = otc.constant dense<3.0> : tensor<f32>
  %c = otc.constant dense<0.044715> : tensor<f32>
  %k = otc.constant dense<0.7978845608028654> : tensor<f32>
  %one = otc.constant dense<1.0> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %0 = otc.matmul %x, %w : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %h = otc.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = otc.pow %h, %three : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = otc.mul %1, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = otc.add %h, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = otc.mul %3, %k : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %5 = otc.tanh %4 : tensor<4x8xf32>
  %6 = otc.add %5, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = otc.mul %h, %6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %8 = otc.mul %7, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %9 = otc.mul %8, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %10 = otc.reduce_sum %9, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %10 : tensor<f32>
}
