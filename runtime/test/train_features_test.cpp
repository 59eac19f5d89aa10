// Unit tests of the training features around the compiled step: the
// learning-rate schedule and batch ramp, token shards and the seeded loader
// (masked-LM targets: masked_lm_test.cpp),
// and whole runs of a fake token model (loss = mean (w[token] - target)^2,
// SGD) through runTraining: --data feeding, exact resume from a checkpoint,
// gradient clipping, --skip-nonfinite and the JSONL log.
#include "data.h"
#include "driver.h"
#include "otcrt/safetensors.h"
#include "otcrt/shards.h"
#include "program.h"
#include "schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace otcrt;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// ---- Fake token program: tokens, targets I64 [2, 4]; w F32 [8].
constexpr int32_t kB = 2, kT = 4, kV = 8, kK = 2;
const int64_t kWShape[] = {kV}, kTokShape[] = {kB, kT};
enum : int64_t {
  kOffW = 0, kOffGW = 32, kOffTok = 64, kOffTgt = 128, kOffLoss = 192,
  kOffLr = 196, kOffStep = 200, kArena = 256
};
const OtcSlot kSlots[] = {
    {"w", OTC_SLOT_PARAM, OTC_F32, 1, kWShape, kOffW, 32},
    {"w", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, kOffGW, 32},
    {"idx", OTC_SLOT_INPUT, OTC_I64, 2, kTokShape, kOffTok, 64},
    {"targets", OTC_SLOT_INPUT, OTC_I64, 2, kTokShape, kOffTgt, 64},
    {"", OTC_SLOT_LOSS, OTC_F32, 0, nullptr, kOffLoss, 4},
    {"", OTC_SLOT_LR, OTC_F32, 0, nullptr, kOffLr, 4},
    {"", OTC_SLOT_STEP, OTC_F32, 0, nullptr, kOffStep, 4},
};
std::vector<std::vector<int64_t>> gTokens; // token rows seen per micro-step
bool gPoisonStep3 = false;
/// The micro-step (1-based, counted over the run) that raises SIGINT at
/// its end, as a Ctrl-C during it would; 0: none.
size_t gInterruptAt = 0;
int gOptimizerCalls = 0;

float *f32(char *a, int64_t off) { return reinterpret_cast<float *>(a + off); }
void zeroGrads(char *a) { std::memset(a + kOffGW, 0, 32); }
void microStep(char *a) {
  const int64_t *tok = reinterpret_cast<const int64_t *>(a + kOffTok);
  const int64_t *tgt = reinterpret_cast<const int64_t *>(a + kOffTgt);
  gTokens.emplace_back(tok, tok + kB * kT);
  float loss = 0;
  for (int i = 0; i < kB * kT; ++i) {
    float r = f32(a, kOffW)[tok[i]] - float(tgt[i]);
    loss += r * r / (kB * kT);
    f32(a, kOffGW)[tok[i]] += 2 * r / (kB * kT) / kK;
  }
  bool step3 = gTokens.size() % 8 == 5 || gTokens.size() % 8 == 6;
  *f32(a, kOffLoss) = (gPoisonStep3 && step3) ? NAN : loss;
  if (gTokens.size() == gInterruptAt)
    std::raise(SIGINT);
}
void optimizerStep(char *a) {
  ++gOptimizerCalls;
  float lr = *f32(a, kOffLr);
  for (int j = 0; j < kV; ++j)
    f32(a, kOffW)[j] -= lr * f32(a, kOffGW)[j];
}
OtcProgram tokenProgram() {
  return OtcProgram{1, "cpu", "tok.onnx", kArena, kB, kK,
                    int32_t(sizeof(kSlots) / sizeof(kSlots[0])), kSlots,
                    zeroGrads, microStep, optimizerStep};
}

