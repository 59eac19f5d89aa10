// The initial parameters read a batch at a time (inputs.h): checked against
// the file's header before any tensor's bytes are read, then each slot's
// tensor handed over with its own bytes, from the initial parameters or the
// fallback file, however small the batches; a tensor that changes between
// the two reads, a missing one and a pipe's layout are refused.
#include "inputs.h"
#include "otcrt/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unistd.h>

using namespace otcrt;
using ::testing::HasSubstr;

namespace {

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/otcrt_init_" +
         std::to_string(::getpid()) + "_" + name;
}

/// A tensor of n F32 values start, start + 1, ...
void addF32(TensorFile &f, const std::string &name, std::vector<int64_t> shape,
            float start) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  f.add(name, StDType::F32, shape, v.data());
}

struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  OtcSlot slot{};
  Slot(std::string n, std::vector<int64_t> s, int32_t kind)
      : name(std::move(n)), shape(std::move(s)) {
    int64_t elements = 1;
    for (int64_t d : shape)
      elements *= d;
    slot.name = name.c_str();
    slot.kind = kind;
    slot.dtype = OTC_F32;
    slot.rank = static_cast<int32_t>(shape.size());
    slot.shape = shape.data();
    slot.nbytes = 4 * elements;
  }
};

class InitialTensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    TensorFile init, fallback;
    addF32(init, "w", {2, 3}, 0.0f);
    addF32(init, "b", {4}, 10.0f);
    addF32(init, "unused", {1000}, 0.0f);
    addF32(fallback, "table", {3}, 100.0f);
    addF32(fallback, "w", {2, 3}, -1.0f); // not read: the init has w
    ASSERT_TRUE(writeSafetensors(initPath, init));
    ASSERT_TRUE(writeSafetensors(fallbackPath, fallback));
  }
  void TearDown() override {
    std::remove(initPath.c_str());
    std::remove(fallbackPath.c_str());
  }
  std::string initPath = tempPath("init.safetensors");
  std::string fallbackPath = tempPath("fallback.safetensors");
  Slot w{"w", {2, 3}, OTC_SLOT_PARAM}, b{"b", {4}, OTC_SLOT_PARAM},
      table{"table", {3}, OTC_SLOT_BUFFER};
};

TEST_F(InitialTensorsTest, CheckedFromTheHeaderThenReadABatchAtATime) {
  for (size_t batch : {size_t(1), size_t(28), size_t(1) << 30}) {
    InitialTensors init;
    ASSERT_TRUE(loadInitialParams(initPath, {&w.slot, &b.slot},
                                  {&table.slot}, fallbackPath, init));
    // Nothing read yet: the layouts hold no bytes.
    for (const Tensor &t : init.layout.tensors)
      EXPECT_TRUE(t.data.empty()) << t.name;
    EXPECT_EQ(init.source.at("w"), initPath);
    EXPECT_EQ(init.source.at("table"), fallbackPath);
    std::map<std::string, std::vector<float>> seen;
    int calls = 0;
    ASSERT_TRUE(forEachInitialTensor(
        init, {&w.slot, &b.slot, &table.slot},
        [&](const OtcSlot &slot, Tensor &t) {
          ++calls;
          std::vector<float> v(t.data.size() / 4);
          std::memcpy(v.data(), t.data.data(), t.data.size());
          seen[slot.name] = v;
          return Status::ok();
        },
        batch));
    EXPECT_EQ(calls, 3) << "batch " << batch;
    EXPECT_EQ(seen["w"], (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(seen["b"], (std::vector<float>{10, 11, 12, 13}));
    EXPECT_EQ(seen["table"], (std::vector<float>{100, 101, 102}));
  }
}

TEST_F(InitialTensorsTest, ErrorsNameTheFileAndTensor) {
  InitialTensors init;
  Slot wrong{"b", {5}, OTC_SLOT_PARAM};
  Status s = loadInitialParams(initPath, {&wrong.slot}, {}, "", init);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("parameter 'b': expected F32 [5]"));
  InitialTensors none;
  Slot absent{"nowhere", {3}, OTC_SLOT_BUFFER};
  s = loadInitialParams(initPath, {}, {&absent.slot}, fallbackPath, none);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("buffer 'nowhere' not found"));
  // The file replaced between the check and the read: refused.
  InitialTensors later;
  ASSERT_TRUE(loadInitialParams(initPath, {&w.slot}, {}, "", later));
  TensorFile changed;
  addF32(changed, "w", {3, 2}, 0.0f);
  ASSERT_TRUE(writeSafetensors(initPath, changed));
  s = forEachInitialTensor(later, {&w.slot},
                           [](const OtcSlot &, Tensor &) {
                             return Status::ok();
                           });
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'w' changed while it was read"));
}

TEST(InitialTensors, APipesLayoutIsRefusedButItsTensorsLoad) {
  TensorFile f;
  addF32(f, "w", {2}, 7.0f);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeSafetensors(f, bytes));
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  ::close(fds[1]);
  std::string path = "/dev/fd/" + std::to_string(fds[0]);
  TensorFile layout;
  EXPECT_FALSE(readSafetensorsLayout(path, layout));
  Slot w{"w", {2}, OTC_SLOT_PARAM};
  InitialTensors init;
  ASSERT_TRUE(loadInitialParams(path, {&w.slot}, {}, "", init));
  std::vector<float> seen;
  ASSERT_TRUE(forEachInitialTensor(init, {&w.slot},
                                   [&](const OtcSlot &, Tensor &t) {
                                     seen.resize(t.data.size() / 4);
                                     std::memcpy(seen.data(), t.data.data(),
                                                 t.data.size());
                                     return Status::ok();
                                   }));
  EXPECT_EQ(seen, (std::vector<float>{7, 8}));
  ::close(fds[0]);
}

} // namespace
