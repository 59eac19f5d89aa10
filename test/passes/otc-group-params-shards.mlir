// RUN: otc-opt %s "--otc-configure=world-size=2 shard-optimizer=true" --otc-group-params=alignment=16 | FileCheck %s
// RUN: otc-opt %s "--otc-configure=world-size=2 shard-optimizer=true" --otc-group-params=alignment=16 --otc-plan-buffers=alignment=16 | FileCheck %s --check-prefix=PLAN
// RUN: %not otc-opt %s "--otc-configure=shard-optimizer=true" 2>&1 | FileCheck %s --check-prefix=ONE

// ZeRO-1 over 2 ranks. Parameters of 3 and 5 FP32 elements (16-byte
// alignment: 4 elements) start at elements 0 and 4; the 12 elements of the
// groups are padded to 16, two parts of 8. The moments are one part each
// ("group:adam_m", "group:adam_v", memref<8xf32>, no members) and the
// per-parameter moments are gone; AdamW runs over 8 elements: the rank's
// halves of the parameter and gradient groups (views with shards = 2) and
// the moments.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: slot = "adam_m:
// CHECK-NOT: slot = "adam_v:
// CHECK-DAG: %[[P:.*]] = otck.buffer {otck.member_offsets = array<i64: 0, 4>, otck.members = ["param:a", "param:b"], slot = "group:param"} : memref<16xf32>
// CHECK-DAG: %[[G:.*]] = otck.buffer {{.*}}slot = "group:grad"} : memref<16xf32>
// CHECK-DAG: %[[M:.*]] = otck.buffer {slot = "group:adam_m"} : memref<8xf32>
// CHECK-DAG: %[[V:.*]] = otck.buffer {slot = "group:adam_v"} : memref<8xf32>
// CHECK-DAG: %[[PS:.*]] = otck.view %[[P]] {shards = 2 : i64} : memref<16xf32> to memref<8xf32>
// CHECK-DAG: %[[GS:.*]] = otck.view %[[G]] {shards = 2 : i64} : memref<16xf32> to memref<8xf32>
// CHECK: otck.kernel ins(%[[PS]], %[[GS]], %[[M]], %[[V]], {{.*}}) outs(%[[PS]], %[[M]], %[[V]] : memref<8xf32>, memref<8xf32>, memref<8xf32>)
// CHECK: otc.adamw {{.*}} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: slot = "adam_m:
// CHECK-NOT: slot = "adam_v:

// Planning: the parts of the moments are placed like any slot, 32 bytes
// each, after the groups of 64.
// PLAN-LABEL: func.func @optimizer_step
// PLAN-DAG: otck.buffer {offset = 0 : i64, {{.*}}slot = "group:param"} : memref<16xf32>
// PLAN-DAG: otck.buffer {offset = 64 : i64, {{.*}}slot = "group:grad"} : memref<16xf32>
// PLAN-DAG: otck.buffer {offset = 128 : i64, slot = "group:adam_m"} : memref<8xf32>
// PLAN-DAG: otck.buffer {offset = 160 : i64, slot = "group:adam_v"} : memref<8xf32>

// ONE: shard_optimizer needs a world_size of 2 or more, got 1
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
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
    otck.yield %np, %nm, %nv : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
  otck.kernel ins(%pb, %gb, %mb, %vb, %lr, %t, %f : memref<5xf32>, memref<5xf32>, memref<5xf32>, memref<5xf32>, memref<f32>, memref<f32>, memref<f32>) outs(%pb, %mb, %vb : memref<5xf32>, memref<5xf32>, memref<5xf32>) {
  ^bb0(%p: tensor<5xf32>, %g: tensor<5xf32>, %m: tensor<5xf32>, %v: tensor<5xf32>, %l: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>):
    %np, %nm, %nv = otc.adamw %p, %g, %m, %v, %l, %s, %k {beta1 = 0.9 : f64, beta2 = 0.999 : f64, epsilon = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    otck.yield %np, %nm, %nv : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
  }
  return
}