// The same program with a GRAD_FACTOR slot (version 5), as otc-compile
// makes them: the factor is computed where the gradients are, the
// micro-steps are queued without a wait for their losses, and the update,
// as AdamW's, multiplies the gradient by the factor and is skipped when
// the factor is not finite. Each update's w is kept.
constexpr int64_t kOffFactor = 204;
std::vector<OtcSlot> factorSlots() {
  std::vector<OtcSlot> slots(std::begin(kSlots), std::end(kSlots));
  slots.push_back(
      {"", OTC_SLOT_GRAD_FACTOR, OTC_F32, 0, nullptr, kOffFactor, 4});
  return slots;
}
std::vector<std::vector<float>> gUpdates;
void factorOptimizerStep(char *a) {
  ++gOptimizerCalls;
  const float factor = *f32(a, kOffFactor);
  if (std::isfinite(factor)) {
    float lr = *f32(a, kOffLr);
    for (int j = 0; j < kV; ++j)
      f32(a, kOffW)[j] -= lr * (factor * f32(a, kOffGW)[j]);
  }
  gUpdates.emplace_back(f32(a, kOffW), f32(a, kOffW) + kV);
}

class TrainRun : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/otcrt_train_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    TensorFile init;
    float w[kV] = {};
    init.add("w", StDType::F32, {kV}, w);
    ASSERT_TRUE(writeSafetensors(dir + "/init.safetensors", init));
    std::vector<uint16_t> tokens;
    for (int i = 0; i < 203; ++i)
      tokens.push_back(static_cast<uint16_t>((i * 5 + i / 7) % kV));
    ASSERT_TRUE(writeShard(dir + "/train_000.bin", tokens));
    tokens.resize(101);
    ASSERT_TRUE(writeShard(dir + "/train_001.bin", tokens));
    options.dataGlobs = {dir + "/train_*.bin"};
    options.initPath = dir + "/init.safetensors";
    options.lr = 0.1;
    gTokens.clear();
    gPoisonStep3 = false;
    gInterruptAt = 0;
    gOptimizerCalls = 0;
    gUpdates.clear();
  }
  void TearDown() override { (void)!system(("rm -rf " + dir).c_str()); }
  Status run(bool factorOnDevice = false) {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *log = open_memstream(&buf, &len);
    OtcProgram p = tokenProgram();
    std::vector<OtcSlot> slots = factorSlots();
    if (factorOnDevice) {
      p.abi_version = 5;
      p.num_slots = static_cast<int32_t>(slots.size());
      p.slots = slots.data();
      p.optimizer_step = factorOptimizerStep;
    }
    Status s =
        runTraining(options, &p, defaultBackend(), log, World{}, &stoppedBy);
    std::fclose(log);
    output.assign(buf, len);
    std::free(buf);
    return s;
  }
  /// The trained w of checkpoint root \p root.
  std::vector<uint8_t> weights(const std::string &root) {
    TensorFile f;
    EXPECT_TRUE(readSafetensors(root + "/model.safetensors", f));
    const Tensor *t = f.find("w");
    return t ? t->data : std::vector<uint8_t>();
  }
  std::string dir, output;
  TrainOptions options;
  int stoppedBy = 0;
};

} // namespace

TEST(Schedule, WarmupThenCosine) {
  LrSchedule s{1.0, 0.1, 10, 110, true};
  EXPECT_DOUBLE_EQ(s.at(1), 0.1);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12); // half way: (peak + floor) / 2
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);
  LrSchedule c{2.0, 0, 0, 10, false};
  EXPECT_EQ(c.at(7), 2.0);
}

TEST(Schedule, BatchRampGrowsToFull) {
  BatchRamp r{16, 8, 16, 1000};
  EXPECT_EQ(r.microsAt(0), 1);
  EXPECT_EQ(r.microsAt(500), 5); // 16 + (128 - 16) / 2 = 72 tokens -> 5 micros
  EXPECT_EQ(r.microsAt(1000), 8);
  BatchRamp none{16, 8, 0, 0};
  EXPECT_EQ(none.microsAt(0), 8);
}

