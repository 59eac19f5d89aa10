//===- StepTimeTest.cpp - predicted step times of small programs ----------===//
//
// Hand-computed predictions (codegen/StepTime.h) for planned otck programs
// small enough to price on paper: one GEMM, an elementwise chain, a
// reduction over few outputs, an attention call, adjacent zero fills, and a
// step with gradient accumulation; plus the device table's lookups. Each
// expected value is written out from the device figures of
// codegen/DeviceModel.cpp (h100: BF16 GEMMs 790 TFLOP/s with a depth knee of
// 260 and 2.67 us per call, 60 TFLOP/s other arithmetic, 3.0 TB/s,
// 1.33 us per launch from a graph, 270336 work items to saturate; cpu:
// 20 GB/s, 10 GFLOP/s, 2 us per launch), not from the code under test.
//
//===----------------------------------------------------------------------===//

#include "codegen/StepTime.h"
#include "codegen/DeviceModel.h"
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
    mlir::FailureOr<StepTime> t = predictStepTime(*module, *d, gradAccum);
    EXPECT_TRUE(mlir::succeeded(t));
    return *t;
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
// W = 2 * 4096^3 = 137438953472 FLOPs at 790e12 * 4096 / (4096 + 260) =
// 742.8466e12 FLOP/s take 185.0166 us, plus the fixed 2.67 us per call,
// against 2 * 32 MiB + 64 MiB = 134217728 bytes / 3e12 = 44.739 us of
// memory; plus 1.33 us of launch: 189.0166 us.
TEST_F(StepTimeTest, BF16GemmOnH100) {
  StepTime t = predict(kGemm, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &g = t.launches[0];
  EXPECT_EQ(g.name, "mm (gemm)");
  EXPECT_EQ(g.kind, "gemm");
  EXPECT_EQ(g.flops, 137438953472.0);
  EXPECT_EQ(g.bytes, 134217728.0);
  expectNear(g.seconds, 189.0166e-6);
  expectNear(t.step, 189.0166e-6);
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
// intermediate stays in registers): 3 x 4 MiB = 12582912 bytes / 3e12 =
// 4.194304 us (2 * 1048576 FLOPs / 60e12 = 0.035 us is less), plus 1.33 us:
// 5.524304 us. It is named after its last op's node.
TEST_F(StepTimeTest, ElementwiseChainOnH100) {
  StepTime t = predict(kChain, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  const LaunchTime &k = t.launches[0];
  EXPECT_EQ(k.name, "last (fused otc.add otc.mul)");
  EXPECT_EQ(k.kind, "elementwise");
  EXPECT_EQ(k.flops, 2097152.0);
  EXPECT_EQ(k.bytes, 12582912.0);
  expectNear(k.seconds, 5.524304e-6);
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

// Tests reductions, one work item per output: reading 8192 x 768 floats
// (25165824 bytes) and writing the sums. Over the rows (768 outputs) only
// 768 / 270336 of the device's threads work: (25165824 + 3072) bytes /
// (3e12 * 768 / 270336) = 2953.1505 us, plus 1.33 us: 2954.4805 us. Over
// the columns (8192 outputs): (25165824 + 32768) bytes /
// (3e12 * 8192 / 270336) = 277.1845 us, plus 1.33 us: 278.5145 us.
TEST_F(StepTimeTest, ReductionsOnH100) {
  StepTime t = predict(kReduction, "h100");
  ASSERT_EQ(t.launches.size(), 2u);
  EXPECT_EQ(t.launches[0].name, "bias (otc.reduce_sum)");
  EXPECT_EQ(t.launches[0].kind, "reduction");
  EXPECT_EQ(t.launches[0].flops, 6291456.0);
  EXPECT_EQ(t.launches[0].bytes, 25168896.0);
  expectNear(t.launches[0].seconds, 2954.4805e-6);
  expectNear(t.launches[1].seconds, 278.5145e-6);
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
// 3e12 take 16.9 us), plus 1.33 us: 52.1484 us.
TEST_F(StepTimeTest, AttentionOnH100) {
  StepTime t = predict(kAttention, "h100");
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].name, "attn (otc.attention)");
  EXPECT_EQ(t.launches[0].kind, "attention");
  EXPECT_EQ(t.launches[0].flops, 26273120256.0);
  EXPECT_EQ(t.launches[0].bytes, 4 * 12582912.0 + 393216.0);
  expectNear(t.launches[0].seconds, 52.1484e-6);
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
// 1.33 us = 1.330683 us. A micro-step is the chain above (5.524304 us) and a
// copy of 4 MiB, read and written: 8388608 / 3e12 + 1.33 us = 4.126203 us,
// together 9.650507 us. The step: 1.330683 + 4 * 9.650507 = 39.932709 us,
// over 1 + 4 * 2 = 9 launches.
TEST_F(StepTimeTest, StepWithAccumulation) {
  StepTime t = predict(kAccumulate, "h100", /*gradAccum=*/4);
  ASSERT_EQ(t.launches.size(), 3u);
  EXPECT_EQ(t.launches[0].kind, "memset");
  EXPECT_EQ(t.launches[0].bytes, 2048.0);
  EXPECT_FALSE(t.launches[0].traced);
  EXPECT_EQ(t.launches[2].kind, "copy");
  expectNear(t.zeroGrads, 1.330683e-6);
  expectNear(t.microStep, 9.650507e-6);
  expectNear(t.step, 39.932709e-6);
  EXPECT_EQ(t.launchesPerStep, 9);
  // The shares: the chain is 4 x 5.524304 us of the step.
  ASSERT_FALSE(t.byKind.empty());
  EXPECT_EQ(t.byKind[0].first, "elementwise");
  expectNear(t.byKind[0].second, 22.097216e-6);
  ASSERT_FALSE(t.byName.empty());
  EXPECT_EQ(t.byName[0].calls, 4);
}

// Tests the device table: the three devices, the defaults per target, and
// the GEMM curve on a small product.
TEST(DeviceModelTest, Table) {
  EXPECT_EQ(knownDeviceNames(), "h100, h200, cpu");
  EXPECT_EQ(defaultDevice("cuda"), "h100");
  EXPECT_EQ(defaultDevice("cpu"), "cpu");
  EXPECT_FALSE(lookupDevice("foo"));
  const DeviceModel *h100 = lookupDevice("h100"), *h200 = lookupDevice("h200");
  ASSERT_TRUE(h100 && h200);
  EXPECT_EQ(h100->target, "cuda");
  EXPECT_GT(h200->bandwidth, h100->bandwidth);
  EXPECT_EQ(h100->peakBf16, 989.4e12);
  // 8192 x 768 x 768 (measured 20.5 us): 2 * 8192 * 768^2 = 9663676416
  // FLOPs / (790e12 * 768 / 1028) + 2.67 us = 19.0437 us.
  EXPECT_NEAR(gemmSeconds(h100->bf16Gemm, 9663676416.0, 768), 19.0437e-6,
              0.0001e-6);
}

} // namespace
