//===- CudaLaunchesTest.cpp - the cuda target's machine model ------------===//
//
// targets/cuda/Launches.h: the launch models the cuda target attaches to
// the ops (every library call and otck.kernel has one), the device's own
// figures in them (a GPU with half an H100's SMs cuts a column reduction
// into half the chunks; one with an eighth of its L1 reads a norm's rows
// from memory again), and which attention calls cuDNN runs. Expected
// values are worked by hand from runtime/cuda/'s launch sites, not read
// from the code under test.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "perf/DeviceModel.h"
#include "targets/cuda/Launches.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace otc;

namespace {

// Every op of the otc dialect that calls the kernel library, and
// otck.kernel, has the cuda target's launch model once the dialects load
// (TargetEntry::attachInterfaces): a new library op without one would be
// priced by nothing on a GPU.
TEST(CudaLaunchesTest, EveryLibraryCallHasAModel) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<OtcDialect, otck::OtckDialect, mlir::func::FuncDialect>();
  int calls = 0;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (!name.hasInterface<LibraryCallOpInterface>())
      continue;
    ++calls;
    EXPECT_TRUE(name.hasInterface<GridLaunchOpInterface>())
        << name.getStringRef().str() << " has no cuda launch model";
  }
  // layer_norm(_grad), rms_norm(_grad), rope, cross_entropy(_grad,
  // _with_grad), linear_cross_entropy_with_grad, gather_grad,
  // expert_matmul(_wgrad), column_sum, attention(_grad).
  EXPECT_EQ(calls, 15);
  auto kernel = mlir::RegisteredOperationName::lookup(
      otck::KernelOp::getOperationName(), &ctx);
  ASSERT_TRUE(kernel);
  EXPECT_TRUE(kernel->hasInterface<GridLaunchOpInterface>());
}

/// The launches of the single library call in `text` on `device`.
llvm::SmallVector<KernelLaunch> launchesOn(mlir::MLIRContext &ctx,
                                           const char *text,
                                           const DeviceModel &device) {
  ctx.loadDialect<OtcDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  llvm::SmallVector<KernelLaunch> launches;
  EXPECT_TRUE(module);
  if (!module)
    return launches;
  module->walk([&](LibraryCallOpInterface call) {
    llvm::cast<GridLaunchOpInterface>(call.getOperation())
        .getGridLaunches(device, launches);
  });
  return launches;
}

// A column sum of 8192 x 768 bf16 rows: 12 tiles of 64 columns. On an
// H100 (132 SMs) the grid aims at 2 x 132 x 8 = 2112 blocks, 176 chunks a
// tile: chunks of ceil(8192 / 176) = 47 rows, 175 of them, 2100 blocks.
// With 66 SMs it aims at 1056, 88 a tile: chunks of ceil(8192 / 88) = 94
// rows, ceil(8192 / 94) = 88 of them, 1056 blocks; stage 2 adds 88 chunks
// instead of 175 (each of the 8 groups 11 instead of 22: 11 / 4 + 11 % 4 +
// 1 = 6 steps instead of 22 / 4 + 22 % 4 + 1 = 8).
TEST(CudaLaunchesTest, ColumnReductionFollowsTheSms) {
  const char *text = R"mlir(
func.func @f(%x: tensor<8192x768xbf16>) -> tensor<768xf32> {
  %r = otc.column_sum %x : (tensor<8192x768xbf16>) -> tensor<768xf32>
  return %r : tensor<768xf32>
}
)mlir";
  const DeviceModel *h100 = lookupDevice("h100");
  ASSERT_TRUE(h100);
  mlir::MLIRContext ctx;
  llvm::SmallVector<KernelLaunch> full = launchesOn(ctx, text, *h100);
  ASSERT_EQ(full.size(), 2u);
  EXPECT_EQ(full[0].blocks, 2100);
  EXPECT_EQ(full[1].steps, 8);
  DeviceModel half = *h100;
  half.sms = 66;
  llvm::SmallVector<KernelLaunch> fewer = launchesOn(ctx, text, half);
  ASSERT_EQ(fewer.size(), 2u);
  EXPECT_EQ(fewer[0].blocks, 1056);
  EXPECT_EQ(fewer[1].steps, 6);
}