TEST(Shards, RoundTripAndHeaderErrors) {
  std::string path = "/tmp/otcrt_shard_test.bin";
  ASSERT_TRUE(writeShard(path, {1, 2, 65535}));
  std::vector<uint32_t> back;
  ASSERT_TRUE(readShard(path, back));
  EXPECT_EQ(back, (std::vector<uint32_t>{1, 2, 65535}));
  // Version 2: uint32 tokens, 4 bytes each after the header.
  ASSERT_TRUE(writeShard32(path, {7, 65536, 128255}));
  ASSERT_TRUE(readShard(path, back));
  EXPECT_EQ(back, (std::vector<uint32_t>{7, 65536, 128255}));
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    EXPECT_EQ(static_cast<int64_t>(in.tellg()), 1024 + 3 * 4);
  }
  // Corrupt the magic, then truncate.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    int32_t bad = 7;
    f.write(reinterpret_cast<char *>(&bad), 4);
  }
  Status s = readShard(path, back);
  EXPECT_THAT(s.message(), HasSubstr("bad magic 7"));
  ASSERT_TRUE(writeShard(path, {1, 2, 3}));
  ASSERT_EQ(truncate(path.c_str(), 1024 + 4), 0);
  EXPECT_THAT(readShard(path, back).message(), HasSubstr("header says 3 tokens"));
  std::remove(path.c_str());
}

// The token that starts every document, recorded in the header's fourth
// int as the token + 1 (0: none, llm.c's shards).
TEST(Shards, RecordTheDocumentToken) {
  std::string path = "/tmp/otcrt_shard_doc_test.bin";
  ASSERT_TRUE(writeShard(path, {5, 1, 2, 1}, 1));
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  int32_t fourth;
  std::memcpy(&fourth, bytes.data() + 12, 4);
  EXPECT_EQ(fourth, 2);
  int64_t count = 0, doc = 7;
  int width = 0;
  ASSERT_TRUE(parseShardHeader(bytes.data(), int64_t(bytes.size()), path,
                               count, width, &doc));
  EXPECT_EQ(doc, 1);
  ASSERT_TRUE(writeShard32(path, {5, 1}));
  std::ifstream again(path, std::ios::binary);
  bytes.assign(std::istreambuf_iterator<char>(again),
               std::istreambuf_iterator<char>());
  ASSERT_TRUE(parseShardHeader(bytes.data(), int64_t(bytes.size()), path,
                               count, width, &doc));
  EXPECT_EQ(doc, -1);
  std::remove(path.c_str());
}

// Query-by-key masks: causal, and with a document token each query sees
// the keys of its own document alone (token 9 starts documents here).
TEST(Shards, DocumentMasks) {
  const int64_t tokShape[] = {2, 4}, maskShape[] = {2, 1, 4, 4};
  OtcSlot tok{"input_ids", OTC_SLOT_INPUT, OTC_I64, 2, tokShape, 0, 64};
  OtcSlot bools{"attention_mask", OTC_SLOT_INPUT, OTC_BOOL, 4, maskShape, 0, 32};
  TokenFeed feed;
  feed.tokens = &tok;
  feed.mask = &bools;
  feed.seqLen = 4;
  const int64_t ids[] = {3, 9, 4, 9, /**/ 9, 5, 6, 7};
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(ids);
  std::vector<uint8_t> out;
  fillMask(feed, bytes, -1, out);
  const std::vector<uint8_t> causalRow = {1, 0, 0, 0, 1, 1, 0, 0,
                                          1, 1, 1, 0, 1, 1, 1, 1};
  ASSERT_EQ(out.size(), 32u);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 16), causalRow);
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 16, out.end()), causalRow);
  fillMask(feed, bytes, 9, out);
  // Row 0: documents {0}, {1, 2}, {3}; row 1: one document.
  const std::vector<uint8_t> docs = {1, 0, 0, 0, 0, 1, 0, 0,
                                     0, 1, 1, 0, 0, 0, 0, 1};
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 16), docs);
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 16, out.end()), causalRow);
  // Float masks are additive.
  OtcSlot floats{"attention_mask", OTC_SLOT_INPUT, OTC_F32, 4, maskShape, 0, 128};
  feed.mask = &floats;
  fillMask(feed, bytes, 9, out);
  ASSERT_EQ(out.size(), 128u);
  float v[32];
  std::memcpy(v, out.data(), sizeof(v));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(v[i], docs[i] ? 0.0f : -3.4028234663852886e38f) << i;
}

