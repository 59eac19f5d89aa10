//===- Passes.td - otc pass definitions --------------------*- tablegen -*-===//
//
// Every otc pass: its flag, summary, a description with a small before/after
// example, and its options. Grouped by level, alphabetical within a group.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_TD
#define OTC_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Tensor level
//===----------------------------------------------------------------------===//

def Configure : Pass<"otc-configure", "mlir::ModuleOp"> {
  let dependentDialects = ["otc::OtcDialect"];
  let summary = "Sets the compile's configuration, #otc.config, on the module";
  let description = [{
    The facts of a compile that passes read (ir/Config.h): otc-compile sets
    them right after import; this pass sets them for passes run alone in
    otc-opt. The options are the fields of #otc.config; an out-of-range one
    is an error.

    ```mlir
    module { ... }
    // with --otc-configure="micro-batch=4 grad-accum=2 precision=bf16" becomes
    module attributes {otc.config = #otc.config<micro_batch = 4, grad_accum = 2,
        precision = "bf16", fp32_grad_accum = false, weight_decay = 0.000000e+00,
        beta1 = 9.000000e-01, beta2 = 9.990000e-01, epsilon = 1.000000e-08,
        target = "cpu", device = "cpu">} { ... }
    ```
  }];
  let options = [
    Option<"microBatch", "micro-batch", "int64_t", "1",
           "Samples per micro-step">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "Micro-steps per optimizer step">,
    Option<"precision", "precision", "std::string", "\"fp32\"",
           "fp32, bf16 (BF16 compute, FP32 masters and AdamW states) or fp8 (bf16 with FP8 GEMMs where they pay)">,
    Option<"fp32GradAccum", "fp32-grad-accum", "bool", "false",
           "FP32 gradients under bf16 or fp8">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "AdamW decoupled weight decay">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "AdamW epsilon">,
    Option<"target", "target", "std::string", "\"cpu\"", "cpu or cuda">,
    Option<"device", "device", "std::string", "\"\"",
           "The device model (default: the target's)">,
    Option<"worldSize", "world-size", "int64_t", "1",
           "Data-parallel ranks">,
    Option<"shardOptimizer", "shard-optimizer", "bool", "false",
           "ZeRO-1: the AdamW moments sharded over the ranks">,
  ];
}

def SparsePrediction : Pass<"otc-sparse-prediction", "mlir::ModuleOp"> {
  let dependentDialects = ["otc::OtcDialect"];
  let summary = "The loss and the row-wise ops before it at K positions per sequence";
  let description = [{
    For a masked LM, whose loss counts the few positions it masked: after
    otc-fuse-patterns, the forward graph's one cross-entropy (a mean over
    the targets that are not its ignore index, the targets a [B, T] graph
    input) gets a new [B, K] int64 input, `prediction_rows` (marked
    `otc.prediction_rows`), holding rows of the micro-batch's B x T
    (b x T + t). Walking back from the loss, an op joins the cut when every
    reader of its results has joined (or is the loss or the return) and it
    computes each row from the same row of its operands alone: elementwise
    ops (operands the rows or broadcast along them), a product of the rows
    by a matrix, a normalization, softmax or reduction past the rows, and
    reshapes, slices and transposes that keep them. The cut runs again on
    the K rows of each sequence (its [B, T, ...] values become [B, K, ...],
    its [B*T, ...] ones [B*K, ...]), from gathers of the values it reads,
    the targets too; the old ops go. A masked LM's head, its last layer's
    MLP and attention output projection are cut; the attention is not
    (each query reads every key). The runtime fills the input from the
    targets (the counted positions, padded with ignored ones), so the loss
    and the gradients are the whole graph's where at most K targets per
    sequence are counted. The module gets `otc.prediction_rows` = {input,
    targets, positions = K, of = T, ops (how many were cut), classes,
    ignore_index}. An output the cut computes holds the kept rows.

    ```mlir
    %z = otc.matmul %h, %w : (tensor<2x8x16xf32>, tensor<16x50xf32>) -> tensor<2x8x50xf32>
    %loss, %lse = otc.cross_entropy %z, %y {ignore_index = -100 : i64} : ...
    // becomes, with positions=3 (%rows the new tensor<2x3xi64> input)
    %hf = otc.reshape %h : (tensor<2x8x16xf32>) -> tensor<16x16xf32>
    %hk = otc.gather %hf, %rows {axis = 0 : i64} : (tensor<16x16xf32>, tensor<2x3xi64>) -> tensor<2x3x16xf32>
    %zk = otc.matmul %hk, %w : (tensor<2x3x16xf32>, tensor<16x50xf32>) -> tensor<2x3x50xf32>
    ```
  }];
  let options = [
    Option<"positions", "positions", "int64_t", "0",
           "K, the positions of each sequence whose loss is computed (-1: "
           "T x 0.15 + 4 sqrt(T x 0.15 x 0.85), rounded up, at most T - 1)">,
  ];
}

