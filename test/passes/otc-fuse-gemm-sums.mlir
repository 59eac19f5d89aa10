// RUN: otc-opt %s --otc-fuse-gemm-sums --split-input-file | FileCheck %s

// Tests that a bias's gradient (a column sum of the output gradient dy)
// goes into the weight-gradient GEMM that reads dy as its K x W operand,
// and that it stays a kernel of its own where that would change a value.

// A GPT-2 layer's form: the sum added into its slot, then dx (dy not
// summed there: not transposed), then dW reading dy through a view.
// CHECK-LABEL: func.func @slot
// CHECK-NOT: otc.column_sum
// CHECK: otck.gemm %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK: otck.gemm %[[V:.*]], %{{.*}}, %[[GW:.*]] sums(%[[GB:.*]] : memref<32xbf16>) {accumulate, accumulate_sums, transpose_lhs}
// CHECK-NOT: otc.column_sum
func.func @slot() {
  %dy = otck.buffer {slot = "dy"} : memref<2x16x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<32x128xbf16>
  %w = otck.buffer {slot = "w"} : memref<32x128xbf16>
  %gw = otck.buffer {slot = "grad:w"} : memref<32x128xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<32xbf16>
  %dx = otck.buffer {slot = "dx"} : memref<2x16x128xbf16>
  otck.kernel ins(%dy, %gb : memref<2x16x32xbf16>, memref<32xbf16>) outs(%gb : memref<32xbf16>) {
  ^bb0(%a: tensor<2x16x32xbf16>, %b: tensor<32xbf16>):
    %s = otc.column_sum %a acc %b : (tensor<2x16x32xbf16>, tensor<32xbf16>) -> tensor<32xbf16>
    otck.yield %s : tensor<32xbf16>
  }
  otck.gemm %dy, %w, %dx : memref<2x16x32xbf16>, memref<32x128xbf16>, memref<2x16x128xbf16>
  %v = otck.view %dy : memref<2x16x32xbf16> to memref<32x32xbf16>
  otck.gemm %v, %x, %gw {accumulate, transpose_lhs} : memref<32x32xbf16>, memref<32x128xbf16>, memref<32x128xbf16>
  return
}

// -----

// dW = x^T dy with dy the right operand (a weight stored [in, out]), the
// sums into an FP32 temporary read after the GEMM: sums_of_rhs, no
// accumulation.
// CHECK-LABEL: func.func @rhs
// CHECK-NOT: otc.column_sum
// CHECK: otck.gemm %{{.*}}, %{{.*}}, %{{.*}} sums(%[[T:.*]] : memref<32xf32>) {accumulate, sums_of_rhs, transpose_lhs}
// CHECK: otc.neg
func.func @rhs() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<64x16xbf16>
  %gw = otck.buffer {slot = "grad:w"} : memref<16x32xbf16>
  %t = otck.buffer : memref<32xf32>
  %y = otck.buffer {slot = "y"} : memref<32xf32>
  otck.kernel ins(%dy : memref<64x32xbf16>) outs(%t : memref<32xf32>) {
  ^bb0(%a: tensor<64x32xbf16>):
    %s = otc.column_sum %a : (tensor<64x32xbf16>) -> tensor<32xf32>
    otck.yield %s : tensor<32xf32>
  }
  otck.gemm %x, %dy, %gw {accumulate, transpose_lhs} : memref<64x16xbf16>, memref<64x32xbf16>, memref<16x32xbf16>
  otck.kernel ins(%t : memref<32xf32>) outs(%y : memref<32xf32>) {
  ^bb0(%a: tensor<32xf32>):
    %n = otc.neg %a : tensor<32xf32>
    otck.yield %n : tensor<32xf32>
  }
  return
}

// -----

