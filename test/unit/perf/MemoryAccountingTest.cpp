//===- MemoryAccountingTest.cpp - unit test of the state accounting -------===//
//
// Checks stateBytesPerParam against the playbook's table (ANCHORS.md): 16
// bytes per parameter in FP32 and BF16 mixed precision, 20 with FP32
// gradient accumulation, i.e. 1B -> 16/20 GB, 7B -> 112/140, 70B ->
// 1120/1400 and 405B -> 6480/8100 (decimal gigabytes).
//
//===----------------------------------------------------------------------===//

#include "perf/MemoryAccounting.h"

#include <gtest/gtest.h>

using otc::stateBytesPerParam;

namespace {

constexpr int64_t kGB = 1000000000;

TEST(MemoryAccounting, BytesPerParam) {
  EXPECT_EQ(stateBytesPerParam(false, false).total(), 16);
  EXPECT_EQ(stateBytesPerParam(true, false).total(), 16);
  EXPECT_EQ(stateBytesPerParam(true, true).total(), 20);
  // FP32 gradient accumulation is what FP32 training does anyway.
  EXPECT_EQ(stateBytesPerParam(false, true).total(), 16);
  otc::StateBytesPerParam mp = stateBytesPerParam(true, false);
  EXPECT_EQ(mp.params, 2);
  EXPECT_EQ(mp.grads, 2);
  EXPECT_EQ(mp.masterParams, 4);
  EXPECT_EQ(mp.optimizer, 8);
}

TEST(MemoryAccounting, PlaybookTable) {
  struct Row {
    int64_t billions, bf16GB, fp32AccumGB;
  } rows[] = {{1, 16, 20}, {7, 112, 140}, {70, 1120, 1400}, {405, 6480, 8100}};
  for (const Row &r : rows) {
    int64_t n = r.billions * kGB;
    EXPECT_EQ(n * stateBytesPerParam(false, false).total(), r.bf16GB * kGB)
        << r.billions;
    EXPECT_EQ(n * stateBytesPerParam(true, false).total(), r.bf16GB * kGB)
        << r.billions;
    EXPECT_EQ(n * stateBytesPerParam(true, true).total(), r.fp32AccumGB * kGB)
        << r.billions;
  }
}

TEST(MemoryAccounting, ShardedMomentsPerRank) {
  // ZeRO-1 as otc does it: the 8 bytes of moments, and under BF16 the 4 of
  // FP32 masters, split over the ranks, the rest whole. BF16 over 8 ranks:
  // 2 + 2 + (4 + 8) / 8 = 5.5; FP32 over 4: 4 + 4 + 8 / 4 = 10; one rank is
  // the unsharded 16.
  EXPECT_DOUBLE_EQ(otc::stateBytesPerParamPerRank(true, false, 8), 5.5);
  EXPECT_DOUBLE_EQ(otc::stateBytesPerParamPerRank(false, false, 4), 10.0);
  EXPECT_DOUBLE_EQ(otc::stateBytesPerParamPerRank(true, false, 1), 16.0);
}

} // namespace
