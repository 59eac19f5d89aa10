// Token shards in llm.c's file format: a header of 256 little-endian int32
// (magic 20240520, a version, the token count, then zeros) followed by the
// tokens. The fourth int is 1 + the token that starts every document where
// the shard's writer knew one (otc-data --tokenizer), 0 otherwise (llm.c's
// zero). Version 1 (llm.c's) holds little-endian uint16 tokens; version 2
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
/// \p docToken, when not negative, is recorded as the token that starts
/// every document.
Status writeShard(const std::string &path, const std::vector<uint16_t> &tokens,
                  int64_t docToken = -1);
/// Writes \p tokens as a version 2 shard (uint32).
Status writeShard32(const std::string &path, const std::vector<uint32_t> &tokens,
                    int64_t docToken = -1);

/// Checks the header of a shard image of \p fileBytes bytes starting at
/// \p header (at least kShardHeaderBytes) and returns its token count, the
/// bytes of one token (2 or 4) and, in \p docToken when given, the token
/// that starts every document (-1: not recorded).
Status parseShardHeader(const uint8_t *header, int64_t fileBytes,
                        const std::string &path, int64_t &tokens,
                        int &tokenBytes, int64_t *docToken = nullptr);

/// Reads a whole shard of either version into \p tokens.
Status readShard(const std::string &path, std::vector<uint32_t> &tokens);

} // namespace otcrt

#endif // OTCRT_SHARDS_H