// Masked-LM targets (--mlm): read over every window of a shard of 40,000
// tokens uniform in [0, 50) (token 7, the document token, never chosen), the
// shares match the definition (15% chosen; of those 80% the mask token 99,
// 10% a random token, 10% kept), every window has one chosen at least,
// targets are the original token where chosen and -100 elsewhere, inputs
// unchanged elsewhere; the same seed and
// epoch give the same masks, another epoch others.
TEST_F(TrainRun, Uint32ShardsGiveTheSameWindows) {
  // The same tokens as version 2 (uint32) shards, one of them mixed with a
  // version 1 one: every window reads the same values.
  TokenDataset narrow;
  ASSERT_TRUE(narrow.open(options.dataGlobs, kT + 1, kT, "--data"));
  std::vector<uint32_t> wide;
  ASSERT_TRUE(readShard(dir + "/train_000.bin", wide));
  ASSERT_TRUE(writeShard32(dir + "/wide_000.bin", wide));
  std::vector<uint32_t> second;
  ASSERT_TRUE(readShard(dir + "/train_001.bin", second));
  ASSERT_TRUE(writeShard(dir + "/wide_001.bin",
                         std::vector<uint16_t>(second.begin(), second.end())));
  TokenDataset mixed;
  ASSERT_TRUE(mixed.open({dir + "/wide_*.bin"}, kT + 1, kT, "--data"));
  ASSERT_EQ(mixed.numWindows(), narrow.numWindows());
  for (int64_t w = 0; w < narrow.numWindows(); ++w)
    for (int64_t t = 0; t <= kT; ++t)
      ASSERT_EQ(mixed.window(w)[t], narrow.window(w)[t]) << w << " " << t;
  EXPECT_EQ(mixed.window(0).tokenBytes, 4);
}

TEST_F(TrainRun, DataFeedsShiftedWindowsAndShufflesEveryWindowOnce) {
  TokenDataset data;
  ASSERT_TRUE(data.open(options.dataGlobs, kT + 1, kT, "--data"));
  EXPECT_EQ(data.numWindows(), (203 - 1) / kT + (101 - 1) / kT);
  TokenFeed feed;
  std::vector<const OtcSlot *> inputs = {&kSlots[2], &kSlots[3]};
  ASSERT_TRUE(chooseTokenFeed(inputs, "", "", feed));
  EXPECT_EQ(feed.seqLen, kT);
  TokenLoader loader(data, feed, 5, true);
  std::vector<uint8_t> tok, tgt;
  std::set<std::vector<int64_t>> seen;
  for (int64_t i = 0; i < data.numWindows(); ++i) {
    ASSERT_TRUE(loader.next(1, tok, tgt));
    const int64_t *t = reinterpret_cast<const int64_t *>(tok.data());
    const int64_t *y = reinterpret_cast<const int64_t *>(tgt.data());
    for (int j = 0; j + 1 < kT; ++j)
      EXPECT_EQ(y[j], t[j + 1]); // targets are the window shifted by one
  }
  EXPECT_EQ(loader.epoch(), 0);
  EXPECT_EQ(loader.cursor(), data.numWindows());
  ASSERT_TRUE(loader.next(1, tok, tgt));
  EXPECT_EQ(loader.epoch(), 1);
}

TEST_F(TrainRun, ResumeIsBitIdentical) {
  options.steps = 12;
  options.lrSchedule = "cosine";
  options.warmupSteps = 2;
  options.gradClip = 0.5;
  options.saveDir = dir + "/straight";
  ASSERT_TRUE(run()) << output;
  std::vector<uint8_t> straight = weights(dir + "/straight");

  options.steps = 5;
  options.lrSchedule = "cosine";
  options.decaySteps = 12;
  options.saveDir = dir + "/split";
  ASSERT_TRUE(run()) << output;
  options.steps = 12;
  options.resumeDir = dir + "/split";
  Status s = run();
  ASSERT_TRUE(s) << s.message();
  EXPECT_THAT(output, HasSubstr("resumed from"));
  EXPECT_THAT(output, HasSubstr("at step 5"));
  EXPECT_EQ(weights(dir + "/split"), straight);
  EXPECT_NE(straight, std::vector<uint8_t>(32, 0));
}

