//===- ModelReader.cpp - reading ONNX files and tensor data ---------------===//
//
// The file side of the importer: parsing the ModelProto (reporting the byte
// offset of a malformed field), checking ir_version and the opset, running
// libonnx's checker where it knows the opset (<= 17), and decoding tensor
// contents from raw_data, typed fields or external data files. Every float
// type is converted to float32.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "onnx/checker.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;

namespace otc {
namespace detail {

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Throws an ImportError carrying `msg`.
void fail(const Twine &msg) { throw ImportError(msg.str()); }

int64_t checkedElements(ArrayRef<int64_t> shape, uint64_t elemBytes,
                        const Twine &what, uint64_t limit) {
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
    if (!overflow && __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      overflow = true;
  }
  uint64_t bytes = 0;
  if (overflow ||
      __builtin_mul_overflow(n, std::max<uint64_t>(elemBytes, 1), &bytes) ||
      bytes > limit)
    fail(what + " is too large: shape " + shapeStr(shape) + " has " +
         (overflow ? std::string("more than 2^64") : std::to_string(n)) +
         " elements, over the limit of " + Twine(limit) +
         " bytes per tensor");
  return static_cast<int64_t>(n);
}

/// Formats a shape as `[4, 3]`.
std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

/// Makes a possibly multi-line message fit on one line.
std::string oneLine(StringRef msg) {
  std::string out;
  bool space = false;
  for (char c : msg.trim()) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// Name of an ONNX tensor element type, e.g. "FLOAT16".
std::string dataTypeName(int32_t type) {
  if (onnx::TensorProto_DataType_IsValid(type))
    return onnx::TensorProto_DataType_Name(type);
  return "type " + std::to_string(type);
}

/// Converts IEEE half-precision bits to float.
static float halfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}

/// Converts bfloat16 bits to float.
static float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

/// Widens a float read from the model to the double with the same shortest
/// decimal form (0.1f becomes 0.1, not 0.10000000149011612).
double widenFloat(float v) {
  if (!std::isfinite(v))
    return v;
  for (int digits = 1; digits <= 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(v));
    double d = std::strtod(text, nullptr);
    if (static_cast<float>(d) == v)
      return d;
  }
  return v;
}

/// Prints a type, e.g. `tensor<2x3xi64>`.
std::string typeStr(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Maps an ONNX element type to the kind it is imported as, if supported.
/// All floating-point types become f32.
std::optional<Kind> kindOf(int32_t type) {
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_DOUBLE:
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    return Kind::F32;
  case onnx::TensorProto_DataType_INT64:
    return Kind::I64;
  case onnx::TensorProto_DataType_INT32:
    return Kind::I32;
  case onnx::TensorProto_DataType_BOOL:
    return Kind::I1;
  default:
    return std::nullopt;
  }
}

/// Bytes per element of an ONNX type in raw_data (0 when unsupported).
static size_t rawElementSize(int32_t type) {
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_INT32:
    return 4;
  case onnx::TensorProto_DataType_DOUBLE:
  case onnx::TensorProto_DataType_INT64:
    return 8;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    return 2;
  case onnx::TensorProto_DataType_BOOL:
    return 1;
  default:
    return 0;
  }
}

/// The MLIR element type of a kind.
Type elementType(MLIRContext *ctx, Kind kind) {
  switch (kind) {
  case Kind::F32:
    return Float32Type::get(ctx);
  case Kind::I64:
    return IntegerType::get(ctx, 64);
  case Kind::I32:
    return IntegerType::get(ctx, 32);
  case Kind::I1:
    return IntegerType::get(ctx, 1);
  }
  llvm_unreachable("unknown kind");
}

DenseElementsAttr toAttr(MLIRContext *ctx, const TensorData &t) {
  auto type = RankedTensorType::get(t.shape, elementType(ctx, t.kind));
  switch (t.kind) {
  case Kind::F32:
    return DenseElementsAttr::get(type, ArrayRef<float>(t.floats));
  case Kind::I64:
    return DenseElementsAttr::get(type, ArrayRef<int64_t>(t.ints));
  case Kind::I32: {
    SmallVector<int32_t> v(t.ints.begin(), t.ints.end());
    return DenseElementsAttr::get(type, ArrayRef<int32_t>(v));
  }
  case Kind::I1: {
    SmallVector<bool> v;
    for (int64_t x : t.ints)
      v.push_back(x != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(v));
  }
  }
  llvm_unreachable("unknown kind");
}

//===----------------------------------------------------------------------===//
// Loading and checking
//===----------------------------------------------------------------------===//

