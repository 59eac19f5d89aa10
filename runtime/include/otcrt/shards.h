// Token shards in llm.c's file format: a header of 256 little-endian int32
// (magic 20240520, version 1, the token count, then zeros) followed by the
// tokens as little-endian uint16. Used by the train driver (--data) and by the
// otc-data tool that makes shards from text.
#ifndef OTCRT_SHARDS_H
#define OTCRT_SHARDS_H

#include "otcrt/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otcrt {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

/// Writes \p tokens as a shard at \p path (through a temporary file renamed
/// into place).
Status writeShard(const std::string &path, const std::vector<uint16_t> &tokens);

/// Checks the header of a shard image of \p fileBytes bytes starting at
/// \p header (at least kShardHeaderBytes) and returns its token count.
Status parseShardHeader(const uint8_t *header, int64_t fileBytes,
                        const std::string &path, int64_t &tokens);

/// Reads a whole shard into \p tokens.
Status readShard(const std::string &path, std::vector<uint16_t> &tokens);

} // namespace otcrt

#endif // OTCRT_SHARDS_H
