// Unit tests of the otcrt driver: descriptor validation, device peaks,
// gradient ranges, and whole runs of a hand-written fake program (least-squares
// regression with SGD, with and without the version 2 constants initializer)
// through runTraining on the cpu backend. The fake program's gradients are
// checked against a closed-form full-batch gradient computed here in double
// precision, so micro-batching must reproduce it. The command line and the step
// line: driver_args_test.cpp.
#include "driver.h"
#include "inputs.h"
#include "metrics.h"
#include "program.h"

#include "otcrt/device_peaks.h"
#include "otcrt/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

using namespace otcrt;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// ---- Fake program: loss = mean_i (w . x_i + b - y_i)^2, x [2,3] F32, y [2] I64.
constexpr int32_t kMicro = 2, kAccum = 2;
const int64_t kWShape[] = {3}, kBShape[] = {1}, kXShape[] = {kMicro, 3},
              kYShape[] = {kMicro};
enum : int64_t {
  kOffW = 0, kOffB = 12, kOffGW = 16, kOffGB = 28, kOffX = 32, kOffY = 56,
  kOffLoss = 72, kOffLr = 76, kOffStep = 80, kOffRng = 88, kArena = 96
};
const OtcSlot kSlots[] = {
    {"w", OTC_SLOT_PARAM, OTC_F32, 1, kWShape, kOffW, 12},
    {"b", OTC_SLOT_PARAM, OTC_F32, 1, kBShape, kOffB, 4},
    {"w", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, kOffGW, 12},
    {"b", OTC_SLOT_GRAD, OTC_F32, 1, kBShape, kOffGB, 4},
    {"x", OTC_SLOT_INPUT, OTC_F32, 2, kXShape, kOffX, 24},
    {"y", OTC_SLOT_INPUT, OTC_I64, 1, kYShape, kOffY, 16},
    {"", OTC_SLOT_LOSS, OTC_F32, 0, nullptr, kOffLoss, 4},
    {"", OTC_SLOT_LR, OTC_F32, 0, nullptr, kOffLr, 4},
    {"", OTC_SLOT_STEP, OTC_F32, 0, nullptr, kOffStep, 4},
    {"", OTC_SLOT_RNG, OTC_I64, 0, nullptr, kOffRng, 8},
};

std::vector<float> gSteps;    // STEP values seen by optimizer_step
std::vector<int64_t> gRngs;   // RNG values seen by micro_step
bool gPoison = false;         // make the loss NaN

float *f32(char *arena, int64_t off) { return reinterpret_cast<float *>(arena + off); }

void fakeZeroGrads(char *arena) { std::memset(arena + kOffGW, 0, 16); }

void fakeMicroStep(char *arena) {
  const float *w = f32(arena, kOffW), *b = f32(arena, kOffB), *x = f32(arena, kOffX);
  const int64_t *y = reinterpret_cast<const int64_t *>(arena + kOffY);
  float *gw = f32(arena, kOffGW), *gb = f32(arena, kOffGB);
  int64_t rng;
  std::memcpy(&rng, arena + kOffRng, 8);
  gRngs.push_back(rng);
  float loss = 0;
  for (int i = 0; i < kMicro; ++i) {
    float r = w[0] * x[3 * i] + w[1] * x[3 * i + 1] + w[2] * x[3 * i + 2] + b[0] -
              static_cast<float>(y[i]);
    loss += r * r / kMicro;
    float g = 2 * r / kMicro / kAccum;
    for (int j = 0; j < 3; ++j)
      gw[j] += g * x[3 * i + j];
    gb[0] += g;
  }
  *f32(arena, kOffLoss) = gPoison ? NAN : loss;
}

void fakeOptimizerStep(char *arena) {
  float lr = *f32(arena, kOffLr);
  gSteps.push_back(*f32(arena, kOffStep));
  for (int j = 0; j < 4; ++j) // w then b, contiguous
    f32(arena, kOffW)[j] -= lr * f32(arena, kOffGW)[j];
}

// ---- Version 2: one constant past the slots, filled by init_constants.
constexpr int64_t kOffConst = kArena;
int gInitCalls = 0;             // init_constants calls
std::vector<float> gConstSeen;  // the constant as each micro_step saw it

void fakeInitConstants(char *arena) {
  ++gInitCalls;
  *f32(arena, kOffConst) = 2.5f;
}

void fakeMicroStepReadingConstant(char *arena) {
  gConstSeen.push_back(*f32(arena, kOffConst));
  fakeMicroStep(arena);
}

