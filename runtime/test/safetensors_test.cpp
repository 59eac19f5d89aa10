// Unit tests of the safetensors reader/writer: round trips of every dtype,
// parsing of a hand-assembled file (an oracle independent of the writer),
// and the error messages for truncated and malformed files, which must name
// the file and the byte offset of the problem.
#include "otcrt/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>

using namespace otcrt;
using ::testing::HasSubstr;

namespace {

/// Builds a file image from a header string and raw data bytes.
std::vector<uint8_t> image(const std::string &header,
                           const std::vector<uint8_t> &data) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status parseImage(const std::vector<uint8_t> &bytes, TensorFile &out) {
  return parseSafetensors(bytes.data(), bytes.size(), "t.safetensors", out);
}

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/otcrt_st_" +
         std::to_string(::getpid()) + "_" + name;
}

} // namespace

TEST(Safetensors, RoundTripEveryDType) {
  const StDType all[] = {StDType::BOOL, StDType::U8,  StDType::I8,
                         StDType::I16,  StDType::U16, StDType::F16,
                         StDType::BF16, StDType::I32, StDType::U32,
                         StDType::F32,  StDType::F64, StDType::I64,
                         StDType::U64};
  std::mt19937 rng(42);
  TensorFile file;
  int index = 0;
  for (StDType dt : all) {
    std::vector<int64_t> shape = {2, 3 + index % 3};
    std::vector<uint8_t> bytes(numElements(shape) * dtypeSize(dt));
    for (auto &b : bytes)
      b = static_cast<uint8_t>(rng());
    file.add(std::string("t_") + dtypeName(dt), dt, shape, bytes.data());
    ++index;
  }
  float scalar = 3.5f;
  file.add("scalar", StDType::F32, {}, &scalar);
  file.add("empty", StDType::I64, {0, 4}, nullptr);
  file.add("we\"ird/näme\\x", StDType::F32, {1}, &scalar);
  file.metadata["format"] = "pt";

  std::string path = tempPath("roundtrip.safetensors");
  ASSERT_TRUE(writeSafetensors(path, file)) << "write failed";
  TensorFile back;
  Status s = readSafetensors(path, back);
  ASSERT_TRUE(s) << s.message();
  std::remove(path.c_str());
  ASSERT_EQ(back.tensors.size(), file.tensors.size());
  for (const Tensor &t : file.tensors) {
    const Tensor *u = back.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->dtype, t.dtype) << t.name;
    EXPECT_EQ(u->shape, t.shape) << t.name;
    EXPECT_EQ(u->data, t.data) << t.name;
  }
  EXPECT_EQ(back.metadata, file.metadata);
}

TEST(Safetensors, WriterLayout) {
  TensorFile file;
  int32_t v[2] = {1, -2};
  file.add("a", StDType::I32, {2}, v);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeSafetensors(file, bytes));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  EXPECT_EQ((8 + n) % 8, 0u) << "header must be padded to 8 bytes";
  ASSERT_EQ(bytes.size(), 8 + n + 8);
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + n);
  EXPECT_THAT(header, HasSubstr("\"a\":{\"dtype\":\"I32\",\"shape\":[2],"
                                "\"data_offsets\":[0,8]}"));
  int32_t back[2];
  std::memcpy(back, bytes.data() + 8 + n, 8);
  EXPECT_EQ(back[0], 1);
  EXPECT_EQ(back[1], -2);
}

TEST(Safetensors, ParsesHandWrittenFile) {
  // Tensors out of order in the header, spaces, an escaped name, metadata.
  std::string header =
      "{ \"__metadata__\": {\"k\": \"v\"},\n"
      "  \"b\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [4, 12]},\n"
      "  \"a\\u00e9\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]} }";
  std::vector<uint8_t> data(12);
  float a = -1.25f;
  int64_t b = 1234567890123ll;
  std::memcpy(data.data(), &a, 4);
  std::memcpy(data.data() + 4, &b, 8);
  TensorFile f;
  Status s = parseImage(image(header, data), f);
  ASSERT_TRUE(s) << s.message();
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a\xc3\xa9"); // sorted by offset
  EXPECT_EQ(f.metadata.at("k"), "v");
  const Tensor *tb = f.find("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->shape, std::vector<int64_t>{});
  int64_t gotB;
  std::memcpy(&gotB, tb->data.data(), 8);
  EXPECT_EQ(gotB, b);
  float gotA;
  std::memcpy(&gotA, f.tensors[0].data.data(), 4);
  EXPECT_EQ(gotA, a);
}

TEST(Safetensors, TruncatedFilesNameFileAndOffset) {
  TensorFile file;
  float v[4] = {1, 2, 3, 4};
  file.add("w", StDType::F32, {4}, v);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(serializeSafetensors(file, bytes));
  TensorFile out;

  Status s = parseSafetensors(bytes.data(), 5, "t.safetensors", out);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("t.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("offset 0"));

  s = parseSafetensors(bytes.data(), 20, "t.safetensors", out);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("t.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("offset 8"));

  size_t cut = bytes.size() - 3;
  s = parseSafetensors(bytes.data(), cut, "t.safetensors", out);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("t.safetensors"));
  EXPECT_THAT(s.message(), HasSubstr("'w'"));
  EXPECT_THAT(s.message(), HasSubstr("offset " + std::to_string(cut)));

  // The same through the file reader.
  std::string path = tempPath("trunc.safetensors");
  std::FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, cut, f);
  std::fclose(f);
  s = readSafetensors(path, out);
  std::remove(path.c_str());
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
}

TEST(Safetensors, MalformedHeaders) {
  TensorFile out;
  std::vector<uint8_t> four(4);
  const std::string kUnclosed =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}";
  struct Case {
    std::string header;
    std::vector<uint8_t> data;
    std::string expect;
  } cases[] = {
      {kUnclosed, four, "byte offset " + std::to_string(8 + kUnclosed.size())},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4],}}",
       four, "byte offset"},
      {"[1, 2]", {}, "expected a JSON object"},
      {"{\"a\": {\"dtype\": \"Q7\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
       four, "unsupported dtype"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}",
       four, "needs 8 bytes"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}",
       four, "non-negative"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
       " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [2, 6]}}",
       std::vector<uint8_t>(8), "overlap"},
      {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
       " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
       four, "twice"},
      {"{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", four, "dtype"},
  };
  for (const auto &c : cases) {
    Status s = parseImage(image(c.header, c.data), out);
    ASSERT_FALSE(s) << c.header;
    EXPECT_THAT(s.message(), HasSubstr("t.safetensors")) << c.header;
    EXPECT_THAT(s.message(), HasSubstr(c.expect)) << c.header;
  }
}

TEST(Safetensors, MissingFile) {
  TensorFile out;
  Status s = readSafetensors("/nonexistent/dir/x.safetensors", out);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/dir/x.safetensors"));
}
