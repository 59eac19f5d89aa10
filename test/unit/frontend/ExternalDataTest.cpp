//===- ExternalDataTest.cpp - reading parts of external tensor data -------===//
//
// What an import that keeps no values reads of a large tensor
// (frontend/ModelReader.cpp): readFloatRange reads elements at the tensor's
// offset in its external file (values written here by hand), refusing a
// range past the tensor; externalHole says a tensor's bytes are a hole of a
// sparse file only when no byte of its range was written; decodeTensor and
// forEachFloatChunk read every float type a chunk at a time (values of a
// hand-made table); keyWithoutValues gives a large tensor's tie key
// without keeping its values.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using otc::detail::decodeTensor;
using otc::detail::externalHole;
using otc::detail::forEachFloatChunk;
using otc::detail::ImportError;
using otc::detail::keyWithoutValues;
using otc::detail::readFloatRange;

namespace {

/// A temporary directory holding model.onnx's external data file.
struct ModelDir {
  llvm::SmallString<128> dir;
  ModelDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("otc-external", dir));
  }
  ~ModelDir() { llvm::sys::fs::remove_directories(dir); }
  std::string model() const { return (dir + "/model.onnx").str(); }
  std::string data() const { return (dir + "/model.onnx.data").str(); }
};

/// A tensor of `dims` (float32 unless `type` says) at `offset` of
/// model.onnx.data.
onnx::TensorProto external(std::vector<int64_t> dims, int64_t offset,
                           int type = onnx::TensorProto::FLOAT) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(type);
  for (int64_t d : dims)
    t.add_dims(d);
  t.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto *location = t.add_external_data();
  location->set_key("location");
  location->set_value("model.onnx.data");
  auto *at = t.add_external_data();
  at->set_key("offset");
  at->set_value(std::to_string(offset));
  return t;
}

void writeAt(const std::string &path, int64_t offset, const void *bytes,
             size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes, size, offset), static_cast<ssize_t>(size));
  ::close(fd);
}

