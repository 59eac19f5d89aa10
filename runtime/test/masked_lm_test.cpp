// Unit tests of masked-LM targets from token shards (train --mlm): the
// definition's shares, the seeded masks, the limit a program whose loss is
// at K positions per sequence puts on them, and the rows such a program
// computes its loss at.
#include "data.h"
#include "otcrt/shards.h"
#include "program.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace otcrt;

namespace {

/// The token and target slots of micro-batches of 4 windows of \p T tokens
/// (int64 tokens, targets of \p targetType), fed masked-LM targets: mask
/// token 99, 50 tokens, document token 7 never chosen, P 0.15.
struct MaskedFeed {
  int64_t shape[2];
  OtcSlot tok, tgt;
  TokenFeed feed;
  MaskedFeed(int64_t T, int32_t targetType)
      : shape{4, T},
        tok{"input_ids", OTC_SLOT_INPUT, OTC_I64, 2, shape, 0, 4 * T * 8},
        tgt{"labels", OTC_SLOT_INPUT, targetType, 2, shape, 0,
            4 * T * (targetType == OTC_I64 ? 8 : 4)} {
    feed.tokens = &tok;
    feed.targets = &tgt;
    feed.seqLen = T;
    feed.mlm.maskToken = 99;
    feed.mlm.vocab = 50;
    feed.mlm.keepToken = 7;
  }
};

} // namespace

/// \p n tokens drawn uniformly from [0, 50) by \p seed, written to \p path
/// as a shard whose document token is 7.
static std::vector<uint16_t> randomShard(const std::string &path, size_t n,
                                         uint64_t seed) {
  std::vector<uint16_t> ids(n);
  for (uint16_t &id : ids) {
    seed = splitMix64(seed);
    id = static_cast<uint16_t>(seed % 50);
  }
  EXPECT_TRUE(writeShard(path, ids, 7));
  return ids;
}

TEST(Shards, MaskedLMTargets) {
  const std::string path = "/tmp/otcrt_mlm_test.bin";
  const std::vector<uint16_t> ids = randomShard(path, 40000, 3);
  const int64_t T = 16;
  TokenDataset data;
  ASSERT_TRUE(data.open({path}, T, T, "--data"));
  ASSERT_EQ(data.numWindows(), 2500);
  EXPECT_EQ(data.docToken(), 7);
  MaskedFeed fed(T, OTC_I32);
  TokenFeed &feed = fed.feed;
  TokenLoader loader(data, feed, 11, false);
  std::vector<uint8_t> in, out;
  int64_t positions = 0, eligible = 0, chosen = 0, masked = 0, kept = 0,
          replaced = 0, emptyWindows = 0;
  for (int64_t b = 0; b < data.numWindows() / 4; ++b) {
    ASSERT_TRUE(loader.next(4, in, out));
    const int64_t *x = reinterpret_cast<const int64_t *>(in.data());
    const int32_t *y = reinterpret_cast<const int32_t *>(out.data());
    for (int64_t r = 0; r < 4; ++r)
      emptyWindows += std::count(y + r * T, y + (r + 1) * T, -100) == T;
    for (int64_t i = 0; i < 4 * T; ++i, ++positions) {
      const int64_t original = ids[static_cast<size_t>(b * 4 * T + i)];
      eligible += original != 7;
      if (y[i] == -100) {
        ASSERT_EQ(x[i], original) << i; // not chosen: the input stays
        continue;
      }
      ASSERT_NE(original, 7);
      ASSERT_EQ(y[i], original);
      ++chosen;
      if (x[i] == 99)
        ++masked;
      else if (x[i] == original)
        ++kept;
      else
        ++replaced;
      ASSERT_TRUE(x[i] == 99 || (x[i] >= 0 && x[i] < 50)) << x[i];
    }
  }
  ASSERT_EQ(positions, 40000);
  EXPECT_EQ(emptyWindows, 0);
  // Binomial shares, each within about four standard deviations; a window
  // with none chosen (0.85^16 of them, about 15 eligible positions each)
  // gets one.
  EXPECT_NEAR(double(chosen) / eligible, 0.15 + std::pow(0.85, 16) / 15, 0.011);
  EXPECT_NEAR(double(masked) / chosen, 0.8, 0.03);
  // A random token equals the original one time in 50.
  EXPECT_NEAR(double(kept) / chosen, 0.1 + 0.1 / 50, 0.025);
  EXPECT_NEAR(double(replaced) / chosen, 0.1 * 49 / 50, 0.025);

  // The same (seed, epoch, window) gives the same masks; epoch 1 others.
  TokenLoader again(data, feed, 11, false);
  std::vector<uint8_t> in2, out2;
  loader.seek(0, 0);
  ASSERT_TRUE(loader.next(4, in, out));
  ASSERT_TRUE(again.next(4, in2, out2));
  EXPECT_EQ(in, in2);
  EXPECT_EQ(out, out2);
  again.seek(1, 0);
  ASSERT_TRUE(again.next(4, in2, out2));
  EXPECT_NE(out, out2);
  TokenLoader other(data, feed, 12, false);
  ASSERT_TRUE(other.next(4, in2, out2));
  EXPECT_NE(out, out2);
  std::remove(path.c_str());
}

