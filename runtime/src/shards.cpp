// Reading and writing token shards (format in otcrt/shards.h). The header is
// validated field by field so a wrong file gets a message naming what is off.
#include "otcrt/shards.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace otcrt {

namespace {

/// Writes a shard of \p count tokens of \p width bytes at \p data.
Status writeTokens(const std::string &path, int32_t version, const void *data,
                   size_t count, size_t width, int64_t docToken) {
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = version;
  if (docToken >= 0x7fffffff)
    return Status::error(path + ": document token " + std::to_string(docToken) +
                         " does not fit the header");
  header[3] = docToken >= 0 ? static_cast<int32_t>(docToken + 1) : 0;
  if (count > 0x7fffffffu)
    return Status::error(path + ": more than 2^31-1 tokens in one shard");
  header[2] = static_cast<int32_t>(count);
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::error("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = std::fwrite(header, 4, kShardHeaderInts, f) == size_t(kShardHeaderInts) &&
            std::fwrite(data, width, count, f) == count;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

} // namespace

Status writeShard(const std::string &path, const std::vector<uint16_t> &tokens,
                  int64_t docToken) {
  return writeTokens(path, kShardVersion, tokens.data(), tokens.size(), 2,
                     docToken);
}

Status writeShard32(const std::string &path, const std::vector<uint32_t> &tokens,
                    int64_t docToken) {
  return writeTokens(path, kShardVersion32, tokens.data(), tokens.size(), 4,
                     docToken);
}

Status parseShardHeader(const uint8_t *bytes, int64_t fileBytes,
                        const std::string &path, int64_t &tokens,
                        int &tokenBytes, int64_t *docToken) {
  if (fileBytes < kShardHeaderBytes)
    return Status::error(path + ": " + std::to_string(fileBytes) +
                         " bytes, shorter than the 1024-byte shard header");
  int32_t header[4];
  std::memcpy(header, bytes, sizeof(header));
  if (header[0] != kShardMagic)
    return Status::error(path + ": bad magic " + std::to_string(header[0]) +
                         " at byte offset 0 (expected 20240520: not a token shard)");
  if (header[1] != kShardVersion && header[1] != kShardVersion32)
    return Status::error(path + ": shard version " + std::to_string(header[1]) +
                         " at byte offset 4 (expected 1: uint16 tokens, or 2: "
                         "uint32 tokens)");
  if (header[2] < 0)
    return Status::error(path + ": negative token count at byte offset 8");
  tokens = header[2];
  tokenBytes = header[1] == kShardVersion32 ? 4 : 2;
  if (header[3] < 0)
    return Status::error(path + ": negative document token at byte offset 12");
  if (docToken)
    *docToken = static_cast<int64_t>(header[3]) - 1;
  int64_t want = kShardHeaderBytes + tokenBytes * tokens;
  if (fileBytes != want)
    return Status::error(path + ": header says " + std::to_string(tokens) +
                         " tokens (" + std::to_string(want) +
                         " bytes) but the file has " + std::to_string(fileBytes) +
                         " bytes");
  return Status::ok();
}

Status readShard(const std::string &path, std::vector<uint32_t> &tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  int64_t n = 0;
  int width = 2;
  Status s = parseShardHeader(bytes.data(), static_cast<int64_t>(bytes.size()),
                              path, n, width);
  if (!s)
    return s;
  tokens.resize(static_cast<size_t>(n));
  const uint8_t *p = bytes.data() + kShardHeaderBytes;
  for (int64_t i = 0; i < n; ++i) {
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      tokens[i] = v;
    } else {
      std::memcpy(&tokens[i], p + 4 * i, 4);
    }
  }
  return Status::ok();
}

} // namespace otcrt
