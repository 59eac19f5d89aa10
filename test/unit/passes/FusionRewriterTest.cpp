//===- FusionRewriterTest.cpp - fusions change IR by their rewriter -------===//
//
// Runs the fusions of otc-fuse-patterns (and the attention layout pattern)
// with fuse::applyInOrder over one function per fusion, a listener
// recording what the PatternRewriter reports, and checks the rule that
// every IR change goes through it: each op present afterwards was there
// before or was reported inserted, each op gone was reported erased, each
// op whose operands changed was reported modified; nothing unread is left;
// and a chain that only nearly matches (attention whose V does not share
// D, found after its mask is read) reports no change at all.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "passes/FusePatterns.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace mlir;

/// One function per fusion (and a near miss), as the exporters write them.
constexpr const char *kModule = R"mlir(
func.func @gelu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = otc.constant dense<1.41421354> : tensor<f32>
  %one = otc.constant dense<1.000000e+00> : tensor<f32>
  %half = otc.constant dense<5.000000e-01> : tensor<f32>
  %0 = otc.div %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = otc.erf %0 : tensor<8xf32>
  %2 = otc.add %1, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %3 = otc.mul %x, %2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %4 = otc.mul %3, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4 : tensor<8xf32>
}
func.func @silu(%x: tensor<8xf32>) -> tensor<8xf32> {
  %dead = otc.exp %x : tensor<8xf32>
  %0 = otc.sigmoid %x : tensor<8xf32>
  %1 = otc.mul %x, %0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
func.func @layer_norm(%x: tensor<3x4xf32>, %g: tensor<1x4xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %inv = otc.constant dense<2.500000e-01> : tensor<f32>
  %eps = otc.constant dense<1.0e-5> : tensor<f32>
  %0 = otc.reduce_sum %x, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %1 = otc.mul %0, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %2 = otc.sub %x, %1 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %3 = otc.mul %2, %2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %4 = otc.reduce_sum %3, [1] {keep_dims} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %5 = otc.mul %4, %inv : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %6 = otc.add %5, %eps : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
  %7 = otc.sqrt %6 : tensor<3x1xf32>
  %8 = otc.reciprocal %7 : tensor<3x1xf32>
  %9 = otc.mul %2, %8 : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %10 = otc.mul %g, %9 : (tensor<1x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %11 = otc.add %10, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  return %11 : tensor<3x4xf32>
}
func.func @causal_attention(%q: tensor<1x2x4x2xf32>, %kr: tensor<1x4x2x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %buf = otc.constant dense<[[[[1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]]]]> : tensor<1x1x5x5xf32>
  %zero = otc.constant dense<0.0> : tensor<f32>
  %ninf = otc.constant dense<0xFF800000> : tensor<f32>
  %sqrtd = otc.constant dense<1.41421354> : tensor<f32>
  %kt = otc.transpose %kr, [0, 2, 3, 1] : (tensor<1x4x2x2xf32>) -> tensor<1x2x2x4xf32>
  %s = otc.matmul %q, %kt : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = otc.div %s, %sqrtd : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %vis = otc.slice %buf, [0, 0, 0, 0], [1, 1, 1, 1] : (tensor<1x1x5x5xf32>) -> tensor<1x1x4x4xf32>
  %hide = otc.compare "eq", %vis, %zero : (tensor<1x1x4x4xf32>, tensor<f32>) -> tensor<1x1x4x4xi1>
  %m = otc.select %hide, %ninf, %sc : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}
func.func @masked_attention(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %hide: tensor<1x1x4x4xi1>) -> tensor<1x2x4x2xf32> {
  %ninf = otc.constant dense<0xFF800000> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %hide, %ninf, %s : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}
func.func @near_miss(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x3xf32>, %hide: tensor<1x1x4x4xi1>) -> tensor<1x2x4x3xf32> {
  %ninf = otc.constant dense<0xFF800000> : tensor<f32>
  %s = otc.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %m = otc.select %hide, %ninf, %s : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = otc.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = otc.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x4x3xf32>
  return %o : tensor<1x2x4x3xf32>
}
func.func @heads_second(%qs: tensor<1x4x2x2xf32>, %ks: tensor<1x4x2x2xf32>, %vs: tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> {
  %q = otc.transpose %qs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %k = otc.transpose %ks, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %v = otc.transpose %vs, [0, 2, 1, 3] : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
  %o, %lse = otc.attention %q, %k, %v {causal, scale = 0.5 : f64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
  %ob = otc.transpose %o, [0, 2, 1, 3] : (tensor<1x2x4x2xf32>) -> tensor<1x4x2x2xf32>
  return %ob : tensor<1x4x2x2xf32>
}
func.func @cross_entropy(%z: tensor<2x3x5xf32>, %y: tensor<2x3xi64>, %z2: tensor<6x5xf32>, %y2: tensor<6xi64>) -> (tensor<f32>, tensor<f32>) {
  %0 = otc.reshape %z : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
  %1 = otc.reshape %y : (tensor<2x3xi64>) -> tensor<6xi64>
  %2 = otc.softmax_cross_entropy %0, %1 {ignore_index = -1 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  %3 = otc.log_softmax %z2 {axis = 1 : i64} : tensor<6x5xf32>
  %4 = otc.nll_loss %3, %y2 {reduction = "sum"} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
  return %2, %4 : tensor<f32>, tensor<f32>
}
func.func @experts(%x: tensor<2x3x1x4xf32>, %ids: tensor<2x3xi32>, %w: tensor<3x4x5xf32>) -> tensor<2x3x1x5xf32> {
  %g = otc.gather %w, %ids {axis = 0 : i64} : (tensor<3x4x5xf32>, tensor<2x3xi32>) -> tensor<2x3x4x5xf32>
  %p = otc.matmul %x, %g : (tensor<2x3x1x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x1x5xf32>
  return %p : tensor<2x3x1x5xf32>
}
)mlir";

/// What the rewriter reported.
struct Recorder : RewriterBase::Listener {
  llvm::DenseSet<Operation *> inserted, modified, erased;
  int failures = 0;

  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    inserted.insert(op);
  }
  void notifyOperationModified(Operation *op) override { modified.insert(op); }
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
  void notifyMatchFailure(Location, function_ref<void(Diagnostic &)>) override {
    ++failures;
  }
};

/// Each op of `f` with its operands.
llvm::DenseMap<Operation *, SmallVector<Value>> snapshot(func::FuncOp f) {
  llvm::DenseMap<Operation *, SmallVector<Value>> ops;
  f.walk([&](Operation *op) {
    if (op != f)
      ops[op] = SmallVector<Value>(op->getOperands());
  });
  return ops;
}

/// Applies the fusions, then the layout pattern, to `f` as the pass does.
void fuse(func::FuncOp f, Recorder &recorder) {
  RewritePatternSet fusions(f.getContext()), layouts(f.getContext());
  otc::fuse::populateFusionPatterns(fusions);
  otc::fuse::populateHeadTransposePatterns(layouts);
  FrozenRewritePatternSet frozenFusions(std::move(fusions)),
      frozenLayouts(std::move(layouts));
  otc::fuse::clearMaskCache();
  SmallVector<Operation *> ops;
  f.walk([&](Operation *op) { ops.push_back(op); });
  otc::fuse::applyInOrder(ops, frozenFusions, recorder);
  ops.clear();
  for (otc::AttentionOp att : f.getOps<otc::AttentionOp>())
    ops.push_back(att);
  otc::fuse::applyInOrder(ops, frozenLayouts, recorder);
  otc::fuse::clearMaskCache();
}

/// How many ops named `name` `f` holds.
int count(func::FuncOp f, StringRef name) {
  int n = 0;
  f.walk([&](Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

TEST(FusionRewriter, EveryChangeGoesThroughTheRewriter) {
  MLIRContext ctx;
  ctx.loadDialect<otc::OtcDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);
  // The fused op each function ends with ("" for the near miss).
  const std::pair<const char *, const char *> expected[] = {
      {"gelu", "otc.gelu"},
      {"silu", "otc.silu"},
      {"layer_norm", "otc.layer_norm"},
      {"causal_attention", "otc.attention"},
      {"masked_attention", "otc.attention"},
      {"near_miss", ""},
      {"heads_second", "otc.attention"},
      {"cross_entropy", "otc.cross_entropy"},
      {"experts", "otc.expert_matmul"},
  };
  for (auto [name, fused] : expected) {
    SCOPED_TRACE(name);
    auto f = module->lookupSymbol<func::FuncOp>(name);
    ASSERT_TRUE(f);
    auto before = snapshot(f);
    std::string text;
    llvm::raw_string_ostream(text) << f;
    Recorder recorder;
    fuse(f, recorder);
    auto after = snapshot(f);
    for (auto &[op, operands] : after) {
      std::string opName = op->getName().getStringRef().str();
      auto it = before.find(op);
      if (it == before.end()) {
        EXPECT_TRUE(recorder.inserted.contains(op))
            << "created outside the rewriter: " << opName;
      } else if (it->second != operands) {
        EXPECT_TRUE(recorder.modified.contains(op) ||
                    recorder.inserted.contains(op))
            << "changed outside the rewriter: " << opName;
      }
      EXPECT_FALSE(otc::fuse::isUnread(op)) << "left unread: " << opName;
    }
    for (auto &entry : before) {
      if (!after.count(entry.first)) {
        EXPECT_TRUE(recorder.erased.contains(entry.first))
            << "erased outside the rewriter";
      }
    }
    if (*fused) {
      EXPECT_GE(count(f, fused), 1);
      continue;
    }
    // A near miss is reported and changes nothing.
    EXPECT_GE(recorder.failures, 1);
    EXPECT_TRUE(recorder.inserted.empty());
    EXPECT_TRUE(recorder.modified.empty());
    EXPECT_TRUE(recorder.erased.empty());
    std::string now;
    llvm::raw_string_ostream(now) << f;
    EXPECT_EQ(text, now);
  }
  // Attention over transposed heads reads them untransposed.
  auto heads = module->lookupSymbol<func::FuncOp>("heads_second");
  EXPECT_EQ(count(heads, "otc.transpose"), 0);
}

} // namespace
