// RUN: otc-opt %s --split-input-file --otc-fuse-patterns | FileCheck %s

// Tests that the rotary embedding as torch.onnx.export's dynamo exporter
// writes it for Llama (HF transformers 5: [1, 1, T, D] constant tables, the
// two slices reading two transposes of one head split) becomes one otc.rope,
// moved before the head transpose: on the [B, T, H, D] value, with the
// tables reshaped to [1, T, 1, D].
// CHECK-LABEL: func.func @rope_dynamo
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x2x8xf32>)
// CHECK-DAG: %[[C:.*]] = otc.reshape %{{.*}} : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK-DAG: %[[S:.*]] = otc.reshape %{{.*}} : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK: %[[R:.*]] = otc.rope %[[X]], %[[C]], %[[S]] : (tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<1x4x2x8xf32>
// CHECK: %[[T:.*]] = otc.transpose %[[R]], [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NOT: otc.concat
// CHECK-NOT: otc.neg
// CHECK: return %[[T]]
func.func @rope_dynamo(%x: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<1x1x4x8xf32>
  %sin = otc.constant dense<0.25> : tensor<1x1x4x8xf32>
  %t0 = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %t1 = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %xc = otc.mul %t0, %cos : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %lo = otc.slice %t0, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %t1, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = otc.add %xc, %rs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests that the TorchScript exporter's form ([T, D] tables computed from
// constants by cos and sin, the products' operands in the other order) of a
// rope on a value that is no head transpose becomes otc.rope on that value,
// the tables as they are.
// CHECK-LABEL: func.func @rope_torchscript
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x4x8xf32>)
// CHECK: %[[C:.*]] = otc.cos
// CHECK: %[[S:.*]] = otc.sin
// CHECK: %[[R:.*]] = otc.rope %[[X]], %[[C]], %[[S]] : (tensor<2x2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x2x4x8xf32>
// CHECK-NOT: otc.transpose
// CHECK: return %[[R]]
func.func @rope_torchscript(%x: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %angles = otc.constant dense<0.125> : tensor<4x8xf32>
  %cos = otc.cos %angles : tensor<4x8xf32>
  %sin = otc.sin %angles : tensor<4x8xf32>
  %xc = otc.mul %cos, %x : (tensor<4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %lo = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %hi = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<2x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
  %rs = otc.mul %sin, %rot : (tensor<4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = otc.add %rs, %xc : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Tests that a rope whose tables vary over the heads stays after the head
// transpose (it does not commute with it), fused all the same.
// CHECK-LABEL: func.func @rope_per_head_tables
// CHECK: %[[T:.*]] = otc.transpose
// CHECK: otc.rope %[[T]], %{{.*}}, %{{.*}} : (tensor<1x2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
func.func @rope_per_head_tables(%x: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<2x4x8xf32>
  %sin = otc.constant dense<0.25> : tensor<2x4x8xf32>
  %t = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %xc = otc.mul %t, %cos : (tensor<1x2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %lo = otc.slice %t, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %t, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = otc.add %xc, %rs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests that with the ropes moved before the head transposes, a causal
// attention reads q, k and v as the [B, T, H, D] projections (layout
// "bthd"): no head transpose is left, forward or back.
// CHECK-LABEL: func.func @rope_then_attention
// CHECK-SAME: (%[[QR:.*]]: tensor<1x4x2x8xf32>, %[[KR:.*]]: tensor<1x4x2x8xf32>, %[[VR:.*]]: tensor<1x4x2x8xf32>)
// CHECK-DAG: %[[Q:.*]] = otc.rope %[[QR]]
// CHECK-DAG: %[[K:.*]] = otc.rope %[[KR]]
// CHECK: %[[O:.*]], %{{.*}} = otc.attention %[[Q]], %[[K]], %[[VR]] {causal, layout = "bthd"
// CHECK-NOT: otc.transpose
// CHECK: return %[[O]]
func.func @rope_then_attention(%qr: tensor<1x4x2x8xf32>, %kr: tensor<1x4x2x8xf32>, %vr: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<1x1x4x8xf32>
  %sin = otc.constant dense<0.25> : tensor<1x1x4x8xf32>
  %qt = otc.transpose %qr, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %qc = otc.mul %qt, %cos : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %qlo = otc.slice %qt, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %qhi = otc.slice %qt, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %qn = otc.neg %qhi : tensor<1x2x4x4xf32>
  %qrot = otc.concat %qn, %qlo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %qs = otc.mul %qrot, %sin : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %q = otc.add %qc, %qs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %kt = otc.transpose %kr, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %kc = otc.mul %kt, %cos : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %klo = otc.slice %kt, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %khi = otc.slice %kt, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %kn = otc.neg %khi : tensor<1x2x4x4xf32>
  %krot = otc.concat %kn, %klo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %ks = otc.mul %krot, %sin : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %k = otc.add %kc, %ks : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %v = otc.transpose %vr, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %ktt = otc.transpose %k, [0, 1, 3, 2] : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = otc.matmul %q, %ktt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %scale = otc.constant dense<0.353553385> : tensor<f32>
  %ss = otc.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %mask = otc.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %ninf = otc.constant dense<-1.0e+09> : tensor<f32>
  %m = otc.select %mask, %ss, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %ot = otc.transpose %o, [0, 2, 1, 3] : (tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32>
  return %ot : tensor<1x4x2x8xf32>
}

// -----

// Tests that tables held in the model's constant buffers (the dynamo
// exporter folds HF's cos and sin into initializers, imported as
// `otc.buffer` arguments: never trained) count as constants: the rope is
// fused and moved before the head transpose, the buffers reshaped.
// CHECK-LABEL: func.func @rope_buffer_tables
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x2x8xf32>, %[[COS:.*]]: tensor<1x1x4x8xf32> {{.*}}, %[[SIN:.*]]: tensor<1x1x4x8xf32>
// CHECK-DAG: %[[C:.*]] = otc.reshape %[[COS]] : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK-DAG: %[[S:.*]] = otc.reshape %[[SIN]] : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK: otc.rope %[[X]], %[[C]], %[[S]]
func.func @rope_buffer_tables(%x: tensor<1x4x2x8xf32>, %cos: tensor<1x1x4x8xf32> {otc.buffer, otc.param = "cos"}, %sin: tensor<1x1x4x8xf32> {otc.buffer, otc.param = "sin"}) -> tensor<1x2x4x8xf32> {
  %t = otc.transpose %x, [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %xc = otc.mul %t, %cos : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %lo = otc.slice %t, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %t, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %nhi = otc.neg %hi : tensor<1x2x4x4xf32>
  %rot = otc.concat %nhi, %lo {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  %rs = otc.mul %rot, %sin : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = otc.add %xc, %rs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests GPT-OSS's rotary embedding with half-width tables, concat(x1 cos -
// x2 sin, x2 cos + x1 sin) of the halves of x's last axis (as the dynamo
// exporter writes it: each half sliced from the [B, T, H, D] head split,
// then transposed): otc.rope of x with the tables repeated to full width
// (a pair (p, p + D/2) reads cos[p] either way), moved before the head
// transpose; the second sum's products in the other order.
// CHECK-LABEL: func.func @rope_half_tables
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x2x8xf32>)
// CHECK-DAG: %[[C:.*]] = otc.concat %[[COS:.*]], %[[COS]] {axis = 3 : i64} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x8xf32>
// CHECK-DAG: %[[S:.*]] = otc.concat %[[SIN:.*]], %[[SIN]] {axis = 3 : i64} : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x8xf32>
// CHECK-DAG: %[[CM:.*]] = otc.reshape %[[C]] : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK-DAG: %[[SM:.*]] = otc.reshape %[[S]] : (tensor<1x1x4x8xf32>) -> tensor<1x4x1x8xf32>
// CHECK: %[[R:.*]] = otc.rope %[[X]], %[[CM]], %[[SM]] : (tensor<1x4x2x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<1x4x2x8xf32>
// CHECK: %[[T:.*]] = otc.transpose %[[R]], [0, 2, 1, 3]
// CHECK-NOT: otc.sub
// CHECK: return %[[T]]
func.func @rope_half_tables(%x: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<[[[[1.0, 0.5, 0.25, 0.125], [0.5, 0.25, 0.125, 1.0], [0.25, 0.125, 1.0, 0.5], [0.125, 1.0, 0.5, 0.25]]]]> : tensor<1x1x4x4xf32>
  %sin = otc.constant dense<[[[[0.0, 0.5, 0.75, 0.875], [0.5, 0.75, 0.875, 0.0], [0.75, 0.875, 0.0, 0.5], [0.875, 0.0, 0.5, 0.75]]]]> : tensor<1x1x4x4xf32>
  %lo = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x4x2x8xf32>) -> tensor<1x4x2x4xf32>
  %x1 = otc.transpose %lo, [0, 2, 1, 3] : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %hi = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x4x2x8xf32>) -> tensor<1x4x2x4xf32>
  %x2 = otc.transpose %hi, [0, 2, 1, 3] : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = otc.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %first = otc.sub %a, %b : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = otc.mul %sin, %x1 : (tensor<1x1x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = otc.mul %x2, %cos : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %second = otc.add %c, %d : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = otc.concat %first, %second {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// Tests that the half-table form with the tables swapped in the second sum
// (x2 sin + x1 cos: no rotation) is left as it is.
// CHECK-LABEL: func.func @rope_half_tables_swapped
// CHECK-NOT: otc.rope
// CHECK: otc.concat
func.func @rope_half_tables_swapped(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %cos = otc.constant dense<0.5> : tensor<4x4xf32>
  %sin = otc.constant dense<0.25> : tensor<4x4xf32>
  %x1 = otc.slice %x, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %x2 = otc.slice %x, [0, 0, 0, 4], [1, 1, 1, 1] : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %a = otc.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = otc.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %first = otc.sub %a, %b : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = otc.mul %x2, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = otc.mul %x1, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %second = otc.add %c, %d : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = otc.concat %first, %second {axis = 3 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}
