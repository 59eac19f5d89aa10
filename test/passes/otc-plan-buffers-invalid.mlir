// RUN: otc-opt %s --split-input-file --otc-plan-buffers --verify-diagnostics
// RUN: not otc-opt %s --otc-plan-buffers=alignment=3 2>&1 | FileCheck %s --check-prefix=ALIGN

// ALIGN: alignment must be a power of two, got 3

// Tests that one slot must have one type in every function.
func.func @a() {
  %w = otck.buffer {slot = "param:w"} : memref<12xf32>
  return
}
func.func @b() {
  // expected-error@+1 {{slot 'param:w' has type 'memref<13xf32>' here and 'memref<12xf32>' elsewhere}}
  %w = otck.buffer {slot = "param:w"} : memref<13xf32>
  return
}

// -----

// Tests that the verifier rejects an in-place buffer whose writer is not
// elementwise (a hand-made plan: offsets and arena size given).
module attributes {otck.arena_size = 1024 : i64} {
  func.func @bad_in_place() {
    %t0 = otck.buffer {offset = 0 : i64} : memref<4x4xf32>
    otck.kernel outs(%t0 : memref<4x4xf32>) {
      %c = otc.constant dense<1.0> : tensor<4x4xf32>
      otck.yield %c : tensor<4x4xf32>
    }
    // expected-error@+1 {{in-place buffer is not written by an elementwise kernel over a dying input at its offset}}
    %t1 = otck.buffer {offset = 0 : i64, otck.in_place} : memref<4x4xf32>
    otck.kernel ins(%t0 : memref<4x4xf32>) outs(%t1 : memref<4x4xf32>) {
    ^bb0(%x: tensor<4x4xf32>):
      %c = otc.transpose %x, [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
      otck.yield %c : tensor<4x4xf32>
    }
    return
  }
}
