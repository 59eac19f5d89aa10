// Tests gradients through a rotary position embedding as Llama exports it:
// q = x wq, rotate_half(q) = concat(-q[..., 4:], q[..., :4]) from two slices,
// then q * cos + rotate_half(q) * sin (cos and sin are inputs here).
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: wq {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x4x8xf32> {otc.input = "x"},
                   %t: tensor<2x4x8xf32> {otc.input = "t"},
                   %cos: tensor<4x8xf32> {otc.input = "cos"},
                   %sin: tensor<4x8xf32> {otc.input = "sin"},
                   %wq: tensor<8x8xf32> {otc.param = "wq"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %q = otc.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %x1 = otc.slice %q, [0, 0, 0], [1, 1, 1] : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %x2 = otc.slice %q, [0, 0, 4], [1, 1, 1] : (tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %n2 = otc.neg %x2 : tensor<2x4x4xf32>
  %rot = otc.concat %n2, %x1 {axis = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %0 = otc.mul %q, %cos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %1 = otc.mul %rot, %sin : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %2 = otc.add %0, %1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %3 = otc.mul %2, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %4 = otc.reduce_sum %3, [0, 1, 2] : (tensor<2x4x8xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
