// Implementation of the safetensors reader and writer declared in
// otcrt/safetensors.h. The reader validates the whole header (dtype names,
// shapes, offsets in bounds, byte counts matching shape x dtype, no overlap)
// before copying any tensor, and every error names the file and the byte
// offset at which the problem was found. Host byte order is assumed to be
// little-endian, as on every platform otc targets.
#include "otcrt/safetensors.h"

#include "json.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

namespace otcrt {

namespace {

struct DTypeInfo {
  StDType dtype;
  const char *name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {StDType::BOOL, "BOOL", 1}, {StDType::U8, "U8", 1},
    {StDType::I8, "I8", 1},     {StDType::I16, "I16", 2},
    {StDType::U16, "U16", 2},   {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I32, "I32", 4},
    {StDType::U32, "U32", 4},   {StDType::F32, "F32", 4},
    {StDType::F64, "F64", 8},   {StDType::I64, "I64", 8},
    {StDType::U64, "U64", 8},
};

/// Largest header we accept; real headers are a few KiB to a few MiB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

/// Computes numel(shape) * elemSize, returning false on overflow.
bool checkedByteCount(const std::vector<int64_t> &shape, size_t elemSize,
                      uint64_t &bytes) {
  uint64_t count = elemSize;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() /
                              static_cast<uint64_t>(d))
      return false;
    count *= static_cast<uint64_t>(d);
  }
  bytes = count;
  return true;
}

/// Prefixes \p message with the file name.
Status fileError(const std::string &file, const std::string &message) {
  return Status::error(file + ": " + message);
}

struct Entry {
  Tensor tensor;
  uint64_t begin = 0;
  uint64_t end = 0;
};

} // namespace

size_t dtypeSize(StDType dtype) {
  for (const auto &info : kDTypes)
    if (info.dtype == dtype)
      return info.size;
  return 0;
}

const char *dtypeName(StDType dtype) {
  for (const auto &info : kDTypes)
    if (info.dtype == dtype)
      return info.name;
  return "?";
}