// A Ctrl-C during step 3 (its second micro-step): the step finishes and is
// applied, its checkpoint saved, a line says so and the run reports the
// signal; resuming continues at step 4 and reaches a straight run's
// weights bit for bit.
TEST_F(TrainRun, ASignalStopsAfterTheStepInFlightWithItsCheckpoint) {
  options.steps = 6;
  options.saveDir = dir + "/straight";
  ASSERT_TRUE(run()) << output;
  EXPECT_EQ(stoppedBy, 0);
  std::vector<uint8_t> straight = weights(dir + "/straight");

  options.steps = 1000;
  options.saveDir = dir + "/ck";
  options.jsonlPath = dir + "/log.jsonl";
  gOptimizerCalls = 0;
  gTokens.clear();
  gInterruptAt = 3 * kK;
  Status s = run();
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(stoppedBy, SIGINT);
  EXPECT_EQ(gOptimizerCalls, 3);
  EXPECT_THAT(output, HasSubstr("step    3/1000"));
  EXPECT_THAT(output, Not(HasSubstr("step    4/")));
  EXPECT_THAT(output, HasSubstr("saved " + dir + "/ck/step-00000003\n"));
  const std::string ck = dir + "/ck";
  EXPECT_THAT(output, HasSubstr("stopped by SIGINT after step 3 of 1000: "
                                "checkpoint " + ck + "/step-00000003 "
                                "(continue with --resume " + ck + ")\n"));
  EXPECT_THAT(output, Not(HasSubstr("final loss")));
  std::ifstream in(options.jsonlPath);
  std::string last, line;
  while (std::getline(in, line))
    last = line;
  EXPECT_THAT(last, HasSubstr("\"event\": \"stop\", \"step\": 3, "
                              "\"signal\": \"SIGINT\""));

  options.steps = 6;
  options.resumeDir = dir + "/ck";
  options.jsonlPath.clear();
  gInterruptAt = 0;
  s = run();
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(stoppedBy, 0);
  EXPECT_THAT(output, HasSubstr("at step 3"));
  EXPECT_THAT(output, HasSubstr("step    4/6"));
  EXPECT_EQ(weights(dir + "/ck"), straight);
}

// Without --save a stopped run says that nothing was saved and how to ask
// for a checkpoint.
TEST_F(TrainRun, ASignalWithoutSaveSaysNothingWasSaved) {
  options.steps = 1000;
  gInterruptAt = 2 * kK;
  Status s = run();
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(stoppedBy, SIGINT);
  EXPECT_EQ(gOptimizerCalls, 2);
  EXPECT_THAT(output, HasSubstr("stopped by SIGINT after step 2 of 1000: "
                                "nothing saved (no --save DIR: with one, a "
                                "stopped run saves its checkpoint there)"));
}

TEST_F(TrainRun, SaveEveryKeepsTheLastK) {
  options.steps = 9;
  options.saveDir = dir + "/ck";
  options.saveEvery = 2;
  options.keep = 2;
  ASSERT_TRUE(run()) << output;
  for (const char *gone : {"/ck/step-00000002", "/ck/step-00000006"})
    EXPECT_NE(access((dir + gone).c_str(), F_OK), 0) << gone;
  for (const char *kept : {"/ck/step-00000008", "/ck/step-00000009",
                           "/ck/latest/state.safetensors", "/ck/model.safetensors"})
    EXPECT_EQ(access((dir + kept).c_str(), F_OK), 0) << kept;
}