// Ropes over [2, 16, 8, 64] bf16 (256 rows), as rope.cu threads them: the
// whole row rotating, 32 pairs a row in packets of 8 pairs (4 threads a
// row, 1024 threads, 4 blocks of 256); GPT-NeoX's partial 16 of 64, one
// thread for the 8 pairs and 6 for the 48 copied features (7 a row, 1792,
// 7 blocks); 12 of 64 (half of 12 is no packet: a thread per pair and per
// copied feature, 6 + 52 = 58 a row, 14848, 58 blocks), interleaved alike.
TEST(CudaLaunchesTest, RopeThreadsFollowTheRotaryWidth) {
  auto blocksOf = [](int64_t rot, const char *attrs) {
    std::string text =
        "func.func @f(%x: tensor<2x16x8x64xbf16>, %c: tensor<1x16x1x" +
        std::to_string(rot) +
        "xf32>) -> tensor<2x16x8x64xbf16> {\n"
        "  %y = otc.rope %x, %c, %c " +
        attrs +
        " : (tensor<2x16x8x64xbf16>, "
        "tensor<1x16x1x" +
        std::to_string(rot) + "xf32>, tensor<1x16x1x" + std::to_string(rot) +
        "xf32>) -> tensor<2x16x8x64xbf16>\n"
        "  return %y : tensor<2x16x8x64xbf16>\n}\n";
    mlir::MLIRContext ctx;
    llvm::SmallVector<KernelLaunch> l =
        launchesOn(ctx, text.c_str(), *lookupDevice("h100"));
    return l.size() == 1 ? l[0].blocks : -1;
  };
  EXPECT_EQ(blocksOf(64, ""), 4);
  EXPECT_EQ(blocksOf(16, ""), 7);
  EXPECT_EQ(blocksOf(12, ""), 58);
  EXPECT_EQ(blocksOf(12, "{interleaved}"), 58);
}

// A layer norm over rows of 4096 bf16 (8 KB: a block per row, past the
// warp rows' 2048 columns) sweeps each row three times, 4096 / (256 x 8) =
// 2 packets a thread a sweep. An H100's 256 KB of L1 over its 8 resident
// row blocks keeps 32 KB a row: the later sweeps hit L1 (2 steps from
// memory, 4 from L1). With 32 KB of L1 (4 KB a row) they read memory
// again: 6 steps from memory, and three times the row's bytes.
TEST(CudaLaunchesTest, RowKernelsFollowTheL1) {
  const char *text = R"mlir(
func.func @f(%x: tensor<64x4096xbf16>, %g: tensor<4096xbf16>, %b: tensor<4096xbf16>) -> tensor<64x4096xbf16> {
  %y, %m, %r = otc.layer_norm %x gamma %g beta %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<64x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>) -> (tensor<64x4096xbf16>, tensor<64xf32>, tensor<64xf32>)
  return %y : tensor<64x4096xbf16>
}
)mlir";
  const DeviceModel *h100 = lookupDevice("h100");
  ASSERT_TRUE(h100);
  mlir::MLIRContext ctx;
  llvm::SmallVector<KernelLaunch> big = launchesOn(ctx, text, *h100);
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].blocks, 64);
  EXPECT_EQ(big[0].steps, 2);
  EXPECT_EQ(big[0].cachedSteps, 4);
  DeviceModel small = *h100;
  small.l1PerSm = 32 << 10;
  llvm::SmallVector<KernelLaunch> again = launchesOn(ctx, text, small);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].steps, 6);
  EXPECT_EQ(again[0].cachedSteps, 0);
  EXPECT_NEAR(again[0].bytes - big[0].bytes, 2.0 * 64 * 8192, 1e-6);
}

// Where a cuda attention call with a mask runs, and the mask it writes out
// for cuDNN: one broadcast over the queries (a key padding) is written out
// as [b|1, h, t, s] with rows padded to 8 elements (2 x 4 x 70 x 72 =
// 40320; 1 x 4 x 64 x 64 = 16384; 2 x 4 x 64 x 64 = 32768); one read as it
// is must have rows of a multiple of 8 elements (rows of 70 are not
// 16-byte aligned: the fallback kernels run it; rows of 64 are). Soft-capped
// scores and a mask with a gradient run on the fallback kernels whatever
// the mask (the runtime's cuDNN graphs compute neither): nothing written;
// the forward of a mask with a gradient is a plain masked attention (cuDNN,
// rows of 64). A key padding (key_padding) goes to cuDNN as lengths:
// nothing written, even with rows of 70, and under a sliding window too
// (the runtime sets the rows that see no key after cuDNN).
TEST(CudaLaunchesTest, AttentionMasksOnCudnn) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<OtcDialect, mlir::func::FuncDialect>();
  const char *text = R"mlir(
