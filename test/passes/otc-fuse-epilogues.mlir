// RUN: otc-opt %s --otc-fuse-epilogues --split-input-file | FileCheck %s

// Tests that a GEMM whose product is only added into an accumulator writes
// into it with `accumulate`, and that it does not when something else reads
// the product or touches the accumulator in between.

// CHECK-LABEL: func.func @weight_grad
// CHECK: %[[G:.*]] = otck.buffer {slot = "grad:w"}
// CHECK-NOT: otck.buffer : memref<8x8xf32>
// CHECK: otck.gemm %{{.*}}, %{{.*}}, %[[G]] {accumulate, transpose_lhs}
// CHECK-NOT: otck.kernel
func.func @weight_grad() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %dy = otck.buffer {slot = "dy"} : memref<4x8xf32>
  %g = otck.buffer {slot = "grad:w"} : memref<8x8xf32>
  %t = otck.buffer : memref<8x8xf32>
  otck.gemm %x, %dy, %t {transpose_lhs} : memref<4x8xf32>, memref<4x8xf32>, memref<8x8xf32>
  otck.kernel ins(%g, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%g : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %s = otc.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  return
}

// -----

// The product is read again (kept), the sum goes to another buffer, or a
// kernel in between reads the accumulator: nothing changes.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: accumulate
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @elsewhere
// CHECK-NOT: accumulate
// CHECK-LABEL: func.func @between
// CHECK-NOT: accumulate
func.func @kept() {
  %x = otck.buffer {slot = "x"} : memref<8x8xf32>
  %g = otck.buffer {slot = "grad:w"} : memref<8x8xf32>
  %y = otck.buffer {slot = "y"} : memref<8x8xf32>
  %t = otck.buffer : memref<8x8xf32>
  otck.gemm %x, %x, %t : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>
  otck.kernel ins(%g, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%g : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %s = otc.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  otck.kernel ins(%t : memref<8x8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>):
    %s = otc.neg %a : tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  return
}
func.func @elsewhere() {
  %x = otck.buffer {slot = "x"} : memref<8x8xf32>
  %g = otck.buffer {slot = "grad:w"} : memref<8x8xf32>
  %y = otck.buffer {slot = "y"} : memref<8x8xf32>
  %t = otck.buffer : memref<8x8xf32>
  otck.gemm %x, %x, %t : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>
  otck.kernel ins(%g, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %s = otc.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  return
}
func.func @between() {
  %x = otck.buffer {slot = "x"} : memref<8x8xf32>
  %g = otck.buffer {slot = "grad:w"} : memref<8x8xf32>
  %y = otck.buffer {slot = "y"} : memref<8x8xf32>
  %t = otck.buffer : memref<8x8xf32>
  otck.gemm %x, %x, %t : memref<8x8xf32>, memref<8x8xf32>, memref<8x8xf32>
  otck.kernel ins(%g : memref<8x8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>):
    %s = otc.neg %a : tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  otck.kernel ins(%g, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%g : memref<8x8xf32>) {
  ^bb0(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>):
    %s = otc.add %a, %b : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    otck.yield %s : tensor<8x8xf32>
  }
  return
}

// -----

// A bias added to the product becomes the GEMM's bias epilogue writing the
// sum's buffer (declared after the GEMM: it moves up); a BF16 product into
// FP32 (no such library form) and a product read elsewhere keep the add.
// CHECK-LABEL: func.func @bias
// CHECK: %[[Y:.*]] = otck.buffer : memref<4x8xf32>
// CHECK-NEXT: otck.gemm %{{.*}}, %{{.*}}, %[[Y]] bias %{{.*}} : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>, memref<8xf32>
// CHECK-NOT: otc.add
// CHECK: otc.tanh
// CHECK-LABEL: func.func @mixed
// CHECK-NOT: bias %
// CHECK: otc.add
func.func @bias() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  %z = otck.buffer {slot = "z"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.gemm %x, %w, %t : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  %y = otck.buffer : memref<4x8xf32>
  otck.kernel ins(%b, %t : memref<8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a0: tensor<8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.add %a0, %a1 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%y : memref<4x8xf32>) outs(%z : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.tanh %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  return
}
func.func @mixed() {
  %x = otck.buffer {slot = "x"} : memref<4x8xbf16>
  %w = otck.buffer {slot = "w"} : memref<8x8xbf16>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  %z = otck.buffer {slot = "z"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.gemm %x, %w, %t : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xf32>
  otck.kernel ins(%t, %b : memref<4x8xf32>, memref<8xf32>) outs(%z : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
    %s = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  return
}
