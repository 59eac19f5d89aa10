//===- FusePatterns.h - the recognizers of otc-fuse-patterns ----*- C++ -*-===//
//
// Private to passes/: what the recognizers of otc-fuse-patterns share. A
// recognizer starts from an anchor op (a softmax, a sqrt, an erf...), walks
// the exported chain around it and either rewrites it into the fused op
// through the PatternRewriter it is given (creating, replacing and erasing
// only through it) or returns the reason the chain is almost, but not quite,
// the pattern (reported as a remark so a user can see why a model did not
// get the fused path), having changed nothing. Also the pattern set and the
// in-order driver the pass applies it with.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_FUSEPATTERNS_H
#define OTC_PASSES_FUSEPATTERNS_H

#include "ir/OtcDialect.h"
#include "ir/ShapeUtils.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace otc::fuse {

/// The outcome of one recognizer at one anchor: `fused` when it rewrote the
/// chain, else `nearMiss` with a reason when the anchor looked like the
/// pattern but a condition failed, else neither (not the pattern at all).
struct Match {
  bool fused = false;
  std::string nearMiss;
  static Match no() { return {}; }
  static Match yes() { return {true, ""}; }
  static Match miss(std::string why) { return {false, std::move(why)}; }
};

/// The value of a constant whose elements are all equal (any shape).
std::optional<double> splatValue(mlir::Value v);

/// Whether `a` and `b` agree to a relative 1e-5 (constants as exported in
/// float32).
bool near(double a, double b);

/// The defining op of `v` as `OpTy` when `v` has exactly one use.
template <typename OpTy> OpTy singleUser(mlir::Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return llvm::dyn_cast<OpTy>(*v.getUsers().begin());
}

/// The other operand of the binary `op` with one operand `y`.
template <typename OpTy> mlir::Value otherOperand(OpTy op, mlir::Value y) {
  return op.getLhs() == y ? op.getRhs() : op.getLhs();
}

/// A product x1 * x2 * ... * c as a tree of otc.mul (and division by
/// constants): the non-constant leaves and the product of the constants.
/// Operands below the root are flattened only when they have one use.
struct Product {
  llvm::SmallVector<mlir::Value> leaves;
  double constant = 1.0;
};
Product flattenProduct(mlir::Value root);

/// Whether `v` depends on an `otc.param` function argument.
bool dependsOnParam(mlir::Value v);

/// Evaluates element `index` (of `v`'s shape) of a value computed from
/// constants only, through constants, slices, reshapes, broadcasts,
/// transposes, casts, comparisons, selects, trilu and elementwise
/// arithmetic; std::nullopt when it depends on anything else.
std::optional<double> evaluateAt(mlir::Value v, llvm::ArrayRef<int64_t> index);
/// Row `prefix` (an index of every dimension but the last) of `v` as
/// evaluateAt gives its elements, into `row` (the last dimension's length),
/// a whole row per op where it can (a [T, S] mask's classification reads
/// T rows, not T x S recursive walks); false where an element cannot be
/// evaluated.
bool evaluateRow(mlir::Value v, llvm::ArrayRef<int64_t> prefix,
                 llvm::SmallVectorImpl<double> &row);
/// The band an attention mask hides outside of: `causal` (every key after
/// its query hidden) with `window` W > 0 also hiding the keys W or more
/// before it (a causal sliding window; 0: none), or not causal with
/// `window` W > 0 hiding every key W or more away on either side (a
/// bidirectional sliding window, |i - j| >= W: ModernBERT's local layers).
struct MaskBand {
  bool causal = false;
  int64_t window = 0;
};
/// The band of an attention mask (AttentionMaskBand.cpp), its rows
/// evaluated one at a time and each value read as hidden or not by `hidden`,
/// over the mask's own shape (broadcast to [.., T, S], T == S): causal when
/// it hides exactly j > i (with a window W when also exactly j <= i - W), a
/// bidirectional window W when it hides exactly |i - j| >= W (some key, not
/// every one), nothing otherwise. From the cache when the same computation
/// was classified before as `kind` (how its values hide a key).
std::optional<MaskBand>
cachedBand(mlir::Value mask, int kind, int64_t t, int64_t s,
           llvm::function_ref<std::optional<bool>(double)> hidden);
