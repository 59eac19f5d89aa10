// Reading and writing token shards (format in otcrt/shards.h). The header is
// validated field by field so a wrong file gets a message naming what is off.
#include "otcrt/shards.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace otcrt {

Status writeShard(const std::string &path, const std::vector<uint16_t> &tokens) {
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  if (tokens.size() > 0x7fffffffu)
    return Status::error(path + ": more than 2^31-1 tokens in one shard");
  header[2] = static_cast<int32_t>(tokens.size());
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return Status::error("cannot write " + tmp + ": " + std::strerror(errno));
  bool ok = std::fwrite(header, 4, kShardHeaderInts, f) == size_t(kShardHeaderInts) &&
            std::fwrite(tokens.data(), 2, tokens.size(), f) == tokens.size();
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::ok();
}

Status parseShardHeader(const uint8_t *bytes, int64_t fileBytes,
                        const std::string &path, int64_t &tokens) {
  if (fileBytes < kShardHeaderBytes)
    return Status::error(path + ": " + std::to_string(fileBytes) +
                         " bytes, shorter than the 1024-byte shard header");
  int32_t header[3];
  std::memcpy(header, bytes, sizeof(header));
  if (header[0] != kShardMagic)
    return Status::error(path + ": bad magic " + std::to_string(header[0]) +
                         " at byte offset 0 (expected 20240520: not a token shard)");
  if (header[1] != kShardVersion)
    return Status::error(path + ": shard version " + std::to_string(header[1]) +
                         " at byte offset 4 (expected 1: uint16 tokens)");
  if (header[2] < 0)
    return Status::error(path + ": negative token count at byte offset 8");
  tokens = header[2];
  int64_t want = kShardHeaderBytes + 2 * tokens;
  if (fileBytes != want)
    return Status::error(path + ": header says " + std::to_string(tokens) +
                         " tokens (" + std::to_string(want) +
                         " bytes) but the file has " + std::to_string(fileBytes) +
                         " bytes");
  return Status::ok();
}

Status readShard(const std::string &path, std::vector<uint16_t> &tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  int64_t n = 0;
  Status s = parseShardHeader(bytes.data(), static_cast<int64_t>(bytes.size()),
                              path, n);
  if (!s)
    return s;
  tokens.resize(static_cast<size_t>(n));
  std::memcpy(tokens.data(), bytes.data() + kShardHeaderBytes, 2 * n);
  return Status::ok();
}

} // namespace otcrt
