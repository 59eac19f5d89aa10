//===- OtcFusedOps.td - fused transformer ops --------------*- tablegen -*-===//
//
// The ops that otc-fuse-patterns recognizes in exported graphs (attention,
// layer and RMS normalization, GELU, SiLU, the rotary embedding,
// cross-entropy) and their gradient kernels. Each fused gradient reads only
// what its op saves: attention its inputs, output and per-row log-sum-exp
// (never the T x T probabilities), the norms their input and per-row
// statistics, the rotary embedding nothing but its constant tables, the
// cross-entropy its logits and per-row log-sum-exp. Included by OtcOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FUSED_OPS_TD
#define OTC_FUSED_OPS_TD

/// The ops the runtime's kernel library computes, and the one whose result
/// may take an operand's buffer.
defvar Library = DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface>;
defvar LibraryInPlace = DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                                                  ["getInPlaceOperand"]>;
/// The ops with results (forward ops) or operands (gradient ops) that are
/// FP32 statistics whatever the data's precision (otc-mixed-precision).
defvar Fp32StatResults =
    DeclareOpInterfaceMethods<Otc_Fp32StatisticsOpInterface,
                              ["isFp32StatisticsResult"]>;
defvar Fp32StatResultsOperands =
    DeclareOpInterfaceMethods<Otc_Fp32StatisticsOpInterface,
                              ["isFp32StatisticsResult",
                               "isFp32StatisticsOperand"]>;
