// Tests of the overlapped gradient sums' bookkeeping (run.h: BucketSums)
// for gradients summed on the device (a GPU with NCCL): which
// buckets the hooks queue, when the multiplier is set, what a replayed
// graph (no hook called) and a failed capture (the body run twice) leave to
// sum after the micro-step. The gradient communicator here records the
// calls; the GPU tests (test/gpu/run.sh) run the real one.
#include "src/run.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace otcrt;

namespace {

/// Records what the driver asks of gradients summed on the device.
class DeviceSums final : public GradientCommunicator {
public:
  std::vector<std::string> calls;

  bool overlapsGradientSum() const override { return true; }
  bool sumsBucketsOnDevice() const override { return true; }
  Status setBucketPreMul(double preMul) override {
    calls.push_back("multiplier " + std::to_string(preMul));
    return Status::ok();
  }
  Status startBucketSum(char *, const std::vector<OtcrtRange> &ranges,
                        const size_t *) override {
    calls.push_back("queue " + std::to_string(ranges.front().offset));
    return Status::ok();
  }
  Status sumGradients(char *, const std::vector<OtcrtRange> &ranges,
                      double preMul) override {
    calls.push_back("blocking " + std::to_string(ranges.front().offset) +
                    " x " + std::to_string(preMul));
    return Status::ok();
  }
  Status reduceScatterGradients(char *, int64_t, int64_t, bool,
                                double) override {
    return Status::error("not here");
  }
  Status allGather(char *, int64_t, int64_t) override {
    return Status::error("not here");
  }
};

/// Buckets of one range each, at offsets 0, 100, 200, ...
std::vector<std::vector<OtcrtRange>> buckets(int n) {
  std::vector<std::vector<OtcrtRange>> b;
  for (int k = 0; k < n; ++k)
    b.push_back({OtcrtRange{100 * k, 25, 0, 0}});
  return b;
}

using Calls = std::vector<std::string>;

/// Gradients summed on the device, and what arm() takes beside them.
class BucketSumsOnDevice : public ::testing::Test {
protected:
  DeviceSums backend;
  HostCollectives host;
  Tracer tracer;
  char arena[1] = {};
  Status arm(BucketSums &sums, double preMul) {
    return sums.arm(arena, preMul, backend, host, tracer);
  }
};

TEST_F(BucketSumsOnDevice, HooksQueueEachBucketAfterTheMultiplier) {
  BucketSums sums(buckets(2));
  ASSERT_TRUE(arm(sums, 0.5));
  otcrt_gradients_ready(0);
  otcrt_gradients_ready(1);
  otcrt_gradients_ready(7); // not a bucket: ignored
  ASSERT_TRUE(sums.finish());
  EXPECT_EQ(backend.calls,
            (Calls{"multiplier 0.500000", "queue 0", "queue 100"}));
  // Disarmed: a hook after the micro-step starts nothing.
  otcrt_gradients_ready(0);
  EXPECT_EQ(backend.calls.size(), 3u);
}

TEST_F(BucketSumsOnDevice, AReplayedGraphSumsWhatItsCaptureQueued) {
  BucketSums sums(buckets(3));
  // The capture (or an eager run) calls the hooks of buckets 0 and 1 only;
  // bucket 2 is summed after the micro-step, blocking.
  ASSERT_TRUE(arm(sums, 1.0));
  otcrt_gradients_ready(0);
  otcrt_gradients_ready(1);
  ASSERT_TRUE(sums.finish());
  EXPECT_EQ(backend.calls, (Calls{"multiplier 1.000000", "queue 0", "queue 100",
                                  "blocking 200 x 1.000000"}));
  // A replay calls no hook: its graph holds the sums of buckets 0 and 1,
  // so only bucket 2 is summed after it, with this step's multiplier set
  // for the graph's sums.
  backend.calls.clear();
  ASSERT_TRUE(arm(sums, 0.25));
  ASSERT_TRUE(sums.finish());
  EXPECT_EQ(backend.calls,
            (Calls{"multiplier 0.250000", "blocking 200 x 0.250000"}));
}

TEST_F(BucketSumsOnDevice, AFailedCaptureRunsTheHooksAgain) {
  BucketSums sums(buckets(2));
  ASSERT_TRUE(arm(sums, 1.0));
  // The capture's run of the body queues into a graph that is dropped;
  // the eager run after it queues every bucket again.
  otcrt_gradients_ready(0);
  otcrt_gradients_ready(1);
  otcrt_gradients_ready(0);
  otcrt_gradients_ready(1);
  ASSERT_TRUE(sums.finish());
  EXPECT_EQ(backend.calls, (Calls{"multiplier 1.000000", "queue 0", "queue 100",
                                  "queue 0", "queue 100"}));
}

} // namespace
