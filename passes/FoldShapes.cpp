//===- FoldShapes.cpp - fold shape computations on constants
//---------------===//
//
// The otc-fold-shapes pass: a greedy fold and canonicalization of the whole
// module. With every dimension bound at import, the shape arithmetic of an
// exported graph reads only constants; the op folders (ir/OtcFolds.cpp) turn
// it into otc.constant ops, constants are deduplicated and dead ops erased.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace otc {
#define GEN_PASS_DEF_FOLDSHAPES
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;

namespace {

struct FoldShapesPass : otc::impl::FoldShapesBase<FoldShapesPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    for (Dialect *dialect : ctx->getLoadedDialects())
      dialect->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : ctx->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, ctx);
    GreedyRewriteConfig config;
    config.useTopDownTraversal = true;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                            config))) {
      getOperation().emitError("otc-fold-shapes did not converge");
      signalPassFailure();
    }
  }
};

} // namespace
