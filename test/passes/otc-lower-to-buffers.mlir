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