TEST_F(TrainRun, ClippingReportsTheNormAndNonfiniteStepsStopOrSkip) {
  options.steps = 4;
  options.gradClip = 1e-3;
  options.jsonlPath = dir + "/log.jsonl";
  gPoisonStep3 = true;
  Status s = run();
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("loss is NaN at step 3"));
  EXPECT_THAT(s.message(), HasSubstr("--skip-nonfinite"));
  EXPECT_THAT(output, HasSubstr("| norm "));
  EXPECT_THAT(output, HasSubstr("tok/s | MFU n/a"));

  options.skipNonfinite = true;
  gOptimizerCalls = 0;
  gTokens.clear();
  s = run();
  ASSERT_TRUE(s) << s.message();
  EXPECT_THAT(output, HasSubstr("update skipped (1 skipped so far)"));
  EXPECT_EQ(gOptimizerCalls, 3);
  std::ifstream in(options.jsonlPath);
  std::string line, all;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    all += line + "\n";
  }
  EXPECT_EQ(lines, 4);
  EXPECT_THAT(all, HasSubstr("\"event\": \"step\", \"step\": 1, \"loss\": "));
  EXPECT_THAT(all, HasSubstr("\"grad_norm\": "));
  EXPECT_THAT(all, HasSubstr("\"skipped\": true"));
}

// Every JSONL record ends with the wall-clock time (Unix seconds, UTC, to
// the millisecond) and the seconds since the run started; step records
// carry the ETA until the last.
TEST_F(TrainRun, JsonlRecordsAreTimestamped) {
  options.steps = 3;
  options.jsonlPath = dir + "/log.jsonl";
  options.saveDir = dir + "/ck";
  const double before = static_cast<double>(std::time(nullptr));
  ASSERT_TRUE(run()) << output;
  const double after = static_cast<double>(std::time(nullptr)) + 1;
  std::ifstream in(options.jsonlPath);
  std::regex stamp(R"(, "time": (\d+\.\d{3}), "elapsed_s": (\d+\.\d{3})\}$)");
  double lastTime = 0, lastElapsed = 0;
  int records = 0, etas = 0;
  for (std::string line; std::getline(in, line); ++records) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, stamp)) << line;
    const double time = std::stod(m[1]), elapsed = std::stod(m[2]);
    EXPECT_GE(time, before);
    EXPECT_LE(time, after);
    EXPECT_GE(time, lastTime);
    EXPECT_GE(elapsed, lastElapsed);
    EXPECT_LE(elapsed, after - before);
    lastTime = time;
    lastElapsed = elapsed;
    etas += line.find("\"eta_s\": ") != std::string::npos;
  }
  EXPECT_EQ(records, 4); // three steps and the checkpoint
  EXPECT_EQ(etas, 2);
}

// With the factor on the device the micro-steps are queued and their
// losses read after the step: a NaN loss whose gradients are finite (this
// program's step 3) must still skip the update, now on the device, and be
// reported as the waiting driver reports it; every other step must give
// the waiting driver's weights and losses bit for bit (the same float
// operations: the factor times each gradient once).
TEST_F(TrainRun, QueuedMicroStepsSkipABadLossOnTheDevice) {
  options.steps = 4;
  options.gradClip = 1e-3;
  options.jsonlPath = dir + "/log.jsonl";
  gPoisonStep3 = true;
  Status s = run(true);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("loss is NaN at step 3, micro-batch 0"));
  EXPECT_THAT(s.message(), HasSubstr("--skip-nonfinite"));
  // The update was queued behind the micro-steps, and skipped there.
  ASSERT_EQ(gOptimizerCalls, 3);
  EXPECT_EQ(gUpdates[2], gUpdates[1]);
  EXPECT_NE(gUpdates[1], gUpdates[0]);

  auto lossesOf = [&](const std::string &path) {
    std::ifstream in(path);
    std::string line, all;
    while (std::getline(in, line))
      if (size_t at = line.find("\"loss\": "); at != std::string::npos)
        all += line.substr(at, line.find(',', at) - at) + "\n";
    return all;
  };
  options.skipNonfinite = true;
  options.saveDir = dir + "/queued";
  gOptimizerCalls = 0;
  gTokens.clear();
  gUpdates.clear();
  s = run(true);
  ASSERT_TRUE(s) << s.message();
  EXPECT_THAT(output, HasSubstr("step 3: loss is NaN at step 3, micro-batch 0; "
                                "update skipped (1 skipped so far)"));
  EXPECT_EQ(gOptimizerCalls, 4);
  ASSERT_EQ(gUpdates.size(), 4u);
  EXPECT_EQ(gUpdates[2], gUpdates[1]);
  EXPECT_NE(gUpdates[3], gUpdates[2]);
  const std::string queuedLosses = lossesOf(options.jsonlPath);

  // The waiting driver (no GRAD_FACTOR slot) on the same batches.
  options.saveDir = dir + "/waited";
  options.jsonlPath = dir + "/waited.jsonl";
  gTokens.clear();
  s = run(false);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(weights(dir + "/queued"), weights(dir + "/waited"));
  EXPECT_EQ(queuedLosses, lossesOf(options.jsonlPath));
  EXPECT_THAT(queuedLosses, HasSubstr("\"loss\": \"NaN\""));
}

