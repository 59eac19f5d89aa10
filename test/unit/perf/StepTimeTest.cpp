//===- StepTimeTest.cpp - predicted step times of small programs ----------===//
//
// Hand-computed predictions (perf/StepTime.h) for planned otck programs
// small enough to price on paper: one GEMM, an elementwise chain, reductions
// over few outputs, a gather's gradient, library calls (a column sum, a
// layer norm's gradient), an attention call, a GEMM's column sums, adjacent
// zero fills, and a step with gradient accumulation; plus the device table's lookups. Each
// expected value is written out from the device figures of
// targets/cuda/Devices.cpp (h100: BF16 GEMMs 790 TFLOP/s with a depth knee of
// 260 and 3.17 us per call, 128 x 128 tiles; 60 TFLOP/s other arithmetic,
// 3.0 TB/s; 132 SMs of 2048 threads, 32 blocks and 128 FP32 lanes; 0.5 us
// per step waiting on memory, 0.02 us per L1 hit; 0.83 us per launch from a
// graph; cpu: 20 GB/s, 10 GFLOP/s, 2 us per launch) and the launches the
// emitter and the kernel library make, not from the code under test.
//
//===----------------------------------------------------------------------===//

#include "perf/StepTime.h"
#include "ir/Config.h"
#include "ir/TargetRegistry.h"
#include "perf/DeviceModel.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace otc;

namespace {

/// Parses `text` and predicts it on `device` with `gradAccum` micro-steps.
class StepTimeTest : public ::testing::Test {
protected:
  StepTime predict(const char *text, llvm::StringRef device,
                   int64_t gradAccum = 1) {
    ctx.loadDialect<OtcDialect, otck::OtckDialect, mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module) << "the test module does not parse";
    const DeviceModel *d = lookupDevice(device);
    EXPECT_TRUE(d);
    // The device and grad-accum come from the module's configuration.
    ConfigParts parts;
    parts.gradAccum = gradAccum;
    for (const TargetEntry &t : registeredTargets())
      if (t.device(device))
        parts.target = t.name;
    parts.device = device.str();
    ConfigAttr config =
        makeConfig(&ctx, parts, [&] { return module->emitError(); });
    EXPECT_TRUE(config);
    setConfig(*module, config);
    mlir::FailureOr<StepTime> t = predictStepTime(*module);
    EXPECT_TRUE(mlir::succeeded(t));
    return *t;
  }

  /// predict of `text` with its first `from` replaced by `to`.
  StepTime predictEdited(std::string text, const std::string &from,
                         const char *to, llvm::StringRef device) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "no '" << from << "' to replace";
    if (at != std::string::npos)
      text.replace(at, from.size(), to);
    return predict(text.c_str(), device);
  }

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Relative tolerance: the expected values are rounded to 6 digits.
void expectNear(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-5 * expected);
}

