//===- BufferPasses.td - otc passes on buffers -----------*- tablegen -*-===//
//
// The passes after otc-lower-to-buffers (and the library-call passes
// beside them), included by Passes.td: their flags, summaries,
// descriptions with a small example, and options.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_BUFFER_PASSES_TD
#define OTC_BUFFER_PASSES_TD

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
    are written by `otc.matmul %h, %w {transpose_rhs}` (w [V, C]; or
    `otc.matmul %h, %w` with w [C, V], an export's transposed copy, whose
    dh and dw products then read it the other way round: `w_by_hidden`)
    (directly, or through
    a cast of its f32 product to bf16, then maybe plus a bias of one value
    per class, [V] or [1, ..., V] of the logits' type) and read by nothing
    else, and whose gradient only the head's two backward products read
    (`dh = dlogits w`, and `dw = dlogitsᵀ h` through a reshape of dlogits to
    [rows, V]) and, with a bias, an `otc.column_sum` of it (a trained bias's
    gradient), with f32 products, becomes one
    `otc.linear_cross_entropy_with_grad` where the loss was (its `bias`, as
    [V], and `dbias` for the sum). The call computes `chunk_rows` rows at a time (the logits of a
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

#endif // OTC_BUFFER_PASSES_TD