OtcProgram fakeProgram() {
  return OtcProgram{1,      "cpu",  "fake.onnx",     kArena,
                    kMicro, kAccum, int32_t(sizeof(kSlots) / sizeof(kSlots[0])),
                    kSlots, fakeZeroGrads, fakeMicroStep, fakeOptimizerStep};
}

/// The fake program with one more slot, \p extra, in \p slots (kSlots and
/// it) and \p extraBytes more arena after kArena.
OtcProgram fakeProgramWith(std::vector<OtcSlot> &slots, const OtcSlot &extra,
                           int64_t extraBytes = 0) {
  slots.assign(std::begin(kSlots), std::end(kSlots));
  slots.push_back(extra);
  OtcProgram p = fakeProgram();
  p.slots = slots.data();
  p.num_slots = static_cast<int32_t>(slots.size());
  p.arena_bytes = kArena + (extraBytes ? extraBytes : extra.nbytes);
  return p;
}

const float kX[4][3] = {{1, 2, 0.5f}, {-1, 0.25f, 3}, {0.5f, -2, 1}, {2, 1, -1}};
const int32_t kY[4] = {3, -1, 2, 0};
const float kW0[3] = {0.1f, -0.2f, 0.3f}, kB0 = 0.05f;

class DriverRun : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/otcrt_driver_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    TensorFile init;
    init.add("w", StDType::F32, {3}, kW0);
    init.add("b", StDType::F32, {1}, &kB0);
    ASSERT_TRUE(writeSafetensors(dir + "/init.safetensors", init));
    TensorFile batch;
    batch.add("x", StDType::F32, {4, 3}, kX);
    batch.add("y", StDType::I32, {4}, kY); // I32 accepted for an I64 slot
    ASSERT_TRUE(writeSafetensors(dir + "/batch.safetensors", batch));
    options.batchPath = dir + "/batch.safetensors";
    options.initPath = dir + "/init.safetensors";
    gSteps.clear();
    gRngs.clear();
    gPoison = false;
  }
  void TearDown() override {
    for (const char *f : {"/init.safetensors", "/batch.safetensors", "/g.safetensors",
                          "/bad.safetensors"})
      std::remove((dir + f).c_str());
    rmdir(dir.c_str());
  }
  /// Runs the fake program, capturing the log.
  Status run(const OtcProgram &program) {
    char *buf = nullptr;
    size_t len = 0;
    std::FILE *log = open_memstream(&buf, &len);
    Status s = runTraining(options, &program, defaultBackend(), log);
    std::fclose(log);
    output.assign(buf, len);
    std::free(buf);
    return s;
  }

  std::string dir, output;
  TrainOptions options;
};

} // namespace

TEST(DriverValidate, Bf16BuffersFromVersion10) {
  // A frozen parameter read in BF16 alone is a BF16 BUFFER slot, which a
  // descriptor may hold from version 10 on; any other kind stays F32.
  const int64_t shape[] = {2};
  std::vector<OtcSlot> slots;
  OtcProgram p = fakeProgramWith(
      slots, {"frozen", OTC_SLOT_BUFFER, OTC_BF16, 1, shape, kArena, 4});
  p.abi_version = 9;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("must be a named F32 tensor"));
  p.abi_version = 10;
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  slots.back().kind = OTC_SLOT_PARAM;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("must be a named F32 tensor"));
}

TEST(DriverValidate, Version12Bidirectional) {
  OtcProgram p = fakeProgram();
  p.abi_version = 12;
  p.bidirectional = 1;
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  EXPECT_TRUE(bidirectionalOf(p));
  p.bidirectional = 2;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("bidirectional is 2"));
  // Before version 12 the field is not read.
  p.abi_version = 11;
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  EXPECT_FALSE(bidirectionalOf(p));
}

