// RUN: otc-opt %s --otc-group-params=alignment=16 --split-input-file | FileCheck %s
// RUN: otc-opt %s --otc-group-params=alignment=16 --otc-plan-buffers=alignment=16 --split-input-file | FileCheck %s --check-prefix=PLAN

// Two parameters of 3 and 5 elements with BF16 working copies; 16-byte
// alignment is 8 elements of the narrowest kind (BF16), so "b" starts at
// element 8 of every group and the groups hold 8 + 8 = 16 elements.
// @zero_grads: one fill of every gradient; the casts of the masters into the
// working copies leave it.
// CHECK-LABEL: func.func @zero_grads
// CHECK: %[[G:.*]] = otck.buffer {otck.member_offsets = array<i64: 0, 8>, otck.members = ["grad:a", "grad:b"], slot = "group:grad"} : memref<16xbf16>
// CHECK: otck.kernel outs(%[[G]] : memref<16xbf16>)
// CHECK-NEXT: otc.constant dense<0.000000e+00> : tensor<16xbf16>
// CHECK-NOT: otck.kernel
// CHECK: return
// @optimizer_step: one AdamW over the groups that also writes the working
// copies; the per-parameter slots stay (the runtime's table and checkpoints
// name them).
// CHECK-LABEL: func.func @optimizer_step
// CHECK-DAG: %[[OP:.*]] = otck.buffer {{.*}}slot = "group:param"} : memref<16xf32>
// CHECK-DAG: %[[OG:.*]] = otck.buffer {{.*}}slot = "group:grad"} : memref<16xbf16>
// CHECK-DAG: %[[OM:.*]] = otck.buffer {{.*}}slot = "group:adam_m"} : memref<16xf32>
// CHECK-DAG: %[[OV:.*]] = otck.buffer {{.*}}slot = "group:adam_v"} : memref<16xf32>
// CHECK-DAG: %[[OC:.*]] = otck.buffer {otck.member_offsets = array<i64: 0, 8>, otck.members = ["param_bf16:a", "param_bf16:b"], slot = "group:param_bf16"} : memref<16xbf16>
// CHECK-DAG: otck.buffer {slot = "adam_m:b"} : memref<5xf32>
// CHECK-DAG: %[[LR:.*]] = otck.buffer {slot = "lr"}
// CHECK-DAG: %[[T:.*]] = otck.buffer {slot = "step"}
// CHECK-DAG: %[[F:.*]] = otck.buffer {slot = "grad_factor"}
// CHECK: otck.kernel ins(%[[OP]], %[[OG]], %[[OM]], %[[OV]], %[[LR]], %[[T]], %[[F]] : memref<16xf32>, memref<16xbf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%[[OP]], %[[OM]], %[[OV]], %[[OC]] : memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xbf16>)
// CHECK: otc.adamw {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = {{.*}} : f64, epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xbf16>)
// CHECK-NOT: otck.kernel
// CHECK: return
// @refresh_params (called by the runtime once the masters are loaded): one
// cast of every master into its working copy.
// CHECK-LABEL: func.func @refresh_params
// CHECK-DAG: %[[RP:.*]] = otck.buffer {{.*}}slot = "group:param"} : memref<16xf32>
// CHECK-DAG: %[[RC:.*]] = otck.buffer {{.*}}slot = "group:param_bf16"} : memref<16xbf16>
// CHECK: otck.kernel ins(%[[RP]] : memref<16xf32>) outs(%[[RC]] : memref<16xbf16>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<16xf32>):
// CHECK-NEXT: otc.cast %[[X]] : (tensor<16xf32>) -> tensor<16xbf16>

