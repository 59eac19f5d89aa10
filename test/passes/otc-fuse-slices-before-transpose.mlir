// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that the thirds of a head transpose's last axis (GPT-NeoX's q, k
// and v of one [B, T, H, 3D] projection) are sliced before it: each part
// is transpose(slice(x)), the [B, H, T, 3D] transpose is gone.
// CHECK-LABEL: func.func @thirds
// CHECK-NOT: tensor<2x4x16x24xf32>
// CHECK-DAG: %[[Q:.*]] = otc.slice %arg0, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x16x4x24xf32>) -> tensor<2x16x4x8xf32>
// CHECK-DAG: %[[K:.*]] = otc.slice %arg0, [0, 0, 0, 8], [1, 1, 1, 1] : (tensor<2x16x4x24xf32>) -> tensor<2x16x4x8xf32>
// CHECK-DAG: %[[V:.*]] = otc.slice %arg0, [0, 0, 0, 16], [1, 1, 1, 1] : (tensor<2x16x4x24xf32>) -> tensor<2x16x4x8xf32>
// CHECK-DAG: otc.transpose %[[Q]], [0, 2, 1, 3]
// CHECK-DAG: otc.transpose %[[K]], [0, 2, 1, 3]
// CHECK-DAG: otc.transpose %[[V]], [0, 2, 1, 3]
func.func @thirds(%x: tensor<2x16x4x24xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %t = otc.transpose %x, [0, 2, 1, 3] : (tensor<2x16x4x24xf32>) -> tensor<2x4x16x24xf32>
  %q = otc.slice %t, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x8xf32>
  %k = otc.slice %t, [0, 0, 0, 8], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x8xf32>
  %v = otc.slice %t, [0, 0, 0, 16], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x8xf32>
  return %q, %k, %v : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// -----

// Tests near misses that keep the transpose: unequal parts, and a reader
// that is no slice.
// CHECK-LABEL: func.func @unequal
// CHECK: otc.transpose %arg0, [0, 2, 1, 3] : (tensor<2x16x4x24xf32>) -> tensor<2x4x16x24xf32>
// CHECK-LABEL: func.func @other_reader
// CHECK: otc.transpose %arg0, [0, 2, 1, 3] : (tensor<2x16x4x24xf32>) -> tensor<2x4x16x24xf32>
func.func @unequal(%x: tensor<2x16x4x24xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>) {
  %t = otc.transpose %x, [0, 2, 1, 3] : (tensor<2x16x4x24xf32>) -> tensor<2x4x16x24xf32>
  %q = otc.slice %t, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x8xf32>
  %kv = otc.slice %t, [0, 0, 0, 8], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x16xf32>
  return %q, %kv : tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>
}
func.func @other_reader(%x: tensor<2x16x4x24xf32>) -> (tensor<2x4x16x12xf32>, tensor<2x4x16x24xf32>) {
  %t = otc.transpose %x, [0, 2, 1, 3] : (tensor<2x16x4x24xf32>) -> tensor<2x4x16x24xf32>
  %q = otc.slice %t, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x4x16x24xf32>) -> tensor<2x4x16x12xf32>
  return %q, %t : tensor<2x4x16x12xf32>, tensor<2x4x16x24xf32>
}