TEST(DriverValidate, Version13PredictionRows) {
  // The rows input of a program whose loss is at K positions per sequence:
  // I64 [micro_batch, K], chosen from count_input's [micro_batch, T], K <= T.
  const int64_t rowsShape[] = {kMicro, 1}, wide[] = {kMicro, 2};
  std::vector<OtcSlot> slots;
  OtcProgram p = fakeProgramWith(
      slots, {"rows", OTC_SLOT_INPUT, OTC_I64, 2, rowsShape, kArena, 16}, 32);
  p.grad_accum = 1;
  p.abi_version = 13;
  p.count_input = "y";
  p.count_ignore_index = -1;
  p.prediction_rows = "rows";
  ASSERT_TRUE(validateProgram(&p, "cpu", false));
  ProgramSlots sorted(p);
  ASSERT_NE(sorted.predictionRows, nullptr);
  EXPECT_STREQ(sorted.predictionRows->name, "rows");
  for (const OtcSlot *in : sorted.inputs)
    EXPECT_STRNE(in->name, "rows"); // filled by the runtime, never fed
  slots.back().dtype = OTC_F32;
  slots.back().nbytes = 8;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("prediction_rows 'rows' is not an I64 INPUT slot"));
  slots.back() = {"rows", OTC_SLOT_INPUT, OTC_I64, 2, wide, kArena, 32};
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("keeps 2 positions of sequences of 1"));
  slots.back() = {"rows", OTC_SLOT_INPUT, OTC_I64, 2, rowsShape, kArena, 16};
  p.count_input = nullptr;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("prediction_rows needs count_input"));
  // Before version 13 the field is not read: an input like any other.
  p.abi_version = 12;
  EXPECT_EQ(predictionRowsOf(p), nullptr);
  EXPECT_EQ(ProgramSlots(p).predictionRows, nullptr);
}

TEST(DriverValidate, Version11Fields) {
  OtcProgram p = fakeProgram();
  p.abi_version = 11;
  p.precision = OTC_PRECISION_BF16;
  p.tokens_per_micro_step = 8;
  p.micro_step_flops = 1000;
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  EXPECT_EQ(precisionOf(p), OTC_PRECISION_BF16);
  EXPECT_EQ(microStepFlopsOf(p), 1000);
  EXPECT_EQ(tokensPerMicroStepOf(p, {}), 8);
  p.precision = 2;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("precision is 2"));
  p.precision = OTC_PRECISION_FP32;
  p.micro_step_flops = -1;
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(),
              HasSubstr("negative"));
  // Before version 11 the fields are not read: no FLOPs (MFU n/a), an
  // unknown precision, and the tokens of the first integer input of rank
  // 2 or more (B x T), or none.
  p.abi_version = 10;
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  EXPECT_EQ(microStepFlopsOf(p), 0);
  EXPECT_EQ(precisionOf(p), -1);
  const int64_t bt[] = {4, 16}, b[] = {4};
  OtcSlot labels{"y", OTC_SLOT_INPUT, OTC_I64, 1, b, 0, 32};
  OtcSlot ids{"ids", OTC_SLOT_INPUT, OTC_I64, 2, bt, 32, 512};
  EXPECT_EQ(tokensPerMicroStepOf(p, {&labels}), 0);
  EXPECT_EQ(tokensPerMicroStepOf(p, {&labels, &ids}), 64);
}

/// A GPU whose peaks are the H100's row of otcrt/device_peaks.h, as the
/// cuda backend finds them for compute capability 9.0, and which records
/// the precision it was asked for.
class PeakBackend final : public Backend {
public:
  const char *name() const override { return "peak"; }
  Status init() override { return Status::ok(); }
  Status allocate(int64_t, char **) override { return Status::ok(); }
  void release(char *) override {}
  Status zero(char *, int64_t, int64_t) override { return Status::ok(); }
  Status upload(char *, int64_t, const void *, int64_t) override {
    return Status::ok();
  }
  Status download(const char *, int64_t, void *, int64_t) override {
    return Status::ok();
  }
  Status copy(char *, const char *, int64_t) override { return Status::ok(); }
  Status downloadAsync(const char *, void *, int64_t) override {
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }
  double peakFlops(int32_t precision) const override {
    asked.push_back(precision);
    return otcrt_peak_for(otcrt_device_peak_of(9, 0), precision);
  }
  mutable std::vector<int32_t> asked;
};

