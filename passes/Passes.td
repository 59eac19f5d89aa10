//===- Passes.td - otc pass definitions --------------------*- tablegen -*-===//
//
// Every otc pass: its flag, summary, a description with a small before/after
// example, and its options. The tensor level here, the buffer level in
// BufferPasses.td (included at the end).
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

include "passes/BufferPasses.td"

#endif // OTC_PASSES_TD
