// RUN: otc-opt %s --split-input-file --otc-plan-buffers | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-plan-buffers=alignment=64 | FileCheck %s --check-prefix=A64

// Tests that slots come first, shared between functions, and that
// temporaries whose live ranges do not overlap share an offset while
// overlapping ones do not. Sizes: slots 48 and 20 bytes (256 each aligned),
// temporaries 400 bytes each.
// CHECK: module attributes {otck.arena_size = 1536 : i64}
// CHECK-LABEL: func.func @a()
// CHECK: otck.buffer {offset = 0 : i64, slot = "param:w"}
// CHECK: otck.buffer {offset = 256 : i64, slot = "loss"}
// CHECK: otck.buffer {offset = 512 : i64} : memref<100xf32>
// CHECK: otck.buffer {offset = 1024 : i64} : memref<100xf32>
// CHECK: otck.buffer {offset = 512 : i64} : memref<100xf32>
// CHECK-LABEL: func.func @b()
// CHECK: otck.buffer {offset = 0 : i64, slot = "param:w"}
// CHECK: otck.buffer {offset = 512 : i64} : memref<100xf32>
// A64: module attributes {otck.arena_size = 1024 : i64}
// A64: otck.buffer {offset = 64 : i64, slot = "loss"}
// A64: otck.buffer {offset = 128 : i64} : memref<100xf32>
// A64: otck.buffer {offset = 576 : i64} : memref<100xf32>
func.func @a() {
  %w = otck.buffer {slot = "param:w"} : memref<12xf32>
  %l = otck.buffer {slot = "loss"} : memref<5xf32>
  %t0 = otck.buffer : memref<100xf32>
  otck.kernel ins(%w : memref<12xf32>) outs(%t0 : memref<100xf32>) {
  ^bb0(%x: tensor<12xf32>):
    %c = otc.constant dense<1.0> : tensor<100xf32>
    otck.yield %c : tensor<100xf32>
  }
  %t1 = otck.buffer : memref<100xf32>
  otck.kernel ins(%t0 : memref<100xf32>) outs(%t1 : memref<100xf32>) {
  ^bb0(%x: tensor<100xf32>):
    %c = otc.neg %x : tensor<100xf32>
    otck.yield %c : tensor<100xf32>
  }
  %t2 = otck.buffer : memref<100xf32>
  otck.kernel ins(%t1 : memref<100xf32>) outs(%t2 : memref<100xf32>) {
  ^bb0(%x: tensor<100xf32>):
    %c = otc.neg %x : tensor<100xf32>
    otck.yield %c : tensor<100xf32>
  }
  return
}
func.func @b() {
  %w = otck.buffer {slot = "param:w"} : memref<12xf32>
  %t0 = otck.buffer : memref<100xf32>
  otck.kernel ins(%w : memref<12xf32>) outs(%t0 : memref<100xf32>) {
  ^bb0(%x: tensor<12xf32>):
    %c = otc.constant dense<1.0> : tensor<100xf32>
    otck.yield %c : tensor<100xf32>
  }
  return
}
