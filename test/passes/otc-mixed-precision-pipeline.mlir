// RUN: otc-opt %s "--otc-configure=precision=bf16 grad-accum=2" --otc-mixed-precision --otc-training-loop | FileCheck %s
// RUN: otc-opt %s "--otc-configure=precision=bf16 fp32-grad-accum=true grad-accum=2" --otc-mixed-precision --otc-training-loop | FileCheck %s --check-prefix=ACC
// RUN: otc-opt %s --otc-configure=precision=bf16 --otc-mixed-precision --otc-training-loop --otc-lower-to-buffers | FileCheck %s --check-prefix=BUF

// Tests the training loop of a mixed-precision step: @zero_grads zeroes the
// BF16 gradient and rounds the FP32 master into the BF16 working copy;
// @micro_step reads the copy and accumulates gradient x the micro-batch's
// weight (the runtime's "grad_scale", FP32) in BF16: the product formed in
// FP32 and rounded once; @optimizer_step runs AdamW in FP32 on the master and
// moments, the gradient widened.
// CHECK-LABEL: func.func @zero_grads
// CHECK-SAME: (%[[P:.*]]: tensor<2x8xf32> {otc.slot = "param:w"})
// CHECK-SAME: -> (tensor<2x8xbf16> {otc.slot = "grad:w"}, tensor<2x8xbf16> {otc.slot = "param_bf16:w"})
// CHECK: %[[Z:.*]] = otc.constant dense<0.000000e+00> : tensor<2x8xbf16>
// CHECK: %[[C:.*]] = otc.cast %[[P]] : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: return %[[Z]], %[[C]]
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: tensor<2x8xbf16> {otc.slot = "param_bf16:w"}
// CHECK-SAME: %[[GACC:.*]]: tensor<2x8xbf16> {otc.slot = "grad:w"}, %[[K:.*]]: tensor<f32> {otc.slot = "grad_scale"}
// CHECK: %[[WIDE:.*]] = otc.cast %{{.*}} : (tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK: %[[M:.*]] = otc.mul %[[WIDE]], %[[K]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// CHECK: %[[D:.*]] = otc.cast %[[M]] : (tensor<2x8xf32>) -> tensor<2x8xbf16>
// CHECK: otc.add %[[GACC]], %[[D]] : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[PM:.*]]: tensor<2x8xf32> {otc.slot = "param:w"}, %[[G:.*]]: tensor<2x8xbf16> {otc.slot = "grad:w"}, %{{.*}}: tensor<2x8xf32> {otc.slot = "adam_m:w"}, %{{.*}}: tensor<2x8xf32> {otc.slot = "adam_v:w"}
// The BF16 gradient goes to AdamW as it is (read widened): no FP32 copy.
// CHECK-NOT: otc.cast
// CHECK: otc.adamw %[[PM]], %[[G]], {{.*}} : (tensor<2x8xf32>, tensor<2x8xbf16>, {{.*}}) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
// ACC-LABEL: func.func @zero_grads
// ACC-SAME: -> (tensor<2x8xf32> {otc.slot = "grad:w"}, tensor<2x8xbf16> {otc.slot = "param_bf16:w"})
// ACC-LABEL: func.func @micro_step
// ACC-SAME: %{{.*}}: tensor<f32> {otc.slot = "grad_scale"}
// ACC: otc.mul %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// ACC-LABEL: func.func @optimizer_step
// ACC-NOT: otc.cast
// ACC: otc.adamw

// Tests that a BF16 matmul lowers to one BF16 GEMM on the BF16 buffers, with
// no widened copies, and that the rounding of its FP32 result to BF16 is the
// GEMM's own output (one rounding, no FP32 temporary, no cast kernel).
// BUF-LABEL: func.func @micro_step
// BUF: %[[W:.*]] = otck.buffer {slot = "param_bf16:w"} : memref<2x8xbf16>
// BUF: %[[XB:.*]] = otck.buffer : memref<4x8xbf16>
// BUF: %[[OUT:.*]] = otck.buffer : memref<4x2xbf16>
// BUF-NEXT: otck.gemm %[[XB]], %[[W]], %[[OUT]] {transpose_rhs} : memref<4x8xbf16>, memref<2x8xbf16>, memref<4x2xbf16>
func.func @train_step(%x: tensor<4x8xf32> {otc.input = "x"}, %w: tensor<2x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<2x8xf32> {otc.grad = "w"}) {
  %y = otc.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  %s = otc.reduce_sum %y, [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
  %g = otc.matmul %y, %x {transpose_lhs} : (tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return %s, %g : tensor<f32>, tensor<2x8xf32>
}