/// Returns the byte offset of the first top-level protobuf field of `data`
/// that cannot be read, if any.
static std::optional<int64_t> firstBadFieldOffset(const std::string &data) {
  namespace pb = google::protobuf;
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t *>(data.data()),
                              static_cast<int>(data.size()));
  in.SetTotalBytesLimit(INT_MAX);
  while (true) {
    int64_t pos = in.CurrentPosition();
    uint32_t tag = in.ReadTag();
    if (tag == 0)
      return pos == static_cast<int64_t>(data.size())
                 ? std::nullopt
                 : std::optional<int64_t>(pos);
    if (!pb::internal::WireFormatLite::SkipField(&in, tag))
      return pos;
  }
}

void loadModel(const std::string &path, onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    fail("cannot read '" + path + "': " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    fail("'" + path + "' is empty (0 bytes), not an ONNX model");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    fail("'" + path + "' is larger than 2 GiB (" + Twine(bytes.size()) +
         " bytes): store the weights as ONNX external data");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    std::string msg = "failed to parse '" + path + "' as an ONNX ModelProto (" +
                      std::to_string(bytes.size()) + " bytes)";
    if (auto off = firstBadFieldOffset(bytes.str()))
      msg += ": field at byte offset " + std::to_string(*off) +
             " is truncated or malformed";
    fail(msg);
  }
}

int64_t checkHeader(const std::string &path, const onnx::ModelProto &model) {
  int64_t opset = 0;
  if (model.ir_version() <= 0)
    fail("'" + path + "' has no ir_version: not an ONNX model?");
  bool found = false;
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      opset = imp.version();
      found = true;
    }
  }
  if (!found)
    fail("'" + path + "' has no opset_import for the default ONNX domain");
  if (!model.has_graph())
    fail("'" + path + "' has no graph");
  if (opset < kOldestOpset || opset > kMaxOpset)
    fail("'" + path + "' uses ONNX opset " + Twine(opset) +
         "; the importer supports opsets " + Twine(kOldestOpset) + " to " +
         Twine(kMaxOpset));
  return opset;
}

void runChecker(const std::string &path, int64_t opset) {
  // libonnx 1.12 rejects opsets it does not know; skip the checker there.
  if (opset > kMaxCheckerOpset)
    return;
  // The path overload resolves external data relative to the model's
  // directory (the ModelProto one would use the working directory).
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception &e) {
    fail("'" + path + "' fails the ONNX checker: " + oneLine(e.what()));
  }
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

/// Resolves the external-data `location` of a tensor to a file the model may
/// read: a relative path that stays inside the model's directory once `..`
/// and symlinks are resolved, naming a regular file (not a device, fifo or
/// directory). Fails naming the tensor otherwise.
static std::string resolveExternal(const std::string &location,
                                   const Twine &what, const std::string &path) {
  namespace fs = llvm::sys::fs;
  namespace sp = llvm::sys::path;
  if (location.empty())
    fail(what + ": external data has no 'location'");
  if (location.find('\0') != std::string::npos)
    fail(what + ": external data location contains a NUL byte");
  if (sp::is_absolute(location) ||
      sp::is_absolute(location, sp::Style::windows))
    fail(what + ": external data location '" + location +
         "' is an absolute path; it must be relative to the model's "
         "directory");
  SmallString<256> dir(sp::parent_path(path));
  if (dir.empty())
    dir = ".";
  SmallString<256> realDir;
  if (std::error_code ec = fs::real_path(dir, realDir))
    fail(what + ": cannot resolve the model's directory '" + dir +
         "': " + ec.message());
  SmallString<256> file(dir);
  sp::append(file, location);
  SmallString<256> realFile;
  if (std::error_code ec = fs::real_path(file, realFile))
    fail(what + ": cannot read external data '" + file + "': " + ec.message());
  StringRef inside = realFile.str();
  bool contained = inside.consume_front(realDir.str()) &&
                   (sp::is_separator(realDir.back()) ||
                    (!inside.empty() && sp::is_separator(inside.front())));
  if (!contained)
    fail(what + ": external data location '" + location + "' resolves to '" +
         realFile + "', outside the model's directory '" + realDir + "'");
  fs::file_status st;
  if (std::error_code ec = fs::status(realFile, st))
    fail(what + ": cannot read external data '" + file + "': " + ec.message());
  if (st.type() != fs::file_type::regular_file)
    fail(what + ": external data '" + file + "' is not a regular file");
  return realFile.str().str();
}

