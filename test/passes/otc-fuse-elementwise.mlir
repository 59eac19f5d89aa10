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

// -----

// Siblings (SwiGLU's backward, selective): db = dy * silu(a) and
// da = silu_grad(dy * b, a) both read dy and a, with a GEMM reading db in
// between. The later kernel moves up beside the earlier one (its buffer op
// with it): one kernel reads dy, a and b once and writes both. dy and b die
// there, so the peak does not grow; the GEMM still reads db after it.
// CHECK-LABEL: func.func @siblings
// CHECK: otck.gemm
// CHECK-NEXT: otck.gemm
// CHECK-NEXT: %[[DB:.*]] = otck.buffer : memref<4x8xbf16>
// CHECK-NEXT: %[[DA:.*]] = otck.buffer : memref<4x8xbf16>
// CHECK-NEXT: otck.kernel ins(%[[A:.*]], %[[DY:.*]], %[[B:.*]] : memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>) outs(%[[DB]], %[[DA]] : memref<4x8xbf16>, memref<4x8xbf16>)
// CHECK: otc.silu
// CHECK-NEXT: otc.mul
// CHECK-NEXT: otc.mul
// CHECK-NEXT: otc.silu_grad
// CHECK-NEXT: otck.yield
// CHECK: otck.gemm %[[DB]]
// CHECK-NOT: otck.kernel
// CAP-LABEL: func.func @siblings
// CAP-COUNT-2: otck.kernel
func.func @siblings() {
  %a = otck.buffer {slot = "a"} : memref<4x8xbf16>
  %w = otck.buffer {slot = "w"} : memref<8x8xbf16>
  %g = otck.buffer {slot = "g"} : memref<4x8xbf16>
  %ga = otck.buffer {slot = "ga"} : memref<4x8xbf16>
  %dy = otck.buffer : memref<4x8xbf16>
  %b = otck.buffer : memref<4x8xbf16>
  otck.gemm %a, %w, %dy : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>
  otck.gemm %a, %w, %b : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>
  %db = otck.buffer : memref<4x8xbf16>
  otck.kernel ins(%a, %dy : memref<4x8xbf16>, memref<4x8xbf16>) outs(%db : memref<4x8xbf16>) {
  ^bb0(%a0: tensor<4x8xbf16>, %a1: tensor<4x8xbf16>):
    %s = otc.silu %a0 : tensor<4x8xbf16>
    %m = otc.mul %a1, %s : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    otck.yield %m : tensor<4x8xbf16>
  }
  otck.gemm %db, %w, %g : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>
  %da = otck.buffer : memref<4x8xbf16>
  otck.kernel ins(%dy, %b, %a : memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>) outs(%da : memref<4x8xbf16>) {
  ^bb0(%a0: tensor<4x8xbf16>, %a1: tensor<4x8xbf16>, %a2: tensor<4x8xbf16>):
    %m = otc.mul %a0, %a1 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %d = otc.silu_grad %m, %a2 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    otck.yield %d : tensor<4x8xbf16>
  }
  otck.gemm %da, %w, %ga : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>
  return
}

// -----