TEST(DevicePeaks, OneTablePerPrecision) {
  // NVIDIA's dense figures: H100 and H200 SXM 66.9 TFLOP/s FP32 and 989.4
  // BF16, A100 19.5 and 312 (the whitepapers' numbers, halved from the
  // datasheets' with sparsity for BF16).
  const OtcrtDevicePeak *h100 = otcrt_device_peak_named("h100");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(otcrt_peak_for(h100, OTC_PRECISION_FP32), 66.9e12);
  EXPECT_EQ(otcrt_peak_for(h100, OTC_PRECISION_BF16), 989.4e12);
  EXPECT_EQ(otcrt_device_peak_of(9, 0), h100);
  const OtcrtDevicePeak *h200 = otcrt_device_peak_named("h200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->fp32, 66.9e12);
  EXPECT_EQ(h200->bf16, 989.4e12);
  const OtcrtDevicePeak *a100 = otcrt_device_peak_of(8, 0);
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(otcrt_peak_for(a100, OTC_PRECISION_FP32), 19.5e12);
  EXPECT_EQ(otcrt_peak_for(a100, OTC_PRECISION_BF16), 312e12);
  // An unknown GPU or precision: no peak (MFU n/a).
  EXPECT_EQ(otcrt_device_peak_of(7, 5), nullptr);
  EXPECT_EQ(otcrt_peak_for(nullptr, OTC_PRECISION_BF16), 0);
  EXPECT_EQ(otcrt_peak_for(h100, -1), 0);
}

TEST(DevicePeaks, MfuAgainstTheProgramsPrecision) {
  PeakBackend gpu;
  OtcProgram p = fakeProgram();
  p.abi_version = 11;
  p.precision = OTC_PRECISION_FP32;
  EXPECT_EQ(mfuPeakFlops(0, gpu, p), 66.9e12);
  p.precision = OTC_PRECISION_BF16;
  EXPECT_EQ(mfuPeakFlops(0, gpu, p), 989.4e12);
  EXPECT_EQ(gpu.asked,
            (std::vector<int32_t>{OTC_PRECISION_FP32, OTC_PRECISION_BF16}));
  // --peak-tflops wins.
  EXPECT_EQ(mfuPeakFlops(2.5, gpu, p), 2.5e12);
  // The MFU of a step: 1.5e11 FLOPs in 10 ms against the FP32 peak.
  StepReport r;
  r.step = r.totalSteps = 1;
  r.ms = 10;
  r.flops = 1.5e11;
  p.precision = OTC_PRECISION_FP32;
  r.peakFlops = mfuPeakFlops(0, gpu, p);
  EXPECT_THAT(formatStepLine(r, 1), HasSubstr("| MFU 22.4%"));
  p.precision = OTC_PRECISION_BF16;
  r.peakFlops = mfuPeakFlops(0, gpu, p);
  EXPECT_THAT(formatStepLine(r, 1), HasSubstr("| MFU 1.5%"));
}

TEST(DriverValidate, RejectsBadDescriptors) {
  OtcProgram p = fakeProgram();
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  p.abi_version = 2;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  // Version 3: weighing two micro-batches per step by a count input needs
  // a GRAD_SCALE slot, and the count input must be an integer INPUT slot.
  p.abi_version = 3;
  p.count_input = nullptr;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  p.count_input = "y";
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("GRAD_SCALE"));
  p.grad_accum = 1;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  p.count_input = "no such input";
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("count_input 'no such input'"));
  // Version 4 changed the GEMM entry point, not the descriptor.
  p.count_input = "y";
  p.abi_version = 4;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  // Version 5: training needs the GRAD_FACTOR slot AdamW reads.
  p.abi_version = 5;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("GRAD_FACTOR"));
  EXPECT_TRUE(validateProgram(&p, "cpu", false));
  p.abi_version = OTC_ABI_VERSION + 1;
  Status s = validateProgram(&p, "cpu", true);
  EXPECT_THAT(s.message(), HasSubstr("abi_version"));
  // Version 3's index ranges must name integer INPUT slots, once each.
  p = fakeProgram();
  p.abi_version = 3;
  const OtcIndexRange onParam[] = {{0, 0, 4, 0, "x"}};
  p.num_index_ranges = 1;
  p.index_ranges = onParam;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("not an integer INPUT slot"));
  const OtcIndexRange twice[] = {{5, 0, 4, 0, "x"}, {5, 0, 4, 0, "x"}};
  p.num_index_ranges = 2;
  p.index_ranges = twice;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("second range"));
  p = fakeProgram();
  EXPECT_THAT(validateProgram(&p, "cuda", true).message(), HasSubstr("target"));
  p.arena_bytes = 90;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(), HasSubstr("outside the arena"));
  p = fakeProgram();
  p.num_slots = 6; // drops LOSS, LR, STEP, RNG
  EXPECT_THAT(validateProgram(&p, "cpu", false).message(), HasSubstr("LOSS"));
  p = fakeProgram();
  p.micro_batch = 3; // INPUT leading dim no longer matches
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(), HasSubstr("leading dimension"));
}