func.func @f(%q70: tensor<2x4x70x64xbf16>, %q70b1: tensor<1x4x70x64xbf16>,
             %q64: tensor<2x4x64x64xbf16>, %q64b1: tensor<1x4x64x64xbf16>,
             %pad70: tensor<2x1x1x70xbf16>, %full70: tensor<1x1x70x70xbf16>,
             %full64: tensor<1x1x64x64xbf16>, %heads64: tensor<1x4x1x64xbf16>,
             %pad64: tensor<2x1x1x64xbf16>) {
  %a:2 = otc.attention %q70, %q70, %q70 mask %pad70 {scale = 0.125 : f64} : (tensor<2x4x70x64xbf16>, tensor<2x4x70x64xbf16>, tensor<2x4x70x64xbf16>, tensor<2x1x1x70xbf16>) -> (tensor<2x4x70x64xbf16>, tensor<2x4x70xf32>)
  %b:2 = otc.attention %q70b1, %q70b1, %q70b1 mask %full70 {scale = 0.125 : f64} : (tensor<1x4x70x64xbf16>, tensor<1x4x70x64xbf16>, tensor<1x4x70x64xbf16>, tensor<1x1x70x70xbf16>) -> (tensor<1x4x70x64xbf16>, tensor<1x4x70xf32>)
  %c:2 = otc.attention %q64b1, %q64b1, %q64b1 mask %full64 {scale = 0.125 : f64} : (tensor<1x4x64x64xbf16>, tensor<1x4x64x64xbf16>, tensor<1x4x64x64xbf16>, tensor<1x1x64x64xbf16>) -> (tensor<1x4x64x64xbf16>, tensor<1x4x64xf32>)
  %d:2 = otc.attention %q64, %q64, %q64 mask %heads64 {scale = 0.125 : f64} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<1x4x1x64xbf16>) -> (tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>)
  %e:2 = otc.attention %q64, %q64, %q64 mask %pad64 {scale = 0.125 : f64} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x1x1x64xbf16>) -> (tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>)
  %f:2 = otc.attention %q64, %q64, %q64 mask %pad64 {scale = 0.125 : f64, softcap = 50.0 : f64} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x1x1x64xbf16>) -> (tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>)
  %g:2 = otc.attention %q64b1, %q64b1, %q64b1 mask %full64 {mask_grad, scale = 0.125 : f64} : (tensor<1x4x64x64xbf16>, tensor<1x4x64x64xbf16>, tensor<1x4x64x64xbf16>, tensor<1x1x64x64xbf16>) -> (tensor<1x4x64x64xbf16>, tensor<1x4x64xf32>)
  %h:2 = otc.attention %q70, %q70, %q70 mask %pad70 {causal, key_padding, scale = 0.125 : f64} : (tensor<2x4x70x64xbf16>, tensor<2x4x70x64xbf16>, tensor<2x4x70x64xbf16>, tensor<2x1x1x70xbf16>) -> (tensor<2x4x70x64xbf16>, tensor<2x4x70xf32>)
  %i:2 = otc.attention %q64, %q64, %q64 mask %pad64 {causal, key_padding, scale = 0.125 : f64, window = 8 : i64} : (tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x4x64x64xbf16>, tensor<2x1x1x64xbf16>) -> (tensor<2x4x64x64xbf16>, tensor<2x4x64xf32>)
  return
}
)mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  std::vector<mlir::Operation *> ops;
  module->walk([&](AttentionOp op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 9u);
  const bool runs[] = {true, false, true, true, true, false, true, true, true};
  const int64_t written[] = {40320, 0, 0, 16384, 32768, 0, 0, 0, 0};
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(cuda::attentionRunsOnCudnn(ops[i]), runs[i]) << "call " << i;
    EXPECT_EQ(cuda::attentionMaskWrittenOut(ops[i]), written[i])
        << "call " << i;
    // What the step-time model reads: the same rule through the model the
    // target attached, the mask's BF16 bytes staged.
    auto model = llvm::dyn_cast<GridLaunchOpInterface>(ops[i]);
    ASSERT_TRUE(model) << "call " << i;
    EXPECT_EQ(model.runsOnVendorLibrary(), runs[i]) << "call " << i;
    EXPECT_EQ(model.getStagedBytes(), 2 * written[i]) << "call " << i;
  }
  // The key paddings (calls 7 and 8, the second under a window) as lengths.
  EXPECT_TRUE(cuda::attentionKeyPaddingAsLengths(ops[7]));
  EXPECT_TRUE(cuda::attentionKeyPaddingAsLengths(ops[8]));
  EXPECT_FALSE(cuda::attentionKeyPaddingAsLengths(ops[4]));
}

} // namespace
