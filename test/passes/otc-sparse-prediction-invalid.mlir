// RUN: %not otc-opt %s --otc-configure=micro-batch=2 --otc-sparse-prediction=positions=3 --split-input-file 2>&1 | FileCheck %s
// RUN: %not otc-opt %s --otc-configure=micro-batch=2 --otc-sparse-prediction=positions=8 --split-input-file 2>&1 | FileCheck %s --check-prefix=WIDE

// Tests the losses otc-sparse-prediction refuses, one line each: one that
// ignores no index (every position counts), a sum, two cross-entropies,
// targets that are computed; and (WIDE) as many positions as a sequence
// has.

// CHECK: error: --sparse-prediction=3 needs the loss to be one cross-entropy, the mean over the targets that are not its ignore index (a masked LM's: --loss=cross_entropy:LOGITS:TARGETS); it ignores no index
module {
  func.func @forward(%arg0: tensor<2x8x10xf32>, %arg1: tensor<2x8xi64> {otc.input = "targets"}) -> tensor<f32> {
    %loss, %lse = otc.cross_entropy %arg0, %arg1 : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// CHECK: error: --sparse-prediction=3 needs the loss to be one cross-entropy, {{.*}}; its reduction is 'sum'
module {
  func.func @forward(%arg0: tensor<2x8x10xf32>, %arg1: tensor<2x8xi64> {otc.input = "targets"}) -> tensor<f32> {
    %loss, %lse = otc.cross_entropy %arg0, %arg1 {ignore_index = -100 : i64, reduction = "sum"} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// CHECK: error: --sparse-prediction=3 needs the loss to be one cross-entropy, {{.*}}; the graph has 2
module {
  func.func @forward(%arg0: tensor<2x8x10xf32>, %arg1: tensor<2x8xi64> {otc.input = "targets"}) -> (tensor<f32>, tensor<f32>) {
    %loss, %lse = otc.cross_entropy %arg0, %arg1 {ignore_index = -100 : i64} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    %again, %lse2 = otc.cross_entropy %arg0, %arg1 {ignore_index = -100 : i64} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %loss, %again : tensor<f32>, tensor<f32>
  }
}

// -----

// CHECK: error: --sparse-prediction: the loss's targets are computed, not a graph input the runtime can choose the positions from
module {
  func.func @forward(%arg0: tensor<2x8x10xf32>, %arg1: tensor<2x8xi64> {otc.input = "targets"}) -> tensor<f32> {
    %one = otc.constant dense<1> : tensor<i64>
    %t = otc.add %arg1, %one : (tensor<2x8xi64>, tensor<i64>) -> tensor<2x8xi64>
    %loss, %lse = otc.cross_entropy %arg0, %t {ignore_index = -100 : i64} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// WIDE: error: --sparse-prediction=8: the positions kept per sequence must be from 1 to 7 (the sequence has 8)
module {
  func.func @forward(%arg0: tensor<2x8x10xf32>, %arg1: tensor<2x8xi64> {otc.input = "targets"}) -> tensor<f32> {
    %loss, %lse = otc.cross_entropy %arg0, %arg1 {ignore_index = -100 : i64} : (tensor<2x8x10xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    return %loss : tensor<f32>
  }
}