TEST(DriverValidate, ShardedOptimizer) {
  // Version 6 (ZeRO-1 over 2 ranks): w and b lie in a parameter group of 4
  // floats at 0 (2 a rank), their gradients in one at 16; each rank's
  // moments are 2 floats at 96 and 104, the GRAD_FACTOR slot at 112.
  std::vector<OtcSlot> slots(std::begin(kSlots), std::end(kSlots));
  slots.push_back({"", OTC_SLOT_GRAD_FACTOR, OTC_F32, 0, nullptr, 112, 4});
  OtcOptimizerShards shards = {2, OTC_F32, 1, 0, 2, 0, 16, -1, 96, 104};
  OtcProgram p = fakeProgram();
  p.abi_version = 6;
  p.arena_bytes = 128;
  p.num_slots = static_cast<int32_t>(slots.size());
  p.slots = slots.data();
  p.shards = &shards;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  EXPECT_EQ(shardsOf(p), &shards);
  // A version 5 descriptor has no such field: it is not read.
  p.abi_version = 5;
  EXPECT_EQ(shardsOf(p), nullptr);
  p.abi_version = 6;
  OtcOptimizerShards bad = shards;
  bad.ranks = 1;
  p.shards = &bad;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(), HasSubstr("bad ranks"));
  bad = shards;
  bad.v_offset = 124; // 8 bytes from 124 pass the arena's 128
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("second moments lies outside the arena"));
  bad = shards;
  bad.masters_sharded = 1; // yet the steps read the FP32 parameters
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("sharded masters need steps that read only"));
  bad = shards;
  bad.steps_read_params = 0; // yet there are no copies to read
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("need BF16 copies"));
  bad = shards;
  bad.param_offset = 4; // w at 0 starts before it
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("PARAM slot 'w' lies outside the parameter group"));
  p.shards = &shards;
  slots.push_back({"w", OTC_SLOT_ADAM_M, OTC_F32, 1, kWShape, 116, 12});
  p.num_slots = static_cast<int32_t>(slots.size());
  p.slots = slots.data();
  p.arena_bytes = 128;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("exists, but the moments are sharded"));
}

TEST(DriverValidate, GradientBuckets) {
  // Version 7: w's gradient (3 floats at 16) in bucket 0, b's (1 at 28) in
  // bucket 1.
  std::vector<OtcSlot> slots(std::begin(kSlots), std::end(kSlots));
  slots.push_back({"", OTC_SLOT_GRAD_FACTOR, OTC_F32, 0, nullptr, 92, 4});
  OtcBucketRange ranges[] = {{0, 0, kOffGW, 3}, {1, 0, kOffGB, 1}};
  OtcProgram p = fakeProgram();
  p.abi_version = 7;
  p.num_slots = static_cast<int32_t>(slots.size());
  p.slots = slots.data();
  p.num_bucket_ranges = 2;
  p.bucket_ranges = ranges;
  EXPECT_TRUE(validateProgram(&p, "cpu", true));
  std::vector<std::vector<OtcrtRange>> buckets = gradientBucketsOf(p);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].size(), 1u);
  EXPECT_EQ(buckets[0][0].offset, kOffGW);
  EXPECT_EQ(buckets[0][0].count, 3);
  EXPECT_EQ(buckets[1][0].offset, kOffGB);
  // Version 6 has no buckets; a bucket skipped, or a range past the arena.
  p.abi_version = 6;
  EXPECT_TRUE(gradientBucketsOf(p).empty());
  p.abi_version = 7;
  ranges[1].bucket = 2;
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("is of bucket 2 after bucket 0"));
  ranges[1] = {1, 0, kOffGB, 100};
  EXPECT_THAT(validateProgram(&p, "cpu", true).message(),
              HasSubstr("lies outside the arena"));
}

TEST(DriverGradients, AdjacentSlotsOfOneDTypeMergeIntoOneRange) {
  // w's and b's gradients follow each other: one range of 4 floats.
  OtcProgram p = fakeProgram();
  ProgramSlots slots(p);
  std::vector<OtcrtRange> r = gradientRanges(slots.grads);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].offset, kOffGW);
  EXPECT_EQ(r[0].count, 4);
  // A gap, or another dtype, starts a new range (in offset order).
  const OtcSlot gapped[] = {
      {"b", OTC_SLOT_GRAD, OTC_BF16, 1, kBShape, 40, 2},
      {"w", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, 0, 12},
      {"v", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, 16, 12},
      {"u", OTC_SLOT_GRAD, OTC_F32, 1, kWShape, 28, 12}};
  r = gradientRanges({&gapped[0], &gapped[1], &gapped[2], &gapped[3]});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].offset, 0);
  EXPECT_EQ(r[0].count, 3);
  EXPECT_EQ(r[1].offset, 16);
  EXPECT_EQ(r[1].count, 6);
  EXPECT_EQ(r[2].bf16, 1);
  // The norm over them: hand values 1, 2, 2 (w) and -4 (b) give 5.
  std::vector<float> arena(8, 0.0f);
  arena[4] = 1, arena[5] = 2, arena[6] = 2, arena[7] = -4;
  double norm = 0;
  ASSERT_TRUE(gradientNorm(gradientRanges(slots.grads),
                           reinterpret_cast<const char *>(arena.data()), norm));
  EXPECT_EQ(norm, 5.0);
}

