// RUN: otc-opt %s --split-input-file --otc-plan-buffers | FileCheck %s
// RUN: otc-opt %s --split-input-file --otc-plan-buffers=alignment=64 | FileCheck %s --check-prefix=A64

// Tests that slots come first, shared between functions, that temporaries
// live at the same time get distinct places, and that an elementwise kernel
// writes its output over an input that dies there. Sizes: slots 48 and 20
// bytes (256 each aligned), temporaries 400 bytes each. %t0 is read by the
// neg and the add, so %t1 cannot take its place; %t2 takes %t0's place at
// the add that reads both last: 512 + 512 + 400 = 1424, aligned 1536.
// CHECK: module attributes {otck.alignment = 256 : i64, otck.arena_size = 1536 : i64}
// CHECK-LABEL: func.func @a()
// CHECK: otck.buffer {offset = 0 : i64, slot = "param:w"}
// CHECK: otck.buffer {offset = 256 : i64, slot = "loss"}
// CHECK: otck.buffer {offset = 512 : i64} : memref<100xf32>
// CHECK: otck.buffer {offset = 1024 : i64} : memref<100xf32>
// CHECK: otck.buffer {offset = 512 : i64, otck.in_place} : memref<100xf32>
// CHECK-LABEL: func.func @b()
// CHECK: otck.buffer {offset = 0 : i64, slot = "param:w"}
// CHECK: otck.buffer {offset = 512 : i64} : memref<100xf32>
// A64: module attributes {otck.alignment = 64 : i64, otck.arena_size = 1024 : i64}
// A64: otck.buffer {offset = 64 : i64, slot = "loss"}
// A64: otck.buffer {offset = 128 : i64} : memref<100xf32>
// A64: otck.buffer {offset = 576 : i64} : memref<100xf32>
// A64: otck.buffer {offset = 128 : i64, otck.in_place} : memref<100xf32>
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
  otck.kernel ins(%t0, %t1 : memref<100xf32>, memref<100xf32>) outs(%t2 : memref<100xf32>) {
  ^bb0(%x: tensor<100xf32>, %y: tensor<100xf32>):
    %c = otc.add %x, %y : (tensor<100xf32>, tensor<100xf32>) -> tensor<100xf32>
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

// -----

// Tests that a reduction (not elementwise) never writes over its input.
// CHECK-LABEL: func.func @reduce()
// CHECK: otck.buffer {offset = 0 : i64} : memref<4x4xf32>
// CHECK: otck.buffer {offset = 256 : i64} : memref<4x4xf32>
// CHECK-NOT: otck.in_place
func.func @reduce() {
  %t0 = otck.buffer : memref<4x4xf32>
  otck.kernel outs(%t0 : memref<4x4xf32>) {
    %c = otc.constant dense<1.0> : tensor<4x4xf32>
    otck.yield %c : tensor<4x4xf32>
  }
  %t1 = otck.buffer : memref<4x4xf32>
  otck.kernel ins(%t0 : memref<4x4xf32>) outs(%t1 : memref<4x4xf32>) {
  ^bb0(%x: tensor<4x4xf32>):
    %c = otc.transpose %x, [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    otck.yield %c : tensor<4x4xf32>
  }
  return
}