// Near misses, each kept as it is: a kernel writes dy between the sum and
// the GEMM; the sums are read between them; the GEMM reads dy not as a
// K x W matrix (dy as the left operand, not transposed); the GEMM carries
// a bias epilogue.
// CHECK-LABEL: func.func @written_between
// CHECK: otc.column_sum
// CHECK-NOT: sums(
// CHECK-LABEL: func.func @read_between
// CHECK: otc.column_sum
// CHECK-NOT: sums(
// CHECK-LABEL: func.func @not_kw
// CHECK: otc.column_sum
// CHECK-NOT: sums(
// CHECK-LABEL: func.func @epilogue
// CHECK: otc.column_sum
// CHECK-NOT: sums(
func.func @written_between() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<64x16xbf16>
  %gw = otck.buffer {slot = "grad:w"} : memref<32x16xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<32xbf16>
  otck.kernel ins(%dy, %gb : memref<64x32xbf16>, memref<32xbf16>) outs(%gb : memref<32xbf16>) {
  ^bb0(%a: tensor<64x32xbf16>, %b: tensor<32xbf16>):
    %s = otc.column_sum %a acc %b : (tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<32xbf16>
    otck.yield %s : tensor<32xbf16>
  }
  otck.kernel ins(%dy : memref<64x32xbf16>) outs(%dy : memref<64x32xbf16>) {
  ^bb0(%a: tensor<64x32xbf16>):
    %n = otc.neg %a : tensor<64x32xbf16>
    otck.yield %n : tensor<64x32xbf16>
  }
  otck.gemm %dy, %x, %gw {accumulate, transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>
  return
}
func.func @read_between() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<64x16xbf16>
  %gw = otck.buffer {slot = "grad:w"} : memref<32x16xbf16>
  %t = otck.buffer : memref<32xf32>
  %y = otck.buffer {slot = "y"} : memref<32xf32>
  otck.kernel ins(%dy : memref<64x32xbf16>) outs(%t : memref<32xf32>) {
  ^bb0(%a: tensor<64x32xbf16>):
    %s = otc.column_sum %a : (tensor<64x32xbf16>) -> tensor<32xf32>
    otck.yield %s : tensor<32xf32>
  }
  otck.kernel ins(%t : memref<32xf32>) outs(%y : memref<32xf32>) {
  ^bb0(%a: tensor<32xf32>):
    %n = otc.neg %a : tensor<32xf32>
    otck.yield %n : tensor<32xf32>
  }
  otck.gemm %dy, %x, %gw {accumulate, transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>
  return
}
func.func @not_kw() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %w = otck.buffer {slot = "w"} : memref<32x16xbf16>
  %dx = otck.buffer {slot = "dx"} : memref<64x16xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<32xbf16>
  otck.kernel ins(%dy, %gb : memref<64x32xbf16>, memref<32xbf16>) outs(%gb : memref<32xbf16>) {
  ^bb0(%a: tensor<64x32xbf16>, %b: tensor<32xbf16>):
    %s = otc.column_sum %a acc %b : (tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<32xbf16>
    otck.yield %s : tensor<32xbf16>
  }
  otck.gemm %dy, %w, %dx : memref<64x32xbf16>, memref<32x16xbf16>, memref<64x16xbf16>
  return
}
func.func @epilogue() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<64x16xbf16>
  %c = otck.buffer {slot = "c"} : memref<16xbf16>
  %y = otck.buffer {slot = "y"} : memref<32x16xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<32xbf16>
  otck.kernel ins(%dy, %gb : memref<64x32xbf16>, memref<32xbf16>) outs(%gb : memref<32xbf16>) {
  ^bb0(%a: tensor<64x32xbf16>, %b: tensor<32xbf16>):
    %s = otc.column_sum %a acc %b : (tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<32xbf16>
    otck.yield %s : tensor<32xbf16>
  }
  otck.gemm %dy, %x, %y bias %c {transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>, memref<16xbf16>
  return
}

// -----

// The GEMM before the sum (the schedule's other order): the sums move up
// to it, dy unchanged in between.
// CHECK-LABEL: func.func @gemm_first
// CHECK: otck.gemm %{{.*}}, %{{.*}}, %{{.*}} sums(%{{.*}} : memref<32xbf16>) {accumulate, accumulate_sums, transpose_lhs}
// CHECK-NOT: otc.column_sum
func.func @gemm_first() {
  %dy = otck.buffer {slot = "dy"} : memref<64x32xbf16>
  %x = otck.buffer {slot = "x"} : memref<64x16xbf16>
  %gw = otck.buffer {slot = "grad:w"} : memref<32x16xbf16>
  %gb = otck.buffer {slot = "grad:b"} : memref<32xbf16>
  otck.gemm %dy, %x, %gw {accumulate, transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>
  otck.kernel ins(%dy, %gb : memref<64x32xbf16>, memref<32xbf16>) outs(%gb : memref<32xbf16>) {
  ^bb0(%a: tensor<64x32xbf16>, %b: tensor<32xbf16>):
    %s = otc.column_sum %a acc %b : (tensor<64x32xbf16>, tensor<32xbf16>) -> tensor<32xbf16>
    otck.yield %s : tensor<32xbf16>
  }
  return
}