TEST(DriverGradients, ScalingInPlaceRoundsBf16ToNearestEven) {
  // One float range and one bfloat16 range: 1, 2, -3 scaled by 0.5, and the
  // bf16 values 1.0 (0x3F80) and 1 + 2^-7 (0x3F81) scaled by 1.5: 1.5 is
  // 0x3FC0 exactly; (1 + 2^-7) * 1.5 = 1.51171875 lies halfway between
  // 0x3FC1 (1.5078125) and 0x3FC2 (1.515625), so ties-to-even gives 0x3FC2.
  std::vector<uint8_t> arena(16, 0);
  float f[3] = {1.0f, 2.0f, -3.0f};
  std::memcpy(arena.data(), f, sizeof f);
  uint16_t h[2] = {0x3F80, 0x3F81};
  std::memcpy(arena.data() + 12, h, sizeof h);
  std::vector<OtcrtRange> ranges = {{0, 3, 0, 0}, {12, 2, 1, 0}};
  char *base = reinterpret_cast<char *>(arena.data());
  ASSERT_TRUE(scaleGradients({ranges[0]}, base, 0.5));
  ASSERT_TRUE(scaleGradients({ranges[1]}, base, 1.5));
  std::memcpy(f, arena.data(), sizeof f);
  std::memcpy(h, arena.data() + 12, sizeof h);
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], 1.0f);
  EXPECT_EQ(f[2], -1.5f);
  EXPECT_EQ(h[0], 0x3FC0);
  EXPECT_EQ(h[1], 0x3FC2);
  // Bad ranges are an error, not a write.
  OtcrtRange bad = {-4, 1, 0, 0};
  EXPECT_FALSE(scaleGradients({bad}, base, 2.0));
}

TEST(DriverBf16, WidensToFloat32) {
  // bf16 0x3F80 is 1.0f, 0xC040 is -3.0f (hand-encoded).
  std::vector<uint8_t> in = {0x80, 0x3F, 0x40, 0xC0};
  std::vector<uint8_t> out = widenBf16(in);
  ASSERT_EQ(out.size(), 8u);
  float f[2];
  std::memcpy(f, out.data(), 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -3.0f);
}

TEST(DriverValidate, RngValuesDiffer) {
  EXPECT_GE(rngValue(0, 1, 0), 0);
  EXPECT_NE(rngValue(0, 1, 0), rngValue(0, 1, 1));
  EXPECT_NE(rngValue(0, 1, 0), rngValue(0, 2, 0));
  EXPECT_NE(rngValue(0, 1, 0), rngValue(1, 1, 0));
  EXPECT_EQ(rngValue(5, 3, 1), rngValue(5, 3, 1));
  // Keys fit in 53 bits so a float64 reference can replay them exactly.
  EXPECT_LT(rngValue(5, 3, 1), int64_t(1) << 53);
}

