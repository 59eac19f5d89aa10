//===- otc-data.cpp - token shards from text ------------------------------===//
//
// Makes token shards for `train --data` (llm.c's format, see
// runtime/include/otcrt/shards.h) from text files:
//
//   otc-data TEXT... -o PREFIX [--vocab=bytes|chars] [--max-vocab N]
//            [--lower] [--val-fraction F] [--shard-tokens N]
//
// writes PREFIX_train_000000.bin, ... and (with --val-fraction) the last
// fraction of the tokens as PREFIX_val_000000.bin, .... Tokens are the bytes
// of the text (vocab 256) by default; --vocab=chars numbers the distinct
// bytes instead, in byte order, keeping the --max-vocab - 1 most frequent
// when there are more (the rest map to one last "unknown" token, shown '?'),
// and writes PREFIX_vocab.bin, whose byte i is the character of token i, so
// a model with a small vocabulary can train on text. Errors are one line
// `otc-data: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "otcrt/shards.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

using namespace llvm;

static cl::OptionCategory toolCategory("otc-data options");

static cl::list<std::string> inputFiles(cl::Positional, cl::desc("<text files>"),
                                        cl::OneOrMore, cl::cat(toolCategory));
static cl::opt<std::string> prefix("o", cl::desc("Output prefix"),
                                   cl::value_desc("PREFIX"), cl::Required, cl::cat(toolCategory));
static cl::opt<std::string>
    vocabMode("vocab", cl::desc("bytes (token = byte, default) or chars "
                                "(distinct bytes numbered, PREFIX_vocab.bin)"),
              cl::init("bytes"), cl::cat(toolCategory));
static cl::opt<unsigned> maxVocab("max-vocab",
                                  cl::desc("--vocab=chars: at most N tokens"),
                                  cl::init(256), cl::cat(toolCategory));
static cl::opt<bool> lower("lower", cl::desc("Lower-case the text first"), cl::cat(toolCategory));
static cl::opt<double> valFraction("val-fraction",
                                   cl::desc("Fraction of tokens for validation"),
                                   cl::init(0.0), cl::cat(toolCategory));
static cl::opt<int64_t> shardTokens("shard-tokens",
                                    cl::desc("Tokens per shard (default 100M)"),
                                    cl::init(100000000), cl::cat(toolCategory));

/// Prints `otc-data: error: <message>` and returns exit status 1.
static int fail(const Twine &message) {
  errs() << "otc-data: error: " << message << "\n";
  return 1;
}

/// Writes \p tokens as shards PREFIX_<split>_NNNNNN.bin; returns the count.
static int writeSplit(const std::vector<uint16_t> &tokens, const char *split,
                      int &shards) {
  shards = 0;
  for (size_t begin = 0; begin < tokens.size() || shards == 0;
       begin += static_cast<size_t>(shardTokens)) {
    size_t end = std::min(tokens.size(), begin + static_cast<size_t>(shardTokens));
    std::vector<uint16_t> part(tokens.begin() + begin, tokens.begin() + end);
    char name[32];
    std::snprintf(name, sizeof(name), "_%s_%06d.bin", split, shards);
    otcrt::Status s = otcrt::writeShard(prefix + name, part);
    if (!s)
      return fail(s.message());
    ++shards;
    if (end >= tokens.size())
      break;
  }
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv, "otc-data: token shards from text\n");
  if (vocabMode != "bytes" && vocabMode != "chars")
    return fail("--vocab must be bytes or chars, got '" + vocabMode + "'");
  if (valFraction < 0 || valFraction >= 1)
    return fail("--val-fraction must be in [0, 1)");
  if (shardTokens < 1)
    return fail("--shard-tokens must be positive");
  if (maxVocab < 2 || maxVocab > 256)
    return fail("--max-vocab must be in [2, 256]");

  std::string text;
  for (const std::string &path : inputFiles) {
    auto buffer = MemoryBuffer::getFile(path);
    if (!buffer)
      return fail("cannot read " + path + ": " + buffer.getError().message());
    text += (*buffer)->getBuffer().str();
  }
  if (lower)
    for (char &c : text)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  std::array<uint16_t, 256> id;
  for (int b = 0; b < 256; ++b)
    id[b] = static_cast<uint16_t>(b);
  std::string vocab;
  if (vocabMode == "chars") {
    std::array<int64_t, 256> count{};
    for (unsigned char c : text)
      ++count[c];
    std::vector<int> present;
    for (int b = 0; b < 256; ++b)
      if (count[b])
        present.push_back(b);
    std::vector<int> kept = present;
    bool unknown = present.size() > maxVocab;
    if (unknown) {
      std::stable_sort(kept.begin(), kept.end(),
                       [&](int a, int b) { return count[a] > count[b]; });
      kept.resize(maxVocab - 1);
      std::sort(kept.begin(), kept.end());
    }
    id.fill(static_cast<uint16_t>(kept.size()));
    for (size_t i = 0; i < kept.size(); ++i) {
      id[kept[i]] = static_cast<uint16_t>(i);
      vocab += static_cast<char>(kept[i]);
    }
    if (unknown)
      vocab += '?';
    std::string path = prefix + "_vocab.bin";
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(vocab.data(), 1, vocab.size(), f) != vocab.size() ||
        std::fclose(f) != 0)
      return fail("cannot write " + path);
  }

  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text)
    tokens.push_back(id[c]);
  size_t valTokens = static_cast<size_t>(valFraction * tokens.size());
  std::vector<uint16_t> val(tokens.end() - valTokens, tokens.end());
  tokens.resize(tokens.size() - valTokens);

  int trainShards = 0, valShards = 0;
  if (int rc = writeSplit(tokens, "train", trainShards))
    return rc;
  if (valTokens)
    if (int rc = writeSplit(val, "val", valShards))
      return rc;
  outs() << "otc-data: " << tokens.size() << " train tokens in " << trainShards
         << " shard(s), " << valTokens << " val tokens in " << valShards
         << " shard(s), vocab "
         << (vocabMode == "chars" ? std::to_string(vocab.size()) : "256 (bytes)")
         << "\n";
  return 0;
}
