// Tests that otc-run reports what it cannot do as one-line errors with exit
// status 1: an op outside the otc dialect, and bad command lines.
// RUN: not otc-run %s --check-gradients 2>&1 | FileCheck %s
// RUN: not otc-run %s --check-gradients --tol 2>&1 | FileCheck %s --check-prefix=TOL
// RUN: not otc-run %s --bogus 2>&1 | FileCheck %s --check-prefix=FLAG
// RUN: not otc-run %s 2>&1 | FileCheck %s --check-prefix=OUT

// CHECK: otc-run: error: {{.*}}: cannot interpret 'func.call'
// TOL: otc-run: error: --tol needs a positive number
// FLAG: otc-run: error: unknown option '--bogus'
// OUT: otc-run: error: --outputs OUT.safetensors is required
func.func private @helper(tensor<3xf32>) -> tensor<3xf32>

func.func @forward(%w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %0 = func.call @helper(%w) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

func.func @train_step(%w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = func.call @helper(%w) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1, %0 : tensor<f32>, tensor<3xf32>
}