TEST_F(DriverRun, DumpGradsMatchesFullBatchGradient) {
  options.dumpGradsPath = dir + "/g.safetensors";
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_TRUE(s) << s.message();
  // Closed-form full-batch loss and gradient in double.
  double loss = 0, gw[3] = {0, 0, 0}, gb = 0;
  for (int i = 0; i < 4; ++i) {
    double r = kB0 - kY[i];
    for (int j = 0; j < 3; ++j)
      r += double(kW0[j]) * kX[i][j];
    loss += r * r / 4;
    for (int j = 0; j < 3; ++j)
      gw[j] += 2 * r * kX[i][j] / 4;
    gb += 2 * r / 4;
  }
  TensorFile g;
  ASSERT_TRUE(readSafetensors(options.dumpGradsPath, g));
  // loss, two gradients and the RNG key of each of the two micro-steps.
  ASSERT_EQ(g.tensors.size(), 5u);
  ASSERT_NE(g.find("rng_key/0"), nullptr);
  ASSERT_NE(g.find("rng_key/1"), nullptr);
  const Tensor *l = g.find("loss");
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->shape.empty());
  float lv;
  std::memcpy(&lv, l->data.data(), 4);
  EXPECT_NEAR(lv, loss, 1e-5 * loss);
  const Tensor *tw = g.find("grad/w"), *tb = g.find("grad/b");
  ASSERT_NE(tw, nullptr);
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tw->shape, std::vector<int64_t>{3});
  float w[3], b;
  std::memcpy(w, tw->data.data(), 12);
  std::memcpy(&b, tb->data.data(), 4);
  for (int j = 0; j < 3; ++j)
    EXPECT_NEAR(w[j], gw[j], 1e-5);
  EXPECT_NEAR(b, gb, 1e-5);
  EXPECT_TRUE(gSteps.empty()) << "dump-grads must not update";
  EXPECT_EQ(gRngs.size(), 2u);
}

TEST_F(DriverRun, MfuFromTheDescriptor) {
  // Version 11: the model FLOPs of a micro-step (no plan.json beside the
  // program) and its tokens. The cpu has no peak; --peak-tflops gives one:
  // 1e-6 TFLOP/s (1 MFLOP/s) against 2 micro-steps of 1000 FLOPs a step.
  options.steps = 2;
  options.peakTflops = 1e-6;
  // From version 5 on, training needs the GRAD_FACTOR slot.
  std::vector<OtcSlot> slots(std::begin(kSlots), std::end(kSlots));
  slots.push_back({"", OTC_SLOT_GRAD_FACTOR, OTC_F32, 0, nullptr, kArena, 4});
  OtcProgram p = fakeProgram();
  p.arena_bytes = kArena + 8;
  p.num_slots = static_cast<int32_t>(slots.size());
  p.slots = slots.data();
  p.abi_version = 11;
  p.precision = OTC_PRECISION_FP32;
  p.tokens_per_micro_step = 8;
  p.micro_step_flops = 1000;
  options.jsonlPath = dir + "/log.jsonl";
  Status s = run(p);
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(std::regex_search(
      output, std::regex(R"(step +1/2 \| .* tok/s \| MFU [0-9.]+% \|)")))
      << output;
  // The JSONL log's MFU is the step's FLOPs over its seconds and the peak.
  std::ifstream jsonl(options.jsonlPath);
  std::string first;
  ASSERT_TRUE(std::getline(jsonl, first));
  std::smatch ms, mfu;
  ASSERT_TRUE(std::regex_search(first, ms, std::regex(R"("ms": ([^,]+),)")));
  ASSERT_TRUE(std::regex_search(first, mfu, std::regex(R"("mfu": ([^,]+),)")))
      << first;
  EXPECT_NEAR(std::stod(mfu[1]), 2000 / (std::stod(ms[1]) / 1000) / 1e6,
              1e-6 * std::stod(mfu[1]));
  options.jsonlPath.clear();
  // No FLOPs: MFU n/a whatever the peak.
  p.micro_step_flops = 0;
  ASSERT_TRUE(run(p));
  EXPECT_THAT(output, HasSubstr("tok/s | MFU n/a"));
}

TEST_F(DriverRun, TrainsAndLogs) {
  options.steps = 30;
  options.lr = 0.05;
  options.logEvery = 10;
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_TRUE(s) << s.message();
  ASSERT_EQ(gSteps.size(), 30u);
  for (size_t i = 0; i < gSteps.size(); ++i)
    EXPECT_EQ(gSteps[i], float(i + 1));
  std::regex line(
      R"(step +(\d+)/30 \| loss (\S+) \| lr 5\.00e-02 \| norm \d+\.\d{4} \| \S+ ms \| \d+(?:\.\d+)? samples/s \| MFU n/a \| mem .*B \| accum 2( \| eta \d+s)?)");
  std::vector<int> logged, withEta;
  std::vector<double> losses;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) {
      logged.push_back(std::stoi(m[1]));
      losses.push_back(std::stod(m[2]));
      if (m[3].matched)
        withEta.push_back(std::stoi(m[1]));
    }
  }
  EXPECT_EQ(logged, (std::vector<int>{1, 10, 20, 30})) << output;
  // The ETA while steps are left.
  EXPECT_EQ(withEta, (std::vector<int>{1, 10, 20})) << output;
  EXPECT_THAT(output, HasSubstr("step    1/30 | loss"));
  EXPECT_THAT(output, HasSubstr("final loss"));
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());
}

