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

// -----

// GELU (tanh form) after a GEMM with a bias becomes the gelu epilogue: the
// GEMM writes the activation where the kernel wrote it (declared before the
// GEMM now) and keeps the pre-activation in aux for the backward. Its
// backward, gelu_grad of a GEMM's product that nothing else reads, becomes
// the dgelu epilogue reading the pre-activation (a view with the product's
// shape), and the product's buffer goes away. A view of the activation
// (HF-style reshapes around the MLP) does not stop either fusion.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[PRE:.*]] = otck.buffer : memref<4x16xbf16>
// CHECK-NEXT: %[[HB:.*]] = otck.buffer : memref<2x2x16xbf16>
// CHECK-NEXT: %[[H:.*]] = otck.view %[[HB]] : memref<2x2x16xbf16> to memref<4x16xbf16>
// CHECK-NEXT: otck.gemm %{{.*}}, %{{.*}}, %[[H]] bias %{{.*}} aux(%[[PRE]] : memref<4x16xbf16>) {gelu} : memref<4x8xbf16>, memref<8x16xbf16>, memref<4x16xbf16>, memref<16xbf16>
// CHECK-NOT: otc.gelu
// CHECK: otck.copy %[[HB]]
// CHECK-NEXT: %[[DXB:.*]] = otck.buffer : memref<2x2x16xbf16>
// CHECK-NEXT: %[[DX:.*]] = otck.view %[[DXB]] : memref<2x2x16xbf16> to memref<4x16xbf16>
// CHECK-NEXT: otck.gemm %{{.*}}, %{{.*}}, %[[DX]] aux(%[[PRE]] : memref<4x16xbf16>) {dgelu, transpose_rhs} : memref<4x8xbf16>, memref<16x8xbf16>, memref<4x16xbf16>
// CHECK-NOT: otc.gelu_grad
// CHECK-NOT: otck.buffer : memref<4x16xbf16>
// CHECK: otc.column_sum
func.func @mlp() {
  %x = otck.buffer {slot = "x"} : memref<4x8xbf16>
  %w = otck.buffer {slot = "w"} : memref<8x16xbf16>
  %b = otck.buffer {slot = "b"} : memref<16xbf16>
  %dy = otck.buffer {slot = "dy"} : memref<4x8xbf16>
  %w2 = otck.buffer {slot = "w2"} : memref<16x8xbf16>
  %db = otck.buffer {slot = "db"} : memref<16xf32>
  %hv = otck.buffer {slot = "hv"} : memref<2x2x16xbf16>
  %pre = otck.buffer : memref<4x16xbf16>
  otck.gemm %x, %w, %pre bias %b : memref<4x8xbf16>, memref<8x16xbf16>, memref<4x16xbf16>, memref<16xbf16>
  %prev = otck.view %pre : memref<4x16xbf16> to memref<2x2x16xbf16>
  %h = otck.buffer : memref<2x2x16xbf16>
  otck.kernel ins(%prev : memref<2x2x16xbf16>) outs(%h : memref<2x2x16xbf16>) {
  ^bb0(%a0: tensor<2x2x16xbf16>):
    %s = otc.gelu %a0 {approximate = "tanh"} : tensor<2x2x16xbf16>
    otck.yield %s : tensor<2x2x16xbf16>
  }
  otck.copy %h, %hv : memref<2x2x16xbf16>
  %t = otck.buffer : memref<4x16xbf16>
  otck.gemm %dy, %w2, %t {transpose_rhs} : memref<4x8xbf16>, memref<16x8xbf16>, memref<4x16xbf16>
  %tv = otck.view %t : memref<4x16xbf16> to memref<2x2x16xbf16>
  %dxv = otck.buffer : memref<2x2x16xbf16>
  otck.kernel ins(%tv, %prev : memref<2x2x16xbf16>, memref<2x2x16xbf16>) outs(%dxv : memref<2x2x16xbf16>) {
  ^bb0(%a0: tensor<2x2x16xbf16>, %a1: tensor<2x2x16xbf16>):
    %s = otc.gelu_grad %a0, %a1 {approximate = "tanh"} : (tensor<2x2x16xbf16>, tensor<2x2x16xbf16>) -> tensor<2x2x16xbf16>
    otck.yield %s : tensor<2x2x16xbf16>
  }
  %dx = otck.view %dxv : memref<2x2x16xbf16> to memref<4x16xbf16>
  otck.kernel ins(%dx : memref<4x16xbf16>) outs(%db : memref<16xf32>) {
  ^bb0(%a0: tensor<4x16xbf16>):
    %s = otc.column_sum %a0 : (tensor<4x16xbf16>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  return
}

// -----

// No GELU epilogue: the exact (erf) GELU, which cuBLASLt has no epilogue
// for; rows of 12 elements (not a multiple of 8); a kernel in between that
// reads the activation's buffer; a product that something else reads too.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: {gelu}
// CHECK: otc.gelu
// CHECK-LABEL: func.func @narrow
// CHECK-NOT: {gelu}
// CHECK: otc.gelu
// CHECK-LABEL: func.func @between_gelu
// CHECK-NOT: {gelu}
// CHECK: otc.gelu
// CHECK-LABEL: func.func @product_kept
// CHECK-NOT: dgelu
// CHECK: otc.gelu_grad
func.func @erf() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x16xf32>
  %h = otck.buffer {slot = "h"} : memref<4x16xf32>
  %pre = otck.buffer : memref<4x16xf32>
  otck.gemm %x, %w, %pre : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  otck.kernel ins(%pre : memref<4x16xf32>) outs(%h : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>):
    %s = otc.gelu %a0 : tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  return
}
func.func @narrow() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x12xf32>
  %h = otck.buffer {slot = "h"} : memref<4x12xf32>
  %pre = otck.buffer : memref<4x12xf32>
  otck.gemm %x, %w, %pre : memref<4x8xf32>, memref<8x12xf32>, memref<4x12xf32>
  otck.kernel ins(%pre : memref<4x12xf32>) outs(%h : memref<4x12xf32>) {
  ^bb0(%a0: tensor<4x12xf32>):
    %s = otc.gelu %a0 {approximate = "tanh"} : tensor<4x12xf32>
    otck.yield %s : tensor<4x12xf32>
  }
  return
}
func.func @between_gelu() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x16xf32>
  %h = otck.buffer {slot = "h"} : memref<4x16xf32>
  %z = otck.buffer {slot = "z"} : memref<4x16xf32>
  %pre = otck.buffer : memref<4x16xf32>
  otck.gemm %x, %w, %pre : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  otck.kernel ins(%h : memref<4x16xf32>) outs(%z : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>):
    %s = otc.neg %a0 : tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  otck.kernel ins(%pre : memref<4x16xf32>) outs(%h : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>):
    %s = otc.gelu %a0 {approximate = "tanh"} : tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  return
}
func.func @product_kept() {
  %dy = otck.buffer {slot = "dy"} : memref<4x8xf32>
  %w2 = otck.buffer {slot = "w2"} : memref<8x16xf32>
  %pre = otck.buffer {slot = "pre"} : memref<4x16xf32>
  %dx = otck.buffer {slot = "dx"} : memref<4x16xf32>
  %z = otck.buffer {slot = "z"} : memref<4x16xf32>
  %t = otck.buffer : memref<4x16xf32>
  otck.gemm %dy, %w2, %t : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  otck.kernel ins(%t, %pre : memref<4x16xf32>, memref<4x16xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = otc.gelu_grad %a0, %a1 {approximate = "tanh"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  otck.kernel ins(%t : memref<4x16xf32>) outs(%z : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>):
    %s = otc.neg %a0 : tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  return
}

// -----

// A residual add right after a projection becomes the GEMM's addend (read as
// cuBLASLt's C; the sum written where the add wrote it, declared before the
// GEMM now); when the add writes over its other operand, the GEMM
// accumulates into it, bias and all. Not when a kernel in between writes the
// residual, nor when the sum broadcasts.
// CHECK-LABEL: func.func @residual
// CHECK: %[[X:.*]] = otck.buffer {slot = "x"} : memref<4x8xbf16>
// CHECK: %[[Y:.*]] = otck.buffer : memref<4x8xbf16>
// CHECK-NEXT: otck.gemm %{{.*}}, %{{.*}}, %[[Y]] bias %{{.*}} addend(%[[X]] : memref<4x8xbf16>) : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>, memref<8xbf16>
// CHECK-NOT: otc.add
// CHECK: otck.copy %[[Y]]
// CHECK-LABEL: func.func @residual_in_place
// CHECK: otck.gemm %{{.*}}, %{{.*}}, %[[R:[^ ]*]] bias %{{.*}} {accumulate} : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>, memref<8xf32>
// CHECK-NOT: otc.add
// CHECK-LABEL: func.func @residual_written_between
// CHECK-NOT: addend(
// CHECK: otc.add
// CHECK-LABEL: func.func @residual_broadcast
// CHECK-NOT: addend(
// CHECK: otc.add
func.func @residual() {
  %h = otck.buffer {slot = "h"} : memref<4x8xbf16>
  %w = otck.buffer {slot = "w"} : memref<8x8xbf16>
  %b = otck.buffer {slot = "b"} : memref<8xbf16>
  %x = otck.buffer {slot = "x"} : memref<4x8xbf16>
  %z = otck.buffer {slot = "z"} : memref<4x8xbf16>
  %t = otck.buffer : memref<4x8xbf16>
  otck.gemm %h, %w, %t bias %b : memref<4x8xbf16>, memref<8x8xbf16>, memref<4x8xbf16>, memref<8xbf16>
  %y = otck.buffer : memref<4x8xbf16>
  otck.kernel ins(%x, %t : memref<4x8xbf16>, memref<4x8xbf16>) outs(%y : memref<4x8xbf16>) {
  ^bb0(%a0: tensor<4x8xbf16>, %a1: tensor<4x8xbf16>):
    %s = otc.add %a0, %a1 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    otck.yield %s : tensor<4x8xbf16>
  }
  otck.copy %y, %z : memref<4x8xbf16>
  return
}
func.func @residual_in_place() {
  %h = otck.buffer {slot = "h"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %b = otck.buffer {slot = "b"} : memref<8xf32>
  %r = otck.buffer {slot = "r"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.gemm %h, %w, %t bias %b : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>, memref<8xf32>
  otck.kernel ins(%t, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%r : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  return
}
func.func @residual_written_between() {
  %h = otck.buffer {slot = "h"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %z = otck.buffer {slot = "z"} : memref<4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.gemm %h, %w, %t : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.kernel ins(%h : memref<4x8xf32>) outs(%x : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %s = otc.neg %a0 : tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  otck.kernel ins(%x, %t : memref<4x8xf32>, memref<4x8xf32>) outs(%z : memref<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.add %a0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    otck.yield %s : tensor<4x8xf32>
  }
  return
}
func.func @residual_broadcast() {
  %h = otck.buffer {slot = "h"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x8xf32>
  %x = otck.buffer {slot = "x"} : memref<2x4x8xf32>
  %z = otck.buffer {slot = "z"} : memref<2x4x8xf32>
  %t = otck.buffer : memref<4x8xf32>
  otck.gemm %h, %w, %t : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>
  otck.kernel ins(%x, %t : memref<2x4x8xf32>, memref<4x8xf32>) outs(%z : memref<2x4x8xf32>) {
  ^bb0(%a0: tensor<2x4x8xf32>, %a1: tensor<4x8xf32>):
    %s = otc.add %a0, %a1 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    otck.yield %s : tensor<2x4x8xf32>
  }
  return
}

// -----

// A layer norm gradient whose dx only an add into the residual stream's
// gradient reads: the call takes that gradient as its residual and writes
// the sum (declared after the call: moved up), the add kernel and dx's
// temporary go away. Either operand order; written over the residual too.
// CHECK-LABEL: func.func @ln_residual
// CHECK: %[[R:.*]] = otck.buffer {slot = "r"} : memref<16x32xbf16>
// CHECK: %[[Y:.*]] = otck.buffer {slot = "y"} : memref<16x32xbf16>
// CHECK-NOT: otck.buffer : memref<16x32xbf16>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[R]] : {{.*}}) outs(%[[Y]], %{{.*}}, %{{.*}} :
// CHECK-NEXT: ^bb0({{.*}}, %[[A:.*]]: tensor<16x32xbf16>):
// CHECK: otc.layer_norm_grad {{.*}} residual %[[A]] {axis = 1 : i64}
// CHECK-NOT: otc.add
// CHECK-LABEL: func.func @ln_residual_in_place
// CHECK: %[[R:.*]] = otck.buffer {slot = "r"} : memref<2x8x32xbf16>
// CHECK: %[[V:.*]] = otck.view %[[R]] : memref<2x8x32xbf16> to memref<16x32xbf16>
// CHECK: otck.kernel ins({{.*}}, %[[V]] : {{.*}}) outs(%[[V]], %{{.*}}, %{{.*}} :
// CHECK: otc.layer_norm_grad {{.*}} residual
// CHECK-NOT: otc.add
func.func @ln_residual() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<16x32xbf16>
  %g = otck.buffer {slot = "g"} : memref<32xbf16>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<16x32xbf16>
  %dg = otck.buffer {slot = "dg"} : memref<32xbf16>
  %db = otck.buffer {slot = "db"} : memref<32xbf16>
  %t = otck.buffer : memref<16x32xbf16>
  otck.kernel ins(%dy, %x, %g, %m, %s : memref<16x32xbf16>, memref<16x32xbf16>, memref<32xbf16>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xbf16>, memref<32xbf16>, memref<32xbf16>) {
  ^bb0(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<32xbf16>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b gamma %c, %d, %e {axis = 1 : i64} : (tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<32xbf16>, tensor<32xbf16>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xbf16>, tensor<32xbf16>, tensor<32xbf16>
  }
  %y = otck.buffer {slot = "y"} : memref<16x32xbf16>
  otck.kernel ins(%r, %t : memref<16x32xbf16>, memref<16x32xbf16>) outs(%y : memref<16x32xbf16>) {
  ^bb0(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>):
    %v = otc.add %a, %b : (tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x32xbf16>
    otck.yield %v : tensor<16x32xbf16>
  }
  return
}
func.func @ln_residual_in_place() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<16x32xbf16>
  %g = otck.buffer {slot = "g"} : memref<32xbf16>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<2x8x32xbf16>
  %dg = otck.buffer {slot = "dg"} : memref<32xbf16>
  %db = otck.buffer {slot = "db"} : memref<32xbf16>
  %t = otck.buffer : memref<16x32xbf16>
  otck.kernel ins(%dy, %x, %g, %m, %s : memref<16x32xbf16>, memref<16x32xbf16>, memref<32xbf16>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xbf16>, memref<32xbf16>, memref<32xbf16>) {
  ^bb0(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<32xbf16>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b gamma %c, %d, %e {axis = 1 : i64} : (tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32xbf16>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<32xbf16>, tensor<32xbf16>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xbf16>, tensor<32xbf16>, tensor<32xbf16>
  }
  %tv = otck.view %t : memref<16x32xbf16> to memref<2x8x32xbf16>
  otck.kernel ins(%tv, %r : memref<2x8x32xbf16>, memref<2x8x32xbf16>) outs(%r : memref<2x8x32xbf16>) {
  ^bb0(%a: tensor<2x8x32xbf16>, %b: tensor<2x8x32xbf16>):
    %v = otc.add %a, %b : (tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x32xbf16>
    otck.yield %v : tensor<2x8x32xbf16>
  }
  return
}

// -----

// The same for an RMS norm gradient (Llama's residual stream), its dx
// written over the residual's bytes.
// CHECK-LABEL: func.func @rms_residual
// CHECK: %[[R:.*]] = otck.buffer {slot = "r"} : memref<16x32xbf16>
// CHECK-NOT: otck.buffer : memref<16x32xbf16>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[R]] : {{.*}}) outs(%[[R]], %{{.*}} :
// CHECK-NEXT: ^bb0({{.*}}, %[[A:.*]]: tensor<16x32xbf16>):
// CHECK: otc.rms_norm_grad {{.*}} residual %[[A]] {axis = 1 : i64}
// CHECK-NOT: otc.add
func.func @rms_residual() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<16x32xbf16>
  %g = otck.buffer {slot = "g"} : memref<32xbf16>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<16x32xbf16>
  %dg = otck.buffer {slot = "dg"} : memref<32xbf16>
  %t = otck.buffer : memref<16x32xbf16>
  otck.kernel ins(%dy, %x, %g, %s : memref<16x32xbf16>, memref<16x32xbf16>, memref<32xbf16>, memref<16xf32>) outs(%t, %dg : memref<16x32xbf16>, memref<32xbf16>) {
  ^bb0(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>, %c: tensor<32xbf16>, %e: tensor<16xf32>):
    %dx, %dgamma = otc.rms_norm_grad %a, %b gamma %c, %e {axis = 1 : i64} : (tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32xbf16>, tensor<16xf32>) -> (tensor<16x32xbf16>, tensor<32xbf16>)
    otck.yield %dx, %dgamma : tensor<16x32xbf16>, tensor<32xbf16>
  }
  otck.kernel ins(%t, %r : memref<16x32xbf16>, memref<16x32xbf16>) outs(%r : memref<16x32xbf16>) {
  ^bb0(%a: tensor<16x32xbf16>, %b: tensor<16x32xbf16>):
    %v = otc.add %a, %b : (tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<16x32xbf16>
    otck.yield %v : tensor<16x32xbf16>
  }
  return
}

// -----

// Not fused: the residual is written in between, dx has a second reader,
// the add broadcasts a row, or y is the call's own input.
// CHECK-LABEL: func.func @ln_written_between
// CHECK-NOT: residual
// CHECK: otc.add
// CHECK-LABEL: func.func @ln_second_reader
// CHECK-NOT: residual
// CHECK: otc.add
// CHECK-LABEL: func.func @ln_broadcast
// CHECK-NOT: residual
// CHECK: otc.add
// CHECK-LABEL: func.func @ln_over_input
// CHECK-NOT: residual
// CHECK: otc.add
func.func @ln_written_between() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xf32>
  %x = otck.buffer {slot = "x"} : memref<16x32xf32>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<16x32xf32>
  %y = otck.buffer {slot = "y"} : memref<16x32xf32>
  %dg = otck.buffer {slot = "dg"} : memref<32xf32>
  %db = otck.buffer {slot = "db"} : memref<32xf32>
  %t = otck.buffer : memref<16x32xf32>
  otck.kernel ins(%dy, %x, %m, %s : memref<16x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xf32>, memref<32xf32>, memref<32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b, %d, %e {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
  }
  otck.kernel ins(%x : memref<16x32xf32>) outs(%r : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>):
    %v = otc.neg %a : tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  otck.kernel ins(%t, %r : memref<16x32xf32>, memref<16x32xf32>) outs(%y : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>):
    %v = otc.add %a, %b : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  return
}
func.func @ln_second_reader() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xf32>
  %x = otck.buffer {slot = "x"} : memref<16x32xf32>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<16x32xf32>
  %y = otck.buffer {slot = "y"} : memref<16x32xf32>
  %z = otck.buffer {slot = "z"} : memref<16x32xf32>
  %dg = otck.buffer {slot = "dg"} : memref<32xf32>
  %db = otck.buffer {slot = "db"} : memref<32xf32>
  %t = otck.buffer : memref<16x32xf32>
  otck.kernel ins(%dy, %x, %m, %s : memref<16x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xf32>, memref<32xf32>, memref<32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b, %d, %e {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
  }
  otck.kernel ins(%t, %r : memref<16x32xf32>, memref<16x32xf32>) outs(%y : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>):
    %v = otc.add %a, %b : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  otck.kernel ins(%t : memref<16x32xf32>) outs(%z : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>):
    %v = otc.neg %a : tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  return
}
func.func @ln_broadcast() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xf32>
  %x = otck.buffer {slot = "x"} : memref<16x32xf32>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<32xf32>
  %y = otck.buffer {slot = "y"} : memref<16x32xf32>
  %dg = otck.buffer {slot = "dg"} : memref<32xf32>
  %db = otck.buffer {slot = "db"} : memref<32xf32>
  %t = otck.buffer : memref<16x32xf32>
  otck.kernel ins(%dy, %x, %m, %s : memref<16x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xf32>, memref<32xf32>, memref<32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b, %d, %e {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
  }
  otck.kernel ins(%t, %r : memref<16x32xf32>, memref<32xf32>) outs(%y : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<32xf32>):
    %v = otc.add %a, %b : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  return
}
func.func @ln_over_input() {
  %dy = otck.buffer {slot = "dy"} : memref<16x32xf32>
  %x = otck.buffer {slot = "x"} : memref<16x32xf32>
  %m = otck.buffer {slot = "m"} : memref<16xf32>
  %s = otck.buffer {slot = "s"} : memref<16xf32>
  %r = otck.buffer {slot = "r"} : memref<16x32xf32>
  %dg = otck.buffer {slot = "dg"} : memref<32xf32>
  %db = otck.buffer {slot = "db"} : memref<32xf32>
  %t = otck.buffer : memref<16x32xf32>
  otck.kernel ins(%dy, %x, %m, %s : memref<16x32xf32>, memref<16x32xf32>, memref<16xf32>, memref<16xf32>) outs(%t, %dg, %db : memref<16x32xf32>, memref<32xf32>, memref<32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>, %d: tensor<16xf32>, %e: tensor<16xf32>):
    %dx, %dgamma, %dbeta = otc.layer_norm_grad %a, %b, %d, %e {axis = 1 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>)
    otck.yield %dx, %dgamma, %dbeta : tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>
  }
  otck.kernel ins(%t, %r : memref<16x32xf32>, memref<16x32xf32>) outs(%x : memref<16x32xf32>) {
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<16x32xf32>):
    %v = otc.add %a, %b : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    otck.yield %v : tensor<16x32xf32>
  }
  return
}

// -----

// The chunked LM head's weight gradient, only added into the gradient slot:
// the call adds into the slot itself (acc, its dw written over the slot) and
// the temporary and the add kernel go away. With a reader of the slot in
// between, nothing changes.
// CHECK-LABEL: func.func @head_grad
// CHECK: %[[G:.*]] = otck.buffer {slot = "grad:wte"} : memref<50x16xf32>
// CHECK-NOT: otck.buffer : memref<50x16xf32>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[G]] : memref<f32>, memref<8x16xf32>, memref<50x16xf32>, memref<8xi64>, memref<50x16xf32>) outs(%{{.*}}, %[[G]], %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK: ^bb0(%{{.*}}: tensor<f32>, %{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<50x16xf32>, %{{.*}}: tensor<8xi64>, %[[ACC:.*]]: tensor<50x16xf32>):
// CHECK: otc.linear_cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} acc %[[ACC]] {chunk_rows = 4 : i64}
// CHECK-NOT: otck.kernel
// CHECK-LABEL: func.func @head_grad_read_between
// CHECK-NOT: acc
// CHECK-COUNT-3: otck.kernel
func.func @head_grad() {
  %one = otck.buffer {slot = "one"} : memref<f32>
  %h = otck.buffer {slot = "h"} : memref<8x16xf32>
  %w = otck.buffer {slot = "param:wte"} : memref<50x16xf32>
  %y = otck.buffer {slot = "y"} : memref<8xi64>
  %g = otck.buffer {slot = "grad:wte"} : memref<50x16xf32>
  %dh = otck.buffer : memref<8x16xf32>
  %t = otck.buffer : memref<50x16xf32>
  %loss = otck.buffer {slot = "loss"} : memref<f32>
  %rows = otck.buffer : memref<8xf32>
  %chunk = otck.buffer : memref<4x50xf32>
  otck.kernel ins(%one, %h, %w, %y : memref<f32>, memref<8x16xf32>, memref<50x16xf32>, memref<8xi64>) outs(%dh, %t, %loss, %rows, %chunk : memref<8x16xf32>, memref<50x16xf32>, memref<f32>, memref<8xf32>, memref<4x50xf32>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<8x16xf32>, %a2: tensor<50x16xf32>, %a3: tensor<8xi64>):
    %r:5 = otc.linear_cross_entropy_with_grad %a0, %a1, %a2, %a3 {chunk_rows = 4 : i64} : (tensor<f32>, tensor<8x16xf32>, tensor<50x16xf32>, tensor<8xi64>) -> (tensor<8x16xf32>, tensor<50x16xf32>, tensor<f32>, tensor<8xf32>, tensor<4x50xf32>)
    otck.yield %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<8x16xf32>, tensor<50x16xf32>, tensor<f32>, tensor<8xf32>, tensor<4x50xf32>
  }
  otck.kernel ins(%g, %t : memref<50x16xf32>, memref<50x16xf32>) outs(%g : memref<50x16xf32>) {
  ^bb0(%a: tensor<50x16xf32>, %b: tensor<50x16xf32>):
    %s = otc.add %a, %b : (tensor<50x16xf32>, tensor<50x16xf32>) -> tensor<50x16xf32>
    otck.yield %s : tensor<50x16xf32>
  }
  return
}
func.func @head_grad_read_between() {
  %one = otck.buffer {slot = "one"} : memref<f32>
  %h = otck.buffer {slot = "h"} : memref<8x16xf32>
  %w = otck.buffer {slot = "param:wte"} : memref<50x16xf32>
  %y = otck.buffer {slot = "y"} : memref<8xi64>
  %g = otck.buffer {slot = "grad:wte"} : memref<50x16xf32>
  %o = otck.buffer {slot = "o"} : memref<50x16xf32>
  %dh = otck.buffer : memref<8x16xf32>
  %t = otck.buffer : memref<50x16xf32>
  %loss = otck.buffer {slot = "loss"} : memref<f32>
  %rows = otck.buffer : memref<8xf32>
  %chunk = otck.buffer : memref<4x50xf32>
  otck.kernel ins(%one, %h, %w, %y : memref<f32>, memref<8x16xf32>, memref<50x16xf32>, memref<8xi64>) outs(%dh, %t, %loss, %rows, %chunk : memref<8x16xf32>, memref<50x16xf32>, memref<f32>, memref<8xf32>, memref<4x50xf32>) {
  ^bb0(%a0: tensor<f32>, %a1: tensor<8x16xf32>, %a2: tensor<50x16xf32>, %a3: tensor<8xi64>):
    %r:5 = otc.linear_cross_entropy_with_grad %a0, %a1, %a2, %a3 {chunk_rows = 4 : i64} : (tensor<f32>, tensor<8x16xf32>, tensor<50x16xf32>, tensor<8xi64>) -> (tensor<8x16xf32>, tensor<50x16xf32>, tensor<f32>, tensor<8xf32>, tensor<4x50xf32>)
    otck.yield %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<8x16xf32>, tensor<50x16xf32>, tensor<f32>, tensor<8xf32>, tensor<4x50xf32>
  }
  otck.kernel ins(%g : memref<50x16xf32>) outs(%o : memref<50x16xf32>) {
  ^bb0(%a: tensor<50x16xf32>):
    %s = otc.neg %a : tensor<50x16xf32>
    otck.yield %s : tensor<50x16xf32>
  }
  otck.kernel ins(%g, %t : memref<50x16xf32>, memref<50x16xf32>) outs(%g : memref<50x16xf32>) {
  ^bb0(%a: tensor<50x16xf32>, %b: tensor<50x16xf32>):
    %s = otc.add %a, %b : (tensor<50x16xf32>, tensor<50x16xf32>) -> tensor<50x16xf32>
    otck.yield %s : tensor<50x16xf32>
  }
  return
}

// -----

// An embedding's gradient (BF16), only added into the gradient slot: the
// call adds into the slot itself (acc, its result written over the slot),
// so the table-sized temporary and the add kernel go away. A gradient that
// something else reads too, and one added into a slot that a kernel reads
// in between, stay as they are.
// CHECK-LABEL: func.func @gather_grad_into_slot
// CHECK: %[[G:.*]] = otck.buffer {slot = "grad:wte"} : memref<50x16xbf16>
// CHECK-NOT: otck.buffer : memref<50x16xbf16>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %[[G]] : memref<2x4x16xbf16>, memref<2x4xi64>, memref<50x16xbf16>) outs(%[[G]] : memref<50x16xbf16>)
// CHECK-NEXT: ^bb0(%[[D:.*]]: tensor<2x4x16xbf16>, %[[I:.*]]: tensor<2x4xi64>, %[[ACC:.*]]: tensor<50x16xbf16>):
// CHECK-NEXT: otc.gather_grad %[[D]], %[[I]] acc %[[ACC]] {axis = 0 : i64}
// CHECK-NOT: otck.kernel
// CHECK-LABEL: func.func @gather_grad_read_twice
// CHECK-NOT: acc
// CHECK-COUNT-3: otck.kernel
// CHECK-LABEL: func.func @gather_grad_slot_read_between
// CHECK-NOT: acc
// CHECK-COUNT-3: otck.kernel
func.func @gather_grad_into_slot() {
  %d = otck.buffer {slot = "d"} : memref<2x4x16xbf16>
  %ids = otck.buffer {slot = "input:ids"} : memref<2x4xi64>
  %g = otck.buffer {slot = "grad:wte"} : memref<50x16xbf16>
  %t = otck.buffer : memref<50x16xbf16>
  otck.kernel ins(%d, %ids : memref<2x4x16xbf16>, memref<2x4xi64>) outs(%t : memref<50x16xbf16>) {
  ^bb0(%a: tensor<2x4x16xbf16>, %b: tensor<2x4xi64>):
    %r = otc.gather_grad %a, %b {axis = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>) -> tensor<50x16xbf16>
    otck.yield %r : tensor<50x16xbf16>
  }
  otck.kernel ins(%g, %t : memref<50x16xbf16>, memref<50x16xbf16>) outs(%g : memref<50x16xbf16>) {
  ^bb0(%a: tensor<50x16xbf16>, %b: tensor<50x16xbf16>):
    %s = otc.add %a, %b : (tensor<50x16xbf16>, tensor<50x16xbf16>) -> tensor<50x16xbf16>
    otck.yield %s : tensor<50x16xbf16>
  }
  return
}
func.func @gather_grad_read_twice() {
  %d = otck.buffer {slot = "d"} : memref<2x4x16xbf16>
  %ids = otck.buffer {slot = "input:ids"} : memref<2x4xi64>
  %g = otck.buffer {slot = "grad:wte"} : memref<50x16xbf16>
  %o = otck.buffer {slot = "o"} : memref<50x16xbf16>
  %t = otck.buffer : memref<50x16xbf16>
  otck.kernel ins(%d, %ids : memref<2x4x16xbf16>, memref<2x4xi64>) outs(%t : memref<50x16xbf16>) {
  ^bb0(%a: tensor<2x4x16xbf16>, %b: tensor<2x4xi64>):
    %r = otc.gather_grad %a, %b {axis = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>) -> tensor<50x16xbf16>
    otck.yield %r : tensor<50x16xbf16>
  }
  otck.kernel ins(%t : memref<50x16xbf16>) outs(%o : memref<50x16xbf16>) {
  ^bb0(%a: tensor<50x16xbf16>):
    %s = otc.neg %a : tensor<50x16xbf16>
    otck.yield %s : tensor<50x16xbf16>
  }
  otck.kernel ins(%g, %t : memref<50x16xbf16>, memref<50x16xbf16>) outs(%g : memref<50x16xbf16>) {
  ^bb0(%a: tensor<50x16xbf16>, %b: tensor<50x16xbf16>):
    %s = otc.add %a, %b : (tensor<50x16xbf16>, tensor<50x16xbf16>) -> tensor<50x16xbf16>
    otck.yield %s : tensor<50x16xbf16>
  }
  return
}
func.func @gather_grad_slot_read_between() {
  %d = otck.buffer {slot = "d"} : memref<2x4x16xbf16>
  %ids = otck.buffer {slot = "input:ids"} : memref<2x4xi64>
  %g = otck.buffer {slot = "grad:wte"} : memref<50x16xbf16>
  %o = otck.buffer {slot = "o"} : memref<50x16xbf16>
  %t = otck.buffer : memref<50x16xbf16>
  otck.kernel ins(%d, %ids : memref<2x4x16xbf16>, memref<2x4xi64>) outs(%t : memref<50x16xbf16>) {
  ^bb0(%a: tensor<2x4x16xbf16>, %b: tensor<2x4xi64>):
    %r = otc.gather_grad %a, %b {axis = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>) -> tensor<50x16xbf16>
    otck.yield %r : tensor<50x16xbf16>
  }
  otck.kernel ins(%g : memref<50x16xbf16>) outs(%o : memref<50x16xbf16>) {
  ^bb0(%a: tensor<50x16xbf16>):
    %s = otc.neg %a : tensor<50x16xbf16>
    otck.yield %s : tensor<50x16xbf16>
  }
  otck.kernel ins(%g, %t : memref<50x16xbf16>, memref<50x16xbf16>) outs(%g : memref<50x16xbf16>) {
  ^bb0(%a: tensor<50x16xbf16>, %b: tensor<50x16xbf16>):
    %s = otc.add %a, %b : (tensor<50x16xbf16>, tensor<50x16xbf16>) -> tensor<50x16xbf16>
    otck.yield %s : tensor<50x16xbf16>
  }
  return
}

// -----

// A norm's parameter gradients and a bias's gradient, each only added into
// its slot: the calls add into the slots (dgamma_acc, dbeta_acc; the column
// sum's acc), the temporaries and add kernels go. Under BF16 the column
// sum's FP32 result is rounded by a kernel of its own before the add: the
// sum then takes the slot's BF16 type and the cast kernel goes too.
// CHECK-LABEL: func.func @norm_and_bias_into_slots
// CHECK-DAG: %[[G:.*]] = otck.buffer {slot = "grad:ln.g"} : memref<16xbf16>
// CHECK-DAG: %[[B:.*]] = otck.buffer {slot = "grad:ln.b"} : memref<16xbf16>
// CHECK-DAG: %[[C:.*]] = otck.buffer {slot = "grad:fc.b"} : memref<16xbf16>
// CHECK-NOT: otck.buffer : memref<16x
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[G]], %[[B]] : {{.*}}) outs(%{{.*}}, %[[G]], %[[B]] :
// CHECK: otc.layer_norm_grad {{.*}} dgamma_acc %{{.*}} dbeta_acc %{{.*}} {axis = 1 : i64}
// CHECK: otck.kernel ins(%{{.*}}, %[[C]] : memref<4x16xbf16>, memref<16xbf16>) outs(%[[C]] : memref<16xbf16>)
// CHECK: otc.column_sum %{{.*}} acc %{{.*}} : (tensor<4x16xbf16>, tensor<16xbf16>) -> tensor<16xbf16>
// CHECK-NOT: otck.kernel
// CHECK: return
func.func @norm_and_bias_into_slots() {
  %dy = otck.buffer {slot = "dy"} : memref<4x16xbf16>
  %x = otck.buffer {slot = "x"} : memref<4x16xbf16>
  %gamma = otck.buffer {slot = "param_bf16:ln.g"} : memref<16xbf16>
  %mean = otck.buffer {slot = "mean"} : memref<4xf32>
  %rstd = otck.buffer {slot = "rstd"} : memref<4xf32>
  %g = otck.buffer {slot = "grad:ln.g"} : memref<16xbf16>
  %b = otck.buffer {slot = "grad:ln.b"} : memref<16xbf16>
  %c = otck.buffer {slot = "grad:fc.b"} : memref<16xbf16>
  %dx = otck.buffer {slot = "dx"} : memref<4x16xbf16>
  %tg = otck.buffer : memref<16xbf16>
  %tb = otck.buffer : memref<16xbf16>
  otck.kernel ins(%dy, %x, %gamma, %mean, %rstd : memref<4x16xbf16>, memref<4x16xbf16>, memref<16xbf16>, memref<4xf32>, memref<4xf32>) outs(%dx, %tg, %tb : memref<4x16xbf16>, memref<16xbf16>, memref<16xbf16>) {
  ^bb0(%a0: tensor<4x16xbf16>, %a1: tensor<4x16xbf16>, %a2: tensor<16xbf16>, %a3: tensor<4xf32>, %a4: tensor<4xf32>):
    %r:3 = otc.layer_norm_grad %a0, %a1 gamma %a2, %a3, %a4 {axis = 1 : i64} : (tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<16xbf16>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4x16xbf16>, tensor<16xbf16>, tensor<16xbf16>)
    otck.yield %r#0, %r#1, %r#2 : tensor<4x16xbf16>, tensor<16xbf16>, tensor<16xbf16>
  }
  otck.kernel ins(%g, %tg : memref<16xbf16>, memref<16xbf16>) outs(%g : memref<16xbf16>) {
  ^bb0(%a: tensor<16xbf16>, %t: tensor<16xbf16>):
    %s = otc.add %a, %t : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  otck.kernel ins(%tb, %b : memref<16xbf16>, memref<16xbf16>) outs(%b : memref<16xbf16>) {
  ^bb0(%t: tensor<16xbf16>, %a: tensor<16xbf16>):
    %s = otc.add %t, %a : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  %sum = otck.buffer : memref<16xf32>
  otck.kernel ins(%dy : memref<4x16xbf16>) outs(%sum : memref<16xf32>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %s = otc.column_sum %a : (tensor<4x16xbf16>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  %v = otck.view %sum : memref<16xf32> to memref<1x16xf32>
  %w = otck.view %v : memref<1x16xf32> to memref<16xf32>
  %rounded = otck.buffer : memref<16xbf16>
  otck.kernel ins(%w : memref<16xf32>) outs(%rounded : memref<16xbf16>) {
  ^bb0(%a: tensor<16xf32>):
    %s = otc.cast %a : (tensor<16xf32>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  otck.kernel ins(%c, %rounded : memref<16xbf16>, memref<16xbf16>) outs(%c : memref<16xbf16>) {
  ^bb0(%a: tensor<16xbf16>, %t: tensor<16xbf16>):
    %s = otc.add %a, %t : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  return
}

// -----

// A bias's FP32 sums of a BF16 tensor added into an FP32 slot (FP32
// gradient accumulation): the library adds only into a slot of the summed
// tensor's storage, so the kernels stay; and where the rounded sums are
// also read elsewhere, the cast kernel and the add stay.
// CHECK-LABEL: func.func @bias_not_into_slot
// CHECK-NOT: acc
// CHECK-COUNT-2: otck.kernel
// CHECK-LABEL: func.func @bias_rounded_read_twice
// CHECK-NOT: acc
// CHECK-COUNT-4: otck.kernel
func.func @bias_not_into_slot() {
  %dy = otck.buffer {slot = "dy"} : memref<4x16xbf16>
  %c = otck.buffer {slot = "grad:fc.b"} : memref<16xf32>
  %sum = otck.buffer : memref<16xf32>
  otck.kernel ins(%dy : memref<4x16xbf16>) outs(%sum : memref<16xf32>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %s = otc.column_sum %a : (tensor<4x16xbf16>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  otck.kernel ins(%c, %sum : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %t: tensor<16xf32>):
    %s = otc.add %a, %t : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  return
}
func.func @bias_rounded_read_twice() {
  %dy = otck.buffer {slot = "dy"} : memref<4x16xbf16>
  %c = otck.buffer {slot = "grad:fc.b"} : memref<16xbf16>
  %o = otck.buffer {slot = "o"} : memref<16xbf16>
  %sum = otck.buffer : memref<16xf32>
  otck.kernel ins(%dy : memref<4x16xbf16>) outs(%sum : memref<16xf32>) {
  ^bb0(%a: tensor<4x16xbf16>):
    %s = otc.column_sum %a : (tensor<4x16xbf16>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  %rounded = otck.buffer : memref<16xbf16>
  otck.kernel ins(%sum : memref<16xf32>) outs(%rounded : memref<16xbf16>) {
  ^bb0(%a: tensor<16xf32>):
    %s = otc.cast %a : (tensor<16xf32>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  otck.kernel ins(%rounded : memref<16xbf16>) outs(%o : memref<16xbf16>) {
  ^bb0(%a: tensor<16xbf16>):
    %s = otc.neg %a : tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  otck.kernel ins(%c, %rounded : memref<16xbf16>, memref<16xbf16>) outs(%c : memref<16xbf16>) {
  ^bb0(%a: tensor<16xbf16>, %t: tensor<16xbf16>):
    %s = otc.add %a, %t : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<16xbf16>
    otck.yield %s : tensor<16xbf16>
  }
  return
}

// -----

// Sums the later kernels see through views of another shape: a position
// table's [3, 16] gradient is the column sum of [2, 48] (BF16: rounded by a
// kernel of its own, then added), and an FP32 bias's sums seen through
// keep_dims views. The column sums add into the slots, seen in the sums'
// shape; no other kernel is left. A view of the sums that another kernel
// reads too keeps them apart.
// CHECK-LABEL: func.func @position_table_into_slot
// CHECK: %[[P:.*]] = otck.buffer {slot = "grad:wpe"} : memref<3x16xbf16>
// CHECK: %[[PV:.*]] = otck.view %[[P]] : memref<3x16xbf16> to memref<48xbf16>
// CHECK-NEXT: otck.kernel ins(%{{.*}}, %[[PV]] : memref<2x48xbf16>, memref<48xbf16>) outs(%[[PV]] : memref<48xbf16>)
// CHECK: otc.column_sum %{{.*}} acc %{{.*}} : (tensor<2x48xbf16>, tensor<48xbf16>) -> tensor<48xbf16>
// CHECK-NOT: otck.kernel
// CHECK-NOT: otck.buffer
// CHECK: return
// CHECK-LABEL: func.func @fp32_bias_through_views
// CHECK: %[[C:.*]] = otck.buffer {slot = "grad:fc.b"} : memref<16xf32>
// CHECK-NEXT: otck.kernel ins(%{{.*}}, %[[C]] : memref<4x16xf32>, memref<16xf32>) outs(%[[C]] : memref<16xf32>)
// CHECK: otc.column_sum %{{.*}} acc %{{.*}} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<16xf32>
// CHECK-NOT: otck.kernel
// CHECK: return
// CHECK-LABEL: func.func @sum_view_read_twice
// CHECK-NOT: acc
// CHECK-COUNT-3: otck.kernel
func.func @position_table_into_slot() {
  %dy = otck.buffer {slot = "dy"} : memref<2x48xbf16>
  %p = otck.buffer {slot = "grad:wpe"} : memref<3x16xbf16>
  %sum = otck.buffer : memref<48xf32>
  otck.kernel ins(%dy : memref<2x48xbf16>) outs(%sum : memref<48xf32>) {
  ^bb0(%a: tensor<2x48xbf16>):
    %s = otc.column_sum %a : (tensor<2x48xbf16>) -> tensor<48xf32>
    otck.yield %s : tensor<48xf32>
  }
  %v = otck.view %sum : memref<48xf32> to memref<1x3x16xf32>
  %w = otck.view %v : memref<1x3x16xf32> to memref<3x16xf32>
  %rounded = otck.buffer : memref<3x16xbf16>
  otck.kernel ins(%w : memref<3x16xf32>) outs(%rounded : memref<3x16xbf16>) {
  ^bb0(%a: tensor<3x16xf32>):
    %s = otc.cast %a : (tensor<3x16xf32>) -> tensor<3x16xbf16>
    otck.yield %s : tensor<3x16xbf16>
  }
  otck.kernel ins(%p, %rounded : memref<3x16xbf16>, memref<3x16xbf16>) outs(%p : memref<3x16xbf16>) {
  ^bb0(%a: tensor<3x16xbf16>, %t: tensor<3x16xbf16>):
    %s = otc.add %a, %t : (tensor<3x16xbf16>, tensor<3x16xbf16>) -> tensor<3x16xbf16>
    otck.yield %s : tensor<3x16xbf16>
  }
  return
}
func.func @fp32_bias_through_views() {
  %dy = otck.buffer {slot = "dy"} : memref<4x16xf32>
  %c = otck.buffer {slot = "grad:fc.b"} : memref<16xf32>
  %sum = otck.buffer : memref<16xf32>
  otck.kernel ins(%dy : memref<4x16xf32>) outs(%sum : memref<16xf32>) {
  ^bb0(%a: tensor<4x16xf32>):
    %s = otc.column_sum %a : (tensor<4x16xf32>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  %v = otck.view %sum : memref<16xf32> to memref<1x16xf32>
  %w = otck.view %v : memref<1x16xf32> to memref<16xf32>
  otck.kernel ins(%c, %w : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %t: tensor<16xf32>):
    %s = otc.add %a, %t : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  return
}
func.func @sum_view_read_twice() {
  %dy = otck.buffer {slot = "dy"} : memref<4x16xf32>
  %c = otck.buffer {slot = "grad:fc.b"} : memref<16xf32>
  %o = otck.buffer {slot = "o"} : memref<1x16xf32>
  %sum = otck.buffer : memref<16xf32>
  otck.kernel ins(%dy : memref<4x16xf32>) outs(%sum : memref<16xf32>) {
  ^bb0(%a: tensor<4x16xf32>):
    %s = otc.column_sum %a : (tensor<4x16xf32>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  %v = otck.view %sum : memref<16xf32> to memref<1x16xf32>
  otck.kernel ins(%v : memref<1x16xf32>) outs(%o : memref<1x16xf32>) {
  ^bb0(%a: tensor<1x16xf32>):
    %s = otc.neg %a : tensor<1x16xf32>
    otck.yield %s : tensor<1x16xf32>
  }
  otck.kernel ins(%c, %sum : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>) {
  ^bb0(%a: tensor<16xf32>, %t: tensor<16xf32>):
    %s = otc.add %a, %t : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    otck.yield %s : tensor<16xf32>
  }
  return
}

// -----

// A mixture of experts' weight gradient only added into its slot: under
// BF16 (FP32 sums, rounded by a cast kernel, added into the BF16 slot) the
// call adds into the slot itself, its result the slot's BF16, and the cast
// and add kernels and both [E, K, O] temporaries go; likewise its FP32 sums
// added into an FP32 slot as they are (FP32 gradient accumulation of BF16
// operands, and FP32 operands).
// CHECK-LABEL: func.func @expert_wgrad_into_slots
// CHECK-DAG: %[[G:.*]] = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xbf16>
// CHECK-DAG: %[[H:.*]] = otck.buffer {slot = "grad:experts.up"} : memref<3x5x4xf32>
// CHECK-DAG: %[[F:.*]] = otck.buffer {slot = "grad:experts.gate"} : memref<3x4x5xf32>
// CHECK-NOT: otck.buffer : memref<3x
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[G]] : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>, memref<3x4x5xbf16>) outs(%[[G]] : memref<3x4x5xbf16>)
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<6x5xbf16>, %{{.*}}: tensor<6x4xbf16>, %{{.*}}: tensor<6xi64>, %[[ACC:.*]]: tensor<3x4x5xbf16>):
// CHECK-NEXT: otc.expert_matmul_wgrad %{{.*}}, %{{.*}}, %{{.*}} acc %[[ACC]] : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>, tensor<3x4x5xbf16>) -> tensor<3x4x5xbf16>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[H]] : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>, memref<3x5x4xf32>) outs(%[[H]] : memref<3x5x4xf32>)
// CHECK: otc.expert_matmul_wgrad {{.*}} acc %{{.*}} {transpose_rhs} : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>, tensor<3x5x4xf32>) -> tensor<3x5x4xf32>
// CHECK: otck.kernel ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[F]] : memref<6x5xf32>, memref<6x4xf32>, memref<6xi64>, memref<3x4x5xf32>) outs(%[[F]] : memref<3x4x5xf32>)
// CHECK: otc.expert_matmul_wgrad {{.*}} acc %{{.*}} : (tensor<6x5xf32>, tensor<6x4xf32>, tensor<6xi64>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
// CHECK-NOT: otck.kernel
// CHECK-NOT: otck.buffer
// CHECK: return
func.func @expert_wgrad_into_slots() {
  %dy = otck.buffer {slot = "dy"} : memref<6x5xbf16>
  %x = otck.buffer {slot = "x"} : memref<6x4xbf16>
  %ids = otck.buffer {slot = "ids"} : memref<6xi64>
  %dyf = otck.buffer {slot = "dyf"} : memref<6x5xf32>
  %xf = otck.buffer {slot = "xf"} : memref<6x4xf32>
  %g = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xbf16>
  %h = otck.buffer {slot = "grad:experts.up"} : memref<3x5x4xf32>
  %f = otck.buffer {slot = "grad:experts.gate"} : memref<3x4x5xf32>
  %t = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%t : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  %rounded = otck.buffer : memref<3x4x5xbf16>
  otck.kernel ins(%t : memref<3x4x5xf32>) outs(%rounded : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xf32>):
    %s = otc.cast %a : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  otck.kernel ins(%g, %rounded : memref<3x4x5xbf16>, memref<3x4x5xbf16>) outs(%g : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xbf16>, %b: tensor<3x4x5xbf16>):
    %s = otc.add %a, %b : (tensor<3x4x5xbf16>, tensor<3x4x5xbf16>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  %u = otck.buffer : memref<3x5x4xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%u : memref<3x5x4xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c {transpose_rhs} : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x5x4xf32>
    otck.yield %r : tensor<3x5x4xf32>
  }
  otck.kernel ins(%u, %h : memref<3x5x4xf32>, memref<3x5x4xf32>) outs(%h : memref<3x5x4xf32>) {
  ^bb0(%a: tensor<3x5x4xf32>, %b: tensor<3x5x4xf32>):
    %s = otc.add %a, %b : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x4xf32>
    otck.yield %s : tensor<3x5x4xf32>
  }
  %v = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dyf, %xf, %ids : memref<6x5xf32>, memref<6x4xf32>, memref<6xi64>) outs(%v : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xf32>, %b: tensor<6x4xf32>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xf32>, tensor<6x4xf32>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  otck.kernel ins(%f, %v : memref<3x4x5xf32>, memref<3x4x5xf32>) outs(%f : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<3x4x5xf32>, %b: tensor<3x4x5xf32>):
    %s = otc.add %a, %b : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
    otck.yield %s : tensor<3x4x5xf32>
  }
  return
}

// -----

// Near misses, left as they are: the rounded gradient read by another
// kernel too; the slot read by a kernel in between; FP32 sums rounded to a
// type that is not the operands' (f16) before the add; and an FP32 slot
// that the rounded gradient is widened back into.
// CHECK-LABEL: func.func @expert_wgrad_rounded_read_twice
// CHECK-NOT: acc
// CHECK-COUNT-4: otck.kernel
// CHECK-LABEL: func.func @expert_wgrad_slot_read_between
// CHECK-NOT: acc
// CHECK-COUNT-4: otck.kernel
// CHECK-LABEL: func.func @expert_wgrad_rounded_to_f16
// CHECK-NOT: acc
// CHECK-COUNT-3: otck.kernel
// CHECK-LABEL: func.func @expert_wgrad_widened_back
// CHECK-NOT: acc
// CHECK-COUNT-4: otck.kernel
func.func @expert_wgrad_rounded_read_twice() {
  %dy = otck.buffer {slot = "dy"} : memref<6x5xbf16>
  %x = otck.buffer {slot = "x"} : memref<6x4xbf16>
  %ids = otck.buffer {slot = "ids"} : memref<6xi64>
  %g = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xbf16>
  %o = otck.buffer {slot = "o"} : memref<3x4x5xbf16>
  %t = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%t : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  %rounded = otck.buffer : memref<3x4x5xbf16>
  otck.kernel ins(%t : memref<3x4x5xf32>) outs(%rounded : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xf32>):
    %s = otc.cast %a : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  otck.kernel ins(%rounded : memref<3x4x5xbf16>) outs(%o : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xbf16>):
    %s = otc.neg %a : tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  otck.kernel ins(%g, %rounded : memref<3x4x5xbf16>, memref<3x4x5xbf16>) outs(%g : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xbf16>, %b: tensor<3x4x5xbf16>):
    %s = otc.add %a, %b : (tensor<3x4x5xbf16>, tensor<3x4x5xbf16>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  return
}
func.func @expert_wgrad_slot_read_between() {
  %dy = otck.buffer {slot = "dy"} : memref<6x5xbf16>
  %x = otck.buffer {slot = "x"} : memref<6x4xbf16>
  %ids = otck.buffer {slot = "ids"} : memref<6xi64>
  %g = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xbf16>
  %o = otck.buffer {slot = "o"} : memref<3x4x5xbf16>
  %t = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%t : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  %rounded = otck.buffer : memref<3x4x5xbf16>
  otck.kernel ins(%t : memref<3x4x5xf32>) outs(%rounded : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xf32>):
    %s = otc.cast %a : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  otck.kernel ins(%g : memref<3x4x5xbf16>) outs(%o : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xbf16>):
    %s = otc.neg %a : tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  otck.kernel ins(%g, %rounded : memref<3x4x5xbf16>, memref<3x4x5xbf16>) outs(%g : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xbf16>, %b: tensor<3x4x5xbf16>):
    %s = otc.add %a, %b : (tensor<3x4x5xbf16>, tensor<3x4x5xbf16>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  return
}
func.func @expert_wgrad_rounded_to_f16() {
  %dy = otck.buffer {slot = "dy"} : memref<6x5xbf16>
  %x = otck.buffer {slot = "x"} : memref<6x4xbf16>
  %ids = otck.buffer {slot = "ids"} : memref<6xi64>
  %g = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xf16>
  %t = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%t : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  %rounded = otck.buffer : memref<3x4x5xf16>
  otck.kernel ins(%t : memref<3x4x5xf32>) outs(%rounded : memref<3x4x5xf16>) {
  ^bb0(%a: tensor<3x4x5xf32>):
    %s = otc.cast %a : (tensor<3x4x5xf32>) -> tensor<3x4x5xf16>
    otck.yield %s : tensor<3x4x5xf16>
  }
  otck.kernel ins(%g, %rounded : memref<3x4x5xf16>, memref<3x4x5xf16>) outs(%g : memref<3x4x5xf16>) {
  ^bb0(%a: tensor<3x4x5xf16>, %b: tensor<3x4x5xf16>):
    %s = otc.add %a, %b : (tensor<3x4x5xf16>, tensor<3x4x5xf16>) -> tensor<3x4x5xf16>
    otck.yield %s : tensor<3x4x5xf16>
  }
  return
}
func.func @expert_wgrad_widened_back() {
  %dy = otck.buffer {slot = "dy"} : memref<6x5xbf16>
  %x = otck.buffer {slot = "x"} : memref<6x4xbf16>
  %ids = otck.buffer {slot = "ids"} : memref<6xi64>
  %g = otck.buffer {slot = "grad:experts.down"} : memref<3x4x5xf32>
  %t = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%dy, %x, %ids : memref<6x5xbf16>, memref<6x4xbf16>, memref<6xi64>) outs(%t : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<6x5xbf16>, %b: tensor<6x4xbf16>, %c: tensor<6xi64>):
    %r = otc.expert_matmul_wgrad %a, %b, %c : (tensor<6x5xbf16>, tensor<6x4xbf16>, tensor<6xi64>) -> tensor<3x4x5xf32>
    otck.yield %r : tensor<3x4x5xf32>
  }
  %rounded = otck.buffer : memref<3x4x5xbf16>
  otck.kernel ins(%t : memref<3x4x5xf32>) outs(%rounded : memref<3x4x5xbf16>) {
  ^bb0(%a: tensor<3x4x5xf32>):
    %s = otc.cast %a : (tensor<3x4x5xf32>) -> tensor<3x4x5xbf16>
    otck.yield %s : tensor<3x4x5xbf16>
  }
  %wide = otck.buffer : memref<3x4x5xf32>
  otck.kernel ins(%rounded : memref<3x4x5xbf16>) outs(%wide : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<3x4x5xbf16>):
    %s = otc.cast %a : (tensor<3x4x5xbf16>) -> tensor<3x4x5xf32>
    otck.yield %s : tensor<3x4x5xf32>
  }
  otck.kernel ins(%g, %wide : memref<3x4x5xf32>, memref<3x4x5xf32>) outs(%g : memref<3x4x5xf32>) {
  ^bb0(%a: tensor<3x4x5xf32>, %b: tensor<3x4x5xf32>):
    %s = otc.add %a, %b : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
    otck.yield %s : tensor<3x4x5xf32>
  }
  return
}

// -----

// A pre-activation recomputed (--remat) after the product of its gradient:
// the product's GEMM moves down past the recomputing GEMM to the gelu_grad
// kernel and takes the dgelu epilogue, as without recomputation. Not when
// an op in between writes what the product reads (@sink_blocked: its
// right operand).
// CHECK-LABEL: func.func @recomputed_pre
// CHECK: otck.gemm %[[X:.*]], %{{.*}}, %[[PRE:.*]] bias
// CHECK-NEXT: otck.gemm %{{.*}}, %{{.*}}, %{{.*}} aux(%[[PRE]] : memref<4x16xf32>) {dgelu, transpose_rhs}
// CHECK-NOT: otc.gelu_grad
// CHECK-LABEL: func.func @sink_blocked
// CHECK-NOT: dgelu
// CHECK: otc.gelu_grad
func.func @recomputed_pre() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x16xf32>
  %b = otck.buffer {slot = "b"} : memref<16xf32>
  %dy = otck.buffer {slot = "dy"} : memref<4x8xf32>
  %w2 = otck.buffer {slot = "w2"} : memref<16x8xf32>
  %dx = otck.buffer {slot = "dx"} : memref<4x16xf32>
  %t = otck.buffer : memref<4x16xf32>
  otck.gemm %dy, %w2, %t {transpose_rhs} : memref<4x8xf32>, memref<16x8xf32>, memref<4x16xf32>
  %pre = otck.buffer : memref<4x16xf32>
  otck.gemm %x, %w, %pre bias %b : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>, memref<16xf32>
  otck.kernel ins(%t, %pre : memref<4x16xf32>, memref<4x16xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = otc.gelu_grad %a0, %a1 {approximate = "tanh"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  return
}
func.func @sink_blocked() {
  %x = otck.buffer {slot = "x"} : memref<4x8xf32>
  %w = otck.buffer {slot = "w"} : memref<8x16xf32>
  %b = otck.buffer {slot = "b"} : memref<16xf32>
  %dy = otck.buffer {slot = "dy"} : memref<4x8xf32>
  %w2 = otck.buffer {slot = "w2"} : memref<16x8xf32>
  %w3 = otck.buffer {slot = "w3"} : memref<16x8xf32>
  %dx = otck.buffer {slot = "dx"} : memref<4x16xf32>
  %t = otck.buffer : memref<4x16xf32>
  otck.gemm %dy, %w2, %t {transpose_rhs} : memref<4x8xf32>, memref<16x8xf32>, memref<4x16xf32>
  otck.copy %w3, %w2 : memref<16x8xf32>
  %pre = otck.buffer : memref<4x16xf32>
  otck.gemm %x, %w, %pre bias %b : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>, memref<16xf32>
  otck.kernel ins(%t, %pre : memref<4x16xf32>, memref<4x16xf32>) outs(%dx : memref<4x16xf32>) {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<4x16xf32>):
    %s = otc.gelu_grad %a0, %a1 {approximate = "tanh"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    otck.yield %s : tensor<4x16xf32>
  }
  return
}
