// Unit tests of `train --generate` (ABI version 9) with a fake program whose
// decode_step is a counting model over a cache: it writes the position's
// id into its KV_CACHE row and makes the largest logit (sum of the cached
// ids up to the position + w[0]) mod V. The test recomputes the ids from
// that rule, the prompt and the restarts past T positions (the caches
// zeroed, the last T/2 ids fed again), independently of the driver; and
// checks the slots and refusals of the descriptor's version 9.
#include "driver.h"
#include "otcrt/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unistd.h>

using namespace otcrt;
using ::testing::HasSubstr;

namespace {

constexpr int32_t kB = 2, kT = 6, kV = 7;
const int64_t kWShape[] = {1}, kTokShape[] = {kB, kT}, kIdShape[] = {kB, 1},
              kPosShape[] = {1}, kCacheShape[] = {kB, kT},
              kLogitsShape[] = {kB, kV}, kTwoShape[] = {kB, 2};
enum : int64_t {
  kOffW = 0, kOffGW = 8, kOffTok = 16, kOffTgt = 16 + 96, kOffLoss = 208,
  kOffLr = 212, kOffStep = 216, kOffFactor = 220, kOffId = 224, kOffPos = 240,
  kOffCache = 256, kOffLogits = 256 + 96, kArena = 256 + 96 + 64
};
const OtcSlot kSlots[] = {
    {"w", OTC_SLOT_PARAM, OTC_F32, 1, kWShape, kOffW, 4},
    {"w", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, kOffGW, 4},
    {"idx", OTC_SLOT_INPUT, OTC_I64, 2, kTokShape, kOffTok, 96},
    {"targets", OTC_SLOT_INPUT, OTC_I64, 2, kTokShape, kOffTgt, 96},
    {"", OTC_SLOT_LOSS, OTC_F32, 0, nullptr, kOffLoss, 4},
    {"", OTC_SLOT_LR, OTC_F32, 0, nullptr, kOffLr, 4},
    {"", OTC_SLOT_STEP, OTC_F32, 0, nullptr, kOffStep, 4},
    {"", OTC_SLOT_GRAD_FACTOR, OTC_F32, 0, nullptr, kOffFactor, 4},
    {"idx", OTC_SLOT_DECODE_TOKENS, OTC_I64, 2, kIdShape, kOffId, 16},
    {"", OTC_SLOT_DECODE_POSITION, OTC_I64, 1, kPosShape, kOffPos, 8},
    {"0.k", OTC_SLOT_KV_CACHE, OTC_F32, 2, kCacheShape, kOffCache, 48},
    {"", OTC_SLOT_LOGITS, OTC_F32, 2, kLogitsShape, kOffLogits, 56},
};

void noop(char *) {}

std::vector<int64_t> gPositions;

void decodeStep(char *a) {
  int64_t p, ids[kB];
  std::memcpy(&p, a + kOffPos, 8);
  std::memcpy(ids, a + kOffId, sizeof(ids));
  gPositions.push_back(p);
  float w = *reinterpret_cast<float *>(a + kOffW);
  float *cache = reinterpret_cast<float *>(a + kOffCache);
  float *logits = reinterpret_cast<float *>(a + kOffLogits);
  for (int r = 0; r < kB; ++r) {
    cache[r * kT + p] = static_cast<float>(ids[r]);
    float sum = w;
    for (int j = 0; j <= p; ++j)
      sum += cache[r * kT + j];
    int next = static_cast<int>(sum) % kV;
    for (int v = 0; v < kV; ++v)
      logits[r * kV + v] = v == next ? 5.0f : static_cast<float>(v) / kV;
  }
}

OtcProgram decodeProgram() {
  OtcProgram p{};
  p.abi_version = 9;
  p.target = "cpu";
  p.model = "fake.onnx";
  p.arena_bytes = kArena;
  p.micro_batch = kB;
  p.grad_accum = 1;
  p.num_slots = int32_t(sizeof(kSlots) / sizeof(kSlots[0]));
  p.slots = kSlots;
  p.zero_grads = p.micro_step = p.optimizer_step = noop;
  p.decode_step = decodeStep;
  return p;
}

/// The ids the rule gives: each next id is (w + the ids in the context) mod
/// V, the context restarting from the last T/2 ids once it holds T.
std::vector<int64_t> expectedIds(std::vector<int64_t> ids, int64_t n,
                                 int64_t w, int64_t &positions) {
  int64_t start = 0, next = 0;
  positions = 0;
  for (int64_t made = 0; made < n;) {
    if (next - start == kT)
      start = next = next - kT / 2;
    ++positions;
    if (++next < static_cast<int64_t>(ids.size()))
      continue;
    int64_t sum = w;
    for (int64_t j = start; j < next; ++j)
      sum += ids[j];
    ids.push_back(sum % kV);
    ++made;
  }
  return ids;
}

class Generate : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/otcrt_generate_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    TensorFile init;
    const float w = 3.0f;
    init.add("w", StDType::F32, {1}, &w);
    ASSERT_TRUE(writeSafetensors(dir + "/init.safetensors", init));
    options.initPath = dir + "/init.safetensors";
    options.temperature = 0;
    gPositions.clear();
  }
  void TearDown() override {
    std::remove((dir + "/init.safetensors").c_str());
    rmdir(dir.c_str());
  }
  Status run(const OtcProgram &p) {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *log = open_memstream(&buf, &len);
    Status s = runTraining(options, &p, defaultBackend(), log);
    std::fclose(log);
    output.assign(buf, len);
    std::free(buf);
    return s;
  }
  std::string dir, output;
  TrainOptions options;
};

