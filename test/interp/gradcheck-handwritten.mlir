// Tests the gradient checker itself on a hand-written @train_step (so the
// differentiation pass is not run): relu_grad and tanh_grad against finite
// differences; then that a wrong gradient (tanh_grad fed the input instead of
// the output) fails with exit status 1 and a FAIL line.
// RUN: otc-run %s --check-gradients | FileCheck %s
// RUN: sed -e 's/otc.tanh_grad %ones, %y/otc.tanh_grad %ones, %w/' %s > %t.bad.mlir
// RUN: not otc-run %t.bad.mlir --check-gradients | FileCheck %s --check-prefix=BAD

// CHECK: loss: {{.*}} PASS
// CHECK: v 6 6 {{.*}} PASS
// CHECK: w 6 6 {{.*}} PASS
// CHECK: gradient check: PASS

// BAD: v {{.*}} PASS
// BAD: w {{.*}} FAIL
// BAD: gradient check: FAIL
func.func @forward(%v: tensor<2x3xf32> {otc.param = "v"},
                   %w: tensor<2x3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %r = otc.relu %v : tensor<2x3xf32>
  %y = otc.tanh %w : tensor<2x3xf32>
  %s = otc.add %r, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = otc.reduce_sum %s, [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @train_step(%v: tensor<2x3xf32> {otc.param = "v"},
                      %w: tensor<2x3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x3xf32> {otc.grad = "v"},
        tensor<2x3xf32> {otc.grad = "w"}) {
  %r = otc.relu %v : tensor<2x3xf32>
  %y = otc.tanh %w : tensor<2x3xf32>
  %s = otc.add %r, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = otc.reduce_sum %s, [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %ones = otc.constant dense<1.0> : tensor<2x3xf32>
  %gv = otc.relu_grad %ones, %v : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %gw = otc.tanh_grad %ones, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %l, %gv, %gw : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>
}
