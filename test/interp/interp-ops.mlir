// Tests the interpreter on the ops that ONNX has no node test for (AdamW
// with its gradient factor and its skip,
// the dropout mask formula, the gradient kernels, constants, integer
// division, the comparison predicates and casts besides those of Equal and
// Cast, matmul's four transpose forms over more than one 256-column
// block of the result, and the expert products with their BF16 result and
// the weight gradient added into a slot): check_interp_ops.py runs each function below with otc-run and
// compares with numpy implementations of the formulas in ir/OtcOps.td.
// RUN: %python %otc_src/test/interp/check_interp_ops.py --otc-run otc-run --mlir %s --work %t | FileCheck %s

// CHECK: adamw PASS
// CHECK: adamw_skip PASS
// CHECK: dropout PASS
// CHECK: grads PASS
// CHECK: sce_grad PASS
// CHECK: constants PASS
// CHECK: int_div PASS
// CHECK: compare_select_cast PASS
// CHECK: grad_kernels PASS
// CHECK: matmul_blocks PASS
// CHECK: experts PASS
// CHECK: 11 passed, 0 failed

func.func @adamw(%p: tensor<3x4xf32> {otc.input = "p"},
                 %g: tensor<3x4xf32> {otc.input = "g"},
                 %m: tensor<3x4xf32> {otc.input = "m"},
                 %v: tensor<3x4xf32> {otc.input = "v"},
                 %lr: tensor<f32> {otc.input = "lr"},
                 %step: tensor<f32> {otc.input = "step"},
                 %factor: tensor<f32> {otc.input = "factor"})
    -> (tensor<3x4xf32> {otc.output = "p1"}, tensor<3x4xf32> {otc.output = "m1"},
        tensor<3x4xf32> {otc.output = "v1"}) {
  %0:3 = otc.adamw %p, %g, %m, %v, %lr, %step, %factor {beta1 = 0.9 : f64, beta2 = 0.99 : f64,
      epsilon = 1.0e-3 : f64, weight_decay = 0.1 : f64}
      : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>)
      -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// A factor that is not finite (the runtime's verdict on a NaN or infinite
// gradient norm) keeps the parameter and moments.
func.func @adamw_skip(%p: tensor<3x4xf32> {otc.input = "p"},
                 %g: tensor<3x4xf32> {otc.input = "g"},
                 %m: tensor<3x4xf32> {otc.input = "m"},
                 %v: tensor<3x4xf32> {otc.input = "v"},
                 %lr: tensor<f32> {otc.input = "lr"},
                 %step: tensor<f32> {otc.input = "step"},
                 %factor: tensor<f32> {otc.input = "factor"})
    -> (tensor<3x4xf32> {otc.output = "p1"}, tensor<3x4xf32> {otc.output = "m1"},
        tensor<3x4xf32> {otc.output = "v1"}) {
  %0:3 = otc.adamw %p, %g, %m, %v, %lr, %step, %factor {beta1 = 0.9 : f64, beta2 = 0.99 : f64,
      epsilon = 1.0e-3 : f64, weight_decay = 0.1 : f64}
      : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>)
      -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %0#0, %0#1, %0#2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

func.func @dropout(%x: tensor<64x32xf32> {otc.input = "x"},
                   %key: tensor<i64> {otc.input = "key"})
    -> (tensor<64x32xf32> {otc.output = "y"}, tensor<64x32xi1> {otc.output = "mask"}) {
  %y, %mask = otc.dropout %x, %key {ratio = 0.3 : f64, stream = 5 : i64}
      : (tensor<64x32xf32>, tensor<i64>) -> (tensor<64x32xf32>, tensor<64x32xi1>)
  return %y, %mask : tensor<64x32xf32>, tensor<64x32xi1>
}

func.func @grads(%g: tensor<2x5xf32> {otc.input = "g"},
                 %x: tensor<2x5xf32> {otc.input = "x"},
                 %mask: tensor<2x5xi1> {otc.input = "mask"})
    -> (tensor<2x5xf32> {otc.output = "relu_grad"}, tensor<2x5xf32> {otc.output = "tanh_grad"},
        tensor<2x5xf32> {otc.output = "dropout_grad"}) {
  %0 = otc.relu_grad %g, %x : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %1 = otc.tanh_grad %g, %x : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %2 = otc.dropout_grad %g, %mask {ratio = 0.25 : f64} : (tensor<2x5xf32>, tensor<2x5xi1>) -> tensor<2x5xf32>
  return %0, %1, %2 : tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>
}