TEST_F(TrainRun, BatchRampRaisesTheAccumulation) {
  options.steps = 3;
  options.batchStartTokens = kB * kT; // one micro-batch
  options.batchRampTokens = 3 * kB * kT;
  ASSERT_TRUE(run()) << output;
  EXPECT_THAT(output, HasSubstr("accum 1"));
  EXPECT_EQ(gTokens.size(), 1u + 2u + 2u);
}

// The ramp's steps of fewer micro-batches than compiled, queued: the same
// micro-batches, weights and losses as the waiting driver's, bit for bit
// (the ramp's scale goes into the device factor instead of a pass over the
// gradients), with clipping on.
TEST_F(TrainRun, QueuedMicroStepsFollowTheBatchRamp) {
  options.steps = 4;
  options.batchStartTokens = kB * kT;
  options.batchRampTokens = 3 * kB * kT;
  options.gradClip = 0.05;
  options.saveDir = dir + "/waited";
  options.jsonlPath = dir + "/waited.jsonl";
  ASSERT_TRUE(run(false)) << output;
  const std::vector<std::vector<int64_t>> waitedTokens = gTokens;
  gTokens.clear();
  options.saveDir = dir + "/queued";
  options.jsonlPath = dir + "/queued.jsonl";
  ASSERT_TRUE(run(true)) << output;
  EXPECT_EQ(gTokens, waitedTokens);
  EXPECT_EQ(gTokens.size(), 1u + 2u + 2u + 2u);
  EXPECT_EQ(weights(dir + "/queued"), weights(dir + "/waited"));
  EXPECT_NE(weights(dir + "/queued"), std::vector<uint8_t>(32, 0));
  auto lines = [](const std::string &path) {
    std::ifstream in(path);
    std::string line, all;
    while (std::getline(in, line))
      for (const char *key : {"\"loss\": ", "\"grad_norm\": "})
        if (size_t at = line.find(key); at != std::string::npos)
          all += line.substr(at, line.find_first_of(",}", at) - at) + "\n";
    return all;
  };
  EXPECT_EQ(lines(dir + "/queued.jsonl"), lines(dir + "/waited.jsonl"));
  EXPECT_THAT(lines(dir + "/queued.jsonl"), HasSubstr("\"grad_norm\": "));
}

TEST_F(TrainRun, MissingShardsAndForeignInputsAreExplained) {
  options.dataGlobs = {dir + "/none_*.bin"};
  EXPECT_THAT(run().message(), HasSubstr("matches no file"));
  options.dataGlobs = {dir + "/train_*.bin"};
  options.tokensInput = "nope";
  EXPECT_THAT(run().message(), HasSubstr("--tokens-input 'nope'"));
}

// Evaluation runs the program's eval_step (version 8), which computes the
// loss and nothing else: no micro_step runs for it, the gradient slots are
// not written, and training goes as it does without evaluations. The
// validation loss is the fake model's, computed here from the trained w
// and the validation windows.
int gEvalCalls = 0;
void evalStep(char *a) {
  ++gEvalCalls;
  const int64_t *tok = reinterpret_cast<const int64_t *>(a + kOffTok);
  const int64_t *tgt = reinterpret_cast<const int64_t *>(a + kOffTgt);
  float loss = 0;
  for (int i = 0; i < kB * kT; ++i) {
    float r = f32(a, kOffW)[tok[i]] - float(tgt[i]);
    loss += r * r / (kB * kT);
  }
  *f32(a, kOffLoss) = loss;
}