TEST_F(DriverRun, FillsConstantsOnceAtLoad) {
  options.steps = 3;
  OtcProgram p = fakeProgram();
  p.abi_version = 2;
  p.arena_bytes = kArena + 4;
  p.micro_step = fakeMicroStepReadingConstant;
  p.init_constants = fakeInitConstants;
  gInitCalls = 0;
  gConstSeen.clear();
  Status s = run(p);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(gInitCalls, 1);
  EXPECT_EQ(gConstSeen, std::vector<float>(3 * kAccum, 2.5f));
}

TEST_F(DriverRun, VersionOneHasNoInitConstants) {
  // A version 1 descriptor ends before init_constants: the driver must not
  // read it, whatever the bytes there hold.
  options.steps = 1;
  OtcProgram p = fakeProgram();
  p.init_constants = fakeInitConstants;
  gInitCalls = 0;
  Status s = run(p);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(gInitCalls, 0);
  p.abi_version = 2;
  p.init_constants = nullptr; // version 2 without constants
  ASSERT_TRUE(run(p));
}

TEST_F(DriverRun, BatchShapeMismatchIsExplained) {
  TensorFile batch;
  batch.add("x", StDType::F32, {2, 3}, kX); // micro-batch instead of global
  batch.add("y", StDType::I64, {4}, std::vector<int64_t>(4).data());
  ASSERT_TRUE(writeSafetensors(dir + "/bad.safetensors", batch));
  options.batchPath = dir + "/bad.safetensors";
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), Status::kRuntimeError);
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
  EXPECT_THAT(s.message(), HasSubstr("expected F32 [4, 3]"));
  EXPECT_THAT(s.message(), HasSubstr("found F32 [2, 3]"));
}

TEST_F(DriverRun, BatchDTypeMismatchIsExplained) {
  TensorFile batch;
  batch.add("x", StDType::F32, {4, 3}, kX);
  batch.add("y", StDType::F32, {4}, kX);
  ASSERT_TRUE(writeSafetensors(dir + "/bad.safetensors", batch));
  options.batchPath = dir + "/bad.safetensors";
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("'y': expected I64 [4]"));
  EXPECT_THAT(s.message(), HasSubstr("found F32 [4]"));
}

TEST_F(DriverRun, InitMismatchIsExplained) {
  TensorFile init;
  init.add("w", StDType::F32, {1, 3}, kW0);
  init.add("b", StDType::F32, {1}, &kB0);
  ASSERT_TRUE(writeSafetensors(dir + "/bad.safetensors", init));
  options.initPath = dir + "/bad.safetensors";
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("'w': expected F32 [3], found F32 [1, 3]"));

  init.tensors.erase(init.tensors.begin());
  ASSERT_TRUE(writeSafetensors(dir + "/bad.safetensors", init));
  s = run(p);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("'w' not found"));
}

TEST_F(DriverRun, BatchValuesOutsideTheirIndexRangeStop) {
  // y holds 3, -1, 2, 0: -1 is the ignore index; 3 is outside [0, 3).
  OtcProgram p = fakeProgram();
  p.abi_version = 3;
  const OtcIndexRange classes3[] = {{5, OTC_INDEX_IGNORE, 3, -1, "3 classes"}};
  p.num_index_ranges = 1;
  p.index_ranges = classes3;
  options.steps = 1;
  Status s = run(p);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("input 'y' holds 3 at [0], outside [0, 3) "
                                     "or -1 (3 classes)"));
  const OtcIndexRange classes4[] = {{5, OTC_INDEX_IGNORE, 4, -1, "4 classes"}};
  p.index_ranges = classes4;
  EXPECT_TRUE(run(p)) << output;
  // Without the ignore index, -1 at [1] is the first bad value.
  const OtcIndexRange strict[] = {{5, 0, 4, 0, "4 classes"}};
  p.index_ranges = strict;
  EXPECT_THAT(run(p).message(), HasSubstr("holds -1 at [1], outside [0, 4)"));
}

TEST_F(DriverRun, NonFiniteLossStops) {
  gPoison = true;
  options.steps = 5;
  OtcProgram p = fakeProgram();
  Status s = run(p);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), Status::kRuntimeError);
  EXPECT_THAT(s.message(), HasSubstr("NaN"));
  EXPECT_TRUE(gSteps.empty());
}