// Siblings that stay apart: an op in between writes what the later one
// reads (@sibling_hazard); the later one's output would be born before a
// GEMM while nothing it reads dies there (@sibling_peak: dy is read again
// after it); the later one reads what the earlier one writes (@sibling_chain,
// a producer and consumer with a GEMM reading the product in between, which
// the producer cannot move past either); different domains (@sibling_domain).
// CHECK-LABEL: func.func @sibling_hazard
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @sibling_peak
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @sibling_chain
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @sibling_domain
// CHECK-COUNT-2: otck.kernel
func.func @sibling_hazard() {
  %a = otck.buffer {slot = "a"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %g = otck.buffer {slot = "g"} : memref<4x8xf32>
  %dy = otck.buffer : memref<4x8xf32>
  %u = otck.buffer : memref<4x8xf32>
  otck.gemm %a, %w, %dy : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %p = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%a, %dy : memref<4x8xf32>, memref<4x8xf32>) outs(%p : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.mul %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.gemm %p, %w, %u : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %q = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%dy, %u : memref<4x8xf32>, memref<4x8xf32>) outs(%q : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.gemm %q, %w, %g : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  return
}
func.func @sibling_peak() {
  %a = otck.buffer {slot = "a"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %g = otck.buffer {slot = "g"} : memref<4x8xf32>
  %h = otck.buffer {slot = "h"} : memref<4x8xf32>
  %dy = otck.buffer : memref<4x8xf32>
  otck.gemm %a, %w, %dy : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %p = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%a, %dy : memref<4x8xf32>, memref<4x8xf32>) outs(%p : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.mul %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.gemm %p, %w, %g : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %q = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%a, %dy : memref<4x8xf32>, memref<4x8xf32>) outs(%q : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.gemm %q, %dy, %h : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
  return
}
func.func @sibling_chain() {
  %a = otck.buffer {slot = "a"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %g = otck.buffer {slot = "g"} : memref<4x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %p = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%a : memref<4x8xf32>) outs(%p : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %m = otc.neg %a0 : tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.gemm %p, %w, %g : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.kernel ins(%a, %p : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  return
}
func.func @sibling_domain() {
  %a = otck.buffer {slot = "a"} : memref<4x8xf32>
  %y = otck.buffer {slot = "y"} : memref<4x8xf32>
  %z = otck.buffer {slot = "z"} : memref<8xf32>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  otck.kernel ins(%a : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %m = otc.neg %a0 : tensor<4x8xf32>
    otck.yield %m : tensor<4x8xf32>
  }
  otck.kernel ins(%b, %a : memref<8xf32>, memref<4x8xf32>) outs(%z : memref<8xf32>) {
  ^bb0(%a0: tensor<8xf32>, %a1: tensor<4x8xf32>):
    %m = otc.neg %a0 : tensor<8xf32>
    otck.yield %m : tensor<8xf32>
  }
  return
}

// -----

// Slice folding: the halves of a fused gate/up projection's output, read by
// the activation and later by its gradient, are never written: each reader
// takes in a copy of the slices and reads the projection's output at their
// offsets; the slice kernels and the halves' buffers go.
// CHECK-LABEL: func.func @fold_slices
// CHECK-NOT: otck.buffer : memref<2x4xf32>
// CHECK: otck.kernel ins(%[[X:.*]] : memref<2x8xf32>) outs(%{{.*}} : memref<2x4xf32>)
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[U:.*]] = otc.slice %[[A]], [0, 4], [1, 1]
// CHECK-NEXT: %[[G:.*]] = otc.slice %[[A]], [0, 0], [1, 1]
// CHECK-NEXT: %[[E:.*]] = otc.gelu %[[G]]
// CHECK-NEXT: otc.mul %[[E]], %[[U]]
// CHECK: otck.gemm
// CHECK: otck.gemm
// CHECK: otck.kernel ins(%{{.*}}, %[[X]] : memref<2x4xf32>, memref<2x8xf32>) outs(%{{.*}} : memref<2x4xf32>)
// CHECK: otc.slice {{.*}}, [0, 4], [1, 1]
// CHECK: otc.slice {{.*}}, [0, 0], [1, 1]
// CHECK-NOT: otck.kernel
func.func @fold_slices() {
  %x = otck.buffer {slot = "x"} : memref<2x8xf32>
  %w = otck.buffer {slot = "w"} : memref<4x4xf32>
  %y = otck.buffer {slot = "y"} : memref<2x4xf32>
  %h = otck.buffer {slot = "h"} : memref<2x4xf32>
  %dg = otck.buffer {slot = "dg"} : memref<2x4xf32>
  %g = otck.buffer : memref<2x4xf32>
  %u = otck.buffer : memref<2x4xf32>
  otck.kernel ins(%x : memref<2x8xf32>) outs(%g : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 0], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%x : memref<2x8xf32>) outs(%u : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 4], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%g, %u : memref<2x4xf32>, memref<2x4xf32>) outs(%y : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<2x4xf32>):
    %a = otc.gelu %a0 : tensor<2x4xf32>
    %m = otc.mul %a, %a1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    otck.yield %m : tensor<2x4xf32>
  }
  otck.gemm %y, %w, %h : memref<2x4xf32>, memref<4x4xf32>, memref<2x4xf32>
  %dy = otck.buffer {slot = "dy"} : memref<2x4xf32>
  otck.gemm %h, %w, %dy : memref<2x4xf32>, memref<4x4xf32>, memref<2x4xf32>
  otck.kernel ins(%dy, %u, %g : memref<2x4xf32>, memref<2x4xf32>, memref<2x4xf32>) outs(%dg : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<2x4xf32>, %a2: tensor<2x4xf32>):
    %m = otc.mul %a0, %a1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %d = otc.mul %m, %a2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    otck.yield %d : tensor<2x4xf32>
  }
  return
}

// -----