/// Where an EXTERNAL tensor's bytes are: the file its `location` names (see
/// resolveExternal), offset and length checked against the file's size.
struct ExternalRange {
  std::string file;
  int64_t offset = 0, length = 0;
};
static ExternalRange externalRange(const onnx::TensorProto &t,
                                   const Twine &what, uint64_t expectedBytes,
                                   const std::string &path) {
  std::string location;
  bool hasLocation = false;
  int64_t offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
      hasLocation = true;
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t v;
      if (StringRef(kv.value()).getAsInteger(10, v) || v < 0)
        fail(what + ": external data " + kv.key() + " '" + oneLine(kv.value()) +
             "' is not a non-negative integer");
      (kv.key() == "offset" ? offset : length) = v;
    }
  }
  if (!hasLocation)
    fail(what + ": external data has no 'location'");
  std::string file = resolveExternal(location, what, path);
  if (length < 0)
    length = static_cast<int64_t>(expectedBytes);
  if (static_cast<uint64_t>(length) != expectedBytes)
    fail(what + ": external data in '" + file + "' has length " +
         Twine(length) + " but the shape needs " + Twine(expectedBytes) +
         " bytes");
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(file, fileSize))
    fail(what + ": cannot read external data '" + file + "': " + ec.message());
  if (static_cast<uint64_t>(offset) > fileSize ||
      static_cast<uint64_t>(length) > fileSize - static_cast<uint64_t>(offset))
    fail(what + ": external data '" + file + "' has " + Twine(fileSize) +
         " bytes, fewer than offset " + Twine(offset) + " + length " +
         Twine(length));
  return {file, offset, length};
}

/// An EXTERNAL tensor's file (externalRange), opened once and read a range
/// at a time with pread: its bytes pass through the page cache, never
/// mapped into the process, so its memory holds only what the caller keeps
/// (at Llama 3 8B, a 2 GB embedding read as floats costs 2 GB, not 4).
class ExternalReader {
public:
  ExternalReader(const onnx::TensorProto &t, const Twine &what,
                 uint64_t expectedBytes, const std::string &path)
      : what(what.str()), range(externalRange(t, what, expectedBytes, path)) {
    fd = ::open(range.file.c_str(), O_RDONLY);
    if (fd < 0)
      fail(this->what + ": cannot read external data '" + range.file +
           "': " + std::strerror(errno));
  }
  ~ExternalReader() { ::close(fd); }
  ExternalReader(const ExternalReader &) = delete;
  ExternalReader &operator=(const ExternalReader &) = delete;

  /// Reads `bytes` bytes from `at` bytes into the tensor.
  void read(void *dst, size_t bytes, int64_t at) const {
    char *p = static_cast<char *>(dst);
    off_t pos = static_cast<off_t>(range.offset + at);
    while (bytes) {
      ssize_t got = ::pread(fd, p, bytes, pos);
      if (got <= 0)
        fail(what + ": cannot read external data '" + range.file + "' at " +
             Twine(static_cast<int64_t>(pos)) +
             (got < 0 ? Twine(": ") + std::strerror(errno) : Twine("")));
      p += got;
      pos += got;
      bytes -= static_cast<size_t>(got);
    }
  }

private:
  std::string what;
  ExternalRange range;
  int fd = -1;
};

/// Raw element `i` of type T at `p` (unaligned).
template <typename T> static T loadRaw(const char *p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

/// Converts `n` raw elements of a float `type` (any width) at `p` to float32.
static void rawToFloats(int32_t type, const char *p, int64_t n, float *dst) {
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
    if (n)
      std::memcpy(dst, p, static_cast<size_t>(n) * 4);
    return;
  case onnx::TensorProto_DataType_DOUBLE:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(loadRaw<double>(p, i));
    return;
  case onnx::TensorProto_DataType_FLOAT16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(loadRaw<uint16_t>(p, i));
    return;
  case onnx::TensorProto_DataType_BFLOAT16:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(loadRaw<uint16_t>(p, i));
    return;
  }
}

/// Appends `n` raw elements of `type` at `p` to `out` (floats or ints by
/// its kind).
static void appendRaw(TensorData &out, int32_t type, const char *p, int64_t n) {
  if (out.kind == Kind::F32) {
    size_t at = out.floats.size();
    out.floats.resize(at + static_cast<size_t>(n));
    rawToFloats(type, p, n, out.floats.data() + at);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
    case onnx::TensorProto_DataType_INT64:
      out.ints.push_back(loadRaw<int64_t>(p, i));
      break;
    case onnx::TensorProto_DataType_INT32:
      out.ints.push_back(loadRaw<int32_t>(p, i));
      break;
    case onnx::TensorProto_DataType_BOOL:
      out.ints.push_back(loadRaw<uint8_t>(p, i) != 0);
      break;
    }
  }
}