// With a program whose loss is at K positions per sequence, a window keeps
// at most K chosen: windows under the limit get the masks they get without
// it; one over it keeps K of its chosen positions, the others left as they
// are (input the shard's token, target ignored).
TEST(Shards, MaskedLMLimit) {
  const std::string path = "/tmp/otcrt_mlm_limit_test.bin";
  const std::vector<uint16_t> ids = randomShard(path, 4000, 5);
  const int64_t T = 16;
  TokenDataset data;
  ASSERT_TRUE(data.open({path}, T, T, "--data"));
  MaskedFeed fed(T, OTC_I64);
  TokenFeed &feed = fed.feed;
  feed.mlm.prob = 0.3;
  TokenFeed limited = feed;
  limited.mlm.maxChosen = 3;
  TokenLoader unlimited(data, feed, 11, false),
      capped(data, limited, 11, false);
  std::vector<uint8_t> in, out, in2, out2;
  int64_t under = 0, over = 0;
  for (int64_t b = 0; b < data.numWindows() / 4; ++b) {
    ASSERT_TRUE(unlimited.next(4, in, out));
    ASSERT_TRUE(capped.next(4, in2, out2));
    const int64_t *x = reinterpret_cast<const int64_t *>(in.data()),
                  *y = reinterpret_cast<const int64_t *>(out.data()),
                  *x2 = reinterpret_cast<const int64_t *>(in2.data()),
                  *y2 = reinterpret_cast<const int64_t *>(out2.data());
    for (int64_t r = 0; r < 4; ++r) {
      const int64_t *yr = y + r * T, *y2r = y2 + r * T;
      int64_t chosen = T - std::count(yr, yr + T, -100),
              kept = T - std::count(y2r, y2r + T, -100);
      if (chosen <= 3) {
        ++under;
        EXPECT_TRUE(std::equal(x + r * T, x + (r + 1) * T, x2 + r * T));
        EXPECT_TRUE(std::equal(yr, yr + T, y2r));
        continue;
      }
      ++over;
      ASSERT_EQ(kept, 3);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t original = ids[static_cast<size_t>((b * 4 + r) * T + t)];
        if (y2r[t] != -100)
          EXPECT_EQ(yr[t], original); // kept among the chosen
        else
          EXPECT_EQ(x2[r * T + t], original); // the input stays
      }
    }
  }
  // 0.3 of about 15 eligible positions: both kinds of window are common.
  EXPECT_GT(under, 20);
  EXPECT_GT(over, 20);
  std::remove(path.c_str());
}

// The rows of a micro-batch a program with prediction_rows computes its
// loss at: the counted positions of each sequence in order, then ignored
// ones; more counted than K is an error naming the sequence.
TEST(Shards, PredictionRows) {
  const int64_t shape[] = {3, 6};
  OtcSlot tgt{"labels", OTC_SLOT_INPUT, OTC_I32, 2, shape, 0, 3 * 6 * 4};
  const int32_t targets[] = {-100, 5,    -100, -100, 9,    -100,  // 1, 4
                             -100, -100, -100, -100, -100, -100,  // none
                             2,    3,    4,    -100, -100, -100}; // 0, 1, 2
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(targets);
  std::vector<int64_t> rows;
  ASSERT_TRUE(predictionRows(tgt, bytes, 3, -100, 3, "here", rows));
  EXPECT_THAT(rows, testing::ElementsAre(1, 4, 0, 6, 7, 8, 12, 13, 14));
  ASSERT_TRUE(predictionRows(tgt, bytes, 3, -100, 6, "here", rows));
  EXPECT_THAT(rows, testing::ElementsAre(1, 4, 0, 2, 3, 5, 6, 7, 8, 9, 10, 11,
                                         12, 13, 14, 15, 16, 17));
  Status s =
      predictionRows(tgt, bytes, 3, -100, 2, "--batch, micro-batch 1", rows);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "--batch, micro-batch 1, sequence 2: 3 targets of input 'labels' "
            "are counted (not -100), more than the 2 positions per sequence "
            "the program computes the loss at (otc-compile "
            "--sparse-prediction=2)");
}