defvar Fp32StatOperands =
    DeclareOpInterfaceMethods<Otc_Fp32StatisticsOpInterface,
                              ["isFp32StatisticsOperand"]>;

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Otc_AttentionOp : Otc_Op<"attention",
    [Library, Fp32StatResultsOperands, CostFlopsRead, Pure, Grad,
     AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention: softmax(Q K^T scale + mask) V";
  let description = [{
    `q` is [B, H, T, D], `k` and `v` are [B, Hk, S, D] with H a multiple of
    Hk (grouped-query attention: query head h reads key/value head
    h / (H / Hk)). Scores are `scale * q k^T`; with `causal`, key j is hidden
    from query i when j > i (T == S), and with `window` = W > 0 (a sliding
    window, T == S) also when j <= i - W, so that each query sees itself
    and the W - 1 keys before it; with `window` = W > 0 and not `causal` (a
    bidirectional sliding window: ModernBERT's local layers) key j is
    hidden when |i - j| >= W, so that each query sees itself and the W - 1
    keys on either side; `mask`, when given, is added to the
    scores (numpy broadcasting to [B, H, T, S]). With `dropout` > 0 the
    probabilities are dropped out as `otc.dropout` with `key` and `stream`
    would, element (b, h, i, j) of the [B, H, T, S] probabilities being
    element number ((b H + h) T + i) S + j of the mask. Results: the output
    [B, H, T, D] and `lse` [B, H, T], the log-sum-exp of each row of scores,
    which the gradient uses to rebuild the probabilities row by row.
    With `layout = "bthd"`, q, k, v and the output are stored [B, T, H, D]
    (sequence before heads, as a projection writes them) and read as the
    [B, H, T, D] above through strides: no transposed copies; `lse` and the
    mask keep their [B, H, T(, S)] indexing. With `layout = "packed"`, q, k
    and v are one value, the [B, T, H + 2 Hk, D] output of a fused QKV
    projection passed as all three operands: in each (b, t) row the first H
    heads are the queries, the next Hk the keys and the last Hk the values,
    read where they lie; the output is [B, T, H, D] (which gives H), and
    T == S (otc-pack-attention forms it after differentiation). With
    `softcap` = c > 0 the scores are soft-capped before the mask is added,
    s -> c tanh(s / c) (Gemma 2's attention logit soft-capping). With
    `mask_grad` the mask carries a gradient (it is computed from parameters:
    T5's relative position bias), which the gradient op returns. With
    `key_padding` the mask is a key padding: [B, 1, 1, S], broadcast over
    the heads and queries, each value 0 (the key is seen) or a fill of at
    most -1e4 (-9984 once rounded to BF16), as otc-fuse-patterns builds it
    from a run-time attention mask. A fill hides its key as `causal` and
    `window` do (it is not added), so a row can see no key: a sliding
    window's query W or more past its sequence's last seen key, every query
    of a sequence that hides every key. Such a row gives zeros and lse =
    +inf (exp(s - lse) is 0 for every score: it has no gradient). A target
    may take the padding as per-sequence key lengths when it is
    right-padded (the cuda runtime gives cuDNN's SDPA lengths, no mask
    tensor). `sinks`, when
    given, is an FP32 [H] logit per query head (GPT-OSS's attention sinks)
    that joins each row's softmax as a key with no value: the row's
    probabilities are exp(s_j - lse) with lse = log(sum_j exp(s_j) +
    exp(sinks[h])), so they sum to less than 1, and a row that sees no key
    gives zeros (its lse the sink's logit).

    ```mlir
    %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.125 : f64}
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$q, Otc_FloatTensor:$k,
                   Otc_FloatTensor:$v, Optional<Otc_FloatTensor>:$mask,
                   Optional<Otc_I64Scalar>:$key,
                   Optional<Otc_FloatTensor>:$sinks, UnitAttr:$causal,
                   F64Attr:$scale,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                   DefaultValuedAttr<I64Attr, "0">:$stream,
                   DefaultValuedAttr<StrAttr, "\"bhtd\"">:$layout,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                   UnitAttr:$mask_grad, UnitAttr:$key_padding);
  let results = (outs Otc_FloatTensor:$output, Otc_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? (`key` $key^)? (`sinks` $sinks^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// q, k and v are one packed value (layout "packed").
    bool isPacked() { return getLayout() == "packed"; }
  }];
  let hasVerifier = 1;
}

def Otc_AttentionGradOp : Otc_Op<"attention_grad",
    [Library, Fp32StatResultsOperands, CostFlopsRead, Pure,
     AttrSizedOperandSegments]> {
  let summary = "Gradients of otc.attention with respect to q, k and v";
  let description = [{
    Reads the output gradient, q, k, v, the forward output and its `lse`
    (plus the mask and key of the forward); rebuilds each row of
    probabilities from the scores and `lse` and returns dq, dk, dv, typed
    as q, k and v. Under layout "packed" (q, k and v one [B, T, H + 2 Hk,
    D] value) it returns one result instead, the gradient of that value:
    dq, dk and dv side by side in each row as q, k and v are. With
    `mask_grad` (not packed) a fourth result is the gradient of the scores
    after the soft cap, dS [B, H, T, S] in the mask's element type: the
    mask's gradient before it is summed over the dimensions it broadcasts.
    With `sinks` (the forward's, FP32 [H]) the last result is their
    gradient, FP32 [H]: minus the sum over the batch and the queries of
    each row's sink probability exp(sinks[h] - lse) times D = dO . O.
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$q,
                   Otc_FloatTensor:$k, Otc_FloatTensor:$v,
                   Otc_FloatTensor:$output, Otc_FloatTensor:$lse,
                   Optional<Otc_FloatTensor>:$mask,
                   Optional<Otc_I64Scalar>:$key,
                   Optional<Otc_FloatTensor>:$sinks, UnitAttr:$causal,
                   F64Attr:$scale,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                   DefaultValuedAttr<I64Attr, "0">:$stream,
                   DefaultValuedAttr<StrAttr, "\"bhtd\"">:$layout,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                   UnitAttr:$mask_grad, UnitAttr:$key_padding);
  let results = (outs Variadic<Otc_FloatTensor>:$grads);
  let assemblyFormat = [{
    $grad `,` $q `,` $k `,` $v `,` $output `,` $lse (`mask` $mask^)?
    (`key` $key^)? (`sinks` $sinks^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// q, k and v are one packed value (layout "packed"), and so are their
    /// gradients: one result.
    bool isPacked() { return getLayout() == "packed"; }
    /// dq, dk and dv of an attention not packed.
    ::mlir::Value getDq() { return getGrads()[0]; }
    ::mlir::Value getDk() { return getGrads()[1]; }
    ::mlir::Value getDv() { return getGrads()[2]; }
    /// dS, the scores' gradient (with mask_grad), else null.
    ::mlir::Value getDscores() {
      return getMaskGrad() && !isPacked() && getGrads().size() >= 4
                 ? getGrads()[3]
                 : ::mlir::Value();
    }
    /// The sinks' gradient (the last result, with sinks), else null.
    ::mlir::Value getDsinks() {
      return getSinks() ? getGrads().back() : ::mlir::Value();
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Otc_LayerNormOp : Otc_Op<"layer_norm",
    [Library, Fp32StatResults, CostFlops, Pure, Grad,
     AttrSizedOperandSegments]> {
  let summary = "Layer normalization over the dimensions from `axis` on";
  let description = [{
    Each row (the dimensions from `axis` on, flattened) is normalized:
    y = (x - mean) * rstd * gamma + beta with rstd = 1 / sqrt(var + epsilon)
    (biased variance). `gamma` and `beta`, when present, have the normalized
    shape x.shape[axis:]. Results: y, and the `mean` and `rstd` of every row
    (shape x.shape[:axis]), which the gradient reads.

    ```mlir
    %y, %mean, %rstd = otc.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
        -> (tensor<2x16x32xf32>, tensor<2x16xf32>, tensor<2x16xf32>)
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$input,
                   Optional<Otc_FloatTensor>:$gamma,
                   Optional<Otc_FloatTensor>:$beta, I64Attr:$axis,
                   F64Attr:$epsilon);
  let results = (outs Otc_FloatTensor:$result, Otc_FloatTensor:$mean,
                 Otc_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input (`gamma` $gamma^)? (`beta` $beta^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Otc_LayerNormGradOp : Otc_Op<"layer_norm_grad",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                               ["getAccumulatedResults"]>,
     Fp32StatOperands, CostFlops, Pure, AttrSizedOperandSegments]> {
  let summary = "Gradients of otc.layer_norm: dx, dgamma and dbeta";
  let description = [{
    With xhat = (x - mean) * rstd and g = grad * gamma:
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) over each row,
    dgamma = sum over rows of grad * xhat, dbeta = sum over rows of grad.
    An optional `residual` (the input's type) is a gradient added to dx:
    dx = residual + the above, formed in FP32 and rounded once to dx's type
    (a residual connection's gradient, fused by otc-fuse-epilogues).
    With `dgamma_acc` (dgamma's type), dgamma is that accumulator plus the
    sum, rounded once, and likewise dbeta with `dbeta_acc`: otc-fuse-
    epilogues forms them for gradient slots, and the kernel then adds into
    the slots' buffers (LibraryCallOpInterface::getAccumulatedResults).

    ```mlir
    %dx, %dg, %db = otc.layer_norm_grad %dy, %x gamma %g, %mean, %rstd
        residual %r dgamma_acc %sg dbeta_acc %sb {axis = 2 : i64} : (...) -> (...)
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$input,
                   Optional<Otc_FloatTensor>:$gamma, Otc_FloatTensor:$mean,
                   Otc_FloatTensor:$rstd, Optional<Otc_FloatTensor>:$residual,
                   Optional<Otc_FloatTensor>:$dgamma_acc,
                   Optional<Otc_FloatTensor>:$dbeta_acc, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$dx, Otc_FloatTensor:$dgamma,
                 Otc_FloatTensor:$dbeta);
  let assemblyFormat = [{
    $grad `,` $input (`gamma` $gamma^)? `,` $mean `,` $rstd
    (`residual` $residual^)? (`dgamma_acc` $dgamma_acc^)?
    (`dbeta_acc` $dbeta_acc^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Otc_RmsNormOp : Otc_Op<"rms_norm",
    [Library, Fp32StatResults, CostFlops, Pure, Grad]> {
  let summary = "RMS normalization over the dimensions from `axis` on";
  let description = [{
    y = x * rstd * gamma with rstd = 1 / sqrt(mean(x^2) + epsilon) per row.
    Results: y and the `rstd` of every row (shape x.shape[:axis]).
  }];
  let arguments = (ins Otc_FloatTensor:$input,
                   Optional<Otc_FloatTensor>:$gamma, I64Attr:$axis,
                   F64Attr:$epsilon);
  let results = (outs Otc_FloatTensor:$result, Otc_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input (`gamma` $gamma^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Otc_RmsNormGradOp : Otc_Op<"rms_norm_grad",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                               ["getAccumulatedResults"]>,
     Fp32StatOperands, CostFlops, Pure, AttrSizedOperandSegments]> {
  let summary = "Gradients of otc.rms_norm: dx and dgamma";
  let description = [{
    With xhat = x * rstd and g = grad * gamma:
    dx = rstd * (g - xhat * mean(g * xhat)) over each row,
    dgamma = sum over rows of grad * xhat; with `dgamma_acc` (dgamma's
    type), that accumulator plus the sum, rounded once (a gradient slot the
    kernel adds into, as for otc.layer_norm_grad). An optional `residual`
    (the input's type) is a gradient added to dx, formed in FP32 and rounded
    once, as for otc.layer_norm_grad (fused by otc-fuse-epilogues).
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$input,
                   Optional<Otc_FloatTensor>:$gamma, Otc_FloatTensor:$rstd,
                   Optional<Otc_FloatTensor>:$residual,
                   Optional<Otc_FloatTensor>:$dgamma_acc, I64Attr:$axis);
  let results = (outs Otc_FloatTensor:$dx, Otc_FloatTensor:$dgamma);
  let assemblyFormat = [{
    $grad `,` $input (`gamma` $gamma^)? `,` $rstd
    (`residual` $residual^)? (`dgamma_acc` $dgamma_acc^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Otc_ColumnSumOp : Otc_Op<"column_sum",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
                               ["getAccumulatedResults"]>,
     Otc_KeepPrecision, CostFlops, Pure]> {
  let summary = "Sum over every dimension but the last, accumulated in FP32";
  let description = [{
    result[c] = sum over all leading indices r of input[r..., c], in FP32
    whatever the input's storage (a BF16 input is widened exactly as it is
    read). A bias's gradient: otc-fuse-reductions makes it from a
    `reduce_sum` over the leading axes (of a widening cast), which the
    runtime's kernel library computes with many threads per column. Appears
    only after differentiation: it has no gradient.

    With `acc` (of the input's element type), the result is `acc` plus the
    sums, rounded once to that type: otc-fuse-epilogues forms it where the
    sums are only rounded and added into a gradient slot, and the kernel
    then adds into the slot's buffer (LibraryCallOpInterface::
    getAccumulatedResults).

    ```mlir
    %db = otc.column_sum %dy : (tensor<8x1024x768xbf16>) -> tensor<768xf32>
    %db2 = otc.column_sum %dy acc %slot : (tensor<8x1024x768xbf16>, tensor<768xbf16>) -> tensor<768xbf16>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$input, Optional<Otc_FloatTensor>:$acc);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$input (`acc` $acc^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

def Otc_GeluOp : Otc_Op<"gelu", [Otc_Elementwise, Scalar, Cost, Pure, Grad, SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or with the tanh approximation";
  let description = [{
    `approximate` = "none": 0.5 x (1 + erf(x / sqrt(2)));
    "tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
  }];
  let arguments = (ins Otc_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Otc_GeluGradOp : Otc_Op<"gelu_grad", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "grad * gelu'(input)";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$input,
                   DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_SiluOp : Otc_Op<"silu", [Otc_Elementwise, Scalar, Cost, Pure, Grad, SameOperandsAndResultType]> {
  let summary = "x * sigmoid(alpha x)";
  let description = [{
    SiLU (swish) at `alpha` = 1; CLIP's QuickGELU, x * sigmoid(1.702 x), at
    `alpha` = 1.702.
  }];
  let arguments = (ins Otc_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Otc_SiluGradOp : Otc_Op<"silu_grad", [Otc_Elementwise, Scalar, Cost, Pure]> {
  let summary = "grad * s (1 + alpha x (1 - s)) with s = sigmoid(alpha input)";
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

def Otc_RopeOp : Otc_Op<"rope",
    [Library, Fp32StatOperands, CostFlops, Pure, Grad]> {
  let summary = "Rotary position embedding: x cos + rotate_half(x) sin";
  let description = [{
    Over the last dimension D of `input`, the first R features rotate, R the
    last dimension of `cos` and `sin` (even, at most D; R < D is partial
    rotary, as GPT-NeoX and Phi write it), and features R to D are copied.
    The rotated features form R / 2 pairs (a, b): (p, p + R / 2) (the
    split-halves rotate_half of Llama and GPT-NeoX), or with `interleaved`
    (2p, 2p + 1) (GPT-J's rotate_every_two). Of a pair,
    y[a] = x[a] cos[a] - x[b] sin[a] and y[b] = x[b] cos[b] + x[a] sin[b].
    `cos` and `sin` have one shape, numpy-broadcast to the input's with a
    last dimension of R; they are FP32 tables whatever the data's precision
    (otc-mixed-precision keeps them FP32) and constants: they get no
    gradient. With `transposed`, the op is the transpose of that linear map,
    the gradient of the rotation: y[a] = x[a] cos[a] + x[b] sin[b] and
    y[b] = x[b] cos[b] - x[a] sin[a] (the copied features copied), so an
    otc.rope's gradient is otc.rope of the output gradient with `transposed`
    flipped (one kernel, one launch, either way).

    A library call rather than an elementwise op: element a reads element b
    of its row, which the elementwise fusion cannot express, and one pass of
    a row kernel reads x once where the exported chain (slices, a negation,
    concatenations, two products and a sum) reads and writes it many times.
    Formed by otc-fuse-patterns (passes/FuseRope.cpp).

    ```mlir
    %y = otc.rope %x, %cos, %sin
        : (tensor<2x4x16x8xbf16>, tensor<16x8xf32>, tensor<16x8xf32>)
        -> tensor<2x4x16x8xbf16>
    %p = otc.rope %x, %cos, %sin {interleaved}
        : (tensor<2x16x4x8xf32>, tensor<16x1x4xf32>, tensor<16x1x4xf32>)
        -> tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins Otc_FloatTensor:$input, Otc_FloatTensor:$cos,
                   Otc_FloatTensor:$sin, UnitAttr:$transposed,
                   UnitAttr:$interleaved);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Otc_CrossEntropyOp : Otc_Op<"cross_entropy",
    [Library, Fp32StatResults, CostFlops, Pure, Grad]> {
  let summary = "Softmax cross-entropy of [..., C] logits against [...] labels";
  let description = [{
    Every row of the logits (all dimensions but the last) has one label.
    loss_r = lse_r - logits[r, label_r] with lse_r the row's log-sum-exp;
    rows labelled `ignore_index` count for nothing. `reduction` is "mean"
    (over the counted rows), "sum" or "none" (the labels' shape). The second
    result is `lse` (the labels' shape; ignored rows too get their
    log-sum-exp), which the gradient reads instead of keeping probabilities:
    the gradient is one pass over the logits and may overwrite them.
  }];
  let arguments = (ins Otc_FloatTensor:$logits, Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$loss, Otc_FloatTensor:$lse);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_CrossEntropyGradOp : Otc_Op<"cross_entropy_grad",
    [LibraryInPlace, Fp32StatOperands, CostFlops, Pure]> {
  let summary = "Gradient of otc.cross_entropy with respect to the logits";
  let description = [{
    dlogits[r, c] = g_r (exp(logits[r, c] - lse_r) - [c == label_r]), g_r
    the gradient of row r's loss (zero for ignored rows). Each element is
    read before it is written, so the result may take the logits' buffer.
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$logits,
                   Otc_IntTensor:$labels, Otc_FloatTensor:$lse,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$result);
  let assemblyFormat =
      "$grad `,` $logits `,` $labels `,` $lse attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_CrossEntropyWithGradOp : Otc_Op<"cross_entropy_with_grad",
    [LibraryInPlace,
     DeclareOpInterfaceMethods<Otc_Fp32StatisticsOpInterface,
         ["isFp32StatisticsOperand", "isFp32StatisticsResult"]>,
     CostFlops, Pure]> {
  let summary = "otc.cross_entropy and its gradient in one pass over the logits";
  let description = [{
    What `otc.cross_entropy` followed by `otc.cross_entropy_grad` computes,
    formed by otc-fuse-loss-grad when the loss's incoming gradient `grad`
    is known before the loss is (the seed of the backward pass): `dlogits`
    as the gradient's result, `loss` as the forward's, `row_loss` each
    row's lse_r - logits[r, label_r] (0 for rows that do not count; the loss
    reduces it). The logits are read once; no per-row log-sum-exp is kept
    between the passes, and the gradient (the first result) may take the
    logits' buffer.
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$logits,
                   Otc_IntTensor:$labels,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$dlogits, Otc_FloatTensor:$loss,
                 Otc_FloatTensor:$row_loss);
  let assemblyFormat =
      "$grad `,` $logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Otc_LinearCrossEntropyWithGradOp : Otc_Op<"linear_cross_entropy_with_grad",
    [DeclareOpInterfaceMethods<Otc_LibraryCallOpInterface,
         ["getLibraryGemms", "getAccumulatedResults"]>,
     CostFlops, Pure, AttrSizedOperandSegments]> {
  let summary = "The LM head, the cross-entropy and their gradients, in chunks of rows";
  let description = [{
    What `logits = otc.matmul h, w {transpose_rhs}` followed by
    `otc.cross_entropy_with_grad grad, logits, labels` and the two products
    of dlogits (`dh = dlogits w`, `dw = dlogitsᵀ h`) compute, formed by
    otc-chunk-loss when nothing else reads the logits: `h` is [..., C] (N
    rows), `w` [V, C], `labels` the rows' classes. The call computes
    `chunk_rows` rows at a time: their logits into `chunk` ([chunk_rows, V],
    the logits' type, a scratch buffer nothing reads after the call), their
    loss and gradient over them in place, their rows of `dh` and their sum
    into `dw` (the first chunk writes it, the others add to it), so no
    [N, V] buffer exists. `loss`, `row_loss` and the gradient's scale are
    the unchunked call's: a mean is over the counted rows of all N. `dh` is
    f32; `dw` is f32, or bf16 with bf16 data (each chunk's sum then rounded
    to bf16 as it is added, where the gradient is rounded to bf16 anyway).

    With `dw_acc` (dw's type), `dw` is `dw_acc` plus the head's gradient:
    the call adds into the accumulator from its first chunk on (beta = 1).
    otc-fuse-epilogues forms it for a tied weight's gradient slot, and the
    kernel then writes `dw` over `dw_acc`'s buffer
    (LibraryCallOpInterface::getAccumulatedResults).

    With `bias` ([V], h's type) the logits are `h wᵀ + bias`, formed in f32
    and rounded once (a head with a bias: BERT's decoder, GPT-J's, BART's
    `final_logits_bias` buffer). With the `dbias` result (f32 [V], only
    with a bias: a trained one) the call also sums the gradient of the
    logits over all rows, each chunk's sum added to the earlier ones'.

    With `w_by_hidden`, w is stored [C, V] (the head's weight as an export's
    transposed copy: `logits = otc.matmul %h, %w` without transpose_rhs),
    and dw has its layout.
  }];
  let extraClassDeclaration = [{
    /// V and C, whichever way w is stored.
    int64_t getClasses();
    int64_t getHidden();
  }];
  let arguments = (ins Otc_FloatTensor:$grad, Otc_FloatTensor:$h,
                   Otc_FloatTensor:$w, Otc_IntTensor:$labels,
                   Optional<Otc_FloatTensor>:$dw_acc,
                   Optional<Otc_FloatTensor>:$bias,
                   I64Attr:$chunk_rows, UnitAttr:$w_by_hidden,
                   DefaultValuedStrAttr<StrAttr, "mean">:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Otc_FloatTensor:$dh, Otc_FloatTensor:$dw,
                 Otc_FloatTensor:$loss, Otc_FloatTensor:$row_loss,
                 Otc_FloatTensor:$chunk,
                 Optional<Otc_FloatTensor>:$dbias);
  let assemblyFormat =
      "$grad `,` $h `,` $w `,` $labels (`acc` $dw_acc^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // OTC_FUSED_OPS_TD