/// Elements per chunk when an external tensor of another type than float32
/// is converted as it is read (4 MiB of float32).
static constexpr int64_t kChunkElements = int64_t(1) << 20;

bool externalHole(const onnx::TensorProto &t, const Twine &what,
                  const std::string &path) {
  if (t.data_location() != onnx::TensorProto_DataLocation_EXTERNAL)
    return false;
  const size_t elemSize = rawElementSize(t.data_type());
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  if (!elemSize || llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return false;
  const int64_t n = checkedElements(shape, elemSize, what);
  ExternalRange r =
      externalRange(t, what, static_cast<uint64_t>(n) * elemSize, path);
  if (r.length == 0)
    return false;
  int fd = ::open(r.file.c_str(), O_RDONLY);
  if (fd < 0)
    return false;
  // The first byte of data at or after the tensor's: none (ENXIO), or
  // past its end, and its bytes are a hole. A file system without holes
  // answers with the offset itself.
  errno = 0;
  off_t data = ::lseek(fd, static_cast<off_t>(r.offset), SEEK_DATA);
  const bool hole = (data < 0 && errno == ENXIO) ||
                    (data >= 0 && data >= r.offset + r.length);
  ::close(fd);
  return hole;
}

std::string externalBytes(const onnx::TensorProto &t, const Twine &what,
                          const std::string &path) {
  std::vector<int64_t> shape;
  for (int64_t d : t.dims()) {
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
    shape.push_back(d);
  }
  const size_t elemSize = rawElementSize(t.data_type());
  if (!elemSize)
    fail(what + " has element type " + dataTypeName(t.data_type()) +
         ", which is not supported");
  const int64_t n = checkedElements(shape, elemSize, what);
  ExternalReader reader(t, what, static_cast<uint64_t>(n) * elemSize, path);
  std::string bytes(static_cast<size_t>(n) * elemSize, '\0');
  reader.read(bytes.data(), bytes.size(), 0);
  return bytes;
}

std::vector<float> readFloatRange(const onnx::TensorProto &t, const Twine &what,
                                  const std::string &path, int64_t first,
                                  int64_t count, int64_t stride) {
  if (t.data_type() != onnx::TensorProto_DataType_FLOAT)
    fail(what + " is not float32");
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
  const int64_t n = checkedElements(shape, 4, what);
  if (first < 0 || count < 0 || stride < 1 || first > n ||
      (count > 0 && (count - 1) > (n - 1 - first) / stride))
    fail(what + ": elements " + Twine(first) + " + " + Twine(count) + " x " +
         Twine(stride) + " are past its " + Twine(n));
  std::vector<float> out(static_cast<size_t>(count));
  if (!count)
    return out;
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    // The file resolved and opened once; one read per element apart (one
    // for a contiguous range).
    ExternalReader reader(t, what, static_cast<uint64_t>(n) * 4, path);
    const int64_t run = stride == 1 ? count : 1;
    for (int64_t i = 0; i < count; i += run)
      reader.read(out.data() + i, static_cast<size_t>(run) * 4,
                  (first + i * stride) * 4);
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * 4)
      fail(what + " has " + Twine(t.raw_data().size()) +
           " bytes of raw_data but needs " + Twine(n * 4));
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(out.data() + i,
                  t.raw_data().data() + (first + i * stride) * 4, 4);
  } else {
    if (t.float_data_size() != n)
      fail(what + " has " + Twine(t.float_data_size()) +
           " values but its shape needs " + Twine(n));
    for (int64_t i = 0; i < count; ++i)
      out[static_cast<size_t>(i)] =
          t.float_data(static_cast<int>(first + i * stride));
  }
  return out;
}