TEST_F(TrainRun, EvaluationRunsTheForwardAlone) {
  std::vector<uint16_t> val;
  for (int i = 0; i < 41; ++i)
    val.push_back(static_cast<uint16_t>((i * 3 + 1) % kV));
  ASSERT_TRUE(writeShard(dir + "/val_000.bin", val));
  // Version 8 with an eval_step, as otc-compile makes them.
  OtcProgram p = tokenProgram();
  std::vector<OtcSlot> slots = factorSlots();
  p.abi_version = 8;
  p.num_slots = static_cast<int32_t>(slots.size());
  p.slots = slots.data();
  p.optimizer_step = factorOptimizerStep;
  p.eval_step = evalStep;
  auto train = [&] {
    gTokens.clear();
    gEvalCalls = 0;
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *log = open_memstream(&buf, &len);
    Status s = runTraining(options, &p, defaultBackend(), log, World{},
                           &stoppedBy);
    std::fclose(log);
    output.assign(buf, len);
    std::free(buf);
    return s;
  };
  options.steps = 4;
  options.saveDir = dir + "/plain";
  ASSERT_TRUE(train()) << output;
  std::vector<uint8_t> plain = weights(dir + "/plain");
  ASSERT_EQ(gTokens.size(), size_t(4 * kK));
  EXPECT_EQ(gEvalCalls, 0);

  // Evaluations after every step, 3 micro-batches each.
  options.valGlobs = {dir + "/val_*.bin"};
  options.valEvery = 1;
  options.valBatches = 3;
  options.saveDir = dir + "/eval";
  ASSERT_TRUE(train()) << output;
  EXPECT_EQ(gTokens.size(), size_t(4 * kK)) << "micro_step ran for evaluation";
  EXPECT_EQ(gEvalCalls, 4 * 3);
  // Training is as without evaluations, bit for bit.
  std::vector<uint8_t> evaluated = weights(dir + "/eval");
  EXPECT_EQ(evaluated, plain);
  // The last validation loss: the mean over the first 3 x 2 windows of
  // (w[token] - next token)^2 with the trained w.
  ASSERT_EQ(evaluated.size(), sizeof(float) * kV);
  float w[kV];
  std::memcpy(w, evaluated.data(), sizeof(w));
  double sum = 0;
  for (int m = 0; m < 3; ++m) {
    double micro = 0;
    for (int r = 0; r < kB; ++r)
      for (int t = 0; t < kT; ++t) {
        int at = (m * kB + r) * kT + t;
        float d = w[val[at]] - float(val[at + 1]);
        micro += d * d / (kB * kT);
      }
    sum += micro;
  }
  char expect[64];
  std::snprintf(expect, sizeof(expect), "val loss %.6f at step 4", sum / 3);
  EXPECT_THAT(output, HasSubstr(expect)) << output;
}

// Shards with fewer windows than one step reads (here 2 of 4: micro-batch 2
// x grad-accum 2) stop the run before it starts, naming both sizes,
// instead of feeding a step the same windows twice; so do validation
// shards with fewer than one micro-batch.
TEST_F(TrainRun, DataSmallerThanOneStepIsAnError) {
  std::vector<uint16_t> tokens(12, 1);
  ASSERT_TRUE(writeShard(dir + "/small_000.bin", tokens));
  options.dataGlobs = {dir + "/small_*.bin"};
  Status s = run();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "--data: one step reads 4 windows of 4 tokens (micro-batch 2 x "
            "grad-accum 2), 16 tokens, but the shards hold 12 tokens, 2 "
            "windows: give more data or build a smaller batch");
  EXPECT_EQ(gOptimizerCalls, 0);

  tokens.resize(5);
  ASSERT_TRUE(writeShard(dir + "/val_000.bin", tokens));
  options.dataGlobs = {dir + "/train_*.bin"};
  options.valGlobs = {dir + "/val_*.bin"};
  s = run();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(),
            "--val-data: one evaluation micro-batch reads 2 windows of 4 "
            "tokens (micro-batch 2), 8 tokens, but the shards hold 5 tokens, "
            "1 window: give more data or build a smaller batch");
}
