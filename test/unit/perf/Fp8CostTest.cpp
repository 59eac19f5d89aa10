//===- Fp8CostTest.cpp - when an FP8 GEMM pays ----------------------------===//
//
// perf/Fp8Cost.h on the device models: a large projection pays in FP8 on an
// H100 (the product at twice BF16's rate outweighs quantizing both
// operands), a small one stays BF16 (fixed costs and the two quantizing
// launches dominate), and the cpu, with no FP8 GEMMs, never picks FP8. The
// shared copies' accounting (chooseFp8Gemms, passes/Passes.h) on prices in
// whole units, each case's sums worked out by hand; the copy's bytes
// against the runtime's layout (otcrt/fp8.h).
//
//===----------------------------------------------------------------------===//

#include "perf/Fp8Cost.h"
#include "ir/Fp8.h"
#include "otcrt/fp8.h"
#include "passes/Passes.h"
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

TEST(Fp8Cost, AQuantizationWritesEachLayout) {
  const DeviceModel *h100 = lookupDevice("h100");
  ASSERT_TRUE(h100);
  // Both layouts of one copy: the BF16 tensor read once (2 bytes an
  // element), 1 byte written per layout: 4 bytes an element, one launch.
  LaunchCost q = fp8QuantizeCost(*h100, 1 << 24, 2);
  EXPECT_NEAR(q.total(),
              4.0 * (1 << 24) / h100->bandwidth + h100->launchSeconds(), 1e-9);
}

TEST(Fp8Cost, CopyBytesAgreeWithTheRuntime) {
  // 1000 values: 1024 bytes a layout, then 256 for the scale.
  EXPECT_EQ(fp8CopyBytes(1000, kFp8AsStored), 1024 + 256);
  EXPECT_EQ(fp8CopyBytes(1000, kFp8AsStored | kFp8Transposed), 2048 + 256);
  for (int64_t n : {1, 255, 256, 257, 4096 * 2048})
    for (int32_t layouts : {1, 2, 3})
      EXPECT_EQ(fp8CopyBytes(n, layouts), otcrt_fp8_copy_bytes(n, layouts));
  // The left operand is read as [M, K], the right one as [N, K].
  EXPECT_EQ(fp8OperandLayout(/*lhs=*/true, /*transposed=*/false), kFp8AsStored);
  EXPECT_EQ(fp8OperandLayout(true, true), kFp8Transposed);
  EXPECT_EQ(fp8OperandLayout(false, true), kFp8AsStored);
  EXPECT_EQ(fp8OperandLayout(false, false), kFp8Transposed);
}

/// Prices in whole units: a product costs 10 in BF16 and 6 in FP8 (saving
/// 4), a quantization 1 per element-unit plus 1 per layout.
Fp8Prices unitPrices() {
  Fp8Prices p;
  p.product = [](const Fp8GemmShape &, bool fp8) { return fp8 ? 6.0 : 10.0; };
  p.quantize = [](int64_t elements, int layouts) {
    return double(elements) + double(layouts);
  };
  return p;
}

TEST(Fp8Cost, ASharedCopyIsPaidOnce) {
  // Copies: 0 a weight W (2 units), 1 and 2 two activations (2 units
  // each). Alone a GEMM pays 6 + (2 + 1) + (2 + 1) = 12 > 10: BF16.
  std::vector<Fp8CopyUse> copies(3, Fp8CopyUse{2, 1.0});
  Fp8Candidate x;
  x.copy[0] = 1;
  x.copy[1] = 0;
  x.layout[0] = kFp8AsStored;
  x.layout[1] = kFp8AsStored;
  EXPECT_FALSE(chooseFp8Gemms(copies, {x}, unitPrices())[0]);
  // Two GEMMs reading W in both layouts: W's copy costs 2 + 2 = 4, half
  // each: 6 + 3 + 2 = 11 > 10, still BF16.
  Fp8Candidate y = x;
  y.copy[0] = 2;
  y.layout[1] = kFp8Transposed;
  auto both = chooseFp8Gemms(copies, {x, y}, unitPrices());
  EXPECT_FALSE(both[0]);
  EXPECT_FALSE(both[1]);
  // The same with W made once per step of 4 micro-steps: its share is
  // 4 / 4 / 2 = 0.5: 6 + 3 + 0.5 = 9.5 < 10, both FP8.
  copies[0].perMicroStep = 0.25;
  both = chooseFp8Gemms(copies, {x, y}, unitPrices());
  EXPECT_TRUE(both[0]);
  EXPECT_TRUE(both[1]);
}

TEST(Fp8Cost, DroppingAReaderRaisesTheOthersShare) {
  // One copy (8 units, one layout: 9) read by three GEMMs, each with a
  // private copy of 1 unit (one layout: 2). Together each pays
  // 6 + 9/3 + 2 = 11 > 10: none pays, however the shares fall. With a
  // fourth reader whose product costs 30 in BF16, each pays
  // 6 + 9/4 + 2 = 10.25: the three small ones drop; the fourth then pays
  // 6 + 9 + 2 = 17 < 30 and stays.
  std::vector<Fp8CopyUse> copies = {
      {8, 1.0}, {1, 1.0}, {1, 1.0}, {1, 1.0}, {1, 1.0}};
  std::vector<Fp8Candidate> gemms(4);
  for (unsigned i = 0; i < 4; ++i) {
    gemms[i].shape = {16, 16, int64_t(i == 3 ? 32 : 16)};
    gemms[i].copy[0] = 0;
    gemms[i].copy[1] = 1 + i;
    gemms[i].layout[0] = gemms[i].layout[1] = kFp8AsStored;
  }
  Fp8Prices p = unitPrices();
  p.product = [](const Fp8GemmShape &s, bool fp8) {
    return fp8 ? 6.0 : (s.k == 32 ? 30.0 : 10.0);
  };
  auto chosen = chooseFp8Gemms(copies, gemms, p);
  EXPECT_FALSE(chosen[0]);
  EXPECT_FALSE(chosen[1]);
  EXPECT_FALSE(chosen[2]);
  EXPECT_TRUE(chosen[3]);
}

TEST(Fp8Cost, TheCpuHasNoFp8Gemms) {
  const DeviceModel *cpu = lookupDevice("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->fp8Gemm.rate, 0.0);
  EXPECT_FALSE(fp8GemmPays(*cpu, 16384, 8192, 2048));
}

} // namespace