// No fold where something other than an elementwise kernel reads a half
// (a GEMM), or where the slice's input is written between the slice and
// its reader: the slice stays a kernel of its own.
// CHECK-LABEL: func.func @keep_slices
// CHECK: otck.kernel ins(%{{.*}} : memref<2x8xf32>) outs(%[[H:.*]] : memref<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: otc.slice
// CHECK-NEXT: otck.yield
// CHECK: otck.kernel ins(%[[H]] : memref<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: otc.gelu
// CHECK: otck.gemm %[[H]]
// CHECK-LABEL: func.func @overwritten
// CHECK: otck.kernel ins(%{{.*}} : memref<2x8xf32>) outs(%{{.*}} : memref<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: otc.slice
// CHECK-NEXT: otck.yield
func.func @keep_slices() {
  %x = otck.buffer {slot = "x"} : memref<2x8xf32>
  %w = otck.buffer {slot = "w"} : memref<4x4xf32>
  %y = otck.buffer {slot = "y"} : memref<2x4xf32>
  %h = otck.buffer {slot = "h"} : memref<2x4xf32>
  %g = otck.buffer : memref<2x4xf32>
  otck.kernel ins(%x : memref<2x8xf32>) outs(%g : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 0], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%g : memref<2x4xf32>) outs(%y : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>):
    %a = otc.gelu %a0 : tensor<2x4xf32>
    otck.yield %a : tensor<2x4xf32>
  }
  otck.gemm %g, %w, %h : memref<2x4xf32>, memref<4x4xf32>, memref<2x4xf32>
  return
}
func.func @overwritten() {
  %x = otck.buffer {slot = "x"} : memref<2x8xf32>
  %v = otck.buffer {slot = "v"} : memref<2x8xf32>
  %y = otck.buffer {slot = "y"} : memref<2x4xf32>
  %g = otck.buffer : memref<2x4xf32>
  otck.kernel ins(%x : memref<2x8xf32>) outs(%g : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 0], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%v : memref<2x8xf32>) outs(%x : memref<2x8xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %n = otc.neg %a0 : tensor<2x8xf32>
    otck.yield %n : tensor<2x8xf32>
  }
  otck.kernel ins(%g : memref<2x4xf32>) outs(%y : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>):
    %a = otc.gelu %a0 : tensor<2x4xf32>
    otck.yield %a : tensor<2x4xf32>
  }
  return
}

// -----

// No fold where it would keep more bytes alive: only one half is read
// again later, so folding would keep the whole projection output (8
// values a row) where that half (4) was kept.
// CHECK-LABEL: func.func @half_kept
// CHECK-COUNT-2: otc.slice {{.*}}
// CHECK-NOT: otc.slice
func.func @half_kept() {
  %x = otck.buffer : memref<2x8xf32>
  %v = otck.buffer {slot = "v"} : memref<2x8xf32>
  %w = otck.buffer {slot = "w"} : memref<4x4xf32>
  %y = otck.buffer {slot = "y"} : memref<2x4xf32>
  %h = otck.buffer {slot = "h"} : memref<2x4xf32>
  %dg = otck.buffer {slot = "dg"} : memref<2x4xf32>
  %g = otck.buffer : memref<2x4xf32>
  %u = otck.buffer : memref<2x4xf32>
  otck.kernel ins(%v : memref<2x8xf32>) outs(%x : memref<2x8xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %n = otc.neg %a0 : tensor<2x8xf32>
    otck.yield %n : tensor<2x8xf32>
  }
  otck.kernel ins(%x : memref<2x8xf32>) outs(%g : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 0], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%x : memref<2x8xf32>) outs(%u : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x8xf32>):
    %s = otc.slice %a0, [0, 4], [1, 1] : (tensor<2x8xf32>) -> tensor<2x4xf32>
    otck.yield %s : tensor<2x4xf32>
  }
  otck.kernel ins(%g, %u : memref<2x4xf32>, memref<2x4xf32>) outs(%y : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<2x4xf32>):
    %a = otc.gelu %a0 : tensor<2x4xf32>
    %m = otc.mul %a, %a1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    otck.yield %m : tensor<2x4xf32>
  }
  otck.gemm %y, %w, %h : memref<2x4xf32>, memref<4x4xf32>, memref<2x4xf32>
  %dy = otck.buffer {slot = "dy"} : memref<2x4xf32>
  otck.gemm %h, %w, %dy : memref<2x4xf32>, memref<4x4xf32>, memref<2x4xf32>
  otck.kernel ins(%dy, %g : memref<2x4xf32>, memref<2x4xf32>) outs(%dg : memref<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<2x4xf32>):
    %m = otc.mul %a0, %a1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    otck.yield %m : tensor<2x4xf32>
  }
  return
}