/// Forgets the masks fuseAttention classified (otc-fuse-patterns calls it
/// before and after its run: the cache holds for one run's IR).
void clearMaskCache();
/// Forgets the classifications of masks computed by `op`, which is being
/// erased (the driver's listener calls it: an op created later at its
/// address is never taken for it).
void forgetMask(mlir::Operation *op);
/// Forgets the constants' values evaluateAt decoded (clearMaskCache calls
/// it).
void clearConstantValues();

/// Whether `op` is an otc op none of whose results is read (every otc op is
/// pure: it can go).
bool isUnread(mlir::Operation *op);
/// Erases, through `rewriter`, those of `ops` that are unread and then, in
/// turn, the producers of their operands that this leaves unread.
void eraseUnread(mlir::RewriterBase &rewriter,
                 llvm::ArrayRef<mlir::Operation *> ops);
/// Replaces the uses of a chain's output `from` by `to` through `rewriter`
/// and erases the chain ops the replacement leaves unread (eraseUnread from
/// `from`'s op).
void replaceChainOutput(mlir::RewriterBase &rewriter, mlir::Value from,
                        mlir::Value to);

/// Recognizers. Each rewrites its chain through `rewriter` when it matches,
/// erasing the ops the fusion leaves unread, and changes nothing when it
/// does not.
Match fuseAttention(SoftmaxOp softmax, mlir::PatternRewriter &rewriter);
Match fuseNorm(SqrtOp sqrt, mlir::PatternRewriter &rewriter);
Match fuseGeluErf(ErfOp erf, mlir::PatternRewriter &rewriter);
Match fuseGeluTanh(TanhOp tanh, mlir::PatternRewriter &rewriter);
Match fuseSilu(SigmoidOp sigmoid, mlir::PatternRewriter &rewriter);
Match fuseCrossEntropy(SoftmaxCrossEntropyOp loss,
                       mlir::PatternRewriter &rewriter);
Match fuseLogSoftmaxNll(NllLossOp loss, mlir::PatternRewriter &rewriter);
Match fuseExpertMatmul(MatMulOp mm, mlir::PatternRewriter &rewriter);

/// The rotary embedding's rewrite patterns (FuseRope.cpp), anchored at the
/// chain's add and at a partial rotary's concat; they build otc.rope.
void populateRopeFusion(mlir::RewritePatternSet &patterns);

/// A bias added across a layout round trip (transpose, reshape, add,
/// reshape back, transpose back) added in the original layout instead
/// (FuseBiasTranspose.cpp), anchored at the transpose back.
void populateBiasTransposeFusion(mlir::RewritePatternSet &patterns);

/// The fusions of otc-fuse-patterns as rewrite patterns, one per anchor op,
/// each naming the fused ops it builds; a near miss is its match failure.
void populateFusionPatterns(mlir::RewritePatternSet &patterns);
/// Attention whose q, k and v are only transposed from [B, T, H, D] and
/// whose output is only transposed back reads them untransposed (layout
/// "bthd"); applied once every chain of a function is fused.
void populateHeadTransposePatterns(mlir::RewritePatternSet &patterns);
/// Attention whose q or k is multiplied by a constant, through reshapes and
/// transposes nothing else reads, scales its scores by it instead (changed
/// in place); applied before the layout patterns.
void populateScoreScalePatterns(mlir::RewritePatternSet &patterns);

/// Applies `patterns` once at each op of `ops` (collected beforehand, in
/// order; an op created meanwhile is not visited, one erased meanwhile is
/// skipped), with every change made through one PatternRewriter whose
/// listener is `listener`. An op that is unread when reached (the input
/// held it dead) is erased then, with what it alone read, instead.
void applyInOrder(llvm::ArrayRef<mlir::Operation *> ops,
                  const mlir::FrozenRewritePatternSet &patterns,
                  mlir::RewriterBase::Listener &listener);

} // namespace otc::fuse

#endif // OTC_PASSES_FUSEPATTERNS_H