TEST(ExternalData, ReadsARangeAtTheTensorsOffset) {
  ModelDir d;
  // 16 bytes before the tensor, then a 3 x 4 tensor of 0.5 * i.
  std::vector<float> values(16 / 4 + 12);
  for (size_t i = 0; i < 12; ++i)
    values[4 + i] = 0.5f * static_cast<float>(i);
  values[0] = 99.0f;
  writeAt(d.data(), 0, values.data(), values.size() * 4);
  onnx::TensorProto t = external({3, 4}, 16);
  EXPECT_EQ(readFloatRange(t, "w", d.model(), 0, 2),
            (std::vector<float>{0.0f, 0.5f}));
  // The diagonal's (1, 1) and (2, 2): elements 5 and 10.
  EXPECT_EQ(readFloatRange(t, "w", d.model(), 5, 1)[0], 2.5f);
  EXPECT_EQ(readFloatRange(t, "w", d.model(), 10, 2),
            (std::vector<float>{5.0f, 5.5f}));
  EXPECT_TRUE(readFloatRange(t, "w", d.model(), 12, 0).empty());
  // Every fifth element from 0 (the 3 x 4 tensor's diagonal, stride 5):
  // elements 0, 5 and 10; a fourth (15) is past it.
  EXPECT_EQ(readFloatRange(t, "w", d.model(), 0, 3, 5),
            (std::vector<float>{0.0f, 2.5f, 5.0f}));
  EXPECT_THROW(readFloatRange(t, "w", d.model(), 0, 4, 5), ImportError);
  EXPECT_THROW(readFloatRange(t, "w", d.model(), 11, 2), ImportError);
  EXPECT_THROW(readFloatRange(t, "w", d.model(), -1, 1), ImportError);
  // The same values as raw data.
  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(12);
  raw.set_raw_data(values.data() + 4, 12 * 4);
  EXPECT_EQ(readFloatRange(raw, "w", d.model(), 3, 2),
            (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(readFloatRange(raw, "w", d.model(), 0, 3, 5),
            (std::vector<float>{0.0f, 2.5f, 5.0f}));
  EXPECT_FALSE(externalHole(raw, "w", d.model()));
}

TEST(ExternalData, AHoleIsARangeNeverWritten) {
  ModelDir d;
  constexpr int64_t kFile = 1 << 20, kTensor = 64 * 256 * 4;
  {
    int fd = ::open(d.data().c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kFile), 0);
    ::close(fd);
  }
  // A file system that keeps no holes says so for the fresh file: then
  // every range reads as data and there is nothing to check.
  {
    int fd = ::open(d.data().c_str(), O_RDONLY);
    errno = 0;
    off_t first = ::lseek(fd, 0, SEEK_DATA);
    int err = errno;
    ::close(fd);
    if (!(first < 0 && err == ENXIO))
      GTEST_SKIP() << "this file system reports no holes";
  }
  onnx::TensorProto low = external({64, 256}, 0);
  onnx::TensorProto high = external({64, 256}, 4 * kTensor);
  EXPECT_TRUE(externalHole(low, "w", d.model()));
  EXPECT_TRUE(externalHole(high, "w", d.model()));
  // One value written inside the low tensor's range: data there, not in
  // the high one's.
  const float one = 1.0f;
  writeAt(d.data(), kTensor - 4, &one, 4);
  EXPECT_FALSE(externalHole(low, "w", d.model()));
  EXPECT_TRUE(externalHole(high, "w", d.model()));
  // A range past the file is an import error, not a hole.
  onnx::TensorProto past = external({64, 256}, kFile - 4);
  EXPECT_THROW(externalHole(past, "w", d.model()), ImportError);
}

/// All of a float tensor's values as forEachFloatChunk visits them, and
/// how many calls it took.
std::vector<float> visitAll(const onnx::TensorProto &t,
                            const std::string &model, int &calls) {
  std::vector<float> out;
  calls = 0;
  forEachFloatChunk(t, "w", model, [&](const float *v, size_t n) {
    out.insert(out.end(), v, v + n);
    ++calls;
  });
  return out;
}

TEST(ExternalData, DecodesEachFloatTypeAChunkAtATime) {
  ModelDir d;
  // More elements than two chunks of conversion (2^20 each), at offset 8.
  constexpr int64_t kCount = (int64_t(1) << 21) + 37;
  // Five half-precision values and their bit patterns, by hand: 1, -2,
  // 0.5, the largest half (65504) and the smallest subnormal (2^-24).
  const uint16_t halfBits[5] = {0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001};
  const float halfValues[5] = {1.0f, -2.0f, 0.5f, 65504.0f, 0x1p-24f};
  // A value of eight bits of mantissa (exact in bfloat16: the top half of
  // its float32 bits).
  auto small = [](int64_t i) { return float(i % 509 - 254) * 0.125f; };
  std::vector<float> expected(kCount);
  for (int type : {onnx::TensorProto::FLOAT, onnx::TensorProto::DOUBLE,
                   onnx::TensorProto::FLOAT16, onnx::TensorProto::BFLOAT16}) {
    SCOPED_TRACE(type);
    std::string bytes(8, '\x7f'); // before the tensor
    for (int64_t i = 0; i < kCount; ++i) {
      float f =
          type == onnx::TensorProto::FLOAT16 ? halfValues[i % 5] : small(i);
      expected[i] = f;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (type == onnx::TensorProto::FLOAT) {
        bytes.append(reinterpret_cast<const char *>(&f), 4);
      } else if (type == onnx::TensorProto::DOUBLE) {
        double x = f;
        bytes.append(reinterpret_cast<const char *>(&x), 8);
      } else {
        uint16_t h = type == onnx::TensorProto::FLOAT16 ? halfBits[i % 5]
                                                        : uint16_t(bits >> 16);
        bytes.append(reinterpret_cast<const char *>(&h), 2);
      }
    }
    llvm::sys::fs::remove(d.data());
    writeAt(d.data(), 0, bytes.data(), bytes.size());
    onnx::TensorProto t = external({kCount}, 8, type);
    EXPECT_EQ(decodeTensor(t, "w", d.model()).floats, expected);
    int calls = 0;
    EXPECT_EQ(visitAll(t, d.model(), calls), expected);
    EXPECT_EQ(calls, 3); // 2^20, 2^20 and 37
  }
  // A tensor in the model (raw data): one call.
  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(3);
  const float three[3] = {1.5f, -0.25f, 8.0f};
  raw.set_raw_data(three, sizeof three);
  int calls = 0;
  EXPECT_EQ(visitAll(raw, d.model(), calls),
            (std::vector<float>{1.5f, -0.25f, 8.0f}));
  EXPECT_EQ(calls, 1);
  // A file shorter than the tensor: an import error before any read.
  onnx::TensorProto past =
      external({kCount + 1}, 8, onnx::TensorProto::BFLOAT16);
  EXPECT_THROW(decodeTensor(past, "w", d.model()), ImportError);
  EXPECT_THROW(visitAll(past, d.model(), calls), ImportError);
}

TEST(ExternalData, AKeyWithoutTheValues) {
  ModelDir d;
  // At the size an export reads again instead of keeping (4M elements
  // unless OTC_TEST_VALUELESS_ELEMENTS says otherwise).
  const int64_t count = int64_t(otc::detail::valuelessElements()) + 5;
  std::vector<float> values(count);
  uint64_t sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    values[i] = float(i % 1000) * 0.001f - 0.5f;
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    sum += bits;
  }
  writeAt(d.data(), 0, values.data(), values.size() * 4);
  onnx::TensorProto t = external({count}, 0);
  std::optional<otc::detail::StreamedKey> key =
      keyWithoutValues(t, "w", d.model());
  ASSERT_TRUE(key);
  EXPECT_TRUE(key->finite);
  EXPECT_EQ(key->key.count, size_t(count));
  // The key's sum is the sum of the values' bit patterns, whatever the
  // chunks.
  EXPECT_EQ(key->key.sum, sum);
  EXPECT_FALSE(key->key.fewDistinct); // 1000 distinct values
  otc::TieKey whole = otc::tieKey(values);
  EXPECT_EQ(key->key.mixed, whole.mixed);
  // A mask's -inf, past the first chunk.
  const float minusInf = -INFINITY;
  writeAt(d.data(), 4 * (count - 2), &minusInf, 4);
  key = keyWithoutValues(t, "w", d.model());
  ASSERT_TRUE(key);
  EXPECT_FALSE(key->finite);
  // Ones and zeros: few distinct values.
  std::vector<float> onesZeros(count);
  for (int64_t i = 0; i < count; ++i)
    onesZeros[i] = float(i % 2);
  writeAt(d.data(), 0, onesZeros.data(), onesZeros.size() * 4);
  key = keyWithoutValues(t, "w", d.model());
  ASSERT_TRUE(key);
  EXPECT_TRUE(key->key.fewDistinct);
  EXPECT_TRUE(key->finite);
  // A smaller tensor, or one in the model, is read whole: no key here.
  EXPECT_FALSE(keyWithoutValues(external({count - 10}, 0), "w", d.model()));
  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(2);
  raw.set_raw_data(values.data(), 8);
  EXPECT_FALSE(keyWithoutValues(raw, "w", d.model()));
}

} // namespace
