// Tests the gradient of a Split (three unit-stride slices tiling the last
// axis of a value computed from a parameter, and of a parameter itself,
// used through different nonlinear paths): the
// differentiation joins the pieces' gradients with one concat (checked
// below) and the gradient matches finite differences. A fourth, overlapping
// slice of another parameter keeps the sum of padded slice gradients.
// RUN: otc-run %s --check-gradients | FileCheck %s
// RUN: otc-opt %s --otc-differentiate | FileCheck %s --check-prefix=IR

// CHECK: w {{.*}} PASS
// CHECK: v {{.*}} PASS
// CHECK: u {{.*}} PASS
// CHECK: gradient check: PASS

// IR-LABEL: func.func @train_step
// IR-COUNT-2: otc.slice_grad %{{.*}} -> tensor<2x4xf32>
// IR-NOT: otc.slice_grad
// IR: otc.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x6xf32>
// IR-NOT: otc.slice_grad
// IR: otc.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<1x6xf32>, tensor<1x6xf32>) -> tensor<2x6xf32>
// IR-NOT: otc.slice_grad
func.func @forward(%x: tensor<2x2xf32> {otc.input = "x"},
                   %w: tensor<2x6xf32> {otc.param = "w"},
                   %v: tensor<2x4xf32> {otc.param = "v"},
                   %u: tensor<2x6xf32> {otc.param = "u"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %h = otc.tanh %w : tensor<2x6xf32>
  %q = otc.slice %h, [0, 0], [1, 1] : (tensor<2x6xf32>) -> tensor<2x2xf32>
  %k = otc.slice %h, [0, 2], [1, 1] : (tensor<2x6xf32>) -> tensor<2x3xf32>
  %r = otc.slice %h, [0, 5], [1, 1] : (tensor<2x6xf32>) -> tensor<2x1xf32>
  %u0 = otc.slice %u, [0, 0], [1, 1] : (tensor<2x6xf32>) -> tensor<1x6xf32>
  %u1 = otc.slice %u, [1, 0], [1, 1] : (tensor<2x6xf32>) -> tensor<1x6xf32>
  %u2 = otc.mul %u0, %u1 : (tensor<1x6xf32>, tensor<1x6xf32>) -> tensor<1x6xf32>
  %9 = otc.reduce_sum %u2, [0, 1] : (tensor<1x6xf32>) -> tensor<f32>
  %0 = otc.tanh %q : tensor<2x2xf32>
  %1 = otc.mul %0, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = otc.reduce_sum %1, [0, 1] : (tensor<2x2xf32>) -> tensor<f32>
  %3 = otc.mul %k, %k : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = otc.reduce_sum %3, [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %5 = otc.sigmoid %r : tensor<2x1xf32>
  %6 = otc.reduce_sum %5, [0, 1] : (tensor<2x1xf32>) -> tensor<f32>
  %a = otc.slice %v, [0, 0], [1, 1] : (tensor<2x4xf32>) -> tensor<2x3xf32>
  %b = otc.slice %v, [0, 1], [1, 1] : (tensor<2x4xf32>) -> tensor<2x3xf32>
  %7 = otc.mul %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = otc.reduce_sum %7, [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %s0 = otc.add %2, %4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s1 = otc.add %s0, %6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s2 = otc.add %s1, %8 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s3 = otc.add %s2, %9 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s3 : tensor<f32>
}
