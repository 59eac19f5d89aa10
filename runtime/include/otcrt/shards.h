// Token shards in llm.c's file format: a header of 256 little-endian int32
// (magic 20240520, a version, the token count, then zeros) followed by the
// tokens. Version 1 (llm.c's) holds little-endian uint16 tokens; version 2
// holds little-endian uint32 tokens, for vocabularies above 65,536 (Llama-3's
// 128,256). Used by the train driver (--data) and by the otc-data tool that
// makes shards from text.
#ifndef OTCRT_SHARDS_H
#define OTCRT_SHARDS_H

#include "otcrt/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace otcrt {

constexpr int32_t kShardMagic = 20240520;
/// uint16 tokens (llm.c's format).
constexpr int32_t kShardVersion = 1;
/// uint32 tokens.
constexpr int32_t kShardVersion32 = 2;
constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

/// Writes \p tokens as a version 1 shard (uint16) at \p path (through a
/// temporary file renamed into place).
Status writeShard(const std::string &path, const std::vector<uint16_t> &tokens);
/// Writes \p tokens as a version 2 shard (uint32).
Status writeShard32(const std::string &path, const std::vector<uint32_t> &tokens);

/// Checks the header of a shard image of \p fileBytes bytes starting at
/// \p header (at least kShardHeaderBytes) and returns its token count and
/// the bytes of one token (2 or 4).
Status parseShardHeader(const uint8_t *header, int64_t fileBytes,
                        const std::string &path, int64_t &tokens,
                        int &tokenBytes);

/// Reads a whole shard of either version into \p tokens.
Status readShard(const std::string &path, std::vector<uint32_t> &tokens);

} // namespace otcrt

#endif // OTCRT_SHARDS_H