def Differentiate : Pass<"otc-differentiate", "mlir::ModuleOp"> {
  let dependentDialects = ["otc::OtcDialect"];
  let summary = "Builds @train_step: the loss and the gradient of every trainable parameter";
  let description = [{
    Reverse-mode differentiation of `@forward`. The new function `@train_step`
    takes the same arguments and returns the loss (`otc.loss`) followed by one
    gradient per trainable parameter (`otc.grad = "<name>"`). A parameter is
    trainable when it is an `otc.param` float argument with a differentiable
    path to the loss and is not matched by `freeze`. Forward values that the
    backward reads are plain SSA uses in `@train_step`.

    ```mlir
    func.func @forward(%x: tensor<4xf32> {otc.input = "x"},
                       %w: tensor<4xf32> {otc.param = "w"}) -> (tensor<f32> {otc.output = "loss"}) {
      %0 = otc.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %1 = otc.reduce_sum %0, [0] : (tensor<4xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    }
    // gains
    func.func @train_step(...) -> (tensor<f32> {otc.loss}, tensor<4xf32> {otc.grad = "w"}) {
      ... forward ...
      %one = otc.constant dense<1.0> : tensor<f32>
      %g1 = otc.broadcast %one : (tensor<f32>) -> tensor<4xf32>
      %gw = otc.mul %g1, %x : ...
      return %1, %gw : ...
    }
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "The function to differentiate">,
    Option<"lossName", "loss", "std::string", "\"\"",
           "The graph output that is the loss (default: the only scalar float result)">,
    Option<"freeze", "freeze", "std::string", "\"\"",
           "Regular expression: parameters whose name matches are not trained">,
  ];
}

def FoldShapes : Pass<"otc-fold-shapes", "mlir::ModuleOp"> {
  let dependentDialects = ["otc::OtcDialect"];
  let summary = "Folds shape computations on constants once dimensions are bound";
  let description = [{
    Exported graphs compute reshape targets, masks and positions at run time
    (Shape, Gather, Unsqueeze, Concat, Range, ConstantOfShape, Equal/Where...).
    Once the importer has bound every symbolic dimension, those computations
    only read constants: this pass folds every op whose operands are constant
    (the op folders in ir/OtcFolds.cpp; small tensors only), removes identity
    reshapes, broadcasts, casts and slices, deduplicates constants and erases
    what becomes dead. The importer already folds as it builds; the pass makes
    the same guarantee for any module.

    ```mlir
    %s = otc.constant dense<[2, 8, 64]> : tensor<3xi64>
    %i = otc.constant dense<0> : tensor<i64>
    %b = otc.gather %s, %i {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
    %u = otc.reshape %b : (tensor<i64>) -> tensor<1xi64>
    %m = otc.constant dense<[-1, 64]> : tensor<2xi64>
    %c = otc.concat %u, %m {axis = 0 : i64} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
    // becomes
    %c = otc.constant dense<[2, -1, 64]> : tensor<3xi64>
    ```
  }];
}

def Remat : Pass<"otc-remat", "mlir::ModuleOp"> {
  let summary = "Chooses the forward values the backward recomputes instead of keeping";
  let dependentDialects = ["otc::OtcDialect"];
  let description = [{
    Works on `@train_step`. Blocks come from the graph: the values that every
    path from the data to the loss passes through (the residual stream) cut
    the forward into segments, and the repeating pattern of their op
    sequences groups them into transformer blocks. Policies:
    `none` keeps every value the backward reads; `full` keeps only the input
    of each block and recomputes the rest of it; `selective` recomputes the
    fused activations (otc.gelu, otc.silu: llm.c's `-r 1`) and, where
    attention is not fused, the attention core (scores, mask, softmax,
    dropout), keeping the inputs of the weight matrix products; `auto`
    applies `blocks`, a choice per block that a search above the pipeline
    made (planner/RematSearch.h: otc-compile --remat=auto and otc-plan
    --memory-budget plan each candidate of the recompute frontier through
    the rest of the pipeline and choose the cheapest whose planned total
    peak fits the budget); `blocks` alone (any policy) applies that choice
    too. Recomputed values are rebuilt by clones placed
    before their first backward use; dropout clones redraw the same mask.
    The choice is recorded in the module attribute `otc.remat`.

    ```mlir
    %p = otc.softmax %s {axis = 2 : i64} : tensor<2x4x4xf32>
    ...backward...
    %g = otc.softmax_grad %d, %p {axis = 2 : i64} : ...
    // with policy=selective becomes
    %p2 = otc.softmax %s2 {axis = 2 : i64} : tensor<2x4x4xf32>
    %g = otc.softmax_grad %d, %p2 {axis = 2 : i64} : ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"none\"",
           "none, full, selective or auto">,
    Option<"blocks", "blocks", "std::string", "\"\"",
           "An explicit choice per block (n, s or f each), as the driver "
           "picks it for auto after planning the candidates">,
  ];
}

def FusePatterns : Pass<"otc-fuse-patterns", "mlir::ModuleOp"> {
  let summary = "Recognizes attention, normalizations, GELU/SiLU, RoPE and cross-entropy";
  let dependentDialects = ["otc::OtcDialect"];
  let description = [{
    Runs on the forward graph after otc-fold-shapes and before
    otc-differentiate, so that the fused ops' gradients are fused too and
    save only what they need. Recognized, as the exporters write them:
    - attention: softmax(Q K^T scale + mask) V over the last axis, with the
      scale on the scores or on Q and K, K^T as a transpose or through
      reshapes of the batch, the mask as Where over a constant (nanoGPT's
      sliced buffer), as an added constant (-inf above the diagonal,
      llama2.c) or both through Trilu, optional dropout on the
      probabilities and grouped-query K/V repeats (reshape, expand,
      reshape) -> `otc.attention` with `causal` when the mask's values are
      exactly the causal pattern (checked element by element; a fill of
      -1e4 or less counts as hidden, its probability being exactly 0), else
      with the mask as an additive operand (never one computed from a
      parameter);
    - (x - mean) / sqrt(var + eps) * gamma + beta over trailing axes, with
      the division as Div, Reciprocal or 1 / x -> `otc.layer_norm`, and
      x / sqrt(mean(x^2) + eps) * gamma -> `otc.rms_norm`;
    - 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(sqrt(2/pi)(x +
      0.044715 x^3))) in any order of the products -> `otc.gelu`;
      x * sigmoid(x) -> `otc.silu`;
    - softmax_cross_entropy, and nll_loss of log_softmax -> `otc.cross_entropy`
      on the logits before the exporter's flattening reshape;
    - x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin with constant
      tables -> `otc.rope` (FuseRope.cpp), moved before a [B, T, H, D] ->
      [B, H, T, D] head transpose when the tables do not vary over the
      heads, so that attention then reads the projections where they lie.
    Intermediates of a chain must have no other reader. The recognizers are
    rewrite patterns applied once at each op, in order, then the attention
    layout at each attention; every change goes through their
    PatternRewriter, which also erases the ops a fusion leaves unread (and
    any op found unread when the walk reaches it). With `remarks`, a
    chain that almost matches gets a remark naming the condition that
    failed. The module attribute `otc.fused` counts the fused ops by kind.

    ```mlir
    %m = otc.reduce_sum %x, [2] {keep_dims} : (tensor<2x16x32xf32>) -> tensor<2x16x1xf32>
    %mean = otc.mul %m, %inv_n ...
    ... sub, pow 2, reduce_sum, mul, add eps, sqrt, div, mul gamma, add beta
    // becomes
    %y, %mean, %rstd = otc.layer_norm %x gamma %g beta %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : ...
    ```
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark at every chain that almost matches a pattern">,
  ];
}

def MixedPrecision : Pass<"otc-mixed-precision", "mlir::ModuleOp"> {
  let summary = "BF16 compute with FP32 master weights, reductions and loss";
  let dependentDialects = ["otc::OtcDialect"];
  let description = [{
    Works on `@train_step`, after otc-remat (so recomputed clones follow the
    same rules as the values they replace, and forward and backward ops are
    treated alike). Every `otc.param` argument becomes a BF16 working copy
    (marked `otc.bf16_copy`; otc-training-loop refreshes it from the FP32
    master weights at the start of each optimizer step). Then, op by op:
    `otc.matmul` reads BF16 operands and accumulates in FP32, its result
    rounded to BF16 by an explicit cast; reductions, softmax and log-softmax,
    the losses, the embedding gradient and exp/log/pow/sqrt/reciprocal run in
    FP32, as does any op named in `fp32-ops` or carrying `otc.keep_fp32`;
    every other op computes in BF16 when all its non-constant float
    operands are BF16 and in FP32 otherwise (constants take the precision of
    their reader). The fused ops follow their data (attention, the norms,
    GELU/SiLU and the cross-entropy read BF16 and compute in FP32 inside),
    while their statistics (log-sum-exp, mean, rstd) and the loss stay FP32.
    An attention's additive mask does not choose its precision: it follows q,
    k and v, an FP32 mask read by BF16 attention rounded once to BF16 with
    values past BF16's largest finite magnitude (infinities too) held there,
    so that FP32's lowest, the exporters' "hidden", stays finite. Each
    conversion is an `otc.cast`, so the precision of every
    value is its type. The loss is returned in FP32, gradients in BF16 (FP32
    with `fp32-grad-accum`, for FP32 accumulation across micro-batches).

    ```mlir
    func.func @train_step(%x: tensor<4x8xf32> {otc.input = "x"},
                          %w: tensor<2x8xf32> {otc.param = "w"}) -> ... {
      %y = otc.matmul %x, %w {transpose_rhs} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
      %s = otc.reduce_sum %y, [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
    // becomes
    func.func @train_step(%x: tensor<4x8xf32> {otc.input = "x"},
                          %w: tensor<2x8xbf16> {otc.bf16_copy, otc.param = "w"}) -> ... {
      %xb = otc.cast %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>
      %a = otc.matmul %xb, %w {transpose_rhs} : (tensor<4x8xbf16>, tensor<2x8xbf16>) -> tensor<4x2xf32>
      %y = otc.cast %a : (tensor<4x2xf32>) -> tensor<4x2xbf16>
      %yf = otc.cast %y : (tensor<4x2xbf16>) -> tensor<4x2xf32>
      %s = otc.reduce_sum %yf, [0, 1] : (tensor<4x2xf32>) -> tensor<f32>
    ```
  }];
  let options = [
    ListOption<"fp32Ops", "fp32-ops", "std::string",
               "Ops kept in FP32 besides the default ones (e.g. otc.tanh)">,
  ];
}

def Schedule : Pass<"otc-schedule", "mlir::ModuleOp"> {
  let summary = "Orders @train_step to lower its activation peak";
  let dependentDialects = ["otc::OtcDialect"];
  let description = [{
    Every otc op is pure, so any topological order computes the same
    values. Greedy list scheduling picks, among the ready ops, the one that
    frees the most bytes (operands it reads last) net of the bytes it
    allocates, the earliest on ties. The result is kept only if its
    activation peak (the most bytes of op results live at once) is lower
    than before; `otc.schedule` on the module records both peaks.

    ```mlir
    %a = otc.exp %x : tensor<1024xf32>   // big, read only at the end
    %s = otc.reduce_sum %y, [0] : ...    // frees %y
    // becomes: %s first, %a just before its use
    ```
  }];
}

def TrainingLoop : Pass<"otc-training-loop", "mlir::ModuleOp"> {
  let dependentDialects = ["otc::OtcDialect"];
  let summary = "Gradient accumulation, the AdamW update and evaluation, as functions on arena slots";
  let description = [{
    Replaces `@forward` and `@train_step` by the functions the runtime calls:
    `@zero_grads` (every gradient slot set to 0), `@micro_step` (the train step
    on one micro-batch, adding gradient / grad-accum into the gradient slots,
    so that after `grad-accum` micro-steps they hold the mean over the global
    batch), `@optimizer_step` (AdamW on every trainable parameter) and
    `@eval_step` (the loss of one micro-batch: the ops the loss depends on,
    with `otc.cross_entropy_with_grad` and
    `otc.linear_cross_entropy_with_grad` replaced by their forward; no
    gradient is computed or written). What these compute from constants
    and untrained buffers alone goes to `@constant_values` (passes/
    ConstantValues.h), computed once at load. Every
    argument and result names its arena slot with `otc.slot`: "param:<name>",
    "grad:<name>", "adam_m:<name>", "adam_v:<name>", "input:<name>", "loss",
    "lr", "step", "rng_key". A result that names the same slot as an argument
    is its new value. With grad-accum above 1, each micro-batch's gradient
    is weighted by the "grad_scale" slot w, which the runtime sets before
    each micro-step (1 / grad-accum, or the micro-batch's share of the
    step's counted targets). Where the loss and its gradient are one fused
    op (`otc.cross_entropy_with_grad`, `otc.linear_cross_entropy_with_grad`)
    seeded with the constant 1, w seeds it instead: every gradient is linear
    in that seed, so the backward yields the weighted gradients themselves.
    Otherwise each gradient is weighted as it lands, `acc + round(w g)` in
    FP32. An unweighted gradient that sums a parameter's contributions (a
    tied embedding and LM head; under mixed precision `cast(cast(a) + b)`)
    is added into its slot one contribution at a time, in the order their
    producers run (`(acc + a) + b`), so each producer can add into the slot
    itself (otc-fuse-epilogues); a contribution rounded to BF16 there that
    is an embedding's gradient of a widened BF16 gradient becomes one of
    BF16 storage (narrowGatherGrad).

    ```mlir
    func.func @micro_step(%x: tensor<4xf32> {otc.slot = "input:x"},
                          %w: tensor<4xf32> {otc.slot = "param:w"},
                          %gw: tensor<4xf32> {otc.slot = "grad:w"})
        -> (tensor<f32> {otc.slot = "loss"}, tensor<4xf32> {otc.slot = "grad:w"})
    ```
  }];  let options = [
    Option<"decode", "decode", "bool", "false",
           "Also build @decode_step from @eval_step (otc-compile --generate): "
           "one position of every row, the keys and values of earlier "
           "positions cached in kv_cache slots, the position's logits in the "
           "logits slot (passes/DecodeStep.h)">
  ];
}

//===----------------------------------------------------------------------===//
// Buffer level
//===----------------------------------------------------------------------===//

def LowerToBuffers : Pass<"otc-lower-to-buffers", "mlir::ModuleOp"> {
  let summary = "Lowers the training-loop functions to otck buffers, kernels and GEMMs";
  let dependentDialects = ["otc::otck::OtckDialect"];
  let description = [{
    Every function whose arguments carry `otc.slot` becomes a function without
    arguments or results: slot arguments become persistent `otck.buffer`s,
    each otc.matmul an `otck.gemm`, each otc.reshape an `otck.view` of its
    input's buffer (no kernel, no bytes), every other op an `otck.kernel` holding
    it, and each value a temporary buffer. A result is written straight into
    its slot when that is safe (the old value is not read afterwards and the
    producer is elementwise), else copied there at the end; the partial
    sums of a slot's sum made in steps from its own value (`(acc + a) + b`,
    each read once) are written into the slot too. Each distinct
    constant that ops read (up to 64 MiB) becomes a persistent "const:<n>"
    slot that a new function, `@init_constants`, fills once; a constant
    returned into a slot (gradient zeroing) or a larger one stays a kernel
    that fills it on every call.

    ```mlir
    %t = otc.tanh %x : tensor<4xf32>
    // becomes
    %b = otck.buffer : memref<4xf32>
    otck.kernel ins(%xb : memref<4xf32>) outs(%b : memref<4xf32>) {
    ^bb0(%a: tensor<4xf32>):
      %t = otc.tanh %a : tensor<4xf32>
      otck.yield %t : tensor<4xf32>
    }
    ```
  }];
}

def FuseReductions : Pass<"otc-fuse-reductions", "mlir::ModuleOp"> {
  let summary = "Sums over the leading axes become otc.column_sum";
  let description = [{
    After differentiation and precision: an `otc.reduce_sum` with an FP32
    result over every axis but the last (a bias's gradient) becomes
    `otc.column_sum`, a call of the runtime's kernel library that sums each
    column with many threads, reshaped back when the sum kept its
    dimensions. When its input is a widening cast of a BF16 tensor, the sum
    reads the BF16 tensor itself (widening is exact), so the FP32 copy is
    never made. Any other FP32 sum with few results (under 16,384) of long
    sums (1,024 elements or more), which a generated kernel would run as a
    few serial loops, becomes one too: its input transposed so that the
    summed axes lead (a full sum: one column of every element).

    ```mlir
    %w = otc.cast %dy : (tensor<8x64xbf16>) -> tensor<8x64xf32>
    %s = otc.reduce_sum %w, [0] : (tensor<8x64xf32>) -> tensor<64xf32>
    // becomes
    %s = otc.column_sum %dy : (tensor<8x64xbf16>) -> tensor<64xf32>
    ```

    Likewise an `otc.gather_grad` (an embedding's gradient) of a widened
    BF16 gradient whose FP32 result only casts back to BF16 read becomes a
    gather gradient of BF16 storage: the library sums in FP32 and rounds
    once either way, and the widened copy of the gradient and the FP32
    table are never made. An `otc.expert_matmul` of BF16 operands whose
    FP32 result only a cast to BF16 reads (mixed precision's rounding of a
    product) returns BF16 itself: the kernel rounds each FP32 sum once as
    it stores it, the same bits, and neither the FP32 [rows, width] tensor
    nor the cast's pass over it is left.

    ```mlir
    %y = otc.expert_matmul %x, %ids, %w : (tensor<64x32xbf16>, tensor<64xi64>, tensor<4x32x16xbf16>) -> tensor<64x16xf32>
    %r = otc.cast %y : (tensor<64x16xf32>) -> tensor<64x16xbf16>
    // becomes
    %r = otc.expert_matmul %x, %ids, %w : (tensor<64x32xbf16>, tensor<64xi64>, tensor<4x32x16xbf16>) -> tensor<64x16xbf16>
    ```
  }];
}

def PackAttention : Pass<"otc-pack-attention", "mlir::ModuleOp"> {
  let summary = "Attention reads and writes a fused QKV projection in place";
  let description = [{
    After differentiation: an `otc.attention` or `otc.attention_grad` of
    layout "bthd" whose q, k and v are reshapes of three slices of one
    [B, T, (H + 2 Hk) D] value, taken in that order along its last axis (a
    fused QKV projection split into heads), reads that value itself, as
    [B, T, H + 2 Hk, D] under layout "packed": the three slices, copies of
    the whole projection, are gone. The gradient then writes one packed
    result; where dq, dk and dv were only reshaped and concatenated back
    along the last axis in that order (the projection's gradient), that
    result replaces the concatenation, another copy gone; otherwise slices of
    it give dq, dk and dv to their readers.

    ```mlir
    %q = otc.slice %qkv, [0, 0, 0], [1, 1, 1] : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
    %k = otc.slice %qkv, [0, 0, 32], [1, 1, 1] : ...
    %v = otc.slice %qkv, [0, 0, 64], [1, 1, 1] : ...
    %q4 = otc.reshape %q : (tensor<2x16x32xf32>) -> tensor<2x16x4x8xf32>
    ...
    %o, %lse = otc.attention %q4, %k4, %v4 {causal, layout = "bthd", ...}
    // becomes
    %p = otc.reshape %qkv : (tensor<2x16x96xf32>) -> tensor<2x16x12x8xf32>
    %o, %lse = otc.attention %p, %p, %p {causal, layout = "packed", ...}
        : (...) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
}

def Fp8Gemms : Pass<"otc-fp8-gemms", "mlir::ModuleOp"> {
  let summary = "The GEMMs that multiply FP8 operands, under precision fp8";
  let dependentDialects = ["otc::OtcDialect"];
  let description = [{
    Last of the fuse-reductions phase (after otc-chunk-loss, whose call
    keeps its products BF16), under a configuration of precision "fp8"
    (nothing otherwise): marks an `otc.matmul` with `fp8 = "LHS,RHS"`
    (ir/Fp8.h) when its operands are BF16, it is one product (a
    projection's rows stacked, no other batch), M, N and K are multiples of
    16, at most one operand is a gradient (computed from an op that starts
    the loss's backward, `*_grad` or `*_with_grad`: E5M2; any other operand
    E4M3), and, run by otc-compile, the step-time model predicts it faster
    in FP8 with the quantization of both operands than in BF16
    (perf/Fp8Cost.h). Run alone (no model), or for otc-compile
    --fp8-gemms=all, every such product is marked.

    ```mlir
    %y = otc.matmul %x, %w {transpose_rhs} : (tensor<64x32xbf16>, tensor<16x32xbf16>) -> tensor<64x16xf32>
    // becomes
    %y = otc.matmul %x, %w {fp8 = "e4m3,e4m3", transpose_rhs} : ...
    ```
  }];
}

def Fp8Copies : Pass<"otc-fp8-copies", "mlir::ModuleOp"> {
  let summary = "One FP8 copy per tensor and format, read by every FP8 GEMM";
  let dependentDialects = ["otc::otck::OtckDialect"];
  let description = [{
    First of the plan phase (before otc-group-params and buffer planning):
    the FP8 GEMMs (`otck.gemm` with `fp8`, ir/Fp8.h) of a function that
    read one buffer in one format, nothing writing its bytes between them,
    read one FP8 copy of it (`lhs_fp8` / `rhs_fp8`), which one
    `otck.fp8_quantize` before the first of them writes in every layout
    they read (a temporary). With `step-weights` (the default), the copy
    of a parameter's BF16 working copy ("param_bf16:<name>") that
    @micro_step reads is the slot "fp8_copy:<format>:<name>", quantized in
    @zero_grads after the working copy is rounded: once per optimizer step.

    ```mlir
    otck.gemm %x, %w, %y {fp8 = "e4m3,e4m3", transpose_rhs} : ...
    otck.gemm %dy, %w, %dx {fp8 = "e5m2,e4m3"} : ...
    // becomes (in @zero_grads: otck.fp8_quantize %w, %q {layouts = 3})
    %q = otck.buffer {slot = "fp8_copy:e4m3:w"} : memref<4352xi8>
    otck.gemm %x, %w, %y rhs_fp8(%q : memref<4352xi8>) {fp8 = ...} : ...
    otck.gemm %dy, %w, %dx rhs_fp8(%q : memref<4352xi8>) {fp8 = ...} : ...
    ```
  }];
  let options = [
    Option<"stepWeights", "step-weights", "bool", /*default=*/"true",
           "quantize the parameters' copies in @zero_grads, once per "
           "optimizer step (a slot each), rather than in every micro-step">,
  ];
}

def ChunkLoss : Pass<"otc-chunk-loss", "mlir::ModuleOp"> {
  let summary = "The LM head, the loss and their gradients in chunks of rows";
  let description = [{
    After otc-fuse-loss-grad: an `otc.cross_entropy_with_grad` whose logits
    are written by `otc.matmul %h, %w {transpose_rhs}` (directly, or through
    a cast of its f32 product to bf16) and read by nothing else, and whose
    gradient only the head's two backward products read (`dh = dlogits w`,
    and `dw = dlogitsᵀ h` through a reshape of dlogits to [rows, V]), with
    f32 products, becomes one `otc.linear_cross_entropy_with_grad` where the
    loss was. The call computes `chunk_rows` rows at a time (the logits of a
    chunk in its `chunk` result, a scratch buffer), so no [rows, V] buffer
    exists; its numbers are the five ops' (a dw the graph rounds to bf16
    at once is the call's bf16 result, each chunk's sum rounded as it is
    added). Run by otc-compile, the pass is given the step-time model's
    price of the call on the compile's device: among the balanced
    chunkings of 1 to 64 chunks, rounded up to 64 rows, it takes the
    smallest chunk (the least memory) whose call is predicted within
    `slack-percent` of the fastest's (each chunk after the first adds once
    more into dw, which the price counts); where
    the chunk is chosen (`chunk-rows` 0), the call is formed only where the
    logits it saves outweigh the [V, C] dw it writes. Run
    alone (no price), the chunk is `chunk-rows` rows,
    or (0) the fewest balanced chunks of at most `chunk-mib` MiB of logits,
    rounded up to 64 rows. Other heads stay as they are; otc-compile's
    `--no-chunked-loss` leaves out the pass, as does `--precision=fp8` on a
    device with FP8 GEMMs without `--loss-chunk-rows` (the head's GEMMs
    can then run FP8).

    ```mlir
    %z = otc.matmul %h, %w {transpose_rhs} : (tensor<2x8x16xf32>, tensor<50x16xf32>) -> tensor<2x8x50xf32>
    %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : ...
    %dh = otc.matmul %dz, %w : (tensor<2x8x50xf32>, tensor<50x16xf32>) -> tensor<2x8x16xf32>
    %dz2 = otc.reshape %dz : (tensor<2x8x50xf32>) -> tensor<16x50xf32>
    %dw = otc.matmul %dz2, %h2 {transpose_lhs} : (tensor<16x50xf32>, tensor<16x16xf32>) -> tensor<50x16xf32>
    // becomes
    %dh, %dw, %loss, %rows, %chunk = otc.linear_cross_entropy_with_grad %one, %h, %w, %y {chunk_rows = 8 : i64} : ...
    ```
  }];
  let options = [
    Option<"chunkRows", "chunk-rows", "int64_t", "0",
           "Rows per chunk (0: from chunk-mib)">,
    Option<"chunkBytes", "chunk-mib", "int64_t", "128",
           "Most MiB of logits per chunk when chunk-rows is 0 and there is "
           "no price">,
    Option<"slackPercent", "slack-percent", "double", "3.0",
           "With a price (otc-compile's step-time model): the smallest chunk "
           "within this percentage of the fastest">,
  ];
}

def FuseLossGrad : Pass<"otc-fuse-loss-grad", "mlir::ModuleOp"> {
  let summary = "The cross-entropy and its gradient become one call";
  let description = [{
    After differentiation and precision: an `otc.cross_entropy` whose `lse`
    only its `otc.cross_entropy_grad` reads (the same logits, labels,
    reduction and ignore index, in the same block), with the loss's incoming
    gradient defined before the loss or by a constant (moved up), becomes
    one `otc.cross_entropy_with_grad` where the loss was: the library reads
    the logits once for the loss and the gradient, and no per-row lse is
    kept between them. Where the seed is computed after the loss, or the
    logits the gradient reads are not the loss's (recomputed), nothing
    changes (also with otc-compile's `--no-fuse-loss-grad`).

    ```mlir
    %loss, %lse = otc.cross_entropy %z, %y : (tensor<8x50xbf16>, tensor<8xi64>) -> (tensor<f32>, tensor<8xf32>)
    %one = otc.constant dense<1.0> : tensor<f32>
    %dz = otc.cross_entropy_grad %one, %z, %y, %lse : (tensor<f32>, tensor<8x50xbf16>, tensor<8xi64>, tensor<8xf32>) -> tensor<8x50xbf16>
    // becomes
    %one = otc.constant dense<1.0> : tensor<f32>
    %dz, %loss, %rows = otc.cross_entropy_with_grad %one, %z, %y : (tensor<f32>, tensor<8x50xbf16>, tensor<8xi64>) -> (tensor<8x50xbf16>, tensor<f32>, tensor<8xf32>)
    ```
  }];
}

def FuseEpilogues : Pass<"otc-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "GEMMs add their product into an accumulator themselves";
  let description = [{
    At the buffer level, before otc-fuse-elementwise: a GEMM whose result
    only a kernel `acc = acc + result` reads (a weight gradient accumulated
    into its slot) writes into `acc` with `accumulate` instead (the library
    computes acc + product in FP32 and rounds once), so neither the
    temporary nor the add kernel remains. Only when nothing between the GEMM
    and the add touches `acc`.

    A kernel computing one `otc.layer_norm_grad` (no residual yet) whose dx
    temporary only a later kernel `y = dx + r` reads (one `otc.add`, either
    order, r a buffer of dx's shape and type, no broadcast) takes r as the
    op's `residual` and writes y itself (the library adds r in FP32 and
    rounds once): the add kernel and the temporary go away, and y's buffer
    moves up when it was declared after the call. Only when nothing between
    the two touches y or writes r, y is none of the call's other operands,
    and r is not dx; y may be r's own buffer (the library lets dx be the
    residual's buffer). This is the residual stream's gradient of a
    pre-LayerNorm transformer.

    Likewise a kernel computing one `otc.linear_cross_entropy_with_grad`
    whose dw temporary only a kernel `acc = acc + dw` reads takes `acc` as
    the op's `dw_acc` and writes dw over it (the call adds from its first
    chunk): no [V, C] temporary lives from the loss to the end of the
    backward. Only when nothing in between touches `acc` and `acc` is none
    of the call's operands. An `otc.gather_grad` (an embedding's gradient)
    takes its slot as `acc` the same way: the call adds each picked row's
    sum into the slot (rounding once) and touches no other row, so the
    table-sized temporary is neither cleared, written nor read. So do a
    norm gradient's dgamma and dbeta (`dgamma_acc`, `dbeta_acc` of
    `otc.layer_norm_grad`, `otc.rms_norm_grad`) and a bias's gradient
    (`otc.column_sum`'s `acc`), the latter also where a kernel of one cast
    rounds its FP32 sums to the slot's type in between, when the slot has
    the summed tensor's element type: the call adds the FP32 sums and
    rounds once, and the cast kernel goes too. So does a mixture of
    experts' weight gradient (`otc.expert_matmul_wgrad`'s `acc`): into a
    slot of its operands' BF16 through such a cast kernel, or into an FP32
    slot as it is (FP32 gradient accumulation, or FP32 operands), so that
    no [E, K, O] temporary, FP32 or rounded, is written or read.

    ```mlir
    otck.gemm %a, %b, %t : ...
    otck.kernel ins(%g, %t : ...) outs(%g : ...) { otc.add }
    // becomes
    otck.gemm %a, %b, %g {accumulate} : ...
    ```
  }];
}

def FuseGemmSums : Pass<"otc-fuse-gemm-sums", "mlir::ModuleOp"> {
  let summary = "A bias's gradient is summed by its weight's gradient GEMM";
  let description = [{
    At the buffer level, after otc-fuse-epilogues: a kernel computing one
    `otc.column_sum` of x (a bias's gradient: the layer's output gradient
    summed over its rows), with or without `acc` (its slot, the kernel's
    output too), goes into a GEMM of the same function that reads x as its
    summed operand: the left one transposed or the right one not
    transposed, x's bytes seen as that operand's [K, W] matrix (K the rows,
    W the columns the sum keeps), a plain 2-D product (no bias, aux,
    addend, GELU or FP8, no sums yet) - the weight's gradient. The GEMM
    takes the kernel's output as `sums` (`sums_of_rhs` for the right
    operand, `accumulate_sums` where the kernel added into its slot) and
    the kernel goes: the library forms the column sums while it reads x
    for the product (cuBLASLt's bias-gradient epilogue on cuda), instead
    of a kernel reading all of x again. Only when nothing between the
    kernel and the GEMM writes x's bytes or touches the output's, and the
    GEMM's result is neither.

    ```mlir
    otck.kernel ins(%dy, %db : ...) outs(%db : ...) { otc.column_sum acc }
    %v = otck.view %dy : memref<2x16x32xbf16> to memref<32x32xbf16>
    otck.gemm %v, %x, %dw {accumulate, transpose_lhs} : ...
    // becomes
    otck.gemm %v, %x, %dw sums(%db : memref<32xbf16>)
        {accumulate, accumulate_sums, transpose_lhs} : ...
    ```
  }];
}

def FuseElementwise : Pass<"otc-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Merges chains of elementwise kernels into one kernel each";
  let description = [{
    At the buffer level, after otc-lower-to-buffers and before planning: a
    kernel whose ops all have a scalar expression (arithmetic, comparisons,
    select, casts, unary math, the fused activations and their gradients)
    and one result shape takes in the kernels of the same kind and shape
    that produce its inputs. A producer's buffer that nothing else reads
    disappears (its values stay in registers); one that later ops read stays
    an output of the merged kernel. A producer moves down to its consumer
    only when no op between them writes what it reads or touches what it
    writes, and buffers seen through views are left alone. Every value
    keeps its element type (a BF16 intermediate is rounded as its store
    would round it), so merged and separate kernels compute the same bits.

    Then siblings: a later kernel of the same shape that reads a buffer an
    earlier one reads, and nothing the earlier one writes, joins it at the
    earlier one's position (its output buffers move up with it), so the
    common inputs are read once. Only when no op in between writes what it
    reads or touches what it writes, its inputs exist by then, and the
    inputs whose last reader it was free at least the bytes it writes (the
    peak cannot grow).

    Then slices: a kernel of one otc.slice whose output only elementwise
    kernels of that shape read, each after it with nothing in between
    writing the slice's input and none writing that input itself (the
    halves of a fused gate/up projection's output, read by the activation
    and by its gradient: ModernBERT's GeGLU, Phi-3's SwiGLU), is copied into
    each reader, which then reads the slice's input at the slice's offsets
    (on cuda 16 bytes at a time where the slice keeps whole aligned packets
    of a row); the slice kernel and its buffer go, so the halves are never
    written. The slices of one input fold together or not at all, and only
    when that adds no live bytes: the input lives on anyway, or the folded
    outputs read by the last reader are at least its size. A slice in a
    chain reads a kernel input (a block argument); slices alone stay a
    copy. Merging then runs again.

    ```mlir
    otck.kernel ins(%x, %bias : ...) outs(%t : memref<8x64xf32>) { otc.add }
    otck.kernel ins(%t : memref<8x64xf32>) outs(%y : memref<8x64xf32>) { otc.tanh }
    // becomes, %t gone when only the tanh read it
    otck.kernel ins(%x, %bias : ...) outs(%y : memref<8x64xf32>) {
    ^bb0(%a: tensor<8x64xf32>, %b: tensor<64xf32>):
      %s = otc.add %a, %b : ...
      %t = otc.tanh %s : tensor<8x64xf32>
      otck.yield %t : tensor<8x64xf32>
    }
    ```
  }];
  let options = [
    Option<"maxOps", "max-ops", "unsigned", "48",
           "Most ops in one merged kernel">,
    Option<"maxBuffers", "max-buffers", "unsigned", "16",
           "Most buffers (inputs and outputs) one merged kernel touches">,
  ];
}

def GroupParams : Pass<"otc-group-params", "mlir::ModuleOp"> {
  let summary = "One flat range per kind of parameter state, one kernel over each";
  let description = [{
    At the buffer level, before planning. When `@optimizer_step` is one
    AdamW kernel per trained parameter, all with the same hyperparameters,
    every kind of that state (masters "param", "grad", "adam_m", "adam_v",
    and the BF16 working copies "param_bf16" that `@zero_grads` rounds from
    the masters) becomes one group slot, "group:<kind>", a flat buffer in
    which each parameter starts at the same element in every kind (a
    multiple of `alignment` bytes in the narrowest kind). The AdamW kernels
    become one kernel over the groups that also writes the BF16 working
    copies (the optional `copy` result of otc.adamw); `@zero_grads`' fills
    become one fill, and its casts one cast in a new function,
    `@refresh_params`, that the runtime calls after loading the masters. The per-parameter slots stay where they were used;
    otc-plan-buffers places them inside their groups. Padding elements are
    zero in every kind and stay zero.

    With #otc.config's `shard_optimizer` (ZeRO-1 over `world_size` = N
    ranks) every group is padded to N equal parts, the moments become
    "group:adam_m" and "group:adam_v" of one part each (no members: the
    per-parameter moments are removed), and the AdamW kernel updates the
    running rank's part of the parameter, gradient and copy groups (views
    with `shards = N`); the runtime reduce-scatters the gradients before it
    and all-gathers the parameters after (OtcOptimizerShards). When the
    optimizer step cannot be grouped, sharding it is an error.

    ```mlir
    // 2 parameters of 3 and 5 elements, alignment 16 bytes (4 f32 elements)
    %g = otck.buffer {slot = "group:param", otck.members = ["param:a", "param:b"],
                      otck.member_offsets = array<i64: 0, 4>} : memref<12xf32>
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of every buffer (that of otc-plan-buffers)">,
  ];
}

def PlanBuffers : Pass<"otc-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Places every buffer at an offset of one arena";
  let description = [{
    Persistent slots come first, one place per slot shared by every function.
    Temporaries follow: each lives from the first to the last op that uses it
    in its function. An elementwise kernel whose input of the same type dies
    there writes its output over that input (marked `otck.in_place`); the
    remaining groups are placed largest first, each at the lowest aligned
    offset that no temporary live at the same time holds. Functions run one
    at a time, so they share the temporary region. Sets `offset` on every
    `otck.buffer` and `otck.arena_size` on the module, then verifies that no
    two buffers live at the same time overlap and that every in-place buffer
    is legal.

    ```mlir
    %a = otck.buffer : memref<4xf32>
    %b = otck.buffer : memref<4xf32>   // written by otc.tanh of %a, its last use
    // becomes
    %a = otck.buffer {offset = 256 : i64} : memref<4xf32>
    %b = otck.buffer {offset = 256 : i64, otck.in_place} : memref<4xf32>
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of every buffer">,
  ];
}

#endif // OTC_PASSES_TD
