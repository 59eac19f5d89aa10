// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that torch 1.13's GPT-2 attention (TorchScript exporter, opsets 14
// and 17) becomes one causal otc.attention: K^T is a transpose of the
// [B, T, H, D] view (made a [B, H, T, D] transpose), the scores are divided
// by sqrt(D) and hidden by Where over the sliced tril buffer compared with 0.
// CHECK-LABEL: func.func @gpt2_attention_torchscript
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x2xf32>, %[[KR:.*]]: tensor<1x4x2x2xf32>, %[[V:.*]]: tensor<1x2x4x2xf32>)
// CHECK: %[[K:.*]] = otc.transpose %[[KR]], [0, 2, 1, 3]
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.70710{{[0-9]*}} : f64}
// CHECK-NOT: otc.softmax
// CHECK-NOT: otc.select
// CHECK: return %[[O]]
func.func @gpt2_attention_torchscript(%q: tensor<1x2x4x2xf32>, %kr: tensor<1x4x2x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %buf = otc.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x5x5xf32>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %ninf = otc.constant dense<0xFF800000> : tensor<f32>
  %sqrtd = otc.constant dense<1.41421354> : tensor<f32>
  %kt = otc.transpose %kr, [0, 2, 3, 1] : (tensor<1x4x2x2xf32>) -> tensor<1x2x2x4xf32>
  %s = otc.matmul %q, %kt : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.div %s, %sqrtd : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %vis = otc.slice %buf, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x1x5x5xf32>) -> tensor<1x1x4x4xf32>
  %hide = otc.compare "eq", %vis, %zero : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xi1>
  %m = otc.select %hide, %ninf, %sc : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that the dynamo exporter's attention (opset 18) is recognized