// Planning puts each group where it or a member first appears, and every
// member at its element offset in it: "group:grad" first (0, 32 bytes),
// then "group:param" (32, 64 bytes), "group:param_bf16" (96, 32 bytes),
// "group:adam_m" (128) and "group:adam_v" (192); "b" is 8 elements in:
// 16 bytes in BF16 groups, 32 in FP32 ones.
// PLAN-LABEL: func.func @zero_grads
// PLAN-DAG: otck.buffer {offset = 0 : i64, {{.*}}slot = "group:grad"} : memref<16xbf16>
// PLAN-DAG: otck.buffer {offset = 32 : i64, slot = "param:a"} : memref<3xf32>
// PLAN-DAG: otck.buffer {offset = 64 : i64, slot = "param:b"} : memref<5xf32>
// PLAN-DAG: otck.buffer {offset = 96 : i64, slot = "param_bf16:a"} : memref<3xbf16>
// PLAN-DAG: otck.buffer {offset = 112 : i64, slot = "param_bf16:b"} : memref<5xbf16>
// PLAN-DAG: otck.buffer {offset = 0 : i64, slot = "grad:a"} : memref<3xbf16>
// PLAN-DAG: otck.buffer {offset = 16 : i64, slot = "grad:b"} : memref<5xbf16>
// PLAN-LABEL: func.func @optimizer_step
// PLAN-DAG: otck.buffer {offset = 32 : i64, {{.*}}slot = "group:param"} : memref<16xf32>
// PLAN-DAG: otck.buffer {offset = 96 : i64, {{.*}}slot = "group:param_bf16"} : memref<16xbf16>
// PLAN-DAG: otck.buffer {offset = 128 : i64, {{.*}}slot = "group:adam_m"} : memref<16xf32>
// PLAN-DAG: otck.buffer {offset = 192 : i64, {{.*}}slot = "group:adam_v"} : memref<16xf32>
// PLAN-DAG: otck.buffer {offset = 160 : i64, slot = "adam_m:b"} : memref<5xf32>
// PLAN-DAG: otck.buffer {offset = 224 : i64, slot = "adam_v:b"} : memref<5xf32>
func.func @zero_grads() {
  %pa = otck.buffer {slot = "param:a"} : memref<3xf32>
  %pb = otck.buffer {slot = "param:b"} : memref<5xf32>
  %ca = otck.buffer {slot = "param_bf16:a"} : memref<3xbf16>
  %cb = otck.buffer {slot = "param_bf16:b"} : memref<5xbf16>
  %ga = otck.buffer {slot = "grad:a"} : memref<3xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<5xbf16>
  otck.kernel outs(%ga : memref<3xbf16>) {
    %z = otc.constant dense<0.0> : tensor<3xbf16>
    otck.yield %z : tensor<3xbf16>
  }
  otck.kernel outs(%gb : memref<5xbf16>) {
    %z = otc.constant dense<0.0> : tensor<5xbf16>
    otck.yield %z : tensor<5xbf16>
  }
  otck.kernel ins(%pa : memref<3xf32>) outs(%ca : memref<3xbf16>) {
  ^bb0(%x: tensor<3xf32>):
    %c = otc.cast %x : (tensor<3xf32>) -> tensor<3xbf16>
    otck.yield %c : tensor<3xbf16>
  }
  otck.kernel ins(%pb : memref<5xf32>) outs(%cb : memref<5xbf16>) {
  ^bb0(%x: tensor<5xf32>):
    %c = otc.cast %x : (tensor<5xf32>) -> tensor<5xbf16>
    otck.yield %c : tensor<5xbf16>
  }
  return
}
func.func @optimizer_step() {
  %pa = otck.buffer {slot = "param:a"} : memref<3xf32>
  %ga = otck.buffer {slot = "grad:a"} : memref<3xbf16>
  %ma = otck.buffer {slot = "adam_m:a"} : memref<3xf32>
  %va = otck.buffer {slot = "adam_v:a"} : memref<3xf32>
  %pb = otck.buffer {slot = "param:b"} : memref<5xf32>
  %gb = otck.buffer {slot = "grad:b"} : memref<5xbf16>
  %mb = otck.buffer {slot = "adam_m:b"} : memref<5xf32>
  %vb = otck.buffer {slot = "adam_v:b"} : memref<5xf32>
  %lr = otck.buffer {slot = "lr"} : memref<f32>
  %t = otck.buffer {slot = "step"} : memref<f32>
  %f = otck.buffer {slot = "grad_factor"} : memref<f32>
  otck.kernel ins(%pa, %ga, %ma, %va, %lr, %t, %f : memref<3xf32>, memref<3xbf16>, memref<3xf32>, memref<3xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%pa, %ma, %va : memref<3xf32>, memref<3xf32>, memref<3xf32>) {
  ^bb0(%p: tensor<3xf32>, %g: tensor<3xbf16>, %m: tensor<3xf32>, %v: tensor<3xf32>, %l: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<3xf32>, tensor<3xbf16>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
    otck.yield %np, %nm, %nv : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  otck.kernel ins(%pb, %gb, %mb, %vb, %lr, %t, %f : memref<5xf32>, memref<5xbf16>, memref<5xf32>, memref<5xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%pb, %mb, %vb : memref<5xf32>, memref<5xf32>, memref<5xf32>) {
  ^bb0(%p: tensor<5xf32>, %g: tensor<5xbf16>, %m: tensor<5xf32>, %v: tensor<5xf32>, %l: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<5xf32>, tensor<5xbf16>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    otck.yield %np, %nm, %nv : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
  }
  return
}

// -----

// Different hyperparameters (here weight decay) cannot share one kernel:
// nothing changes.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: group:
// CHECK-COUNT-2: otc.adamw
func.func @optimizer_step() {
  %pa = otck.buffer {slot = "param:a"} : memref<3xf32>
  %ga = otck.buffer {slot = "grad:a"} : memref<3xf32>
  %ma = otck.buffer {slot = "adam_m:a"} : memref<3xf32>
  %va = otck.buffer {slot = "adam_v:a"} : memref<3xf32>
  %pb = otck.buffer {slot = "param:b"} : memref<5xf32>
  %gb = otck.buffer {slot = "grad:b"} : memref<5xf32>
  %mb = otck.buffer {slot = "adam_m:b"} : memref<5xf32>
  %vb = otck.buffer {slot = "adam_v:b"} : memref<5xf32>
  %lr = otck.buffer {slot = "lr"} : memref<f32>
  %t = otck.buffer {slot = "step"} : memref<f32>
  %f = otck.buffer {slot = "grad_factor"} : memref<f32>
  otck.kernel ins(%pa, %ga, %ma, %va, %lr, %t, %f : memref<3xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%pa, %ma, %va : memref<3xf32>, memref<3xf32>, memref<3xf32>) {
  ^bb0(%p: tensor<3xf32>, %g: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %l: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
    otck.yield %np, %nm, %nv : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  otck.kernel ins(%pb, %gb, %mb, %vb, %lr, %t, %f : memref<5xf32>, memref<5xf32>, memref<5xf32>, memref<5xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%pb, %mb, %vb : memref<5xf32>, memref<5xf32>, memref<5xf32>) {
  ^bb0(%p: tensor<5xf32>, %g: tensor<5xf32>, %m: tensor<5xf32>, %v: tensor<5xf32>, %l: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    otck.yield %np, %nm, %nv : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
  }
  return
}
