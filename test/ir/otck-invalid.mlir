// RUN: otc-opt %s --split-input-file --verify-diagnostics

// Tests that a kernel body's arguments must match its inputs.
func.func @bad_arg() {
  %a = otck.buffer : memref<4xf32>
  %b = otck.buffer : memref<4xf32>
  // expected-error@+1 {{body argument type 'tensor<5xf32>' does not match input 'memref<4xf32>'}}
  otck.kernel ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%x: tensor<5xf32>):
    %y = otc.tanh %x : tensor<5xf32>
    otck.yield %y : tensor<5xf32>
  }
  return
}

// -----

// Tests that a kernel must yield one value per output.
func.func @bad_yield() {
  %a = otck.buffer : memref<4xf32>
  %b = otck.buffer : memref<4xf32>
  // expected-error@+1 {{must yield one value per output}}
  otck.kernel ins(%a : memref<4xf32>) outs(%b, %a : memref<4xf32>, memref<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %y = otc.tanh %x : tensor<4xf32>
    otck.yield %y : tensor<4xf32>
  }
  return
}

// -----

// Tests the GELU epilogues' rules: an aux operand, of the result's type,
// rows of a multiple of 8, no accumulation, no bias with dgelu, not both.
func.func @gelu_no_aux(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>) {
  // expected-error@+1 {{needs an aux operand for its gelu epilogue}}
  otck.gemm %x, %w, %y {gelu} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @aux_type(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %a: memref<4x16xbf16>) {
  // expected-error@+1 {{aux type 'memref<4x16xbf16>' must be the result type 'memref<4x16xf32>'}}
  otck.gemm %x, %w, %y aux(%a : memref<4x16xbf16>) {gelu} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @narrow(%x: memref<4x8xf32>, %w: memref<8x12xf32>, %y: memref<4x12xf32>, %a: memref<4x12xf32>) {
  // expected-error@+1 {{GELU epilogues need a last dimension that is a multiple of 8}}
  otck.gemm %x, %w, %y aux(%a : memref<4x12xf32>) {dgelu} : memref<4x8xf32>, memref<8x12xf32>, memref<4x12xf32>
  return
}

// -----

func.func @accumulate(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %a: memref<4x16xf32>) {
  // expected-error@+1 {{cannot accumulate with a GELU epilogue}}
  otck.gemm %x, %w, %y aux(%a : memref<4x16xf32>) {accumulate, gelu} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @dgelu_bias(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %b: memref<16xf32>, %a: memref<4x16xf32>) {
  // expected-error@+1 {{cannot add a bias with the dgelu epilogue}}
  otck.gemm %x, %w, %y bias %b aux(%a : memref<4x16xf32>) {dgelu} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>, memref<16xf32>
  return
}

// -----

func.func @both(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %a: memref<4x16xf32>) {
  // expected-error@+1 {{cannot have both the gelu and dgelu epilogues}}
  otck.gemm %x, %w, %y aux(%a : memref<4x16xf32>) {dgelu, gelu} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @aux_alone(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %a: memref<4x16xf32>) {
  // expected-error@+1 {{has an aux operand but no gelu or dgelu epilogue}}
  otck.gemm %x, %w, %y aux(%a : memref<4x16xf32>) : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @addend_type(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %r: memref<4x16xbf16>) {
  // expected-error@+1 {{addend type 'memref<4x16xbf16>' must be the result type 'memref<4x16xf32>'}}
  otck.gemm %x, %w, %y addend(%r : memref<4x16xbf16>) : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

func.func @addend_accumulate(%x: memref<4x8xf32>, %w: memref<8x16xf32>, %y: memref<4x16xf32>, %r: memref<4x16xf32>) {
  // expected-error@+1 {{cannot take an addend with accumulate or a GELU epilogue}}
  otck.gemm %x, %w, %y addend(%r : memref<4x16xf32>) {accumulate} : memref<4x8xf32>, memref<8x16xf32>, memref<4x16xf32>
  return
}

// -----

// Tests that a rank's part (a view with shards = N) is 1/N of a 1-D source.
func.func @bad_shard_view() {
  %a = otck.buffer : memref<16xf32>
  // expected-error@+1 {{with shards = 2 must view 1/2 of a 1-D source, got 'memref<16xf32>' to 'memref<4xf32>'}}
  %b = otck.view %a {shards = 2 : i64} : memref<16xf32> to memref<4xf32>
  return
}

// -----

// Tests the rules of a GEMM's sums (otc-fuse-gemm-sums): the summed operand
// stored K x W, W sums, a plain product.
func.func @sums_not_kw(%dy: memref<64x32xbf16>, %w: memref<32x16xbf16>, %dx: memref<64x16xbf16>, %s: memref<64xf32>) {
  // expected-error@+1 {{the summed operand must be stored K x W: the left one transposed}}
  otck.gemm %dy, %w, %dx sums(%s : memref<64xf32>) : memref<64x32xbf16>, memref<32x16xbf16>, memref<64x16xbf16>
  return
}

// -----

func.func @sums_width(%dy: memref<64x32xbf16>, %x: memref<64x16xbf16>, %gw: memref<32x16xbf16>, %s: memref<16xf32>) {
  // expected-error@+1 {{sums have 16 elements, the summed operand 32 columns}}
  otck.gemm %dy, %x, %gw sums(%s : memref<16xf32>) {transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>
  return
}

// -----

func.func @sums_bias(%dy: memref<64x32xbf16>, %x: memref<64x16xbf16>, %gw: memref<32x16xbf16>, %b: memref<16xbf16>, %s: memref<32xf32>) {
  // expected-error@+1 {{sums go with a plain product only}}
  otck.gemm %dy, %x, %gw bias %b sums(%s : memref<32xf32>) {transpose_lhs} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>, memref<16xbf16>
  return
}

// -----

func.func @sums_flag(%dy: memref<64x32xbf16>, %x: memref<64x16xbf16>, %gw: memref<32x16xbf16>) {
  // expected-error@+1 {{has sums_of_rhs or accumulate_sums but no sums}}
  otck.gemm %dy, %x, %gw {transpose_lhs, accumulate_sums} : memref<64x32xbf16>, memref<64x16xbf16>, memref<32x16xbf16>
  return
}
