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
