// Unit tests of the safetensors reader/writer: round trips of every dtype,
// parsing of a hand-assembled file (an oracle independent of the writer),
// and the error messages for truncated and malformed files, which must name
// the file and the byte offset of the problem.
#include "otcrt/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
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

// The streamed writer asks for each tensor's bytes in file order, as it
// writes them, and its file is byte for byte the one writeSafetensors makes
// of the same tensors; an error from the callback ends the write with that
// error.
TEST(Safetensors, StreamedWriteAsksInOrderAndMatchesTheWholeWrite) {
  TensorFile whole, layout;
  float a[3] = {1.5f, -2.0f, 3.25f};
  int64_t b[2] = {7, -9};
  whole.add("a", StDType::F32, {3}, a);
  whole.add("b", StDType::I64, {2, 1}, b);
  whole.metadata["format"] = "pt";
  layout = whole;
  for (Tensor &t : layout.tensors)
    t.data.clear();
  const std::string wholePath = tempPath("whole"),
                    streamed = tempPath("stream");
  ASSERT_TRUE(writeSafetensors(wholePath, whole));
  std::vector<size_t> asked;
  Status s =
      writeSafetensorsFrom(streamed, layout, [&](size_t i, const void *&data) {
        asked.push_back(i);
        data = i == 0 ? static_cast<const void *>(a)
                      : static_cast<const void *>(b);
        return Status::ok();
      });
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(asked, (std::vector<size_t>{0, 1}));
  auto bytesOf = [](const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytesOf(streamed), bytesOf(wholePath));
  Status failed =
      writeSafetensorsFrom(streamed, layout, [&](size_t i, const void *&data) {
        data = a;
        return i == 1 ? Status::error("tensor b: cannot read") : Status::ok();
      });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.message(), "tensor b: cannot read");
  std::remove(wholePath.c_str());
  std::remove(streamed.c_str());
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

namespace {

/// The bytes this process has read through read(2) and friends so far
/// (/proc/self/io's rchar), or -1 where the kernel does not count them.
long long bytesReadSoFar() {
  std::FILE *f = std::fopen("/proc/self/io", "r");
  if (!f)
    return -1;
  long long n = -1;
  char key[32];
  long long v;
  while (std::fscanf(f, "%31s %lld", key, &v) == 2)
    if (std::strcmp(key, "rchar:") == 0)
      n = v;
  std::fclose(f);
  return n;
}

} // namespace

TEST(Safetensors, SelectiveReadLeavesTheOtherTensorsUnread) {
  // A 64 MiB tensor between two small ones, its bytes a hole of a sparse
  // file: the header written by hand, the last tensor's bytes at the end.
  constexpr long long kBig = 64ll << 20;
  std::string header =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
      "\"big\":{\"dtype\":\"U8\",\"shape\":[" +
      std::to_string(kBig) + "],\"data_offsets\":[16," +
      std::to_string(16 + kBig) +
      "]},"
      "\"z\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[" +
      std::to_string(16 + kBig) + "," + std::to_string(24 + kBig) + "]}}";
  const float a[4] = {1.5f, -2, 3, 4};
  const int64_t z = -77;
  std::vector<uint8_t> head = image(header, {});
  const long long dataStart = static_cast<long long>(head.size());
  std::string path = tempPath("sparse.safetensors");
  std::FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(head.data(), 1, head.size(), f), head.size());
  ASSERT_EQ(std::fwrite(a, 1, sizeof(a), f), sizeof(a));
  ASSERT_EQ(std::fseek(f, static_cast<long>(dataStart + 16 + kBig), SEEK_SET),
            0);
  ASSERT_EQ(std::fwrite(&z, 1, sizeof(z), f), sizeof(z));
  ASSERT_EQ(std::fclose(f), 0);

  const long long before = bytesReadSoFar();
  TensorFile out;
  Status s = readSafetensors(
      path, out, [](const std::string &name) { return name != "big"; });
  const long long after = bytesReadSoFar();
  ASSERT_TRUE(s) << s.message();
  ASSERT_EQ(out.tensors.size(), 2u);
  EXPECT_EQ(out.tensors[0].name, "a"); // file order
  EXPECT_EQ(out.tensors[1].name, "z");
  EXPECT_EQ(out.find("big"), nullptr);
  EXPECT_EQ(out.metadata.at("k"), "v");
  ASSERT_EQ(out.tensors[0].data.size(), sizeof(a));
  EXPECT_EQ(std::memcmp(out.tensors[0].data.data(), a, sizeof(a)), 0);
  int64_t gotZ = 0;
  std::memcpy(&gotZ, out.tensors[1].data.data(), 8);
  EXPECT_EQ(gotZ, z);
  // The hole was never read: a few pages of the header and the small
  // tensors at most, against 64 MiB.
  if (before >= 0 && after >= 0)
    EXPECT_LT(after - before, 1 << 20) << "bytes read: " << after - before;

  // Nothing kept: the metadata alone.
  s = readSafetensors(path, out, [](const std::string &) { return false; });
  ASSERT_TRUE(s) << s.message();
  EXPECT_TRUE(out.tensors.empty());
  EXPECT_EQ(out.metadata.at("k"), "v");

  // The whole header is still checked: with the file cut inside 'z', the
  // read of 'a' alone fails naming 'z'.
  ASSERT_EQ(::truncate(path.c_str(), dataStart + 20 + kBig), 0);
  s = readSafetensors(path, out, [](const std::string &n) { return n == "a"; });
  std::remove(path.c_str());
  ASSERT_FALSE(s);
  EXPECT_THAT(s.message(), HasSubstr("truncated: tensor 'z'"));
}

TEST(Safetensors, Crc32IsZlibs) {
  // The check value of CRC-32/ISO-HDLC (zlib's crc32) for "123456789".
  const char *digits = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t *>(digits), 9), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0), 0u);
  // Against the bit-by-bit definition, at every length and alignment up to
  // 40 bytes, and continued from a first part.
  auto reference = [](const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
  };
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(64);
  for (auto &b : bytes)
    b = static_cast<uint8_t>(rng());
  for (size_t start = 0; start < 8; ++start)
    for (size_t n = 0; n <= 40; ++n) {
      EXPECT_EQ(crc32(bytes.data() + start, n),
                reference(bytes.data() + start, n))
          << start << " " << n;
      size_t half = n / 3;
      EXPECT_EQ(crc32(bytes.data() + start + half, n - half,
                      crc32(bytes.data() + start, half)),
                reference(bytes.data() + start, n))
          << start << " " << n;
    }
}
