// RUN: otc-opt %s --split-input-file --otc-fuse-patterns=remarks=true -verify-diagnostics | FileCheck %s

// Tests that a rope whose cos and sin are function arguments other than
// constant buffers (inputs, or tables that would need a gradient) stays
// unfused, with a remark saying why.
// CHECK-LABEL: func.func @rope_tables_not_constant
// CHECK-NOT: otc.rope
// CHECK: otc.concat
func.func @rope_tables_not_constant(%x: tensor<1x2x4x8xf32>, %cos: tensor<4x8xf32>, %sin: tensor<4x8xf32>) -> tensor<1x2x4x8xf32> {
  %xc = otc.mul %x, %cos : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  %lo = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  // expected-remark@+1 {{not fused: rotary embedding: the cos and sin tables are not constants (they would need a gradient)}}
  %y = otc.add %xc, %rs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests that a rope whose rotated half is also read elsewhere is left
// unfused with a remark.
// CHECK-LABEL: func.func @rope_product_shared
// CHECK-NOT: otc.rope
func.func @rope_product_shared(%x: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %cos = otc.constant dense<0.5> : tensor<4x8xf32>
  %sin = otc.constant dense<0.25> : tensor<4x8xf32>
  %xc = otc.mul %x, %cos : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  %lo = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32>
  // expected-remark@+1 {{not fused: rotary embedding: a product is also read elsewhere}}
  %y = otc.add %xc, %rs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y, %xc : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// Tests that a partial rotary whose passed features are another tensor's
// keeps its concatenation (the rope over the rotated slice is fused), with
// a remark saying why.
// CHECK-LABEL: func.func @partial_pass_elsewhere
// CHECK: otc.rope
// CHECK: otc.concat
func.func @partial_pass_elsewhere(%x: tensor<1x2x4x8xf32>, %z: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<4x4xf32>
  %sin = otc.constant dense<0.25> : tensor<4x4xf32>
  %xr = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %zp = otc.slice %z, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %xc = otc.mul %xr, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %lo = otc.slice %xr, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x2xf32>
  %hi = otc.slice %xr, [0, 0, 0, 2], [1, 1, 1, 1] : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x2xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x2xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %r = otc.add %xc, %rs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // expected-remark@+1 {{not fused: partial rotary embedding: the rotated and passed features are not the two parts of one tensor's last dimension}}
  %y = otc.concat %r, %zp {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
