//===- ExternalDataTest.cpp - reading parts of external tensor data -------===//
//
// What an import that keeps no values reads of a large tensor
// (frontend/ModelReader.cpp): readFloatRange reads elements at the tensor's
// offset in its external file (values written here by hand), refusing a
// range past the tensor; externalHole says a tensor's bytes are a hole of a
// sparse file only when no byte of its range was written.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

using otc::detail::externalHole;
using otc::detail::ImportError;
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

/// A float32 tensor of `dims` at `offset` of model.onnx.data.
onnx::TensorProto external(std::vector<int64_t> dims, int64_t offset) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
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

} // namespace