func.func @sce_grad(%g: tensor<f32> {otc.input = "g"},
                    %gn: tensor<6xf32> {otc.input = "gn"},
                    %logits: tensor<6x4xf32> {otc.input = "logits"},
                    %labels: tensor<6xi64> {otc.input = "labels"})
    -> (tensor<6x4xf32> {otc.output = "mean"}, tensor<6x4xf32> {otc.output = "sum"},
        tensor<6x4xf32> {otc.output = "none"}) {
  %0 = otc.softmax_cross_entropy_grad %g, %logits, %labels {ignore_index = 1 : i64}
      : (tensor<f32>, tensor<6x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  %1 = otc.softmax_cross_entropy_grad %g, %logits, %labels {reduction = "sum"}
      : (tensor<f32>, tensor<6x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  %2 = otc.softmax_cross_entropy_grad %gn, %logits, %labels {reduction = "none", ignore_index = 1 : i64}
      : (tensor<6xf32>, tensor<6x4xf32>, tensor<6xi64>) -> tensor<6x4xf32>
  return %0, %1, %2 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}

func.func @constants() -> (tensor<2x2xf32> {otc.output = "splat"}, tensor<3xi64> {otc.output = "ints"},
                           tensor<2xi1> {otc.output = "bools"}, tensor<2xf64> {otc.output = "doubles"}) {
  %0 = otc.constant dense<2.5> : tensor<2x2xf32>
  %1 = otc.constant dense<[-3, 0, 9000000000]> : tensor<3xi64>
  %2 = otc.constant dense<[true, false]> : tensor<2xi1>
  %3 = otc.constant dense<[0.1, -2.0]> : tensor<2xf64>
  return %0, %1, %2, %3 : tensor<2x2xf32>, tensor<3xi64>, tensor<2xi1>, tensor<2xf64>
}

func.func @int_div(%a: tensor<4xi64> {otc.input = "a"}, %b: tensor<4xi64> {otc.input = "b"})
    -> (tensor<4xi64> {otc.output = "q"}) {
  %0 = otc.div %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

func.func @compare_select_cast(%a: tensor<2x5xf32> {otc.input = "a"},
                               %b: tensor<5xf32> {otc.input = "b"},
                               %n: tensor<3xi64> {otc.input = "n"})
    -> (tensor<2x5xi1> {otc.output = "eq"}, tensor<2x5xi1> {otc.output = "ne"},
        tensor<2x5xi1> {otc.output = "lt"}, tensor<2x5xi1> {otc.output = "le"},
        tensor<2x5xi1> {otc.output = "gt"}, tensor<2x5xi1> {otc.output = "ge"},
        tensor<2x5xf32> {otc.output = "select"}, tensor<2x5xi64> {otc.output = "to_i64"},
        tensor<2x5xi1> {otc.output = "to_i1"}, tensor<2x5xf16> {otc.output = "to_f16"},
        tensor<3xf32> {otc.output = "from_i64"}) {
  %eq = otc.compare "eq", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %ne = otc.compare "ne", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %lt = otc.compare "lt", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %le = otc.compare "le", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %gt = otc.compare "gt", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %ge = otc.compare "ge", %a, %b : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xi1>
  %sel = otc.select %lt, %a, %b : (tensor<2x5xi1>, tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  %i = otc.cast %a : (tensor<2x5xf32>) -> tensor<2x5xi64>
  %z = otc.cast %a : (tensor<2x5xf32>) -> tensor<2x5xi1>
  %h = otc.cast %a : (tensor<2x5xf32>) -> tensor<2x5xf16>
  %f = otc.cast %n : (tensor<3xi64>) -> tensor<3xf32>
  return %eq, %ne, %lt, %le, %gt, %ge, %sel, %i, %z, %h, %f
      : tensor<2x5xi1>, tensor<2x5xi1>, tensor<2x5xi1>, tensor<2x5xi1>, tensor<2x5xi1>,
        tensor<2x5xi1>, tensor<2x5xf32>, tensor<2x5xi64>, tensor<2x5xi1>, tensor<2x5xf16>,
        tensor<3xf32>
}

func.func @grad_kernels(%g: tensor<3x4xf32> {otc.input = "g"},
                        %y: tensor<3x4xf32> {otc.input = "y"},
                        %gs: tensor<f32> {otc.input = "gs"},
                        %labels: tensor<3xi64> {otc.input = "labels"},
                        %gw: tensor<2x2xf32> {otc.input = "gw"},
                        %idx: tensor<3xi64> {otc.input = "idx"},
                        %slot: tensor<4x4xf32> {otc.input = "slot"})
    -> (tensor<3x4xf32> {otc.output = "softmax_grad"},
        tensor<3x4xf32> {otc.output = "log_softmax_grad"},
        tensor<3x4xf32> {otc.output = "nll_loss_grad"},
        tensor<5x5xf32> {otc.output = "slice_grad"},
        tensor<4x4xf32> {otc.output = "gather_grad"},
        tensor<4x4xf32> {otc.output = "gather_grad_acc"}) {
  %0 = otc.softmax_grad %g, %y {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = otc.log_softmax_grad %g, %y {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %2 = otc.nll_loss_grad %gs, %labels {ignore_index = 2 : i64} : (tensor<f32>, tensor<3xi64>) -> tensor<3x4xf32>
  %3 = otc.slice_grad %gw, [1, 0], [2, 3] : (tensor<2x2xf32>) -> tensor<5x5xf32>
  %4 = otc.gather_grad %g, %idx {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<4x4xf32>
  %5 = otc.gather_grad %g, %idx acc %slot {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<5x5xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// The four forms of otc.matmul with a batched lhs and a 2-d rhs, n = 300
// columns (a block of 256 and one of 44 in the interpreter's loop without
// transpose_rhs).
func.func @matmul_blocks(%a: tensor<2x3x7xf32> {otc.input = "a"},
                         %at: tensor<2x7x3xf32> {otc.input = "at"},
                         %b: tensor<7x300xf32> {otc.input = "b"},
                         %bt: tensor<300x7xf32> {otc.input = "bt"})
    -> (tensor<2x3x300xf32> {otc.output = "nn"}, tensor<2x3x300xf32> {otc.output = "tn"},
        tensor<2x3x300xf32> {otc.output = "nt"}, tensor<2x3x300xf32> {otc.output = "tt"}) {
  %0 = otc.matmul %a, %b : (tensor<2x3x7xf32>, tensor<7x300xf32>) -> tensor<2x3x300xf32>
  %1 = otc.matmul %at, %b {transpose_lhs} : (tensor<2x7x3xf32>, tensor<7x300xf32>) -> tensor<2x3x300xf32>
  %2 = otc.matmul %a, %bt {transpose_rhs} : (tensor<2x3x7xf32>, tensor<300x7xf32>) -> tensor<2x3x300xf32>
  %3 = otc.matmul %at, %bt {transpose_lhs, transpose_rhs} : (tensor<2x7x3xf32>, tensor<300x7xf32>) -> tensor<2x3x300xf32>
  return %0, %1, %2, %3 : tensor<2x3x300xf32>, tensor<2x3x300xf32>, tensor<2x3x300xf32>, tensor<2x3x300xf32>
}

// Each row times its expert's matrix (stored [E, O, K]; -1 is the last
// expert), and the weight gradient added into a slot (expert 1, which no
// row picks, keeps the slot's values), in FP32 and in BF16 (the same
// bfloat16 values cast in: unrounded here, every sum is the exact one).
func.func @experts(%x: tensor<5x3xf32> {otc.input = "x"},
                   %ids: tensor<5xi64> {otc.input = "ids"},
                   %w: tensor<3x4x3xf32> {otc.input = "w"},
                   %dy: tensor<5x4xf32> {otc.input = "dy"},
                   %slot: tensor<3x4x3xf32> {otc.input = "slot"})
    -> (tensor<5x4xf32> {otc.output = "y"}, tensor<3x4x3xf32> {otc.output = "dw"},
        tensor<5x4xbf16> {otc.output = "y_bf16"}, tensor<3x4x3xbf16> {otc.output = "dw_bf16"}) {
  %y = otc.expert_matmul %x, %ids, %w {transpose_rhs} : (tensor<5x3xf32>, tensor<5xi64>, tensor<3x4x3xf32>) -> tensor<5x4xf32>
  %dw = otc.expert_matmul_wgrad %dy, %x, %ids acc %slot {transpose_rhs} : (tensor<5x4xf32>, tensor<5x3xf32>, tensor<5xi64>, tensor<3x4x3xf32>) -> tensor<3x4x3xf32>
  %xb = otc.cast %x : (tensor<5x3xf32>) -> tensor<5x3xbf16>
  %wb = otc.cast %w : (tensor<3x4x3xf32>) -> tensor<3x4x3xbf16>
  %dyb = otc.cast %dy : (tensor<5x4xf32>) -> tensor<5x4xbf16>
  %sb = otc.cast %slot : (tensor<3x4x3xf32>) -> tensor<3x4x3xbf16>
  %yb = otc.expert_matmul %xb, %ids, %wb {transpose_rhs} : (tensor<5x3xbf16>, tensor<5xi64>, tensor<3x4x3xbf16>) -> tensor<5x4xbf16>
  %dwb = otc.expert_matmul_wgrad %dyb, %xb, %ids acc %sb {transpose_rhs} : (tensor<5x4xbf16>, tensor<5x3xbf16>, tensor<5xi64>, tensor<3x4x3xbf16>) -> tensor<3x4x3xbf16>
  return %y, %dw, %yb, %dwb : tensor<5x4xf32>, tensor<3x4x3xf32>, tensor<5x4xbf16>, tensor<3x4x3xbf16>
}
