// RUN: otc-opt %s --split-input-file --otc-configure=grad-accum=4 --otc-training-loop | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-configure --otc-training-loop | FileCheck %s --check-prefix=ONE

// Tests that the train step becomes zero_grads, micro_step and optimizer_step
// on named slots, that micro_step adds gradient x the micro-batch's weight
// (the "grad_scale" slot the runtime sets) into the gradient slot, and that
// AdamW updates parameter and moments in their slots.
// CHECK-NOT: func.func @train_step
// CHECK-NOT: func.func @forward
// CHECK-LABEL: func.func @zero_grads()
// CHECK-SAME: -> (tensor<3xf32> {otc.slot = "grad:w"})
// CHECK: %[[Z:.*]] = otc.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[Z]]
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32> {otc.slot = "input:x"}, %[[W:.*]]: tensor<3xf32> {otc.slot = "param:w"}, %[[ACC:.*]]: tensor<3xf32> {otc.slot = "grad:w"}, %[[S:.*]]: tensor<f32> {otc.slot = "grad_scale"})
// CHECK-SAME: -> (tensor<f32> {otc.slot = "loss"}, tensor<3xf32> {otc.slot = "grad:w"})
// CHECK: %[[L:.*]] = otc.reduce_sum
// CHECK: %[[SG:.*]] = otc.mul %[[X]], %[[S]]
// CHECK: %[[NEW:.*]] = otc.add %[[ACC]], %[[SG]]
// CHECK: return %[[L]], %[[NEW]]
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: {otc.slot = "param:w"}, %{{.*}}: tensor<3xf32> {otc.slot = "grad:w"}, %{{.*}}: tensor<3xf32> {otc.slot = "adam_m:w"}, %{{.*}}: tensor<3xf32> {otc.slot = "adam_v:w"}, %{{.*}}: tensor<f32> {otc.slot = "lr"}, %{{.*}}: tensor<f32> {otc.slot = "step"}
// CHECK-SAME: -> (tensor<3xf32> {otc.slot = "param:w"}, tensor<3xf32> {otc.slot = "adam_m:w"}, tensor<3xf32> {otc.slot = "adam_v:w"})
// CHECK: otc.adamw {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, epsilon = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64}
// ONE-LABEL: func.func @micro_step
// ONE-NOT: grad_scale
// ONE-NOT: otc.constant dense<
// ONE: otc.add
// ONE: return
func.func @train_step(%x: tensor<3xf32> {otc.input = "x"}, %w: tensor<3xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = otc.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1, %x : tensor<f32>, tensor<3xf32>
}

// -----

// Tests that a frozen parameter and the random key stay arguments of
// micro_step but get no gradient slot and no optimizer update: the frozen
// parameter is a "buffer:" slot, not a "param:" one.
// CHECK-LABEL: func.func @micro_step
// CHECK-SAME: {otc.slot = "buffer:frozen"}
// CHECK-SAME: {otc.slot = "rng_key"}
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: frozen
// CHECK: return
func.func @train_step(%w: tensor<3xf32> {otc.param = "w"}, %f: tensor<3xf32> {otc.param = "frozen"},
                      %k: tensor<i64> {otc.rng_key})
    -> (tensor<f32> {otc.loss}, tensor<3xf32> {otc.grad = "w"}) {
  %0 = otc.mul %f, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.reduce_sum %0, [0] : (tensor<3xf32>) -> tensor<f32>
  return %1, %f : tensor<f32>, tensor<3xf32>
}
