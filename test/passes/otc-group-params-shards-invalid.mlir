// RUN: %not otc-opt %s "--otc-configure=world-size=2 shard-optimizer=true" --otc-group-params=alignment=16 2>&1 | FileCheck %s

// Different hyperparameters cannot share one kernel, so the optimizer step
// cannot be sharded: an error.
// CHECK: error: cannot shard the optimizer (shard_optimizer): @optimizer_step is not one AdamW kernel per trained parameter with one set of hyperparameters
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
