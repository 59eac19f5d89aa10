// Tests the gradients of otc.rope (its gradient is otc.rope with
// `transposed` flipped): a rope over the last dimension of h = x w with [T, D]
// tables whose halves differ, and a transposed one with [H, 1, D] tables
// (broadcast over the batch and T), both feeding the loss.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x4x5xf32> {otc.input = "x"},
                   %t: tensor<2x3x4x8xf32> {otc.input = "t"},
                   %t2: tensor<2x3x4x8xf32> {otc.input = "t2"},
                   %w: tensor<5x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %cos = otc.constant dense<[[-0.524, 0.088, -0.260, 0.208, 0.251, -0.869, -0.974, 0.675], [-0.481, -0.531, 0.991, -0.059, 0.673, -0.047, 0.278, -0.699], [0.270, 0.736, 0.046, 0.483, 0.343, -0.872, 0.516, 0.182], [-0.397, -0.938, 0.731, -0.055, 0.438, 0.758, 0.428, 0.842]]> : tensor<4x8xf32>
  %sin = otc.constant dense<[[-0.210, 0.602, -0.111, 0.871, 0.758, -0.805, -0.728, -0.566], [0.931, -0.128, 0.253, -0.398, 0.014, -0.228, -0.298, 0.170], [0.169, 0.808, 0.364, 0.858, 0.713, 0.982, 0.343, -0.674], [0.721, 0.929, 0.809, 0.138, 0.428, -0.578, 0.663, 0.147]]> : tensor<4x8xf32>
  %cos2 = otc.constant dense<[[[-0.430, -0.873, 0.708, 0.980, -0.823, 0.601, -0.179, -0.698]], [[-0.412, 0.538, 0.746, -0.912, 0.229, -0.910, 0.437, -0.338]], [[0.762, 0.961, 0.011, 0.997, -0.381, -0.846, 0.200, -0.937]]]> : tensor<3x1x8xf32>
  %sin2 = otc.constant dense<[[[-0.605, -0.184, 0.221, -0.688, -0.915, 0.736, -0.372, 0.917]], [[0.793, -0.244, -0.079, 0.040, 0.288, 0.191, 0.119, 0.240]], [[0.881, 0.014, -0.138, 0.441, -0.525, -0.398, 0.956, 0.042]]]> : tensor<3x1x8xf32>
  %h = otc.matmul %x, %w : (tensor<2x3x4x5xf32>, tensor<5x8xf32>) -> tensor<2x3x4x8xf32>
  %y = otc.rope %h, %cos, %sin : (tensor<2x3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4x8xf32>
  %y2 = otc.rope %h, %cos2, %sin2 {transposed} : (tensor<2x3x4x8xf32>, tensor<3x1x8xf32>, tensor<3x1x8xf32>) -> tensor<2x3x4x8xf32>
  %0 = otc.mul %y, %t : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %1 = otc.mul %y2, %t2 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %2 = otc.add %0, %1 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %3 = otc.reduce_sum %2, [0, 1, 2, 3] : (tensor<2x3x4x8xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
