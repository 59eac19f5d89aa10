//===- LaunchModelTest.cpp - the time of kernel launches by their grid ----===//
//
// Hand-computed prices (perf/LaunchModel.h) of kernel launches on the
// h100 model: a few blocks with long serial loops, many blocks moving a
// gigabyte, a loop of cache hits, a tiny kernel, a tail wave of one block,
// arithmetic, and the GEMMs' wave quantization. Every expected value is
// written out from the figures of perf/DeviceModel.cpp, not from the
// code under test: 132 SMs holding 2048 threads and 32 blocks each, 128
// FP32 lanes per SM, 3.0 TB/s, 60 TFLOP/s of vector arithmetic, 0.5 us per
// step that waits on memory, 0.02 us per step served by L1, 0.83 us of
// launch overhead from a graph, 128 x 128 GEMM tiles and split-K slices of
// at least 512.
//
//===----------------------------------------------------------------------===//

#include "perf/LaunchModel.h"
#include "perf/DeviceModel.h"

#include <gtest/gtest.h>

using namespace otc;

namespace {

const DeviceModel &h100() { return *lookupDevice("h100"); }

KernelLaunch launch(int64_t blocks, int64_t threads, int64_t steps,
                    double bytes, int64_t cachedSteps = 0) {
  KernelLaunch l;
  l.blocks = blocks;
  l.threads = threads;
  l.steps = steps;
  l.cachedSteps = cachedSteps;
  l.bytes = bytes;
  return l;
}

void expectNear(double actual, double expected) {
  EXPECT_NEAR(actual, expected, 1e-5 * expected);
}

// Tests a few blocks with serial loops: a column sum of 8192 x 768 floats
// in 24 blocks (768 / 32 columns) of 32 x 32 = 1024 threads, each summing
// 8192 / 32 = 256 rows and waiting on memory for each (a loop that loads
// one row at a time). An SM holds 2048 / 1024 = 2 such blocks, so all 24
// run in one wave on 24 SMs. Its 25165824 bytes would take 8.388608 us at
// 3 TB/s and its 6291456 FLOPs 0.105 us (24 x 1024 threads cover all 132 x
// 128 lanes), but each thread waits 256 times: 256 x 0.5 us = 128 us, plus
// 0.83 us of launch: 128.83 us, bound by latency.
TEST(LaunchModelTest, FewBlocksWithSerialLoops) {
  LaunchCost c =
      priceKernel(h100(), launch(24, 1024, 256, 25165824.0), 6291456.0);
  EXPECT_EQ(c.waves, 1);
  expectNear(c.total(), 128.83e-6);
  expectNear(c[Limit::Latency], 128e-6);
  EXPECT_EQ(c.binding(), Limit::Latency);
  EXPECT_EQ(residentBlocks(h100(), 1024), 2);
}

// Tests that dynamic shared memory bounds the blocks an SM holds: a block
// of 512 threads keeping a GPT-2 row of 50304 bfloat16 logits (100608
// bytes) fits twice in an H100 SM's 228 KB (233472 / (100608 + 1024) =
// 2.3), though its threads would let 4 in; 8192 such rows then take
// ceil(8192 / (132 x 2)) = 32 waves, not 16.
TEST(LaunchModelTest, SharedMemoryBoundsResidency) {
  EXPECT_EQ(residentBlocks(h100(), 512), 4);
  EXPECT_EQ(residentBlocks(h100(), 512, 100608), 2);
  EXPECT_EQ(residentBlocks(h100(), 512, 200 << 10), 1);
  KernelLaunch k = launch(8192, 512, 8, 1.0e9);
  k.sharedBytes = 100608;
  EXPECT_EQ(priceKernel(h100(), k, 0.0).waves, 32);
}

// Tests a grid-stride kernel over 1 GiB: 4096 blocks of 256 threads, 4
// steps each. An SM holds min(32, 2048 / 256) = 8 blocks, so a wave is
// 132 x 8 = 1056 blocks: three full waves and a tail of 4096 - 3168 = 928.
// A full wave moves 1056/4096 GiB = 276824064 bytes, 92.274688 us at
// 3 TB/s (its 4 steps take 2 us); the tail 243269632 bytes, 81.089877 us.
// Together 357.913941 us, which is 1 GiB / 3 TB/s: the bandwidth binds.
// Plus 0.83 us: 358.743941 us.
TEST(LaunchModelTest, ManyBlocksBandwidthBound) {
  LaunchCost c = priceKernel(h100(), launch(4096, 256, 4, 1073741824.0), 0.0);
  EXPECT_EQ(c.waves, 4);
  expectNear(c[Limit::Bandwidth], 357.913941e-6);
  expectNear(c.total(), 358.743941e-6);
  EXPECT_EQ(c.binding(), Limit::Bandwidth);
}

// Tests a serial loop of cache hits: a gather's gradient over a 50304 x 768
// table as generated, one thread per row, 197 blocks of 256 (one wave),
// each thread adding 126 elements of matching gradient rows (memory) and
// scanning all 8192 indices (L1 hits): 126 x 0.5 + 8192 x 0.02 = 63 +
// 163.84 = 226.84 us, against 179765248 bytes / 3 TB/s = 59.92 us. Plus
// 0.83 us: 227.67 us.
TEST(LaunchModelTest, SerialLoopBound) {
  LaunchCost c = priceKernel(
      h100(), launch(197, 256, 126, 179765248.0, /*cachedSteps=*/8192),
      6291456.0);
  expectNear(c.total(), 227.67e-6);
  EXPECT_EQ(c.binding(), Limit::Latency);
}

// Tests a tiny kernel: one block of 256 threads, one step, 2 KiB. Its step
// waits 0.5 us on memory (its bytes take 0.7 ns, its 256 FLOPs on 256 of
// 16896 lanes 0.3 ns); the launch overhead, 0.83 us, is the larger part:
// 1.33 us in all, the measured time of a tiny kernel replayed from a graph.
TEST(LaunchModelTest, TinyKernelLaunchBound) {
  LaunchCost c = priceKernel(h100(), launch(1, 256, 1, 2048.0), 256.0);
  expectNear(c.total(), 1.33e-6);
  expectNear(c[Limit::Launch], 0.83e-6);
  EXPECT_EQ(c.binding(), Limit::Launch);
}

// Tests a tail wave: 1057 blocks of 256 threads, one more than a wave of
// 1056, each thread 10 steps and 16 bytes. The full wave's 4325376 bytes
// take 1.441792 us, its steps 10 x 0.5 = 5 us; the tail's one block 5 us
// too: 10 us plus 0.83 us, twice the 5.83 us of 1056 blocks.
TEST(LaunchModelTest, TailWave) {
  LaunchCost full =
      priceKernel(h100(), launch(1056, 256, 10, 1056 * 256 * 16.0), 0.0);
  EXPECT_EQ(full.waves, 1);
  expectNear(full.total(), 5.83e-6);
  LaunchCost tail =
      priceKernel(h100(), launch(1057, 256, 10, 1057 * 256 * 16.0), 0.0);
  EXPECT_EQ(tail.waves, 2);
  expectNear(tail.total(), 10.83e-6);
  EXPECT_EQ(tail.binding(), Limit::Latency);
}

// Tests arithmetic: 6e9 FLOPs over a full wave of 1056 blocks of 256
// threads (270336 threads, more than the 16896 lanes) take 6e9 / 60e12 =
// 100 us against 1 MiB of bytes (0.35 us) and one step (0.5 us): 100.83 us,
// bound by compute. The same FLOPs in one block of 128 threads use 128 of
// the 16896 lanes: 6e9 / (60e12 x 128 / 16896) = 13200 us.
TEST(LaunchModelTest, ComputeBound) {
  LaunchCost c = priceKernel(h100(), launch(1056, 256, 1, 1048576.0), 6e9);
  expectNear(c.total(), 100.83e-6);
  EXPECT_EQ(c.binding(), Limit::Compute);
  LaunchCost one = priceKernel(h100(), launch(1, 128, 1, 1048576.0), 6e9);
  expectNear(one[Limit::Compute], 13200e-6);
}

// Tests the roofline of a launch priced by a rate: 10 us of work against
// 3 MB (1 us) is compute; 1 us against 30 MB (10 us) is bandwidth; each
// plus 0.83 us.
TEST(LaunchModelTest, Roofline) {
  LaunchCost c = priceRoofline(h100(), 10e-6, 3e6);
  expectNear(c.total(), 10.83e-6);
  EXPECT_EQ(c.binding(), Limit::Compute);
  LaunchCost b = priceRoofline(h100(), 1e-6, 30e6);
  expectNear(b.total(), 10.83e-6);
  EXPECT_EQ(b.binding(), Limit::Bandwidth);
  EXPECT_EQ(limitName(b.binding()), "bandwidth");
}

// Tests the GEMMs' wave quantization. 8192 x 768 x 768: 64 x 6 = 384
// tiles, K too short to split (768 / 512 = 1 slice), 3 waves of 132:
// 384 / 396 = 0.969697. 4096^3: 32 x 32 = 1024 tiles, up to 8 slices of
// 512: s = 1..4 fill 1024 s / (132 ceil(1024 s / 132)) = 0.969697, s = 5
// 5120 / 5148 = 0.994561, s = 6 6144 / 6204 = 0.990329, s = 7 7168 / 7260
// = 0.987328, s = 8 8192 / 8316 = 0.985089: the best is 0.994561. One
// 128 x 128 tile with K = 256 (no split) fills 1 / 132 of the SMs. The cpu
// has no waves.
TEST(LaunchModelTest, GemmWaveEfficiency) {
  expectNear(gemmWaveEfficiency(h100(), 8192, 768, 768, 1), 0.969697);
  expectNear(gemmWaveEfficiency(h100(), 4096, 4096, 4096, 1), 0.994561);
  expectNear(gemmWaveEfficiency(h100(), 128, 128, 256, 1), 1.0 / 132);
  EXPECT_EQ(gemmWaveEfficiency(*lookupDevice("cpu"), 128, 128, 256, 1), 1.0);
}

} // namespace
