// RUN: otc-opt %s "--otc-configure=world-size=2 shard-optimizer=true precision=bf16" --otc-group-params=alignment=16 | FileCheck %s
// RUN: otc-opt %s "--otc-configure=world-size=2 shard-optimizer=true precision=bf16" --otc-group-params=alignment=16 --otc-plan-buffers=alignment=16 | FileCheck %s --check-prefix=PLAN

// ZeRO-1 over 2 ranks with BF16 working copies that the steps read instead of
// the FP32 masters (no @micro_step reads "param:"): the masters are sharded
// too. Parameters of 3 and 5 elements start at elements 0 and 8 of 16 (16
// bytes: 8 BF16 elements), two parts of 8. "group:param" is the rank's part
// (memref<8xf32>) naming the whole group's members and offsets; the
// per-parameter masters are places in that image (otck.image_member).
// AdamW updates the part itself and the rank's half of the copies;
// @refresh_params rounds the part into that half.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-DAG: %[[P:.*]] = otck.buffer {otck.image_members = ["param:a", "param:b"], otck.image_offsets = array<i64: 0, 8>, slot = "group:param"} : memref<8xf32>
// CHECK-DAG: %[[C:.*]] = otck.buffer {{.*}}slot = "group:param_bf16"} : memref<16xbf16>
// CHECK-DAG: %[[CS:.*]] = otck.view %[[C]] {shards = 2 : i64} : memref<16xbf16> to memref<8xbf16>
// CHECK-DAG: otck.buffer {otck.image_member, slot = "param:b"} : memref<5xf32>
// CHECK: otck.kernel ins(%[[P]], {{.*}}) outs(%[[P]], {{.*}}, %[[CS]] : memref<8xf32>, memref<8xf32>, memref<8xf32>, memref<8xbf16>)
// CHECK-LABEL: func.func @refresh_params
// CHECK-DAG: %[[RP:.*]] = otck.buffer {otck.image_members = ["param:a", "param:b"], {{.*}}slot = "group:param"} : memref<8xf32>
// CHECK-DAG: %[[RC:.*]] = otck.view %{{.*}} {shards = 2 : i64} : memref<16xbf16> to memref<8xbf16>
// CHECK: otck.kernel ins(%[[RP]] : memref<8xf32>) outs(%[[RC]] : memref<8xbf16>)

// Planning: after the gradient group (32 bytes at 0), the rank's part of
// the masters takes 32 bytes at 32; each master is its place in the whole
// group from there, 4 bytes an element ("a" at 32, "b" at element 8: 64),
// with no bytes of its own (the copies' group starts at 64 too).
// PLAN-LABEL: func.func @zero_grads
// PLAN-DAG: otck.buffer {offset = 32 : i64, otck.image_member, slot = "param:a"} : memref<3xf32>
// PLAN-DAG: otck.buffer {offset = 64 : i64, otck.image_member, slot = "param:b"} : memref<5xf32>
// PLAN-DAG: otck.buffer {offset = 64 : i64, slot = "param_bf16:a"} : memref<3xbf16>
// PLAN-LABEL: func.func @optimizer_step
// PLAN-DAG: otck.buffer {offset = 32 : i64, otck.image_members = ["param:a", "param:b"], otck.image_offsets = array<i64: 0, 8>, slot = "group:param"} : memref<8xf32>
// PLAN-DAG: otck.buffer {offset = 0 : i64, {{.*}}slot = "group:grad"} : memref<16xbf16>
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
