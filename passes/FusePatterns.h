//===- FusePatterns.h - matching helpers of otc-fuse-patterns ----*- C++ -*-===//
//
// Private to passes/: what the recognizers of otc-fuse-patterns share. A
// recognizer starts from an anchor op (a softmax, a sqrt, an erf...), walks
// the exported chain around it and either returns the fused op it built or
// the reason the chain is almost, but not quite, the pattern (reported as a
// remark so a user can see why a model did not get the fused path).
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PASSES_FUSEPATTERNS_H
#define OTC_PASSES_FUSEPATTERNS_H

#include "ir/OtcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
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

/// The static shape of a tensor value.
llvm::ArrayRef<int64_t> shapeOf(mlir::Value v);

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
/// Forgets the masks fuseAttention classified (otc-fuse-patterns calls it
/// before and after its run: the cache holds for one run's IR).
void clearMaskCache();
/// Forgets the constants' values evaluateAt decoded (clearMaskCache calls
/// it).
void clearConstantValues();

/// Recognizers. Each may rewrite around its anchor and leaves dead ops for
/// the pass to erase.
Match fuseAttention(SoftmaxOp softmax, mlir::OpBuilder &b);
Match fuseNorm(SqrtOp sqrt, mlir::OpBuilder &b);
Match fuseGeluErf(ErfOp erf, mlir::OpBuilder &b);
Match fuseGeluTanh(TanhOp tanh, mlir::OpBuilder &b);
Match fuseSilu(SigmoidOp sigmoid, mlir::OpBuilder &b);
Match fuseCrossEntropy(SoftmaxCrossEntropyOp loss, mlir::OpBuilder &b);
Match fuseLogSoftmaxNll(NllLossOp loss, mlir::OpBuilder &b);
Match fuseExpertMatmul(MatMulOp mm, mlir::OpBuilder &b);
/// The rotary embedding's rewrite pattern (FuseRope.cpp), anchored at the
/// chain's add; it builds otc.rope.
void populateRopeFusion(mlir::RewritePatternSet &patterns);

} // namespace otc::fuse

#endif // OTC_PASSES_FUSEPATTERNS_H
