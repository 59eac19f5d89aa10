// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that a run-time mask select(C & K, 0, fill), C a constant causal
// band [1, 1, T, S] and K a run-time key padding [B, 1, 1, S] (the form
// both exporters give Hugging Face's causal LMs with an attention_mask),
// fuses as `causal` with the key padding alone as its mask, [B, 1, 1, S]
// and marked key_padding: no [B, 1, T, S] mask is left.
// CHECK-LABEL: func.func @causal_padding
// CHECK: %[[F:.*]] = otc.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK: %[[Z:.*]] = otc.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[M:.*]] = otc.select %arg3, %[[Z]], %[[F]] : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %[[M]] {causal, key_padding, scale = 5.000000e-01 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>)
// CHECK-NOT: tensor<2x1x4x4x
// CHECK-NOT: otc.softmax
func.func @causal_padding(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                          %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %band = otc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %band, %pad, %no : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %fill = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = otc.select %seen, %zero, %fill : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.add %ss, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// -----

// Tests the bidirectional form (BERT's: C all true, [1, 1, T, 1], K first):
// no causal flag, the key padding the mask.
// CHECK-LABEL: func.func @bidirectional_padding
// CHECK: %[[M:.*]] = otc.select %arg3, %{{.*}}, %{{.*}} : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %[[M]] {key_padding, scale = 5.000000e-01 : f64}
func.func @bidirectional_padding(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                                 %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %all = otc.constant dense<true> : tensor<1x1x4x1xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %pad, %all, %no : (tensor<2x1x1x4xi1>, tensor<1x1x4x1xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %fill = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = otc.select %seen, %zero, %fill : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.add %ss, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// -----

// Tests that a sliding window of 2 keys under the padding (Mistral's form)
// splits as the causal band does, here in the masked-fill form where(C & K,
// scores, fill): causal, window = 2 and the key padding alone (a padded
// query 2 or more past its sequence's last seen key sees no key).
// CHECK-LABEL: func.func @window_padding_fill
// CHECK: %[[M:.*]] = otc.select %arg3, %{{.*}}, %{{.*}} : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %[[M]] {causal, key_padding, scale = 5.000000e-01 : f64, window = 2 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>)
// CHECK-NOT: tensor<2x1x4x4x
func.func @window_padding_fill(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                               %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %band = otc.constant dense<[[[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]]]> : tensor<1x1x4x4xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %band, %pad, %no : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %fill = otc.constant dense<-1.0e9> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.select %seen, %ss, %fill : (tensor<2x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// -----

// Tests that a constant part that is no band (key 3 hidden from query 0
// alone) does not split: the attention fuses with the whole [B, 1, T, S]
// mask, not marked key_padding.
// CHECK-LABEL: func.func @no_band
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %{{.*}} {scale = 5.000000e-01 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>)
func.func @no_band(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                   %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %c = otc.constant dense<[[[[true, true, true, false], [true, true, true, true], [true, true, true, true], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %c, %pad, %no : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %fill = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = otc.select %seen, %zero, %fill : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.add %ss, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// -----

// Tests that two attentions reading one padding (two layers of a model)
// share one key padding mask, made once after the padding.
// CHECK-LABEL: func.func @two_layers
// CHECK: %[[M:.*]] = otc.select %arg3, %{{.*}}, %{{.*}} : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK-NOT: otc.select %arg3
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %[[M]] {causal, key_padding
// CHECK-NOT: otc.select %arg3
// CHECK: otc.attention %{{.*}}, %arg1, %arg2 mask %[[M]] {causal, key_padding
func.func @two_layers(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                      %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %band = otc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %band, %pad, %no : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %fill = otc.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = otc.select %seen, %zero, %fill : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.add %ss, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %s2 = otc.matmul %o, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss2 = otc.mul %s2, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a2 = otc.add %ss2, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = otc.softmax %a2 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o2 = otc.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o2 : tensor<2x2x4x4xf32>
}

// -----

// Tests the masked-fill form where(C & K, scores, fill) of a causal band:
// split as the additive one is.
// CHECK-LABEL: func.func @causal_padding_fill
// CHECK: %[[M:.*]] = otc.select %arg3, %{{.*}}, %{{.*}} : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %[[M]] {causal, key_padding, scale = 5.000000e-01 : f64}
func.func @causal_padding_fill(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>,
                               %pad: tensor<2x1x1x4xi1>) -> tensor<2x2x4x4xf32> {
  %band = otc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %no = otc.constant dense<false> : tensor<i1>
  %seen = otc.select %band, %pad, %no : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %fill = otc.constant dense<-1.0e9> : tensor<f32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.select %seen, %ss, %fill : (tensor<2x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o : tensor<2x2x4x4xf32>
}

// -----

// Tests that an additive mask of zeros (the exporters' mask of a model
// without padding, where(true, 0, min), once folded: ViT's and BERT's
// bidirectional attention without attention_mask) is no mask: the fused op
// reads none (cuDNN then runs it), while a mask of one nonzero value stays.
// CHECK-LABEL: func.func @zero_mask
// CHECK: otc.attention %arg0, %arg1, %arg2 {scale = 5.000000e-01 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) ->
// CHECK: otc.attention %arg0, %arg1, %arg2 mask %{{.*}} {scale = 5.000000e-01 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>)
func.func @zero_mask(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>, %v: tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
  %zeros = otc.constant dense<0.0> : tensor<2x1x4x4xf32>
  %ones = otc.constant dense<1.0> : tensor<2x1x4x4xf32>
  %half = otc.constant dense<0.5> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss = otc.mul %s, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a = otc.add %ss, %zeros : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = otc.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %s1 = otc.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %ss1 = otc.mul %s1, %half : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %a1 = otc.add %ss1, %ones : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p1 = otc.softmax %a1 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o1 = otc.matmul %p1, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  return %o, %o1 : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
}
