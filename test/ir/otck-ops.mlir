// RUN: otc-opt %s --split-input-file | otc-opt --split-input-file | FileCheck %s

// Tests that buffers, kernels, GEMMs and copies round-trip.
// CHECK-LABEL: func.func @step
func.func @step() {
  // CHECK: %[[X:.*]] = otck.buffer {offset = 0 : i64, slot = "input:x"} : memref<4x3xf32>
  %x = otck.buffer {slot = "input:x", offset = 0 : i64} : memref<4x3xf32>
  %w = otck.buffer {slot = "param:w"} : memref<5x3xf32>
  // CHECK: %[[T:.*]] = otck.buffer : memref<4x5xf32>
  %t = otck.buffer : memref<4x5xf32>
  // CHECK: otck.gemm %[[X]], %{{.*}}, %[[T]] {transpose_rhs}
  otck.gemm %x, %w, %t {transpose_rhs} : memref<4x3xf32>, memref<5x3xf32>, memref<4x5xf32>
  %u = otck.buffer : memref<4x5xf32>
  // CHECK: otck.kernel ins(%[[T]] : memref<4x5xf32>) outs(%{{.*}} : memref<4x5xf32>)
  otck.kernel ins(%t : memref<4x5xf32>) outs(%u : memref<4x5xf32>) {
  ^bb0(%a: tensor<4x5xf32>):
    // CHECK: otc.tanh
    %r = otc.tanh %a : tensor<4x5xf32>
    // CHECK: otck.yield
    otck.yield %r : tensor<4x5xf32>
  }
  // CHECK: otck.copy
  otck.copy %u, %t : memref<4x5xf32>
  return
}

// A rank's part of a group (ZeRO-1) prints and parses back.
// CHECK-LABEL: func.func @shard_view
// CHECK: otck.view %{{.*}} {shards = 4 : i64} : memref<16xf32> to memref<4xf32>
func.func @shard_view() {
  %a = otck.buffer : memref<16xf32>
  %b = otck.view %a {shards = 4 : i64} : memref<16xf32> to memref<4xf32>
  return
}
