// RUN: otc-opt %s --split-input-file --otc-fuse-patterns=remarks=true -verify-diagnostics -o /dev/null

// Tests that a softmax over the queries' axis of attention scores is
// reported as a near miss naming the axis.
func.func @softmax_axis(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  // expected-remark@+1 {{not fused: attention: softmax over axis 2, not the last}}
  %p = otc.softmax %s {axis = 2 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that probabilities read by another op than the product with V are
// reported.
func.func @probabilities_reused(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x4xf32>) {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  // expected-remark@+1 {{not fused: attention: the probabilities are also read elsewhere}}
  %p = otc.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o, %p : tensor<1x2x4x2xf32>, tensor<1x2x4x4xf32>
}

// -----

// Tests that a LayerNorm chain whose mean and variance reduce over
// different axes is reported.
func.func @layer_norm_axes(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %1 = otc.mul %0, %inv : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %2 = otc.sub %x, %1 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  %3 = otc.mul %2, %2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = otc.reduce_sum %3, [0] {keep_dims} : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %5 = otc.mul %4, %inv : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %6 = otc.add %5, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  // expected-remark@+1 {{not fused: layer norm: the mean and the variance reduce over different axes}}
  %7 = otc.sqrt %6 : tensor<1x4xf32>
  %8 = otc.div %2, %7 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  return %8 : tensor<4x4xf32>
}

// -----

// Tests that a variance divided by the wrong count is reported with both
// numbers.
func.func @layer_norm_count(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %third = otc.constant dense<0.333333343> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %1 = otc.mul %0, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %2 = otc.sub %x, %1 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %5 = otc.mul %4, %third : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %6 = otc.add %5, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  // expected-remark@+1 {{not fused: normalization: the mean divides by 3.000000, not the 4 reduced elements}}
  %7 = otc.sqrt %6 : tensor<3x1xf32>
  %8 = otc.div %2, %7 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  return %8 : tensor<3x4xf32>
}

// -----

// Tests that log_softmax over a non-class axis before nll_loss is reported.
func.func @log_softmax_axis(%z: tensor<6x5xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  %0 = otc.log_softmax %z {axis = 0 : i64} : tensor<6x5xf32>
  // expected-remark@+1 {{not fused: cross-entropy: log_softmax is not over the classes}}
  %1 = otc.nll_loss %0, %y : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Tests that a mixture of experts' router (a softmax of the router's
// product over the experts, read by a top-k and the routing weights) is no
// attention near miss: no remark.
func.func @router(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> (tensor<8x2xi64>, tensor<8x4xf32>) {
  %l = otc.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %p = otc.softmax %l {axis = 1 : i64} : tensor<8x4xf32>
  %i = otc.top_k %p {k = 2 : i64} : (tensor<8x4xf32>) -> tensor<8x2xi64>
  return %i, %p : tensor<8x2xi64>, tensor<8x4xf32>
}

// -----

// Tests the near misses of attention sinks (GPT-OSS: a learned logit per
// head concatenated to the scores, the softmax stabilized by its maximum,
// the sink's column sliced off before the product with V): a column that
// varies over the queries is no logit per head (@sinks_per_query); the
// probabilities' sink column read, not only the scores' (@sinks_read).
func.func @sinks_per_query(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %sink: tensor<1x2x4x1xf32>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %c = otc.concat %s, %sink {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  %m = otc.reduce_max %c, [3] {keep_dims} : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x1xf32>
  %d = otc.sub %c, %m : (tensor<1x2x4x5xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  // expected-remark@+1 {{not fused: attention sinks: the column [1, 2, 4, 1] does not broadcast one logit per head}}
  %p = otc.softmax %d {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %ps = otc.slice %p, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = otc.matmul %ps, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

func.func @sinks_read(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %sink: tensor<2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x5xf32>) {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %r = otc.reshape %sink : (tensor<2xf32>) -> tensor<1x2x1x1xf32>
  %col = otc.broadcast %r : (tensor<1x2x1x1xf32>) -> tensor<1x2x4x1xf32>
  %c = otc.concat %s, %col {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  // expected-remark@+1 {{not fused: attention sinks: the probabilities are read other than as the scores' columns}}
  %p = otc.softmax %c {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %ps = otc.slice %p, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = otc.matmul %ps, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o, %p : tensor<1x2x4x2xf32>, tensor<1x2x4x5xf32>
}