bool parseDTypeName(const std::string &name, StDType &out) {
  for (const auto &info : kDTypes) {
    if (name == info.name) {
      out = info.dtype;
      return true;
    }
  }
  return false;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

const Tensor *TensorFile::find(const std::string &name) const {
  for (const auto &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

Tensor *TensorFile::find(const std::string &name) {
  return const_cast<Tensor *>(std::as_const(*this).find(name));
}

void TensorFile::addLayout(std::string name, StDType dtype,
                           std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  tensors.push_back(std::move(t));
}

void TensorFile::add(std::string name, StDType dtype,
                     std::vector<int64_t> shape, const void *bytes) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  size_t n = static_cast<size_t>(numElements(t.shape)) * dtypeSize(dtype);
  const auto *p = static_cast<const uint8_t *>(bytes);
  t.data.assign(p, p + n);
  tensors.push_back(std::move(t));
}

/// The header of a safetensors file of `size` bytes whose first `avail`
/// bytes are at `data` (the 8-byte length and the JSON header at least):
/// the metadata into `out`, the tensors (shapes, types, where their bytes
/// lie: checked against the size, in file order, without overlaps) into
/// `entries`, and where the data starts.
static Status parseHeader(const uint8_t *data, size_t avail, size_t size,
                          const std::string &sourceName, TensorFile &out,
                          std::vector<Entry> &entries, uint64_t &dataStart) {
  out = TensorFile();
  if (size < 8)
    return fileError(sourceName,
                     "truncated: expected an 8-byte header length at offset "
                     "0, but the file has only " +
                         std::to_string(size) + " bytes");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | data[i];
  if (headerLen > kMaxHeaderBytes)
    return fileError(sourceName, "header length " + std::to_string(headerLen) +
                                     " at offset 0 is implausibly large");
  if (headerLen > size - 8)
    return fileError(sourceName,
                     "truncated: the JSON header at offset 8 declares " +
                         std::to_string(headerLen) +
                         " bytes, but only " + std::to_string(size - 8) +
                         " bytes follow");
  if (headerLen > avail - 8)
    return fileError(sourceName, "cannot read the JSON header at offset 8");
  std::string headerText(reinterpret_cast<const char *>(data + 8),
                         static_cast<size_t>(headerLen));
  json::Value root;
  Status s = json::parse(headerText, root, 8);
  if (!s)
    return fileError(sourceName, "malformed JSON header: " + s.message());
  if (root.kind != json::Value::Object)
    return fileError(sourceName,
                     "malformed header at offset 8: expected a JSON object");

  dataStart = 8 + headerLen;
  const uint64_t dataSize = size - dataStart;
  std::set<std::string> seen;
  entries.clear();
  for (const auto &member : root.members) {
    const std::string &name = member.first;
    const json::Value &v = member.second;
    if (!seen.insert(name).second)
      return fileError(sourceName, "header at offset 8 lists tensor '" + name +
                                       "' twice");
    if (name == "__metadata__") {
      if (v.kind != json::Value::Object)
        return fileError(sourceName,
                         "header at offset 8: __metadata__ is not an object");
      for (const auto &kv : v.members) {
        if (kv.second.kind != json::Value::String)
          return fileError(sourceName, "header at offset 8: __metadata__ '" +
                                           kv.first + "' is not a string");
        out.metadata[kv.first] = kv.second.string;
      }
      continue;
    }
    auto bad = [&](const std::string &what) {
      return fileError(sourceName, "header at offset 8: tensor '" + name +
                                       "': " + what);
    };
    if (v.kind != json::Value::Object)
      return bad("entry is not an object");
    const json::Value *dtype = v.get("dtype");
    const json::Value *shape = v.get("shape");
    const json::Value *offsets = v.get("data_offsets");
    if (!dtype || dtype->kind != json::Value::String)
      return bad("missing or non-string \"dtype\"");
    if (!shape || shape->kind != json::Value::Array)
      return bad("missing or non-array \"shape\"");
    if (!offsets || offsets->kind != json::Value::Array ||
        offsets->elements.size() != 2)
      return bad("\"data_offsets\" must be an array of two integers");
    Entry e;
    e.tensor.name = name;
    if (!parseDTypeName(dtype->string, e.tensor.dtype))
      return bad("unsupported dtype \"" + dtype->string + "\"");
    for (const auto &d : shape->elements) {
      if (d.kind != json::Value::Number || !d.isInteger || d.integer < 0)
        return bad("shape entries must be non-negative integers");
      e.tensor.shape.push_back(d.integer);
    }
    for (int i = 0; i < 2; ++i) {
      const auto &o = offsets->elements[i];
      if (o.kind != json::Value::Number || !o.isInteger || o.integer < 0)
        return bad("\"data_offsets\" must be non-negative integers");
    }
    e.begin = static_cast<uint64_t>(offsets->elements[0].integer);
    e.end = static_cast<uint64_t>(offsets->elements[1].integer);
    if (e.end < e.begin)
      return bad("data_offsets end " + std::to_string(e.end) +
                 " is before begin " + std::to_string(e.begin));
    uint64_t expected = 0;
    if (!checkedByteCount(e.tensor.shape, dtypeSize(e.tensor.dtype), expected))
      return bad("shape " + formatShape(e.tensor.shape) + " is too large");
    if (e.end - e.begin != expected)
      return bad(std::string(dtypeName(e.tensor.dtype)) + " " +
                 formatShape(e.tensor.shape) + " needs " +
                 std::to_string(expected) + " bytes but data_offsets [" +
                 std::to_string(e.begin) + ", " + std::to_string(e.end) +
                 ") span " + std::to_string(e.end - e.begin));
    if (e.end > dataSize)
      return fileError(
          sourceName,
          "truncated: tensor '" + name + "' occupies file bytes [" +
              std::to_string(dataStart + e.begin) + ", " +
              std::to_string(dataStart + e.end) + ") but the file ends at offset " +
              std::to_string(size));
    entries.push_back(std::move(e));
  }

  std::sort(entries.begin(), entries.end(),
            [](const Entry &a, const Entry &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end)
      return fileError(sourceName,
                       "tensors '" + entries[i - 1].tensor.name + "' and '" +
                           entries[i].tensor.name +
                           "' overlap at file offset " +
                           std::to_string(dataStart + entries[i].begin));
  }
  return Status::ok();
}

Status parseSafetensors(const uint8_t *data, size_t size,
                        const std::string &sourceName, TensorFile &out) {
  std::vector<Entry> entries;
  uint64_t dataStart = 0;
  if (Status s = parseHeader(data, size, size, sourceName, out, entries,
                             dataStart);
      !s)
    return s;
  for (auto &e : entries) {
    const uint8_t *p = data + dataStart + e.begin;
    e.tensor.data.assign(p, p + (e.end - e.begin));
    out.tensors.push_back(std::move(e.tensor));
  }
  return Status::ok();
}

Status readSafetensors(const std::string &path, TensorFile &out) {
  return readSafetensors(path, out, nullptr);
}

namespace {
/// readSafetensors and readSafetensorsLayout: with \p layoutOnly, every
/// tensor without its bytes (a seekable file only).
Status readFile(const std::string &path, TensorFile &out,
                const std::function<bool(const std::string &)> &keep,
                bool layoutOnly);
} // namespace

Status readSafetensors(const std::string &path, TensorFile &out,
                       const std::function<bool(const std::string &)> &keep) {
  return readFile(path, out, keep, false);
}

Status readSafetensorsLayout(const std::string &path, TensorFile &out) {
  return readFile(path, out, nullptr, true);
}

namespace {
Status readFile(const std::string &path, TensorFile &out,
                const std::function<bool(const std::string &)> &keep,
                bool layoutOnly) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Status::error(path + ": cannot open for reading: " +
                         std::strerror(errno));
  struct Closer {
    std::FILE *f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  long end = -1;
  if (std::fseek(f, 0, SEEK_END) == 0)
    end = std::ftell(f);
  if (end < 0 || std::fseek(f, 0, SEEK_SET) != 0) {
    if (layoutOnly)
      return Status::error(path + ": not a seekable file (its layout cannot "
                                  "be read apart from its tensors)");
    // Not seekable (a pipe): the whole stream, then parsed in memory.
    std::vector<uint8_t> bytes;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
      bytes.insert(bytes.end(), buf, buf + n);
    if (std::ferror(f))
      return Status::error(path + ": read error after " +
                           std::to_string(bytes.size()) + " bytes");
    Status s = parseSafetensors(bytes.data(), bytes.size(), path, out);
    if (s && keep)
      out.tensors.erase(
          std::remove_if(out.tensors.begin(), out.tensors.end(),
                         [&](const Tensor &t) { return !keep(t.name); }),
          out.tensors.end());
    return s;
  }
  const size_t size = static_cast<size_t>(end);
  // The header first, then each tensor read straight into its own bytes:
  // the weights are copied once, and never held twice.
  std::vector<uint8_t> head(std::min<size_t>(size, 8));
  if (std::fread(head.data(), 1, head.size(), f) != head.size())
    return Status::error(path + ": read error in the first 8 bytes");
  if (size >= 8) {
    uint64_t headerLen = 0;
    for (int i = 7; i >= 0; --i)
      headerLen = (headerLen << 8) | head[i];
    size_t more = static_cast<size_t>(
        std::min<uint64_t>(headerLen, std::min<uint64_t>(kMaxHeaderBytes,
                                                         size - 8)));
    head.resize(8 + more);
    if (std::fread(head.data() + 8, 1, more, f) != more)
      return Status::error(path + ": read error in the header");
  }
  std::vector<Entry> entries;
  uint64_t dataStart = 0;
  if (Status s = parseHeader(head.data(), head.size(), size, path, out,
                             entries, dataStart);
      !s)
    return s;
  for (auto &e : entries) {
    if (keep && !keep(e.tensor.name))
      continue;
    if (layoutOnly) {
      out.tensors.push_back(std::move(e.tensor));
      continue;
    }
    e.tensor.data.resize(static_cast<size_t>(e.end - e.begin));
    if (std::fseek(f, static_cast<long>(dataStart + e.begin), SEEK_SET) != 0 ||
        std::fread(e.tensor.data.data(), 1, e.tensor.data.size(), f) !=
            e.tensor.data.size())
      return Status::error(path + ": read error in tensor '" + e.tensor.name +
                           "' at offset " + std::to_string(dataStart + e.begin));
    out.tensors.push_back(std::move(e.tensor));
  }
  return Status::ok();
}
} // namespace

Status serializeSafetensors(const TensorFile &file, std::vector<uint8_t> &out) {
  if (Status s = serializeSafetensorsHeader(file, out); !s)
    return s;
  size_t data = 0;
  for (const auto &t : file.tensors)
    data += t.data.size();
  out.reserve(out.size() + data);
  for (const auto &t : file.tensors)
    out.insert(out.end(), t.data.begin(), t.data.end());
  return Status::ok();
}

namespace {
Status serializeHeader(const TensorFile &file, std::vector<uint8_t> &out,
                       bool layoutOnly);
} // namespace

Status serializeSafetensorsHeader(const TensorFile &file,
                                  std::vector<uint8_t> &out) {
  return serializeHeader(file, out, false);
}

Status serializeSafetensorsLayoutHeader(const TensorFile &file,
                                        std::vector<uint8_t> &out) {
  return serializeHeader(file, out, true);
}

namespace {
Status serializeHeader(const TensorFile &file, std::vector<uint8_t> &out,
                       bool layoutOnly) {
  out.clear();
  std::set<std::string> names;
  std::string header = "{";
  bool first = true;
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool firstKv = true;
    for (const auto &kv : file.metadata) {
      if (!firstKv)
        header += ",";
      firstKv = false;
      json::appendQuoted(header, kv.first);
      header += ":";
      json::appendQuoted(header, kv.second);
    }
    header += "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const auto &t : file.tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      return Status::error("cannot serialize safetensors: duplicate or "
                           "reserved tensor name '" + t.name + "'");
    uint64_t expected = 0;
    if (!checkedByteCount(t.shape, dtypeSize(t.dtype), expected) ||
        (expected != t.data.size() && !(layoutOnly && t.data.empty())))
      return Status::error("cannot serialize safetensors: tensor '" + t.name +
                           "' (" + dtypeName(t.dtype) + " " +
                           formatShape(t.shape) + ") has " +
                           std::to_string(t.data.size()) + " data bytes");
    if (!first)
      header += ",";
    first = false;
    json::appendQuoted(header, t.name);
    header += ":{\"dtype\":\"";
    header += dtypeName(t.dtype);
    header += "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i)
        header += ",";
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + expected) + "]}";
    offset += expected;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0)
    header += ' ';
  uint64_t len = header.size();
  out.reserve(8 + header.size());
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  return Status::ok();
}
} // namespace

