// Unit tests of train's command line (parseTrainArgs, its usage and
// errors, the default init path) and of the step line it logs (durations,
// throughput, the ETA).
#include "driver.h"
#include "metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

using namespace otcrt;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(DriverArgs, ParsesAllFlags) {
  TrainOptions o;
  Status s = parseTrainArgs({"--batch", "b.st", "--steps=20", "--lr", "0.01",
                             "--seed", "7", "--init", "i.st", "--dump-grads",
                             "g.st", "--log-every", "5", "--quiet"},
                            o);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(o.batchPath, "b.st");
  EXPECT_EQ(o.steps, 20);
  EXPECT_DOUBLE_EQ(o.lr, 0.01);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.initPath, "i.st");
  EXPECT_EQ(o.dumpGradsPath, "g.st");
  EXPECT_EQ(o.logEvery, 5);
  EXPECT_TRUE(o.quiet);
}

TEST(DriverArgs, Defaults) {
  TrainOptions o;
  ASSERT_TRUE(parseTrainArgs({"--batch", "b"}, o));
  EXPECT_EQ(o.steps, 1);
  EXPECT_EQ(o.logEvery, 1);
  EXPECT_TRUE(o.initPath.empty());
  EXPECT_FALSE(o.quiet);
  EXPECT_TRUE(o.cudaGraphs);
  EXPECT_FALSE(o.traceSync);
}

TEST(DriverArgs, GraphsAndTraceFlags) {
  TrainOptions o;
  ASSERT_TRUE(parseTrainArgs({"--batch", "b", "--no-cuda-graphs", "--trace",
                              "t.json", "--trace-sync"},
                             o));
  EXPECT_FALSE(o.cudaGraphs);
  EXPECT_TRUE(o.traceSync);
  EXPECT_EQ(o.tracePath, "t.json");
  EXPECT_THAT(trainUsage("train"), HasSubstr("--no-cuda-graphs"));
  EXPECT_THAT(trainUsage("train"), HasSubstr("--trace-sync"));
}

TEST(DriverArgs, HelpAndData) {
  TrainOptions o;
  ASSERT_TRUE(parseTrainArgs({"--help"}, o));
  EXPECT_TRUE(o.help);
  ASSERT_TRUE(parseTrainArgs({"--data", "a*.bin", "--data=b.bin", "--val-data",
                              "v.bin", "--tokens-input", "idx",
                              "--targets-input", "y", "--no-shuffle"},
                             o));
  EXPECT_EQ(o.dataGlobs, (std::vector<std::string>{"a*.bin", "b.bin"}));
  EXPECT_EQ(o.valGlobs, std::vector<std::string>{"v.bin"});
  EXPECT_EQ(o.tokensInput, "idx");
  EXPECT_EQ(o.targetsInput, "y");
  EXPECT_FALSE(o.shuffle);
  EXPECT_THAT(trainUsage("train"), HasSubstr("--dump-grads"));
  EXPECT_THAT(trainUsage("train"), HasSubstr("--resume"));
}

TEST(DriverArgs, MaskedLM) {
  TrainOptions o;
  ASSERT_TRUE(parseTrainArgs({"--data", "d"}, o));
  EXPECT_EQ(o.mlmToken, -1);
  ASSERT_TRUE(parseTrainArgs({"--data", "d", "--mlm", "50284"}, o));
  EXPECT_EQ(o.mlmToken, 50284);
  EXPECT_DOUBLE_EQ(o.mlmProb, 0.15);
  TrainOptions p;
  ASSERT_TRUE(parseTrainArgs({"--data", "d", "--mlm=0:0.3"}, p));
  EXPECT_EQ(p.mlmToken, 0);
  EXPECT_DOUBLE_EQ(p.mlmProb, 0.3);
  EXPECT_THAT(trainUsage("train"), HasSubstr("--mlm ID[:P]"));
  for (const char *bad : {"x", "-1", "5:", "5:0", "5:1", "5:nan", ":0.2"}) {
    TrainOptions q;
    Status s = parseTrainArgs({"--data", "d", "--mlm", bad}, q);
    EXPECT_EQ(s.code(), Status::kUsageError) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--mlm expects MASK_ID or MASK_ID:P"));
  }
  TrainOptions q;
  EXPECT_THAT(parseTrainArgs({"--batch", "b", "--mlm", "4"}, q).message(),
              HasSubstr("--mlm needs --data"));
  EXPECT_THAT(
      parseTrainArgs({"--data", "d", "--mlm", "4", "--doc-mask"}, q).message(),
      HasSubstr("--mlm and --doc-mask are exclusive"));
}

TEST(DriverArgs, UsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--steps", "3"},
      {"--batch"},
      {"--batch", "b", "--steps", "0"},
      {"--batch", "b", "--steps", "x"},
      {"--batch", "b", "--lr", "nan"},
      {"--batch", "b", "--lr", "-1"},
      {"--batch", "b", "--seed", "-3"},
      {"--batch", "b", "--log-every", "0"},
      {"--batch", "b", "--frobnicate"},
      {"--batch", "b", "stray"},
      {"--batch="},
      {"--batch", "b", "--quiet=1"},
      {"--batch", "b", "--data", "d"},
      {"--batch", "b", "--val-data", "v"},
      {"--batch", "b", "--save-every", "5"},
      {"--batch", "b", "--lr-schedule", "linear"},
      {"--data", "d", "--batch-start-tokens", "64"},
      {"--batch", "b", "--dump-grads", "g", "--resume", "r"},
      {"--batch", "b", "--skip-nonfinite=1"},
      {"--batch", "b", "--trace-sync"},
      {"--batch", "b", "--no-cuda-graphs=1"},
  };
  for (const auto &args : bad) {
    TrainOptions o;
    Status s = parseTrainArgs(args, o);
    EXPECT_FALSE(s) << ::testing::PrintToString(args);
    EXPECT_EQ(s.code(), Status::kUsageError);
  }
}

TEST(DriverArgs, DefaultInitPathIsNextToExecutable) {
  std::string p = defaultInitPath();
  EXPECT_THAT(p, ::testing::EndsWith("/init.safetensors"));
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  std::string e(exe, n);
  EXPECT_EQ(p, e.substr(0, e.rfind('/')) + "/init.safetensors");
}

TEST(DriverMetrics, EtaIsSecondsMinutesOrHours) {
  EXPECT_EQ(formatDuration(0), "0s");
  EXPECT_EQ(formatDuration(42.4), "42s");
  EXPECT_EQ(formatDuration(59.6), "1m00s");
  EXPECT_EQ(formatDuration(185), "3m05s");
  EXPECT_EQ(formatDuration(3599.4), "59m59s");
  EXPECT_EQ(formatDuration(3725), "1h02m");
  EXPECT_EQ(formatDuration(3600 * 100 + 59), "100h01m");
  StepReport r;
  r.step = 3;
  r.totalSteps = 10;
  r.ms = 2;
  r.tokens = 64;
  r.micros = 1;
  r.etaSeconds = 185;
  const std::string line = formatStepLine(r, 4);
  EXPECT_THAT(line, HasSubstr("| 32000 tok/s |"));
  EXPECT_THAT(line, testing::EndsWith(" | accum 1 | eta 3m05s"));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  r.etaSeconds = -1;
  EXPECT_THAT(formatStepLine(r, 4), Not(HasSubstr("eta")));
}
