// RUN: otc-opt %s --split-input-file --otc-lower-to-buffers | FileCheck %s

// Tests that slot arguments become persistent buffers, matmul a GEMM, other
// ops kernels over temporaries, and that a result whose slot's old value is
// read by its own elementwise producer only is written in place.
// CHECK-LABEL: func.func @micro_step()
// CHECK-DAG: %[[X:.*]] = otck.buffer {slot = "input:x"} : memref<4x3xf32>
// CHECK-DAG: %[[W:.*]] = otck.buffer {slot = "param:w"} : memref<5x3xf32>
// CHECK-DAG: %[[ACC:.*]] = otck.buffer {slot = "grad:w"} : memref<5x3xf32>
// CHECK: %[[Y:.*]] = otck.buffer : memref<4x5xf32>
// CHECK: otck.gemm %[[X]], %[[W]], %[[Y]] {transpose_rhs}
// CHECK: %[[LOSS:.*]] = otck.buffer {slot = "loss"} : memref<f32>
// CHECK: otck.kernel ins(%[[Y]] : memref<4x5xf32>) outs(%[[LOSS]] : memref<f32>)
// CHECK: otc.reduce_sum
// CHECK: otck.kernel ins(%[[ACC]], %[[W]] : memref<5x3xf32>, memref<5x3xf32>) outs(%[[ACC]] : memref<5x3xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<5x3xf32>, %[[B:.*]]: tensor<5x3xf32>):
// CHECK-NEXT: %[[R:.*]] = otc.add %[[A]], %[[B]]
// CHECK-NEXT: otck.yield %[[R]]
// CHECK-NOT: otck.copy
// CHECK: return
func.func @micro_step(%x: tensor<4x3xf32> {otc.slot = "input:x"}, %w: tensor<5x3xf32> {otc.slot = "param:w"},
                      %acc: tensor<5x3xf32> {otc.slot = "grad:w"})
    -> (tensor<f32> {otc.slot = "loss"}, tensor<5x3xf32> {otc.slot = "grad:w"}) {
  %0 = otc.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = otc.reduce_sum %0, [0, 1] : (tensor<4x5xf32>) -> tensor<f32>
  %2 = otc.add %acc, %w : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %1, %2 : tensor<f32>, tensor<5x3xf32>
}

// -----

