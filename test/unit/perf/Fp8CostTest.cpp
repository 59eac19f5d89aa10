//===- Fp8CostTest.cpp - when an FP8 GEMM pays ----------------------------===//
//
// perf/Fp8Cost.h on the device models: a large projection pays in FP8 on an
// H100 (the product at twice BF16's rate outweighs quantizing both
// operands), a small one stays BF16 (fixed costs and the two quantizing
// launches dominate), and the cpu, with no FP8 GEMMs, never picks FP8.
//
//===----------------------------------------------------------------------===//

#include "perf/Fp8Cost.h"
#include "perf/DeviceModel.h"

#include <gtest/gtest.h>

using namespace otc;

namespace {

TEST(Fp8Cost, LargeProjectionsPaySmallOnesDoNot) {
  const DeviceModel *h100 = lookupDevice("h100");
  ASSERT_TRUE(h100);
  EXPECT_GT(h100->fp8Gemm.rate, h100->bf16Gemm.rate);
  // Llama-1B's MLP up-projection at 16K tokens: 16384 x 8192 x 2048.
  EXPECT_TRUE(fp8GemmPays(*h100, 16384, 8192, 2048));
  EXPECT_LT(gemmProductSeconds(*h100, 16384, 8192, 2048, true),
            gemmProductSeconds(*h100, 16384, 8192, 2048, false));
  // A 64 x 64 x 64 product: the quantization costs more than it saves.
  EXPECT_FALSE(fp8GemmPays(*h100, 64, 64, 64));
  // Quantizing is one launch priced by its bytes (2 read + 1 written an
  // element).
  LaunchCost q = fp8QuantizeCost(*h100, 1 << 24);
  EXPECT_NEAR(q.total(),
              3.0 * (1 << 24) / h100->bandwidth + h100->launchSeconds(), 1e-9);
}

TEST(Fp8Cost, TheCpuHasNoFp8Gemms) {
  const DeviceModel *cpu = lookupDevice("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->fp8Gemm.rate, 0.0);
  EXPECT_FALSE(fp8GemmPays(*cpu, 16384, 8192, 2048));
}

} // namespace