namespace {
/// Writes `header` to `path`, then each of `file`'s tensors' bytes as
/// `bytes` gives them, in file order (see writeSafetensorsFrom).
Status writeAfterHeader(
    const std::string &path, const std::vector<uint8_t> &header,
    const TensorFile &file,
    const std::function<Status(size_t index, const void *&data)> &bytes) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return Status::error(path + ": cannot open for writing: " +
                         std::strerror(errno));
  size_t total = header.size();
  for (const Tensor &t : file.tensors)
    total += static_cast<size_t>(t.numel()) * dtypeSize(t.dtype);
  size_t written = std::fwrite(header.data(), 1, header.size(), f);
  for (size_t i = 0; written < total && i < file.tensors.size(); ++i) {
    const Tensor &t = file.tensors[i];
    const void *data = nullptr;
    if (Status got = bytes(i, data); !got) {
      std::fclose(f);
      return got;
    }
    size_t n = static_cast<size_t>(t.numel()) * dtypeSize(t.dtype);
    if (n)
      written += std::fwrite(data, 1, n, f);
  }
  bool closeFailed = std::fclose(f) != 0;
  if (written != total || closeFailed)
    return Status::error(path + ": write failed after " +
                         std::to_string(written) + " of " +
                         std::to_string(total) + " bytes");
  return Status::ok();
}
} // namespace

