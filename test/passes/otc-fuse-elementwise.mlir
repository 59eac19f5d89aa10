// RUN: otc-opt %s --otc-fuse-elementwise --split-input-file | FileCheck %s
// RUN: otc-opt %s "--otc-fuse-elementwise=max-ops=1" --split-input-file | FileCheck %s --check-prefix=CAP

// Tests the merging of elementwise kernels at the buffer level.

// A bias add feeding a tanh: one kernel; the sum never reaches a buffer.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: otck.buffer : memref<4x8xf32>{{$}}
// CHECK: %[[Y:.*]] = otck.buffer {slot = "y"}
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}} : memref<4x8xf32>, memref<8xf32>) outs(%[[Y]] : memref<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[S:.*]] = otc.add %[[A]], %[[B]]
// CHECK-NEXT: %[[T:.*]] = otc.tanh %[[S]]
// CHECK-NEXT: otck.yield %[[T]]
// CHECK-NOT: otck.kernel
// CAP-LABEL: func.func @chain
// CAP-COUNT-2: otck.kernel
func.func @chain() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%x, %b : memref<4x8xf32>, memref<8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
    %s = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%t : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %r = otc.tanh %a0 : tensor<4x8xf32>
    otck.yield %r : tensor<4x8xf32>
  }
  return
}

// -----

// The pre-activation is read again later (by the backward): it stays an
// output of the merged kernel, written in the same pass.
// CHECK-LABEL: func.func @kept
// CHECK: %[[T:.*]] = otck.buffer : memref<4x8xf32>
// CHECK: otck.kernel ins(%{{.*}} : memref<4x8xf32>) outs(%[[T]], %{{.*}} : memref<4x8xf32>, memref<4x8xf32>)
// CHECK: otc.neg
// CHECK-NEXT: otc.relu
// CHECK-NEXT: otck.yield
// CHECK: otck.kernel ins(%[[T]]
// CHECK-NEXT: ^bb
// CHECK-NEXT: otc.reduce_sum
func.func @kept() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %l = otck.buffer {slot = "l"} : memref<f32>
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%x : memref<4x8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.neg %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%t : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %r = otc.relu %a0 : tensor<4x8xf32>
    otck.yield %r : tensor<4x8xf32>
  }
  otck.kernel ins(%t : memref<4x8xf32>) outs(%l : memref<f32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %r = otc.reduce_sum %a0, [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
    otck.yield %r : tensor<f32>
  }
  return
}

// -----

// A kernel between them overwrites the producer's input: the producer cannot
// move down to its consumer, so nothing merges.
// CHECK-LABEL: func.func @hazard
// CHECK-COUNT-3: otck.kernel
func.func @hazard() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%x : memref<4x8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.neg %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%x : memref<4x8xf32>) outs(%x : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.exp %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%t, %x : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %r = otc.mul %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %r : tensor<4x8xf32>
  }
  return
}

// -----

// Different domains ([8] into [4x8]), a reduction, and a buffer seen through
// a view do not merge.
// CHECK-LABEL: func.func @shapes
// CHECK-COUNT-4: otck.kernel
func.func @shapes() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %l = otck.buffer {slot = "l"} : memref<32xf32>
  %u = otck.buffer : memref<8xf32>
  otck.kernel ins(%b : memref<8xf32>) outs(%u : memref<8xf32>) {
  ^bb0(%a0: tensor<8xf32>):
    %s = otc.neg %a0 : tensor<8xf32>
    otck.yield %s : tensor<8xf32>
  }
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%x, %u : memref<4x8xf32>, memref<8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
    %s = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  %v = otck.view %t : memref<4x8xf32> to memref<32xf32>
  otck.kernel ins(%v : memref<32xf32>) outs(%l : memref<32xf32>) {
  ^bb0(%a0: tensor<32xf32>):
    %s = otc.exp %a0 : tensor<32xf32>
    otck.yield %s : tensor<32xf32>
  }
  otck.kernel ins(%t : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.tanh %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  return
}

// -----

// Moving the producer down would keep both of its dying inputs (2 x 128
// bytes) alive across the GEMM in between while freeing only its output's
// 128: the peak could grow, so it stays. With nothing in between it merges.
// CHECK-LABEL: func.func @peak
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @adjacent
// CHECK-COUNT-1: otck.kernel
// CHECK-NOT: otck.kernel
func.func @peak() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %p = otck.buffer : memref<4x8xf32>
  %q = otck.buffer : memref<4x8xf32>
  otck.gemm %x, %w, %p : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.gemm %x, %w, %q : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%p, %q : memref<4x8xf32>, memref<4x8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.mul %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  %g = otck.buffer : memref<4x8xf32>
  otck.gemm %x, %w, %g : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.kernel ins(%t, %g : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %r = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %r : tensor<4x8xf32>
  }
  return
}
func.func @adjacent() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %p = otck.buffer : memref<4x8xf32>
  %q = otck.buffer : memref<4x8xf32>
  %g = otck.buffer : memref<4x8xf32>
  otck.gemm %x, %w, %p : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.gemm %x, %w, %q : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.gemm %x, %w, %g : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%p, %q : memref<4x8xf32>, memref<4x8xf32>) outs(%t : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.mul %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%t, %g : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %r = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %r : tensor<4x8xf32>
  }
  return
}