std::string joined(const std::vector<int64_t> &ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i)
    os << (i ? " " : "") << ids[i];
  return os.str();
}

TEST_F(Generate, DrawsByTheRuleAndRestartsPastTheLength) {
  OtcProgram p = decodeProgram();
  options.generate = 9;
  options.promptIds = {1, 2};
  options.samples = 2;
  options.quiet = true;
  ASSERT_TRUE(run(p)) << output;
  int64_t positions = 0;
  std::vector<int64_t> want = expectedIds({1, 2}, 9, 3, positions);
  // Both rows drew the same (greedy) ids: 2 prompt ids and 9 new, past the
  // 6 positions twice.
  EXPECT_EQ(output, joined(want) + "\n" + joined(want) + "\n");
  EXPECT_EQ(static_cast<int64_t>(gPositions.size()), positions);
  // Positions start at 0, rise by one, and restart at 0 (from the last 3
  // ids) when the caches are full.
  EXPECT_EQ(gPositions.front(), 0);
  for (size_t i = 1; i < gPositions.size(); ++i)
    EXPECT_TRUE(gPositions[i] == gPositions[i - 1] + 1 || gPositions[i] == 0)
        << "position " << gPositions[i] << " after " << gPositions[i - 1];
  EXPECT_GE(std::count(gPositions.begin(), gPositions.end(), 0), 3);
}

TEST_F(Generate, RefusesWhatItCannotRun) {
  OtcProgram p = decodeProgram();
  options.generate = 2;
  options.promptIds = {1, 7};
  EXPECT_THAT(run(p).message(),
              HasSubstr("--prompt-ids: id 7 is outside the vocabulary of 7"));
  options.promptIds = {1};
  options.samples = 3;
  EXPECT_THAT(run(p).message(), HasSubstr("--samples 3 exceeds the micro-batch of 2"));
  options.samples = 1;
  p.abi_version = 8;
  EXPECT_THAT(run(p).message(), HasSubstr("slot 8 has unknown kind 12"));
  std::vector<OtcSlot> slots(kSlots, kSlots + p.num_slots - 4);
  p.slots = slots.data();
  p.num_slots = static_cast<int32_t>(slots.size());
  EXPECT_THAT(run(p).message(),
              HasSubstr("this program has no decode_step: compile the model "
                        "with otc-compile --generate"));
}

TEST(GenerateValidate, DecodeSlots) {
  OtcProgram p = decodeProgram();
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  std::vector<OtcSlot> slots(kSlots, kSlots + p.num_slots);
  p.slots = slots.data();
  slots[8].shape = kTwoShape; // ids [B, 2] instead of [B, 1]
  slots[8].nbytes = 32;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("DECODE_TOKENS slot 'idx' must be integers [2, 1]"));
  slots[8] = kSlots[8];
  slots[11].dtype = OTC_BF16;
  slots[11].nbytes = 28;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("must be F32 [2, V]"));
  slots[11] = kSlots[11];
  p.num_slots -= 1; // no LOGITS slot
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("decode_step needs one LOGITS slot, found 0"));
}

} // namespace