void forEachFloatChunk(const onnx::TensorProto &t, const Twine &what,
                       const std::string &path,
                       llvm::function_ref<void(const float *, size_t)> visit) {
  const int32_t type = t.data_type();
  if (t.data_location() != onnx::TensorProto_DataLocation_EXTERNAL ||
      kindOf(type) != Kind::F32) {
    TensorData d = decodeTensor(t, what, path);
    if (d.kind != Kind::F32)
      fail(what + " is not a float tensor");
    visit(d.floats.data(), d.floats.size());
    return;
  }
  std::vector<int64_t> shape;
  for (int64_t d : t.dims()) {
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
    shape.push_back(d);
  }
  const size_t elemSize = rawElementSize(type);
  const int64_t n = checkedElements(shape, elemSize, what);
  ExternalReader reader(t, what, static_cast<uint64_t>(n) * elemSize, path);
  std::vector<float> floats(static_cast<size_t>(std::min(n, kChunkElements)));
  std::vector<char> raw(
      type == onnx::TensorProto_DataType_FLOAT ? 0 : floats.size() * elemSize);
  for (int64_t i = 0; i < n; i += kChunkElements) {
    const int64_t k = std::min(kChunkElements, n - i);
    const int64_t at = i * static_cast<int64_t>(elemSize);
    if (type == onnx::TensorProto_DataType_FLOAT) {
      reader.read(floats.data(), static_cast<size_t>(k) * 4, at);
    } else {
      reader.read(raw.data(), static_cast<size_t>(k) * elemSize, at);
      rawToFloats(type, raw.data(), k, floats.data());
    }
    visit(floats.data(), static_cast<size_t>(k));
  }
}

TensorData decodeTensor(const onnx::TensorProto &t, const Twine &what,
                        const std::string &path) {
  int32_t type = t.data_type();
  std::optional<Kind> kind = kindOf(type);
  if (!kind)
    fail(what + " has element type " + dataTypeName(type) +
         ", which is not supported");
  TensorData out;
  out.kind = *kind;
  for (int64_t d : t.dims()) {
    if (d < 0)
      fail(what + " has a negative dimension " + Twine(d));
    out.shape.push_back(d);
  }
  const size_t elemSize = rawElementSize(type);
  const int64_t n = checkedElements(out.shape, elemSize, what);

  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    ExternalReader reader(t, what, static_cast<uint64_t>(n) * elemSize, path);
    if (type == onnx::TensorProto_DataType_FLOAT) {
      // float32, most of a model's bytes: read in place.
      out.floats.resize(static_cast<size_t>(n));
      reader.read(out.floats.data(), static_cast<size_t>(n) * 4, 0);
      return out;
    }
    // Other types converted a chunk at a time.
    if (out.kind == Kind::F32)
      out.floats.reserve(static_cast<size_t>(n));
    else
      out.ints.reserve(static_cast<size_t>(n));
    std::vector<char> chunk(static_cast<size_t>(std::min(n, kChunkElements)) *
                            elemSize);
    for (int64_t i = 0; i < n; i += kChunkElements) {
      const int64_t k = std::min(kChunkElements, n - i);
      reader.read(chunk.data(), static_cast<size_t>(k) * elemSize,
                  i * static_cast<int64_t>(elemSize));
      appendRaw(out, type, chunk.data(), k);
    }
    return out;
  }
  if (t.has_raw_data()) {
    StringRef raw(t.raw_data());
    if (raw.size() != n * elemSize)
      fail(what + " has " + Twine(raw.size()) + " bytes of raw_data but " +
           shapeStr(out.shape) + " " + dataTypeName(type) + " needs " +
           Twine(n * elemSize));
    appendRaw(out, type, raw.data(), n);
    return out;
  }

  auto count = [&](int64_t have) {
    if (have != n)
      fail(what + " has " + Twine(have) + " values but its shape " +
           shapeStr(out.shape) + " needs " + Twine(n));
  };
  // Typed fields.
  switch (type) {
  case onnx::TensorProto_DataType_FLOAT:
    count(t.float_data_size());
    out.floats.assign(t.float_data().begin(), t.float_data().end());
    break;
  case onnx::TensorProto_DataType_DOUBLE:
    count(t.double_data_size());
    for (double v : t.double_data())
      out.floats.push_back(static_cast<float>(v));
    break;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    count(t.int32_data_size());
    for (int32_t v : t.int32_data())
      out.floats.push_back(type == onnx::TensorProto_DataType_FLOAT16
                               ? halfToFloat(static_cast<uint16_t>(v))
                               : bf16ToFloat(static_cast<uint16_t>(v)));
    break;
  case onnx::TensorProto_DataType_INT64:
    count(t.int64_data_size());
    out.ints.assign(t.int64_data().begin(), t.int64_data().end());
    break;
  case onnx::TensorProto_DataType_INT32:
  case onnx::TensorProto_DataType_BOOL:
    count(t.int32_data_size());
    for (int32_t v : t.int32_data())
      out.ints.push_back(type == onnx::TensorProto_DataType_BOOL ? v != 0 : v);
    break;
  }
  return out;
}

} // namespace detail
} // namespace otc
