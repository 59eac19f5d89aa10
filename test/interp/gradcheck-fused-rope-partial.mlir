// Tests the gradients of otc.rope in its partial and interleaved forms
// (the gradient is otc.rope with `transposed` flipped): over h = x w of 8
// features, a rope rotating the first 4 with [T, 4] tables (halves that
// differ), a transposed interleaved one rotating the first 6 with [H, 1, 6]
// tables, and an interleaved one over the whole row, all feeding the loss:
// the features past the rotary width are copied, forward and back.
// RUN: otc-run %s --check-gradients | FileCheck %s

// CHECK: loss: {{.*}} PASS
// CHECK: w {{.*}} PASS
// CHECK: gradient check: PASS
func.func @forward(%x: tensor<2x3x4x5xf32> {otc.input = "x"},
                   %t: tensor<2x3x4x8xf32> {otc.input = "t"},
                   %t2: tensor<2x3x4x8xf32> {otc.input = "t2"},
                   %t3: tensor<2x3x4x8xf32> {otc.input = "t3"},
                   %w: tensor<5x8xf32> {otc.param = "w"})
    -> (tensor<f32> {otc.output = "loss"}) {
  %cos = otc.constant dense<[[-0.352, -0.698, 0.302, -0.855], [0.072, -0.269, -0.884, 0.015], [-0.925, -0.133, -0.860, -0.819], [-0.151, 0.654, -0.752, -0.554]]> : tensor<4x4xf32>
  %sin = otc.constant dense<[[0.255, 0.895, 0.154, -0.207], [0.953, -0.907, 0.717, -0.421], [-0.711, -0.764, -0.383, 0.632], [-0.639, 0.163, 0.278, -0.255]]> : tensor<4x4xf32>
  %cos2 = otc.constant dense<[[[0.095, -0.874, -0.881, -0.588, 0.361, -0.145]], [[-0.372, 0.171, -0.094, -0.400, 0.589, 0.398]], [[-0.512, 0.149, 0.050, 0.750, 0.459, -0.424]]]> : tensor<3x1x6xf32>
  %sin2 = otc.constant dense<[[[0.960, -0.764, -0.164, 0.514, -0.696, -0.022]], [[-0.922, 0.336, 0.529, 0.146, 0.751, -0.373]], [[0.391, 0.189, 0.160, -0.088, 0.680, 0.889]]]> : tensor<3x1x6xf32>
  %cos3 = otc.constant dense<[[-0.052, 0.328, -0.879, 0.403, 0.294, 0.986, 0.644, -0.431], [-0.228, 0.337, -0.955, -0.077, -0.664, -0.766, -0.882, 0.536], [-0.741, -0.505, -0.218, 0.743, -0.839, -0.102, 0.099, 0.767], [0.639, 0.728, -0.443, -0.169, -0.282, 0.768, 0.915, -0.698]]> : tensor<4x8xf32>
  %sin3 = otc.constant dense<[[-0.648, -0.536, -0.533, -0.030, 0.178, -0.475, -0.992, -0.162], [-0.261, 0.133, 0.906, 0.381, 0.031, 0.235, 0.352, -0.892], [0.799, 0.560, 0.749, 0.596, -0.215, -0.202, -0.793, 0.269], [-0.876, -0.865, -0.582, -0.675, -0.320, -0.895, -1.000, -0.697]]> : tensor<4x8xf32>
  %h = otc.matmul %x, %w : (tensor<2x3x4x5xf32>, tensor<5x8xf32>) -> tensor<2x3x4x8xf32>
  %y = otc.rope %h, %cos, %sin : (tensor<2x3x4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4x8xf32>
  %y2 = otc.rope %h, %cos2, %sin2 {interleaved, transposed} : (tensor<2x3x4x8xf32>, tensor<3x1x6xf32>, tensor<3x1x6xf32>) -> tensor<2x3x4x8xf32>
  %y3 = otc.rope %h, %cos3, %sin3 {interleaved} : (tensor<2x3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4x8xf32>
  %0 = otc.mul %y, %t : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %1 = otc.mul %y2, %t2 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %2 = otc.mul %y3, %t3 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %3 = otc.add %0, %1 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %4 = otc.add %3, %2 : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %5 = otc.reduce_sum %4, [0, 1, 2, 3] : (tensor<2x3x4x8xf32>) -> tensor<f32>
  return %5 : tensor<f32>
}