// Tests that a result is copied into its slot when the slot's old value is
// still read after the result is computed.
// CHECK-LABEL: func.func @swap()
// CHECK-DAG: %[[A:.*]] = otck.buffer {slot = "param:a"}
// CHECK-DAG: %[[B:.*]] = otck.buffer {slot = "param:b"}
// CHECK: %[[T:.*]] = otck.buffer : memref<3xf32>
// CHECK: otck.kernel ins(%[[B]] : memref<3xf32>) outs(%[[T]] : memref<3xf32>)
// CHECK: otck.kernel ins(%[[A]] : memref<3xf32>) outs(%[[B]] : memref<3xf32>)
// CHECK: otck.copy %[[T]], %[[A]]
func.func @swap(%a: tensor<3xf32> {otc.slot = "param:a"}, %b: tensor<3xf32> {otc.slot = "param:b"})
    -> (tensor<3xf32> {otc.slot = "param:a"}, tensor<3xf32> {otc.slot = "param:b"}) {
  %0 = otc.neg %b : tensor<3xf32>
  %1 = otc.neg %a : tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// Tests that a constant the ops read becomes a persistent "const:<n>" slot,
// one per distinct value and type across functions, that @init_constants
// fills once, so that no step fills it; and that a constant returned into a
// slot (gradient zeroing) is still written there by a kernel on every call.
// CHECK-LABEL: func.func @zero_grads()
// CHECK: %[[G:.*]] = otck.buffer {slot = "grad:w"} : memref<3xf32>
// CHECK-NEXT: otck.kernel outs(%[[G]] : memref<3xf32>)
// CHECK-NEXT: otc.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-LABEL: func.func @micro_step()
// CHECK-NOT: otc.constant
// CHECK: %[[C0:.*]] = otck.buffer {slot = "const:0"} : memref<3xf32>
// CHECK-NOT: otc.constant
// CHECK: otck.kernel ins(%{{.*}}, %[[C0]] : memref<3xf32>, memref<3xf32>)
// CHECK-NOT: otc.constant
// CHECK: %[[C1:.*]] = otck.buffer {slot = "const:1"} : memref<f32>
// CHECK-NOT: otc.constant
// CHECK: otck.kernel ins(%{{.*}}, %[[C1]] : memref<f32>, memref<f32>)
// CHECK-NOT: otc.constant
// CHECK-LABEL: func.func @optimizer_step()
// CHECK-NOT: otc.constant
// CHECK: %[[D0:.*]] = otck.buffer {slot = "const:0"} : memref<3xf32>
// CHECK-NOT: otc.constant
// CHECK: %[[D2:.*]] = otck.buffer {slot = "const:2"} : memref<3xf32>
// CHECK-NOT: otc.constant
// CHECK-LABEL: func.func @init_constants()
// CHECK-NEXT: %[[I0:.*]] = otck.buffer {slot = "const:0"} : memref<3xf32>
// CHECK-NEXT: otck.kernel outs(%[[I0]] : memref<3xf32>)
// CHECK-NEXT: %[[V0:.*]] = otc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: otck.yield %[[V0]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[I1:.*]] = otck.buffer {slot = "const:1"} : memref<f32>
// CHECK-NEXT: otck.kernel outs(%[[I1]] : memref<f32>)
// CHECK-NEXT: otc.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[I2:.*]] = otck.buffer {slot = "const:2"} : memref<3xf32>
// CHECK-NEXT: otck.kernel outs(%[[I2]] : memref<3xf32>)
// CHECK-NEXT: otc.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK: return
// CHECK-NOT: const:3
func.func @zero_grads() -> (tensor<3xf32> {otc.slot = "grad:w"}) {
  %z = otc.constant dense<0.0> : tensor<3xf32>
  return %z : tensor<3xf32>
}
func.func @micro_step(%x: tensor<3xf32> {otc.slot = "input:x"})
    -> (tensor<f32> {otc.slot = "loss"}) {
  %c = otc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %m = otc.mul %x, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = otc.reduce_sum %m, [0] : (tensor<3xf32>) -> tensor<f32>
  %h = otc.constant dense<0.5> : tensor<f32>
  %l = otc.mul %s, %h : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
func.func @optimizer_step(%w: tensor<3xf32> {otc.slot = "param:w"})
    -> (tensor<3xf32> {otc.slot = "param:w"}) {
  %c = otc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %a = otc.add %w, %c : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %o = otc.constant dense<1.0> : tensor<3xf32>
  %b = otc.sub %a, %o : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %b : tensor<3xf32>
}

// -----

// Tests that each module numbers its constant slots from zero.
// CHECK-LABEL: func.func @micro_step()
// CHECK: otck.buffer {slot = "const:0"} : memref<2xf32>
// CHECK-LABEL: func.func @init_constants()
// CHECK-NEXT: otck.buffer {slot = "const:0"} : memref<2xf32>
// CHECK-NOT: const:1
func.func @micro_step(%x: tensor<2xf32> {otc.slot = "input:x"})
    -> (tensor<2xf32> {otc.slot = "loss"}) {
  %c = otc.constant dense<[4.0, 5.0]> : tensor<2xf32>
  %m = otc.mul %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

// Tests that a sum into a slot made in steps from the slot's own value,
// (acc + a) + b (a tied weight's contributions), keeps its partial sum in
// the slot: both adds write the slot, no temporary, no copy.
// CHECK-LABEL: func.func @partial_sums()
// CHECK-DAG: %[[ACC:.*]] = otck.buffer {slot = "grad:w"} : memref<3xf32>
// CHECK-DAG: %[[X:.*]] = otck.buffer {slot = "input:x"} : memref<3xf32>
// CHECK: otck.kernel ins(%[[ACC]], %{{.*}} : memref<3xf32>, memref<3xf32>) outs(%[[ACC]] : memref<3xf32>)
// CHECK: otck.kernel ins(%[[ACC]], %{{.*}} : memref<3xf32>, memref<3xf32>) outs(%[[ACC]] : memref<3xf32>)
// CHECK-NOT: otck.copy
// CHECK: return
func.func @partial_sums(%x: tensor<3xf32> {otc.slot = "input:x"}, %acc: tensor<3xf32> {otc.slot = "grad:w"})
    -> (tensor<3xf32> {otc.slot = "grad:w"}) {
  %a = otc.exp %x : tensor<3xf32>
  %b = otc.neg %x : tensor<3xf32>
  %0 = otc.add %acc, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.add %0, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}

// -----

// Tests that a partial sum read twice stays a temporary.
// CHECK-LABEL: func.func @partial_read_twice()
// CHECK-DAG: %[[ACC:.*]] = otck.buffer {slot = "grad:w"} : memref<3xf32>
// CHECK: %[[T:.*]] = otck.buffer : memref<3xf32>
// CHECK: otck.kernel ins(%[[ACC]], %{{.*}} : memref<3xf32>, memref<3xf32>) outs(%[[T]] : memref<3xf32>)
func.func @partial_read_twice(%x: tensor<3xf32> {otc.slot = "input:x"}, %acc: tensor<3xf32> {otc.slot = "grad:w"})
    -> (tensor<3xf32> {otc.slot = "grad:w"}, tensor<3xf32> {otc.slot = "y"}) {
  %0 = otc.add %acc, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = otc.add %0, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = otc.neg %0 : tensor<3xf32>
  return %1, %2 : tensor<3xf32>, tensor<3xf32>
}