Status writeSafetensors(const std::string &path, const TensorFile &file) {
  // The header, then each tensor's bytes from where they are: no second
  // image of the file in memory (otc-compile's init.safetensors of a 0.6B
  // model held 2.4 GB more so).
  std::vector<uint8_t> header;
  Status s = serializeSafetensorsHeader(file, header);
  if (!s)
    return Status::error(path + ": " + s.message());
  return writeAfterHeader(path, header, file, [&](size_t i, const void *&data) {
    data = file.tensors[i].data.data();
    return Status::ok();
  });
}

Status writeSafetensorsFrom(
    const std::string &path, const TensorFile &layout,
    const std::function<Status(size_t index, const void *&data)> &bytes) {
  std::vector<uint8_t> header;
  Status s = serializeSafetensorsLayoutHeader(layout, header);
  if (!s)
    return Status::error(path + ": " + s.message());
  return writeAfterHeader(path, header, layout, bytes);
}

uint32_t crc32(const uint8_t *data, size_t size, uint32_t crc) {
  // Eight bytes a round (slicing by 8): table[k][n] is the CRC of byte n
  // followed by k zero bytes, so one round folds eight bytes through eight
  // lookups; a checkpoint's buffers, gigabytes, are summed at start-up.
  static const auto table = [] {
    std::array<std::array<uint32_t, 256>, 8> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][n] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (uint32_t n = 0; n < 256; ++n)
        t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xFF];
    return t;
  }();
  crc = ~crc;
  for (; size >= 8; size -= 8, data += 8) {
    uint32_t lo = crc ^ (uint32_t(data[0]) | uint32_t(data[1]) << 8 |
                         uint32_t(data[2]) << 16 | uint32_t(data[3]) << 24);
    crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^
          table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^ table[3][data[4]] ^
          table[2][data[5]] ^ table[1][data[6]] ^ table[0][data[7]];
  }
  for (size_t i = 0; i < size; ++i)
    crc = table[0][(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

namespace {

constexpr const char *kCrcPrefix = "crc32/";

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

} // namespace

void setChecksum(TensorFile &file, const std::string &tensor, uint32_t crc) {
  file.metadata[kCrcPrefix + tensor] = hex8(crc);
}

void addChecksums(TensorFile &file) {
  for (const Tensor &t : file.tensors)
    file.metadata[kCrcPrefix + t.name] = hex8(crc32(t.data.data(), t.data.size()));
}

Status verifyChecksums(const TensorFile &file, const std::string &path,
                       bool &checked) {
  checked = false;
  for (const auto &[key, value] : file.metadata)
    checked |= key.rfind(kCrcPrefix, 0) == 0;
  if (!checked)
    return Status::ok();
  for (const Tensor &t : file.tensors) {
    auto it = file.metadata.find(kCrcPrefix + t.name);
    if (it == file.metadata.end())
      return Status::error(path + ": tensor '" + t.name +
                           "' has no checksum (the others have one)");
    std::string actual = hex8(crc32(t.data.data(), t.data.size()));
    if (it->second != actual)
      return Status::error(path + ": tensor '" + t.name +
                           "' does not match its checksum (crc32 " + actual +
                           ", stored " + it->second + "): the file is corrupt");
  }
  return Status::ok();
}

} // namespace otcrt