const char kGemm[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %a = otck.buffer {offset = 0 : i64} : memref<4096x4096xbf16>
  %b = otck.buffer {offset = 33554432 : i64} : memref<4096x4096xbf16>
  %c = otck.buffer {offset = 67108864 : i64} : memref<4096x4096xf32>
  otck.gemm %a, %b, %c : memref<4096x4096xbf16>, memref<4096x4096xbf16>, memref<4096x4096xf32> loc("mm")
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests that a BF16 GEMM of M = N = K = 4096 on an H100 is compute-bound:
// its FP32 result doubles the epilogue's bytes (the knee 2 x 260 steps):
// W = 2 * 4096^3 = 137438953472 FLOPs at 790e12 * 4096 / (4096 + 520) =
// 701.0052e12 FLOP/s take 196.0598 us on a full device; its 1024 tiles,
// split in 5 along K, fill 5120 / (39 x 132) = 0.994561 of the SMs' waves:
// 197.1320 us, plus the fixed 3.17 us per call, against 2 * 32 MiB +
// 64 MiB = 134217728 bytes / 3e12 = 44.739 us of memory; plus 0.83 us of
// launch: 201.1320 us.
TEST_F(StepTimeTest, BF16GemmOnH100) {
  StepTime t = predict(kGemm, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &g = t.launches[0];
  EXPECT_EQ(g.name, "mm (gemm)");
  EXPECT_EQ(g.kind, "gemm");
  EXPECT_EQ(g.flops, 137438953472.0);
  EXPECT_EQ(g.bytes, 134217728.0);
  expectNear(g.seconds, 201.1320e-6);
  expectNear(t.step, 201.1320e-6);
  EXPECT_EQ(g.cost.binding(), Limit::Compute);
}

const char kChain[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %x = otck.buffer {offset = 0 : i64} : memref<1048576xf32>
  %y = otck.buffer {offset = 4194304 : i64} : memref<1048576xf32>
  %z = otck.buffer {offset = 8388608 : i64} : memref<1048576xf32>
  otck.kernel ins(%x, %y : memref<1048576xf32>, memref<1048576xf32>) outs(%z : memref<1048576xf32>) {
  ^bb0(%a: tensor<1048576xf32>, %b: tensor<1048576xf32>):
    %s = otc.add %a, %b : (tensor<1048576xf32>, tensor<1048576xf32>) -> tensor<1048576xf32> loc("first")
    %m = otc.mul %s, %a : (tensor<1048576xf32>, tensor<1048576xf32>) -> tensor<1048576xf32> loc("last")
    otck.yield %m : tensor<1048576xf32>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests that an elementwise chain costs its buffers' bytes only (the
// intermediate stays in registers). Its 1048576 floats move 4 per access:
// 262144 vectors, one per thread of 1024 blocks of 256 (of the 4096 blocks
// launched for 1048576 items, the rest find no work), one wave of 1056
// slots. 3 x 4 MiB = 12582912 bytes / 3e12 = 4.194304 us (one step, 0.5
// us, and 2 * 1048576 FLOPs / 60e12 = 0.035 us, are less), plus 0.83 us:
// 5.024304 us. It is named after its last op's node.
TEST_F(StepTimeTest, ElementwiseChainOnH100) {
  StepTime t = predict(kChain, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &k = t.launches[0];
  EXPECT_EQ(k.name, "last (fused otc.add otc.mul)");
  EXPECT_EQ(k.kind, "elementwise");
  EXPECT_EQ(k.flops, 2097152.0);
  EXPECT_EQ(k.bytes, 12582912.0);
  expectNear(k.seconds, 5.024304e-6);
  EXPECT_EQ(k.cost.binding(), Limit::Bandwidth);
  ASSERT_EQ(k.kernels.size(), 1u);
  EXPECT_EQ(k.kernels[0].first.blocks, 1024);
  EXPECT_EQ(k.kernels[0].first.threads, 256);
  EXPECT_EQ(k.kernels[0].first.steps, 1);
}

const char kPackedSlice[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %x = otck.buffer {offset = 0 : i64} : memref<8192x2304xbf16>
  %y = otck.buffer {offset = 37748736 : i64} : memref<8192x1152xbf16>
  otck.kernel ins(%x : memref<8192x2304xbf16>) outs(%y : memref<8192x1152xbf16>) {
  ^bb0(%a: tensor<8192x2304xbf16>):
    %s = otc.slice %a, [0, 1152], [1, 1] : (tensor<8192x2304xbf16>) -> tensor<8192x1152xbf16> loc("gate")
    otck.yield %s : tensor<8192x1152xbf16>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests that a slice copying 16-byte packets (the second half of a fused
// GeGLU projection's rows, BF16) is priced by the items the emitter
// launches, one packet of 8 elements each: 9437184 / 8 = 1179648 items,
// 4096 blocks of 256 (the most launched), 2 items a thread: 2 steps (9
// when each element was counted as an item). Its bytes, 18874368 read and
// as many written, take 37748736 / 3e12 = 12.582912 us, above the 4 waves
// of 2 steps (4 us): bandwidth, plus 0.83 us: 13.412912 us.
TEST_F(StepTimeTest, PackedSliceOnH100) {
  StepTime t = predict(kPackedSlice, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &k = t.launches[0];
  EXPECT_EQ(k.bytes, 37748736.0);
  ASSERT_EQ(k.kernels.size(), 1u);
  EXPECT_EQ(k.kernels[0].first.blocks, 4096);
  EXPECT_EQ(k.kernels[0].first.steps, 2);
  EXPECT_EQ(k.cost.binding(), Limit::Bandwidth);
  expectNear(k.seconds, 13.412912e-6);
}

// Tests the same chain on the cpu model: 12582912 bytes / 20e9 = 629.1456 us
// (2097152 FLOPs / 10e9 = 209.7 us is less), plus 2 us: 631.1456 us.
TEST_F(StepTimeTest, ElementwiseChainOnCpu) {
  StepTime t = predict(kChain, "cpu");
  ASSERT_EQ(t.launches.size(), 1u);
  expectNear(t.launches[0].seconds, 631.1456e-6);
}

const char kReduction[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %x = otck.buffer {offset = 0 : i64} : memref<8192x768xf32>
  %y = otck.buffer {offset = 25165824 : i64} : memref<768xf32>
  %r = otck.buffer {offset = 25169920 : i64} : memref<8192xf32>
  otck.kernel ins(%x : memref<8192x768xf32>) outs(%y : memref<768xf32>) {
  ^bb0(%a: tensor<8192x768xf32>):
    %s = otc.reduce_sum %a, [0] : (tensor<8192x768xf32>) -> tensor<768xf32> loc("bias")
    otck.yield %s : tensor<768xf32>
  }
  otck.kernel ins(%x : memref<8192x768xf32>) outs(%r : memref<8192xf32>) {
  ^bb0(%a: tensor<8192x768xf32>):
    %s = otc.reduce_sum %a, [1] : (tensor<8192x768xf32>) -> tensor<8192xf32> loc("rows")
    otck.yield %s : tensor<8192xf32>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests reductions, one work item per output, each walking its reduced
// elements in a loop that only loads (waiting once per 4 iterations):
// reading 8192 x 768 floats (25165824 bytes) and writing the sums. Over
// the rows (768 outputs: 3 blocks of 256 threads) each thread waits 8192 /
// 4 = 2048 times: 2048 x 0.5 us = 1024 us (the bytes take 8.39 us; 6291456
// FLOPs on 768 of 16896 lanes 2.31 us), plus 0.83 us: 1024.83 us. Over the
// columns (8192 outputs: 32 blocks), 768 / 4 = 192 waits: 96 us, plus
// 0.83 us: 96.83 us.
TEST_F(StepTimeTest, ReductionsOnH100) {
  StepTime t = predict(kReduction, "h100");
  ASSERT_EQ(t.launches.size(), 2u);
  EXPECT_EQ(t.launches[0].name, "bias (otc.reduce_sum)");
  EXPECT_EQ(t.launches[0].kind, "reduction");
  EXPECT_EQ(t.launches[0].flops, 6291456.0);
  EXPECT_EQ(t.launches[0].bytes, 25168896.0);
  expectNear(t.launches[0].seconds, 1024.83e-6);
  EXPECT_EQ(t.launches[0].cost.binding(), Limit::Latency);
  expectNear(t.launches[1].seconds, 96.83e-6);
}

const char kGatherGrad[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %g = otck.buffer {offset = 0 : i64} : memref<8192x768xf32>
  %i = otck.buffer {offset = 25165824 : i64} : memref<8192xi64>
  %t = otck.buffer {offset = 25231360 : i64} : memref<50304x768xf32>
  otck.kernel ins(%g, %i : memref<8192x768xf32>, memref<8192xi64>) outs(%t : memref<50304x768xf32>) {
  ^bb0(%a: tensor<8192x768xf32>, %b: tensor<8192xi64>):
    %r = otc.gather_grad %a, %b {axis = 0 : i64} : (tensor<8192x768xf32>, tensor<8192xi64>) -> tensor<50304x768xf32> loc("wte")
    otck.yield %r : tensor<50304x768xf32>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests a gather's gradient as the library runs it (gather_grad.cu), four
// launches: clearing the 50304 x 768 f32 table (154533888 bytes, 37728
// blocks of 256 stores: 36 waves of 1056 and one of 768, priced by their
// bytes: 51.511296 us), the sort of the 8192 positions (32 blocks, 4 passes
// of 16 bytes a position, 524288 bytes: 4 x 0.5 us = 2 us), the sums of the
// 256 pieces of 32 sorted positions (192 threads = 768 / 4 floats per
// packet; 32 rows 4 at a time and a store: 9 x 0.5 = 4.5 us, against the
// gradient's 25165824 bytes, at most 8192 rows of 3072 bytes written,
// 25165824, and 256 partial rows of 3072 bytes, 786432: 51118080 bytes,
// 17.03936 us) and the runs across pieces (256 blocks, 2 x 0.5 = 1 us,
// 1572864 bytes: 0.524288 us). Bytes: 154533888 + 524288 + 51118080 +
// 1572864 = 207749120. Time: 51.511296 + 2 + 17.03936 + 1 + 4 x 0.83 =
// 74.870656 us.
TEST_F(StepTimeTest, GatherGradOnH100) {
  StepTime t = predict(kGatherGrad, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &l = t.launches[0];
  EXPECT_EQ(l.kind, "gather");
  EXPECT_EQ(l.bytes, 207749120.0);
  ASSERT_EQ(l.kernels.size(), 4u);
  EXPECT_EQ(l.kernels[0].first.blocks, 37728);
  EXPECT_EQ(l.kernels[2].first.blocks, 256);
  EXPECT_EQ(l.kernels[2].first.threads, 192);
  EXPECT_EQ(l.kernels[2].first.steps, 9);
  expectNear(l.seconds, 74.870656e-6);
  EXPECT_EQ(l.cost.binding(), Limit::Bandwidth);
}

const char kGatherGradAcc[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %g = otck.buffer {offset = 0 : i64} : memref<8192x768xbf16>
  %i = otck.buffer {offset = 12582912 : i64} : memref<8192xi64>
  %t = otck.buffer {offset = 12648448 : i64} : memref<50304x768xbf16>
  otck.kernel ins(%g, %i, %t : memref<8192x768xbf16>, memref<8192xi64>, memref<50304x768xbf16>) outs(%t : memref<50304x768xbf16>) {
  ^bb0(%a: tensor<8192x768xbf16>, %b: tensor<8192xi64>, %c: tensor<50304x768xbf16>):
    %r = otc.gather_grad %a, %b acc %c {axis = 0 : i64} : (tensor<8192x768xbf16>, tensor<8192xi64>, tensor<50304x768xbf16>) -> tensor<50304x768xbf16> loc("wte")
    otck.yield %r : tensor<50304x768xbf16>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// The same gradient of BF16 storage added into its slot: no clearing, three
// launches. The sort as above (2 us); the sums with 96 threads (768 / 8
// bfloat16 per packet), the same 9 x 0.5 = 4.5 us of steps, against the
// gradient's 12582912 bytes, at most 8192 rows of 1536 bytes read and
// written, 25165824, and the 786432 bytes of partial rows (float):
// 38535168 bytes, 12.845056 us; the crossing runs as above (1 us). Bytes:
// 524288 + 38535168 + 1572864 = 40632320. Time: 2 + 12.845056 + 1 + 3 x
// 0.83 = 18.335056 us.
TEST_F(StepTimeTest, GatherGradIntoSlotOnH100) {
  StepTime t = predict(kGatherGradAcc, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &l = t.launches[0];
  EXPECT_EQ(l.bytes, 40632320.0);
  ASSERT_EQ(l.kernels.size(), 3u);
  EXPECT_EQ(l.kernels[0].first.what, "sort positions by row");
  EXPECT_EQ(l.kernels[1].first.threads, 96);
  expectNear(l.seconds, 18.335056e-6);
  EXPECT_EQ(l.cost.binding(), Limit::Bandwidth);
}

const char kLibrary[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %x = otck.buffer {offset = 0 : i64} : memref<8192x768xbf16>
  %s = otck.buffer {offset = 12582912 : i64} : memref<768xf32>
  %dy = otck.buffer {offset = 12585984 : i64} : memref<8192x768xbf16>
  %gm = otck.buffer {offset = 25168896 : i64} : memref<768xbf16>
  %mu = otck.buffer {offset = 25170432 : i64} : memref<8192xf32>
  %rs = otck.buffer {offset = 25203200 : i64} : memref<8192xf32>
  %dx = otck.buffer {offset = 25235968 : i64} : memref<8192x768xbf16>
  %dg = otck.buffer {offset = 37818880 : i64} : memref<768xbf16>
  %db = otck.buffer {offset = 37820416 : i64} : memref<768xbf16>
  otck.kernel ins(%x : memref<8192x768xbf16>) outs(%s : memref<768xf32>) {
  ^bb0(%a: tensor<8192x768xbf16>):
    %r = otc.column_sum %a : (tensor<8192x768xbf16>) -> tensor<768xf32> loc("bias")
    otck.yield %r : tensor<768xf32>
  }
  otck.kernel ins(%dy, %x, %gm, %mu, %rs : memref<8192x768xbf16>, memref<8192x768xbf16>, memref<768xbf16>, memref<8192xf32>, memref<8192xf32>) outs(%dx, %dg, %db : memref<8192x768xbf16>, memref<768xbf16>, memref<768xbf16>) {
  ^bb0(%a: tensor<8192x768xbf16>, %b: tensor<8192x768xbf16>, %c: tensor<768xbf16>, %d: tensor<8192xf32>, %e: tensor<8192xf32>):
    %r:3 = otc.layer_norm_grad %a, %b gamma %c, %d, %e {axis = 1 : i64} : (tensor<8192x768xbf16>, tensor<8192x768xbf16>, tensor<768xbf16>, tensor<8192xf32>, tensor<8192xf32>) -> (tensor<8192x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) loc("ln")
    otck.yield %r#0, %r#1, %r#2 : tensor<8192x768xbf16>, tensor<768xbf16>, tensor<768xbf16>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests library calls priced by the launches runtime/cuda/ makes for them.
// The column sum of 8192 x 768 bf16 (otcrt_column_plan): 12 tiles of 64
// columns; 2112 / 12 = 176 chunks aimed at, so chunks of ceil(8192 / 176) =
// 47 rows, 175 of them. Stage 1: 12 x 175 = 2100 blocks of 8 x 32 = 256
// threads (8 per SM: waves of 1056 and 1044 blocks), each thread 2 rows
// (one group of loads) and a store: 3 steps, 1.5 us a wave; its bytes, the
// input's 12582912 and the partials' 175 x 768 x 4 = 537600, 13120512,
// bound a wave by its share: 13120512 / 3e12 = 4.373504 us over both.
// Stage 2: 24 blocks of 32 x 8 threads, each adding 22 of the 175 chunks 4
// at a time (5 groups, 2 left, a store: 8 steps, 4 us; 540672 bytes, 0.18
// us). 4.373504 + 4 + 2 x 0.83 = 10.033504 us. The layer norm's gradient:
// the parameter gradients cut the same way for two results (175 x 768 x 2
// partials, 1075200 bytes), stage 1 reading dy and x (25165824 bytes) and
// the statistics (65536): 26306560 bytes in 2100 blocks, 1 load group (2
// rows as bf16 packets, 2 at a time) and a store, so bound by bytes:
// 8.768853 us; stage 2 in 48 blocks, 22 chunks 2 at a time and a store: 12
// steps, 6 us (1078272 bytes); then dx as before, 12.605269 us, bound by its
// 37815808 bytes. 8.768853 + 6 + 12.605269 + 3 x 0.83 = 29.864122 us.
TEST_F(StepTimeTest, LibraryCallsOnH100) {
  StepTime t = predict(kLibrary, "h100");
  ASSERT_EQ(t.launches.size(), 2u);
  const LaunchTime &sum = t.launches[0];
  EXPECT_EQ(sum.name, "bias (otc.column_sum)");
  ASSERT_EQ(sum.kernels.size(), 2u);
  EXPECT_EQ(sum.kernels[0].first.blocks, 2100);
  EXPECT_EQ(sum.kernels[0].first.threads, 256);
  EXPECT_EQ(sum.kernels[0].first.steps, 3);
  EXPECT_EQ(sum.kernels[0].second.waves, 2);
  EXPECT_EQ(sum.kernels[1].first.blocks, 24);
  EXPECT_EQ(sum.kernels[1].first.steps, 8);
  expectNear(sum.seconds, 10.033504e-6);
  const LaunchTime &ln = t.launches[1];
  EXPECT_EQ(ln.kind, "layer_norm");
  EXPECT_EQ(ln.launches, 3);
  ASSERT_EQ(ln.kernels.size(), 3u);
  EXPECT_EQ(ln.kernels[0].first.blocks, 2100);
  EXPECT_EQ(ln.kernels[0].first.steps, 2);
  EXPECT_EQ(ln.kernels[0].second.binding(), Limit::Bandwidth);
  EXPECT_EQ(ln.kernels[1].first.blocks, 48);
  EXPECT_EQ(ln.kernels[1].first.steps, 12);
  // dx: a warp per row of 768 (layer_norm.cu), 8 rows a block of 256
  // threads: 8192 / 8 = 1024 blocks, one wave of the 132 x 8 an H100 holds.
  EXPECT_EQ(ln.kernels[2].first.blocks, 1024);
  EXPECT_EQ(ln.kernels[2].first.threads, 256);
  EXPECT_EQ(ln.kernels[2].second.waves, 1);
  // A lane's sweep: 768 / (32 lanes x 8 bf16) = 3 packets; the second
  // sweep reads the 1536-byte row from L1 (at most 32 KiB / 8 rows).
  EXPECT_EQ(ln.kernels[2].first.steps, 3);
  EXPECT_EQ(ln.kernels[2].second.binding(), Limit::Bandwidth);
  EXPECT_EQ(ln.bytes, 26306560.0 + 1078272.0 + 37815808.0);
  expectNear(ln.seconds, 29.864122e-6);
  EXPECT_EQ(t.launchesPerStep, 5);
}

const char kAttention[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %q = otck.buffer {offset = 0 : i64} : memref<8x12x1024x64xbf16>
  %k = otck.buffer {offset = 12582912 : i64} : memref<8x12x1024x64xbf16>
  %v = otck.buffer {offset = 25165824 : i64} : memref<8x12x1024x64xbf16>
  %o = otck.buffer {offset = 37748736 : i64} : memref<8x12x1024x64xbf16>
  %l = otck.buffer {offset = 50331648 : i64} : memref<8x12x1024xf32>
  otck.kernel ins(%q, %k, %v : memref<8x12x1024x64xbf16>, memref<8x12x1024x64xbf16>, memref<8x12x1024x64xbf16>) outs(%o, %l : memref<8x12x1024x64xbf16>, memref<8x12x1024xf32>) {
  ^bb0(%a: tensor<8x12x1024x64xbf16>, %b: tensor<8x12x1024x64xbf16>, %c: tensor<8x12x1024x64xbf16>):
    %out, %lse = otc.attention %a, %b, %c {causal, scale = 0.125 : f64} : (tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>, tensor<8x12x1024x64xbf16>) -> (tensor<8x12x1024x64xbf16>, tensor<8x12x1024xf32>) loc("attn")
    otck.yield %out, %lse : tensor<8x12x1024x64xbf16>, tensor<8x12x1024xf32>
  }
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests that a BF16 attention call runs at the measured forward rate on
// FLOPs from its cost interface: 4 * B*H*T*S*D + 5 * B*H*T*S with B 8, H 12,
// T = S = 1024, D 64 = 25769803776 + 503316480 = 26273120256 FLOPs /
// 517e12 = 50.8184 us (its 4 x 12 MiB + 384 KiB of q, k, v, o and lse at
// 3e12 take 16.9 us), plus 0.83 us: 51.6484 us.
TEST_F(StepTimeTest, AttentionOnH100) {
  StepTime t = predict(kAttention, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].name, "attn (otc.attention)");
  EXPECT_EQ(t.launches[0].kind, "attention");
  EXPECT_EQ(t.launches[0].flops, 26273120256.0);
  EXPECT_EQ(t.launches[0].bytes, 4 * 12582912.0 + 393216.0);
  expectNear(t.launches[0].seconds, 51.6484e-6);
  EXPECT_EQ(t.launches[0].cost.binding(), Limit::Compute);
  EXPECT_TRUE(t.launches[0].kernels.empty());
}

// Tests that a causal sliding window of 256 keys at T = 1024 is priced by
// the pairs it sees (the rates are measured on causal attention with its
// FLOPs counted in full): 1024 x 256 - 256 x 255 / 2 = 229504 of the causal
// 1024 x 1025 / 2 = 524800, 0.437317 of the full FLOPs' time: 22.2238 us
// (the bytes' 16.9 us stay below), plus 0.83 us: 23.0538 us. Its FLOPs are
// counted over each query's 256 keys, a quarter of the full count:
// 26273120256 / 4 = 6568280064.
TEST_F(StepTimeTest, SlidingWindowAttentionOnH100) {
  StepTime t = predictEdited(kAttention, "{causal, ",
                             "{causal, window = 256 : i64, ", "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].flops, 6568280064.0);
  expectNear(t.launches[0].seconds, 23.0538e-6);
  EXPECT_EQ(t.launches[0].cost.binding(), Limit::Compute);
}

// Tests that an attention that is not causal (BERT's, ViT's: every key)
// is priced by the pairs it computes, 1024 x 1024 against the causal
// 524800 the rates are measured on: 1.998049 x 50.8184 us = 101.5377 us,
// plus 0.83 us: 102.3677 us.
TEST_F(StepTimeTest, BidirectionalAttentionOnH100) {
  StepTime t = predictEdited(kAttention, "{causal, ", "{", "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].flops, 26273120256.0);
  expectNear(t.launches[0].seconds, 102.3677e-6);
}

// Tests that a bidirectional sliding window (ModernBERT's local layers: not
// causal, window W = 129, the keys 128 or fewer away) is priced by the
// pairs it computes, 1024 x 257 - 129 x 128 = 246656 of the causal 524800
// the rates are measured on: 0.47 x 50.8184 us = 23.8846 us (above the
// bytes' 16.9 us), plus 0.83 us: 24.7146 us. Its FLOPs are counted over
// each query's 2 W - 1 = 257 keys: 26273120256 / 1024 x 257 = 6593937408.
TEST_F(StepTimeTest, BidirectionalWindowAttentionOnH100) {
  StepTime t =
      predictEdited(kAttention, "{causal, ", "{window = 129 : i64, ", "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].flops, 6593937408.0);
  expectNear(t.launches[0].seconds, 24.7146e-6);
  EXPECT_EQ(t.launches[0].cost.binding(), Limit::Compute);
}

const char kAccumulate[] = R"mlir(
module attributes {otck.alignment = 256 : i64} {
func.func @zero_grads() {
  %g0 = otck.buffer {slot = "grad:a", offset = 0 : i64} : memref<250xf32>
  %g1 = otck.buffer {slot = "grad:b", offset = 1024 : i64} : memref<256xf32>
  otck.kernel outs(%g0 : memref<250xf32>) {
    %z = otc.constant dense<0.0> : tensor<250xf32>
    otck.yield %z : tensor<250xf32>
  }
  otck.kernel outs(%g1 : memref<256xf32>) {
    %z = otc.constant dense<0.0> : tensor<256xf32>
    otck.yield %z : tensor<256xf32>
  }
  return
}
func.func @micro_step() {
  %x = otck.buffer {offset = 0 : i64} : memref<1048576xf32>
  %y = otck.buffer {offset = 4194304 : i64} : memref<1048576xf32>
  %z = otck.buffer {offset = 8388608 : i64} : memref<1048576xf32>
  otck.kernel ins(%x, %y : memref<1048576xf32>, memref<1048576xf32>) outs(%z : memref<1048576xf32>) {
  ^bb0(%a: tensor<1048576xf32>, %b: tensor<1048576xf32>):
    %s = otc.add %a, %b : (tensor<1048576xf32>, tensor<1048576xf32>) -> tensor<1048576xf32>
    %m = otc.mul %s, %a : (tensor<1048576xf32>, tensor<1048576xf32>) -> tensor<1048576xf32>
    otck.yield %m : tensor<1048576xf32>
  }
  otck.copy %x, %y : memref<1048576xf32>
  return
}
func.func @optimizer_step() { return }
}
)mlir";

// Tests a step of 4 micro-steps: @zero_grads fills two buffers that only
// alignment padding separates (1000 bytes at 0, then 1024 bytes at 1024),
// which the program writes as one memset of 2048 bytes: 2048 / 3e12 +
// 0.83 us = 0.830683 us. A micro-step is the chain above (5.024304 us) and
// a copy of 4 MiB, read and written: 8388608 / 3e12 + 0.83 us = 3.626203
// us, together 8.650507 us. Before the (empty) optimizer step, the
// runtime's gradient factor over the 506 floats of grad:a and grad:b: one
// block of 256 threads, each at most one of the 126 16-byte packets (fewer
// than a round of 4 in flight: 0.5 us), then threads 0 and 1 one of the 2
// floats past them (0.5 us), then one block adding its partial (0.5 us),
// each launch 0.83 us more: 3.16 us.
// The step: 0.830683 + 4 * 8.650507 + 3.16 = 38.592711 us, over
// 1 + 4 * 2 + 2 = 11 launches.
TEST_F(StepTimeTest, StepWithAccumulation) {
  StepTime t = predict(kAccumulate, "h100", /*gradAccum=*/4);
  ASSERT_EQ(t.launches.size(), 4u);
  EXPECT_EQ(t.launches[0].kind, "memset");
  EXPECT_EQ(t.launches[0].bytes, 2048.0);
  EXPECT_FALSE(t.launches[0].traced);
  EXPECT_EQ(t.launches[2].kind, "copy");
  EXPECT_EQ(t.launches[3].function, "optimizer_step");
  EXPECT_EQ(t.launches[3].name, "gradient norm");
  EXPECT_EQ(t.launches[3].bytes, 506.0 * 4 + 8.0 + 12.0);
  expectNear(t.launches[3].seconds, 3.16e-6);
  expectNear(t.zeroGrads, 0.830683e-6);
  expectNear(t.microStep, 8.650507e-6);
  expectNear(t.optimizerStep, 3.16e-6);
  expectNear(t.step, 38.592711e-6);
  EXPECT_EQ(t.launchesPerStep, 11);
  // The shares: the chain is 4 x 5.024304 us of the step.
  ASSERT_FALSE(t.byKind.empty());
  EXPECT_EQ(t.byKind[0].first, "elementwise");
  expectNear(t.byKind[0].second, 20.097216e-6);
  // By limit: 11 launches of 0.83 us, the gradient factor's 1.5 us of
  // dependent loads, the rest bytes.
  expectNear(t.byLimit[Limit::Launch], 11 * 0.83e-6);
  expectNear(t.byLimit[Limit::Latency], 1.5e-6);
  expectNear(t.byLimit[Limit::Bandwidth], 35.432711e-6 - 9 * 0.83e-6);
  ASSERT_FALSE(t.byName.empty());
  EXPECT_EQ(t.byName[0].calls, 4);
}

const char kGemmSums[] = R"mlir(
func.func @zero_grads() { return }
func.func @micro_step() {
  %dy = otck.buffer {offset = 0 : i64} : memref<4096x4096xbf16>
  %x = otck.buffer {offset = 33554432 : i64} : memref<4096x4096xbf16>
  %gw = otck.buffer {offset = 67108864 : i64} : memref<4096x4096xbf16>
  %gb = otck.buffer {offset = 100663296 : i64} : memref<4096xbf16>
  %t = otck.buffer {offset = 100671488 : i64} : memref<4096xf32>
  otck.gemm %dy, %x, %gw sums(%gb : memref<4096xbf16>) {accumulate, accumulate_sums, transpose_lhs} : memref<4096x4096xbf16>, memref<4096x4096xbf16>, memref<4096x4096xbf16> loc("dw")
  otck.gemm %dy, %x, %gw sums(%t : memref<4096xf32>) {accumulate, transpose_lhs} : memref<4096x4096xbf16>, memref<4096x4096xbf16>, memref<4096x4096xbf16> loc("dw2")
  return
}
func.func @optimizer_step() { return }
)mlir";

// Tests the price of a GEMM's column sums (otc-fuse-gemm-sums). On an H100
// cuBLASLt's bias-gradient epilogue forms them from the tiles of the product
// (no time of their own); sums added into BF16 take one small kernel of the
// runtime: 4096 FP32 sums read (16384 bytes), the BF16 slot read and
// written (16384), 32768 bytes / 3e12 = 0.010923 us, plus 0.83 us of
// launch: 0.840923 us. FP32 sums not accumulated are the epilogue's output
// itself: nothing more. On the cpu the operand is read once more (32 MiB)
// with the slot (16384 bytes): 33570816 / 20e9 = 1678.5408 us, plus 2 us
// of launch: 1680.5408 us; the FP32 sums read their operand and write
// 16384 bytes: 33570816 bytes too.
TEST_F(StepTimeTest, GemmSums) {
  StepTime gpu = predict(kGemmSums, "h100");
  ASSERT_EQ(gpu.launches.size(), 3u);
  EXPECT_EQ(gpu.launches[0].name, "dw (gemm)");
  const LaunchTime &sums = gpu.launches[1];
  EXPECT_EQ(sums.name, "dw (gemm).sums");
  EXPECT_EQ(sums.kind, "column_sum");
  EXPECT_EQ(sums.bytes, 32768.0);
  EXPECT_FALSE(sums.traced);
  expectNear(sums.seconds, 0.840923e-6);
  EXPECT_EQ(gpu.launches[2].name, "dw2 (gemm)");
  // The GEMM itself is priced as it is without sums.
  EXPECT_EQ(gpu.launches[0].seconds, gpu.launches[2].seconds);

  StepTime cpu = predict(kGemmSums, "cpu");
  ASSERT_EQ(cpu.launches.size(), 4u);
  EXPECT_EQ(cpu.launches[1].name, "dw (gemm).sums");
  EXPECT_EQ(cpu.launches[1].bytes, 33570816.0);
  expectNear(cpu.launches[1].seconds, 1680.5408e-6);
  EXPECT_EQ(cpu.launches[3].name, "dw2 (gemm).sums");
  EXPECT_EQ(cpu.launches[3].bytes, 33570816.0);
}

// Tests the device table as the targets register it: the three devices,
// each under its own target, the defaults per target, and the GEMM curve on
// a small product.
TEST(DeviceModelTest, Table) {
  EXPECT_EQ(registeredTargetNames(), "cpu, cuda");
  EXPECT_EQ(knownDeviceNames(), "cpu, h100, h200");
  EXPECT_EQ(defaultDevice("cuda"), "h100");
  EXPECT_EQ(defaultDevice("cpu"), "cpu");
  EXPECT_EQ(defaultDevice("tpu"), "");
  EXPECT_FALSE(lookupDevice("foo"));
  const DeviceModel *h100 = lookupDevice("h100"), *h200 = lookupDevice("h200");
  ASSERT_TRUE(h100 && h200);
  EXPECT_TRUE(lookupTargetEntry("cuda")->device("h100"));
  EXPECT_FALSE(lookupTargetEntry("cpu")->device("h100"));
  EXPECT_EQ(h100->arch, "90");
  EXPECT_EQ(lookupDevice("cpu")->arch, "");
  EXPECT_GT(h200->bandwidth, h100->bandwidth);
  // The peaks MFU is quoted against, per precision, from the one table
  // the runtime quotes train's MFU against too (otcrt/device_peaks.h):
  // NVIDIA's dense figures, 989.4 TFLOP/s BF16 and 66.9 FP32 for the H100
  // and H200 SXM; the cpu's its measured GEMM rate at both.
  EXPECT_EQ(h100->peakBf16, 989.4e12);
  EXPECT_EQ(h100->peakFor("bf16"), 989.4e12);
  EXPECT_EQ(h100->peakFor("fp32"), 66.9e12);
  EXPECT_EQ(h200->peakFor("bf16"), 989.4e12);
  EXPECT_EQ(h200->peakFor("fp32"), 66.9e12);
  EXPECT_EQ(h100->peakSource, "datasheet, dense");
  EXPECT_EQ(lookupDevice("cpu")->peakFor("fp32"), 230e9);
  EXPECT_EQ(lookupDevice("cpu")->peakFor("bf16"), 230e9);
  // 8192 x 768 x 768 (measured 20.5 us): 2 * 8192 * 768^2 = 9663676416
  // FLOPs / (790e12 * 768 / 1028) + 3.17 us = 19.5437 us, and with its
  // tiles' 0.969697 of the waves 16.3737 / 0.969697 + 3.17 = 20.0554 us.
  EXPECT_NEAR(gemmSeconds(h100->bf16Gemm, 9663676416.0, 768), 19.5437e-6,
              0.0001e-6);
  EXPECT_NEAR(gemmSeconds(h100->bf16Gemm, 9663676416.0, 768, 0.969697),
              20.0554e-6, 0.0001e-6);
  EXPECT_EQ(h100->sms, 132);
  EXPECT_EQ(lookupDevice("cpu")->sms, 0);
}

// Tests the ring all-reduce of the gradients: GPT-2 124M's BF16
// gradients, 248,951,808 bytes, over 8 H100s: 30 us + 2 * 7 / 8 *
// 248951808 / 450e9 = 30 + 968.146 us = 998.146 us; over 2 ranks of the
// cpu: 20 us + 248951808 / 2.5e9 = 0.02 + 99.580723 = 99.600723 ms; one
// rank: 0.
TEST(DeviceModelTest, AllReduce) {
  const DeviceModel *h100 = lookupDevice("h100"), *cpu = lookupDevice("cpu");
  ASSERT_TRUE(h100 && cpu);
  EXPECT_NEAR(allReduceSeconds(*h100, 248951808.0, 8), 998.146e-6, 0.001e-6);
  EXPECT_NEAR(allReduceSeconds(*cpu, 248951808.0, 2), 99.600723e-3,
              0.000001e-3);
  EXPECT_EQ(allReduceSeconds(*h100, 248951808.0, 1), 0.0);
  EXPECT_EQ(allReduceSeconds(*h100, 0.0, 8), 0.0);
}

// Tests the epilogue's share of a GEMM's time: the knee scaled by the bytes
// the epilogue moves per element of the result over those of the products
// the curve was fitted on (2 for BF16, 4 for FP32). The LM head's weight
// gradient, 50304 x 768 over K = 1024 rows (79,121,350,656 FLOPs): with
// 79121350656 / 790e12 = 100.1536 us of products, the knee of 260 steps
// adds 100.1536 * 260 / 1024 = 25.4296 us for a BF16 result (2 bytes an
// element), twice that for FP32 (4) and four times when it adds into FP32
// (8 bytes: read and written); plus the fixed 3.17 us.
TEST(DeviceModelTest, GemmEpilogue) {
  EXPECT_EQ(gemmEpilogueScale(/*bf16Curve=*/true, 2), 1.0);
  EXPECT_EQ(gemmEpilogueScale(true, 8), 4.0);
  EXPECT_EQ(gemmEpilogueScale(/*bf16Curve=*/false, 4), 1.0);
  EXPECT_EQ(gemmEpilogueScale(false, 8), 2.0);
  const GemmRate &bf16 = lookupDevice("h100")->bf16Gemm;
  const double flops = 2.0 * 50304 * 768 * 1024;
  EXPECT_NEAR(gemmSeconds(bf16, flops, 1024, 1.0, 1.0),
              (100.1536 + 25.4296 + 3.17) * 1e-6, 0.001e-6);
  EXPECT_NEAR(gemmSeconds(bf16, flops, 1024, 1.0, 2.0),
              (100.1536 + 2 * 25.4296 + 3.17) * 1e-6, 0.001e-6);
  EXPECT_NEAR(gemmSeconds(bf16, flops, 1024, 1.0, 4.0),
              (100.1536 + 4 * 25.4296 + 3.17) * 1e-6, 0.001e-6);
}

} // namespace