// through the reshapes that merge [B, H] into one batch dimension around
// both products, with K^T a transpose of the last two dimensions of K and a
// boolean causal constant selecting the scores (bench/make_gpt2_onnx.py's
// form, with a -1e9 fill).
// CHECK-LABEL: func.func @attention_dynamo_batched
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x2xf32>, %[[K:.*]]: tensor<1x2x4x2xf32>, %[[V:.*]]: tensor<1x2x4x2xf32>)
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: otc.matmul
// CHECK: return %[[O]]
func.func @attention_dynamo_batched(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %tril = otc.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = otc.constant dense<-1.0e+09> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %kt = otc.transpose %k, [0, 1, 3, 2] : (tensor<1x2x4x2xf32>) -> tensor<1x2x2x4xf32>
  %q3 = otc.reshape %q : (tensor<1x2x4x2xf32>) -> tensor<2x4x2xf32>
  %k3 = otc.reshape %kt : (tensor<1x2x2x4xf32>) -> tensor<2x2x4xf32>
  %s3 = otc.matmul %q3, %k3 : (tensor<2x4x2xf32>, tensor<2x2x4xf32>) -> tensor<2x4x4xf32>
  %s = otc.reshape %s3 : (tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %tril, %sc, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %p3 = otc.reshape %p : (tensor<1x2x4x4xf32>) -> tensor<2x4x4xf32>
  %v3 = otc.reshape %v : (tensor<1x2x4x2xf32>) -> tensor<2x4x2xf32>
  %o3 = otc.matmul %p3, %v3 : (tensor<2x4x4xf32>, tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %o = otc.reshape %o3 : (tensor<2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests the Llama form (opsets 14-18): grouped-query K and V repeated by
// reshape / expand / reshape are read unrepeated (Hk = 2 for H = 4), the
// scale multiplies the scores, and the mask is the added triu of a -inf
// matrix.
// CHECK-LABEL: func.func @llama_gqa_additive_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x2xf32>, %[[K:.*]]: tensor<1x2x4x2xf32>, %[[V:.*]]: tensor<1x2x4x2xf32>)
// CHECK: otc.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.70710{{[0-9]*}} : f64} : (tensor<1x4x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x4x4x2xf32>, tensor<1x4x4xf32>)
// CHECK-NOT: otc.broadcast
// CHECK-NOT: otc.trilu
func.func @llama_gqa_additive_mask(%q: tensor<1x4x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x4x4x2xf32> {
  %ninf = otc.constant dense<0xFF800000> : tensor<4x4xf32>
  %c = otc.constant dense<0.707106769> : tensor<f32>
  %k5 = otc.reshape %k : (tensor<1x2x4x2xf32>) -> tensor<1x2x1x4x2xf32>
  %kb = otc.broadcast %k5 : (tensor<1x2x1x4x2xf32>) -> tensor<1x2x2x4x2xf32>
  %kk = otc.reshape %kb : (tensor<1x2x2x4x2xf32>) -> tensor<1x4x4x2xf32>
  %v5 = otc.reshape %v : (tensor<1x2x4x2xf32>) -> tensor<1x2x1x4x2xf32>
  %vb = otc.broadcast %v5 : (tensor<1x2x1x4x2xf32>) -> tensor<1x2x2x4x2xf32>
  %vv = otc.reshape %vb : (tensor<1x2x2x4x2xf32>) -> tensor<1x4x4x2xf32>
  %kt = otc.transpose %kk, [0, 1, 3, 2] : (tensor<1x4x4x2xf32>) -> tensor<1x4x2x4xf32>
  %s = otc.matmul %q, %kt : (tensor<1x4x4x2xf32>, tensor<1x4x2x4xf32>) -> tensor<1x4x4x4xf32>
  %sc = otc.mul %s, %c : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %mask = otc.trilu %ninf {k = 1 : i64, upper = true} : tensor<4x4xf32>
  %a = otc.add %sc, %mask : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %o = otc.matmul %p, %vv : (tensor<1x4x4x4xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  return %o : tensor<1x4x4x2xf32>
}

// -----

// Tests that dropout on the probabilities moves into the attention op with
// its key, ratio and stream (so the same mask is drawn), and that attention
// without a mask is not causal.
// CHECK-LABEL: func.func @attention_dropout
// CHECK-SAME: %[[KEY:[^:]*]]: tensor<i64>
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} key %[[KEY]] {dropout = 1.000000e-01 : f64, scale = 1.000000e+00 : f64, stream = 3 : i64}
// CHECK-NOT: otc.dropout
func.func @attention_dropout(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %key: tensor<i64>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %d, %mask = otc.dropout %p, %key {ratio = 0.1 : f64, stream = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<i64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xi1>)
  %o = otc.matmul %d, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a constant mask that is not exactly causal (one future key is
// visible) is not given the causal flag: it becomes an additive mask
// operand (the fill where hidden, 0 elsewhere).
// CHECK-LABEL: func.func @attention_not_causal_constant
// CHECK: %[[M:.*]] = otc.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] {scale = 5.000000e-01 : f64}
// CHECK-NOT: causal
func.func @attention_not_causal_constant(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %vis = otc.constant dense<[[true, true, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = otc.constant dense<0xFF800000> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %vis, %sc, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a causal sliding window (each query sees itself and the key
// before it: Mistral's and Gemma 2's local attention) becomes `causal` with
// `window = 2` and no mask operand, as a boolean select and as an additive
// -inf matrix; a band whose width changes from row to row is no window and
// stays an additive mask.
// CHECK-LABEL: func.func @attention_sliding_window
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 5.000000e-01 : f64}
func.func @attention_sliding_window(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) {
  %band = otc.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %fill = otc.constant dense<0xFF800000> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %band, %sc, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %add = otc.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0xFF800000, 0.0, 0.0, 0xFF800000], [0xFF800000, 0xFF800000, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s2 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc2 = otc.mul %s2, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m2 = otc.add %sc2, %add : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = otc.softmax %m2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o2 = otc.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %ragged = otc.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %s3 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc3 = otc.mul %s3, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m3 = otc.select %ragged, %sc3, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p3 = otc.softmax %m3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o3 = otc.matmul %p3, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o, %o2, %o3 : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests that a bidirectional sliding window (each query sees the keys at
// most 1 away on either side: ModernBERT's local attention, |i - j| <= 1)
// becomes `window = 2` without `causal` and no mask operand, as a boolean
// select and as an additive -inf matrix; a band one key wider ahead than
// behind (|i - j| <= 1 behind, <= 2 ahead) is no window and stays a mask,
// and so is a band that hides nothing.
// CHECK-LABEL: func.func @attention_bidirectional_window
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64, window = 2 : i64}
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 5.000000e-01 : f64}
func.func @attention_bidirectional_window(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) {
  %band = otc.constant dense<[[true, true, false, false], [true, true, true, false], [false, true, true, true], [false, false, true, true]]> : tensor<4x4xi1>
  %fill = otc.constant dense<0xFF800000> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %band, %sc, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %add = otc.constant dense<[[[[0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0xFF800000, 0.0, 0.0, 0.0], [0xFF800000, 0xFF800000, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s2 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc2 = otc.mul %s2, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m2 = otc.add %sc2, %add : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = otc.softmax %m2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o2 = otc.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %wider = otc.constant dense<[[true, true, true, false], [true, true, true, true], [false, true, true, true], [false, false, true, true]]> : tensor<4x4xi1>
  %s3 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc3 = otc.mul %s3, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m3 = otc.select %wider, %sc3, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p3 = otc.softmax %m3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o3 = otc.matmul %p3, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o, %o2, %o3 : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests onnxscript's NaN guard after the softmax, Where(IsNaN(p), 0, p)
// (imported as select(p != p, 0, p)): under causal masking alone no row
// hides every key, so the guard never fires and the attention fuses; under
// a run-time key padding (a bidirectional attention's, as the dynamo
// exporter writes Hugging Face's SDPA mask: select(select(true, K, false),
// 0, fill)) a row that hides every key gives zeros fused, as the guard
// does, so it fuses too; with an additive mask a row could hide every key,
// and the guard's zeros would differ from the fused op's NaN, so it stays
// unfused; with no mask at all (ModernBERT's global layers exported from
// SDPA without an attention_mask) every row sees every key: it fuses.
// CHECK-LABEL: func.func @attention_nan_guard
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 5.000000e-01 : f64}
// CHECK: otc.softmax
// CHECK-NOT: otc.softmax
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {key_padding, scale = 5.000000e-01 : f64} : ({{.*}}, tensor<1x1x1x4xf32>)
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f64}
// CHECK: return
func.func @attention_nan_guard(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %pad: tensor<1x1x1x4xf32>, %seen: tensor<1x1x1x4xi1>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) {
  %tril = otc.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = otc.constant dense<0xFF800000> : tensor<f32>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %tril, %sc, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan = otc.compare "ne", %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g = otc.select %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = otc.matmul %g, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %s2 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc2 = otc.mul %s2, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m2 = otc.add %sc2, %pad : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = otc.softmax %m2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan2 = otc.compare "ne", %p2, %p2 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g2 = otc.select %nan2, %zero, %p2 : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o2 = otc.matmul %g2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %all = otc.constant dense<true> : tensor<1x1x4x1xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %min = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %cond = otc.select %all, %seen, %no : (tensor<1x1x4x1xi1>, tensor<1x1x1x4xi1>, tensor<i1>) -> tensor<1x1x4x4xi1>
  %add = otc.select %cond, %zero, %min : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %s3 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc3 = otc.mul %s3, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m3 = otc.add %sc3, %add : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p3 = otc.softmax %m3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan3 = otc.compare "ne", %p3, %p3 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g3 = otc.select %nan3, %zero, %p3 : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o3 = otc.matmul %g3, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %s4 = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %sc4 = otc.mul %s4, %half : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p4 = otc.softmax %sc4 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan4 = otc.compare "ne", %p4, %p4 : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g4 = otc.select %nan4, %zero, %p4 : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o4 = otc.matmul %g4, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o, %o2, %o3, %o4 : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests that a softmax over the wrong axis (the queries, not the keys) is
// left alone.
// CHECK-LABEL: func.func @attention_softmax_wrong_axis
// CHECK-NOT: otc.attention
// CHECK: otc.softmax %{{.*}} {axis = 2 : i64}
func.func @attention_softmax_wrong_axis(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %s {axis = 2 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests the opset-14 LayerNorm decomposition (ReduceMean as reduce_sum
// times 1/n, Pow 2, Sqrt, Div, Mul gamma, Add beta) -> otc.layer_norm.
// CHECK-LABEL: func.func @layer_norm_opset14
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[G:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = otc.layer_norm %[[X]] gamma %[[G]] beta %[[B]] {axis = 2 : i64, epsilon = 9.99999974{{[0-9E-]*}} : f64} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_opset14(%x: tensor<2x3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %eps = otc.constant dense<9.99999974E-6> : tensor<f32>
  %two = otc.constant dense<2.000000e+00> : tensor<f32>
  %0 = otc.reduce_sum %x, [2] {keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %1 = otc.mul %0, %inv : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %2 = otc.sub %x, %1 : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %3 = otc.pow %2, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %4 = otc.reduce_sum %3, [2] {keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %5 = otc.mul %4, %inv : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %6 = otc.add %5, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %7 = otc.sqrt %6 : tensor<2x3x1xf32>
  %8 = otc.div %2, %7 : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %9 = otc.mul %8, %g : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %10 = otc.add %9, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %10 : tensor<2x3x4xf32>
}

// -----

// Tests the form the importer gives LayerNormalization (opset 17) and the
// dynamo exporter writes (opset 18): d * d and a reciprocal of the square
// root; a [1, 4] scale is reshaped to the normalized shape.
// CHECK-LABEL: func.func @layer_norm_reciprocal
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>, %[[G:.*]]: tensor<1x4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK: %[[G2:.*]] = otc.reshape %[[G]] : (tensor<1x4xf32>) -> tensor<4xf32>
// CHECK: otc.layer_norm %[[X]] gamma %[[G2]] beta %[[B]] {axis = 1 : i64
func.func @layer_norm_reciprocal(%x: tensor<3x4xf32>, %g: tensor<1x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %1 = otc.mul %0, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %2 = otc.sub %x, %1 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %5 = otc.mul %4, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %6 = otc.add %5, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %7 = otc.sqrt %6 : tensor<3x1xf32>
  %8 = otc.reciprocal %7 : tensor<3x1xf32>
  %9 = otc.mul %2, %8 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %10 = otc.mul %g, %9 : (tensor<1x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %11 = otc.add %10, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %11 : tensor<3x4xf32>
}

// -----

// Tests that a LayerNorm chain whose mean and variance reduce over
// different axes is left alone.
// CHECK-LABEL: func.func @layer_norm_axes_differ
// CHECK-NOT: otc.layer_norm
// CHECK-NOT: otc.rms_norm
// CHECK: otc.sqrt
func.func @layer_norm_axes_differ(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  %1 = otc.mul %0, %inv : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %2 = otc.sub %x, %1 : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
  %3 = otc.mul %2, %2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = otc.reduce_sum %3, [0] {keep_dims} : (tensor<4x4xf32>) -> tensor<1x4xf32>
  %5 = otc.mul %4, %inv : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %6 = otc.add %5, %eps : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %7 = otc.sqrt %6 : tensor<1x4xf32>
  %8 = otc.div %2, %7 : (tensor<4x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  return %8 : tensor<4x4xf32>
}

// -----

// Tests that a LayerNorm chain whose epsilon is not a constant (here a
// function argument) is left alone: the fused op's epsilon is an attribute.
// CHECK-LABEL: func.func @layer_norm_epsilon_not_constant
// CHECK-NOT: otc.layer_norm
// CHECK: otc.sqrt
func.func @layer_norm_epsilon_not_constant(%x: tensor<3x4xf32>, %eps: tensor<f32>) -> tensor<3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %1 = otc.mul %0, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %2 = otc.sub %x, %1 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %5 = otc.mul %4, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %6 = otc.add %5, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %7 = otc.sqrt %6 : tensor<3x1xf32>
  %8 = otc.div %2, %7 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  return %8 : tensor<3x4xf32>
}

// -----

// Tests Llama's RMSNorm as exported: Pow 2, ReduceMean, Add eps, Sqrt,
// 1 / x, Mul x, Mul weight -> otc.rms_norm.
// CHECK-LABEL: func.func @rms_norm_llama
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<4xf32>)
// CHECK: %[[Y:.*]], %{{.*}} = otc.rms_norm %[[X]] gamma %[[W]] {axis = 2 : i64, epsilon = 9.99999974{{[0-9E-]*}} : f64}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_llama(%x: tensor<2x3x4xf32>, %w: tensor<4xf32>) -> tensor<2x3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %eps = otc.constant dense<9.99999974E-6> : tensor<f32>
  %two = otc.constant dense<2.000000e+00> : tensor<f32>
  %0 = otc.pow %x, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %1 = otc.reduce_sum %0, [2] {keep_dims} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %2 = otc.mul %1, %inv : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %3 = otc.add %2, %eps : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %4 = otc.sqrt %3 : tensor<2x3x1xf32>
  %5 = otc.div %one, %4 : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %6 = otc.mul %x, %5 : (tensor<2x3x4xf32>, tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
  %7 = otc.mul %6, %w : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %7 : tensor<2x3x4xf32>
}

// -----

// Tests GELU in the torch exporter's erf form (x / sqrt(2), Erf, + 1, * x,
// * 0.5) and Hugging Face's tanh form (0.5 x (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3)))), and x * sigmoid(x).
// CHECK-LABEL: func.func @activations
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK-DAG: %[[E:.*]] = otc.gelu %[[X]] : tensor<8xf32>
// CHECK-DAG: %[[T:.*]] = otc.gelu %[[X]] {approximate = "tanh"} : tensor<8xf32>
// CHECK-DAG: %[[S:.*]] = otc.silu %[[X]] : tensor<8xf32>
// CHECK-NOT: otc.erf
// CHECK-NOT: otc.tanh
// CHECK: return %[[E]], %[[T]], %[[S]]
func.func @activations(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %sqrt2 = otc.constant dense<1.41421354> : tensor<f32>
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %half = otc.constant dense<5.000000e-01> : tensor<f32>
  %three = otc.constant dense<3.000000e+00> : tensor<f32>
  %c = otc.constant dense<4.471500e-02> : tensor<f32>
  %k = otc.constant dense<0.797884583> : tensor<f32>
  %0 = otc.div %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = otc.erf %0 : tensor<8xf32>
  %2 = otc.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = otc.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = otc.mul %3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %10 = otc.mul %half, %x : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %11 = otc.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %12 = otc.mul %c, %11 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %13 = otc.add %x, %12 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %14 = otc.mul %k, %13 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %15 = otc.tanh %14 : tensor<8xf32>
  %16 = otc.add %one, %15 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %17 = otc.mul %10, %16 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %20 = otc.sigmoid %x : tensor<8xf32>
  %21 = otc.mul %x, %20 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %4, %17, %21 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests CLIP's QuickGELU, x * sigmoid(1.702 x) (the constant on either side
// of the product), fused to otc.silu with alpha = 1.702; a scale that is
// not a constant, or whose product is also read elsewhere, is left alone.
// CHECK-LABEL: func.func @quick_gelu
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8xf32>, %[[Y:[^:]*]]: tensor<2x8xf32>)
// CHECK-DAG: %[[A:.*]] = otc.silu %[[X]] {alpha = 1.70{{[0-9]*}} : f64} : tensor<2x8xf32>
// CHECK-DAG: %[[B:.*]] = otc.silu %[[X]] {alpha = 1.70{{[0-9]*}} : f64} : tensor<2x8xf32>
// CHECK-DAG: %[[YS:.*]] = otc.mul %[[X]], %[[Y]]
// CHECK-DAG: %[[C:.*]] = otc.sigmoid %[[YS]]
// CHECK-DAG: %[[KS:.*]] = otc.mul %[[X]], %{{.*}} : (tensor<2x8xf32>, tensor<f32>)
// CHECK-DAG: otc.sigmoid %[[KS]]
// CHECK: return %[[A]], %[[B]]
func.func @quick_gelu(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %k = otc.constant dense<1.702000e+00> : tensor<f32>
  %0 = otc.mul %x, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %1 = otc.sigmoid %0 : tensor<2x8xf32>
  %2 = otc.mul %x, %1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %3 = otc.mul %k, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %4 = otc.sigmoid %3 : tensor<2x8xf32>
  %5 = otc.mul %4, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %6 = otc.mul %x, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %7 = otc.sigmoid %6 : tensor<2x8xf32>
  %8 = otc.mul %x, %7 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %9 = otc.mul %x, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %10 = otc.sigmoid %9 : tensor<2x8xf32>
  %11 = otc.mul %x, %10 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %2, %5, %8, %11, %9 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests that an erf chain scaled by 1 instead of 0.5 is not a GELU.
// CHECK-LABEL: func.func @gelu_wrong_constant
// CHECK-NOT: otc.gelu
// CHECK: otc.erf
func.func @gelu_wrong_constant(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = otc.constant dense<1.41421354> : tensor<f32>
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %0 = otc.div %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = otc.erf %0 : tensor<8xf32>
  %2 = otc.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = otc.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %3 : tensor<8xf32>
}

// -----

// Tests that SoftmaxCrossEntropyLoss on logits the exporter flattened with a
// reshape takes the unflattened [B, T, V] logits and [B, T] labels, and that
// LogSoftmax followed by NegativeLogLikelihoodLoss is one cross-entropy.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[Z:.*]]: tensor<2x3x5xf32>, %[[Y:.*]]: tensor<2x3xi64>, %[[Z2:.*]]: tensor<6x5xf32>, %[[Y2:.*]]: tensor<6xi64>)
// CHECK: %[[L:.*]], %{{.*}} = otc.cross_entropy %[[Z]], %[[Y]] {ignore_index = -1 : i64} : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK: %[[L2:.*]], %{{.*}} = otc.cross_entropy %[[Z2]], %[[Y2]] {reduction = "sum"} : (tensor<6x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
// CHECK-NOT: otc.log_softmax
// CHECK: return %[[L]], %[[L2]]
func.func @cross_entropy(%z: tensor<2x3x5xf32>, %y: tensor<2x3xi64>, %z2: tensor<6x5xf32>, %y2: tensor<6xi64>) -> (tensor<f32>, tensor<f32>) {
  %0 = otc.reshape %z : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
  %1 = otc.reshape %y : (tensor<2x3xi64>) -> tensor<6xi64>
  %2 = otc.softmax_cross_entropy %0, %1 {ignore_index = -1 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  %3 = otc.log_softmax %z2 {axis = 1 : i64} : tensor<6x5xf32>
  %4 = otc.nll_loss %3, %y2 {reduction = "sum"} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %2, %4 : tensor<f32>, tensor<f32>
}

// -----

// Tests that attention over [B, T, H, D] projections transposed to
// [B, H, T, D], whose output is transposed back, reads and writes the
// [B, T, H, D] tensors itself (layout "bthd"): no transpose is left; and
// that one extra reader of the output keeps the [B, H, T, D] form.
// CHECK-LABEL: func.func @attention_heads_second
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x2x2xf32>, %[[K:.*]]: tensor<1x4x2x2xf32>, %[[V:.*]]: tensor<1x4x2x2xf32>)
// CHECK-NOT: otc.transpose
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] {causal, layout = "bthd", scale = 5.000000e-01 : f64} : (tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4xf32>)
// CHECK-NOT: otc.transpose
// CHECK: return %[[O]]
// CHECK-LABEL: func.func @attention_output_read_twice
// CHECK: otc.attention
// CHECK-NOT: layout = "bthd"
// CHECK: return
func.func @attention_heads_second(%qs: tensor<1x4x2x2xf32>, %ks: tensor<1x4x2x2xf32>, %vs: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %q = otc.transpose %qs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %k = otc.transpose %ks, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %v = otc.transpose %vs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %ob = otc.transpose %o, [0, 2, 1, 3] : (tensor<1x2x4x2xf32>) -> tensor<1x4x2x2xf32>
  return %ob : tensor<1x4x2x2xf32>
}
func.func @attention_output_read_twice(%qs: tensor<1x4x2x2xf32>, %ks: tensor<1x4x2x2xf32>, %vs: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>) {
  %q = otc.transpose %qs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %k = otc.transpose %ks, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %v = otc.transpose %vs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %ob = otc.transpose %o, [0, 2, 1, 3] : (tensor<1x2x4x2xf32>) -> tensor<1x4x2x2xf32>
  return %ob, %o : tensor<1x4x2x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests Hugging Face GPT-2's attention (transformers 4.40, TorchScript
// exporter): the scores divided by sqrt(D), hidden by Where over the bool
// causal buffer with finfo(float32).min, then the padding mask built from
// attention_mask added: one otc.attention with the causal flag and the added
// mask as its operand.
// CHECK-LABEL: func.func @hf_gpt2_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x2xf32>, %[[K:.*]]: tensor<1x2x4x2xf32>, %[[V:.*]]: tensor<1x2x4x2xf32>, %[[PAD:.*]]: tensor<1x1x1x4xf32>)
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] mask %[[PAD]] {causal, scale = 0.70710{{[0-9]*}} : f64}
// CHECK-NOT: otc.softmax
// CHECK: return %[[O]]
func.func @hf_gpt2_attention(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %pad: tensor<1x1x1x4xf32>) -> tensor<1x2x4x2xf32> {
  %tril = otc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %min = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %sqrtd = otc.constant dense<1.41421354> : tensor<f32>
  %kt = otc.transpose %k, [0, 1, 3, 2] : (tensor<1x2x4x2xf32>) -> tensor<1x2x2x4xf32>
  %s = otc.matmul %q, %kt : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.div %s, %sqrtd : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %w = otc.select %tril, %sc, %min : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.add %w, %pad : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a Where under an added mask whose condition is not exactly
// causal (one future key is visible) is left unfused: two masks would have
// to be merged.
// CHECK-LABEL: func.func @select_not_causal_plus_mask
// CHECK-NOT: otc.attention
// CHECK: otc.softmax
func.func @select_not_causal_plus_mask(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %pad: tensor<1x1x1x4xf32>) -> tensor<1x2x4x2xf32> {
  %tril = otc.constant dense<[[[[true, true, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %min = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = otc.transpose %k, [0, 1, 3, 2] : (tensor<1x2x4x2xf32>) -> tensor<1x2x2x4xf32>
  %s = otc.matmul %q, %kt : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %w = otc.select %tril, %s, %min : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = otc.add %w, %pad : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that an additive mask computed from a parameter (a relative position
// bias, as T5's) fuses with mask_grad on a target without a config (the
// cpu's): the gradient op returns dS for it.
// CHECK-LABEL: func.func @mask_from_param
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {mask_grad, scale = 1.000000e+00 : f64}
// CHECK-NOT: otc.softmax
func.func @mask_from_param(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>,
                           %bias: tensor<4x4xf32> {otc.param = "bias"}) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.add %s, %bias : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that the cuda target fuses it too (its kernel library's attention
// returns dS).
// CHECK-LABEL: func.func @mask_from_param_cuda
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {mask_grad, scale = 1.000000e+00 : f64}
// CHECK-NOT: otc.softmax
module attributes {otc.config = #otc.config<micro_batch = 1, grad_accum = 1, precision = "fp32", fp32_grad_accum = false, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-8, target = "cuda", device = "h100">} {
func.func @mask_from_param_cuda(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>,
                                %bias: tensor<4x4xf32> {otc.param = "bias"}) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.add %s, %bias : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}
}

// -----

// Tests T5's eager decoder attention, (S + bias) + causal: the relative
// bias from a parameter first, then a causal mask (-inf above the
// diagonal). One causal otc.attention whose mask is the bias, with
// mask_grad; the same with the causal mask added first (the sum read
// whichever way round).
// CHECK-LABEL: func.func @bias_then_causal
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {causal, mask_grad, scale = 1.000000e+00 : f64}
// CHECK-NOT: otc.softmax
func.func @bias_then_causal(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>,
                            %bias: tensor<1x2x4x4xf32> {otc.param = "bias"}) -> tensor<1x2x4x2xf32> {
  %m = otc.constant dense<[[[[0.0, -3.40282347e+38, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, -3.40282347e+38, -3.40282347e+38], [0.0, 0.0, 0.0, -3.40282347e+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.add %s, %bias : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = otc.add %m, %a : (tensor<1x1x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %b {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// The second mask not a band (a run-time padding mask): one attention whose
// mask is the two masks' sum, broadcast as the adds broadcast them.
// CHECK-LABEL: func.func @bias_then_padding
// CHECK: %[[SUM:.*]] = otc.add %arg3, %arg4 : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: otc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[SUM]] {mask_grad, scale = 1.000000e+00 : f64}
// CHECK-NOT: otc.softmax
func.func @bias_then_padding(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>,
                             %bias: tensor<1x2x4x4xf32> {otc.param = "bias"}, %pad: tensor<1x1x1x4xf32>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.add %s, %bias : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = otc.add %a, %pad : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %b {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a constant factor of q (Whisper's and BART's q_proj(x) *
// head_dim^-0.5 before an attention of scale 1), through the head split's
// reshape and transpose, and a division of k by a constant, move into the
// attention's scale (2 * 0.5 / 4 = 0.25): the multiply and the division are
// gone and the layout pattern still applies; a factor of q that something
// else also reads stays.
// CHECK-LABEL: func.func @scaled_q
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x4xf32>, %[[K:.*]]: tensor<1x4x2x2xf32>, %[[V:.*]]: tensor<1x4x2x2xf32>)
// CHECK-NOT: otc.mul
// CHECK-NOT: otc.div
// CHECK: %[[Q:.*]] = otc.reshape %[[X]] : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
// CHECK-NOT: otc.div
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] {causal, layout = "bthd", scale = 2.500000e-01 : f64}
// CHECK-LABEL: func.func @scaled_q_read_twice
// CHECK: otc.mul
// CHECK: otc.attention {{.*}}scale = 5.000000e-01
func.func @scaled_q(%x: tensor<1x4x4xf32>, %ks: tensor<1x4x2x2xf32>, %vs: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %c = otc.constant dense<0.5> : tensor<f32>
  %four = otc.constant dense<4.0> : tensor<f32>
  %xs = otc.mul %x, %c : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %qs = otc.reshape %xs : (tensor<1x4x4xf32>) -> tensor<1x4x2x2xf32>
  %q = otc.transpose %qs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %kd = otc.div %ks, %four : (tensor<1x4x2x2xf32>, tensor<f32>) -> tensor<1x4x2x2xf32>
  %k = otc.transpose %kd, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %v = otc.transpose %vs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 2.0 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %ob = otc.transpose %o, [0, 2, 1, 3] : (tensor<1x2x4x2xf32>) -> tensor<1x4x2x2xf32>
  return %ob : tensor<1x4x2x2xf32>
}
func.func @scaled_q_read_twice(%x: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) {
  %c = otc.constant dense<0.5> : tensor<f32>
  %q = otc.mul %x, %c : (tensor<1x2x4x2xf32>, tensor<f32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  return %o, %q : tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
}

// -----

// Tests that attention sinks (GPT-OSS: a logit per head, [H] reshaped to
// [1, H, 1, 1] and broadcast to a column concatenated after the scores,
// the softmax stabilized by the row maximum, the sink's column sliced off
// before the product with V) become the fused op's `sinks` operand, the
// logits as [H]; without the stabilization too (@sinks_plain, whose column
// is the [1, H, 1, 1] value itself: reshaped to [H]). The additive mask
// and causal flag are classified as without sinks.
// CHECK-LABEL: func.func @sinks
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x2xf32>, %[[K:.*]]: tensor<2x2x4x2xf32>, %[[V:.*]]: tensor<2x2x4x2xf32>, %[[SINK:.*]]: tensor<2xf32>)
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[V]] sinks %[[SINK]] {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: otc.softmax
// CHECK-NOT: otc.concat
// CHECK-NOT: otc.reduce_max
// CHECK: return %[[O]]
func.func @sinks(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<2x2x4x2xf32>, %sink: tensor<2xf32>) -> tensor<2x2x4x2xf32> {
  %mask = otc.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x4xf32>
  %sc = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sm = otc.add %sc, %mask : (tensor<2x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %r = otc.reshape %sink : (tensor<2xf32>) -> tensor<1x2x1x1xf32>
  %col = otc.broadcast %r : (tensor<1x2x1x1xf32>) -> tensor<2x2x4x1xf32>
  %c = otc.concat %sm, %col {axis = 3 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x5xf32>
  %m = otc.reduce_max %c, [3] {keep_dims} : (tensor<2x2x4x5xf32>) -> tensor<2x2x4x1xf32>
  %d = otc.sub %c, %m : (tensor<2x2x4x5xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x5xf32>
  %p = otc.softmax %d {axis = 3 : i64} : tensor<2x2x4x5xf32>
  %ps = otc.slice %p, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x5xf32>) -> tensor<2x2x4x4xf32>
  %o = otc.matmul %ps, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  return %o : tensor<2x2x4x2xf32>
}

// CHECK-LABEL: func.func @sinks_plain
// CHECK-SAME: %[[SINK:[^:]*]]: tensor<1x2x1x1xf32>)
// CHECK: %[[S:.*]] = otc.reshape %[[SINK]] : (tensor<1x2x1x1xf32>) -> tensor<2xf32>
// CHECK: otc.attention {{.*}} sinks %[[S]] {scale = 1.000000e+00 : f64}
// CHECK-NOT: otc.softmax
func.func @sinks_plain(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %sink: tensor<1x2x1x1xf32>) -> tensor<1x2x4x2xf32> {
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %col = otc.broadcast %sink : (tensor<1x2x1x1xf32>) -> tensor<1x2x4x1xf32>
  %c = otc.concat %s, %col {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x5xf32>
  %p = otc.softmax %c {axis = 3 : i64} : tensor<1x2x4x5xf32>
  %ps = otc.slice %p, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x5xf32>) -> tensor<1x2x4x4xf32>
  %o = otc.matmul %ps, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}
