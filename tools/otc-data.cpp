//===- otc-data.cpp - token shards from text ------------------------------===//
//
// Makes token shards for `train --data` (llm.c's format, see
// runtime/include/otcrt/shards.h) from text files:
//
//   otc-data TEXT... -o PREFIX [--vocab=bytes|chars] [--max-vocab N]
//            [--lower] [--val-fraction F] [--shard-tokens N]
//   otc-data TEXT... -o PREFIX --tokenizer PATH [--doc-token TOKEN]
//            [--python PY] [--val-fraction F] [--shard-tokens N]
//
// writes PREFIX_train_000000.bin, ... and (with --val-fraction) about that
// fraction of the tokens as PREFIX_val_000000.bin, ...: whole documents (the
// input files; under --tokenizer, the spans each separator token starts)
// spread over the corpus, each taken where it brings the validation share
// closer to the fraction, so that validation sees every kind of text; with
// one document (or none that fits) the last fraction of the tokens. A line
// after the summary says which. Tokens are the bytes
// of the text (vocab 256) by default; --vocab=chars numbers the distinct
// bytes instead, in byte order, keeping the --max-vocab - 1 most frequent
// when there are more (the rest map to one last "unknown" token, shown '?'),
// and writes PREFIX_vocab.bin, whose byte i is the character of token i, so
// a model with a small vocabulary can train on text.
//
// --tokenizer PATH takes the ids of a model's own tokenizer instead: a Hugging
// Face tokenizer.json or a SentencePiece *.model, through otc-tokenize.py
// (next to this program; Python with the tokenizers or sentencepiece
// package), each file one document that starts with the tokenizer's
// beginning- or end-of-text token (--doc-token names another). Shards hold
// uint16 tokens where the vocabulary fits (llm.c's format) and uint32 ones
// (shard version 2) where it does not. Errors are one line
// `otc-data: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "otcrt/shards.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/wait.h>
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
static cl::opt<std::string>
    tokenizer("tokenizer",
              cl::desc("A tokenizer.json or SentencePiece .model: its ids, "
                       "each file a document"),
              cl::value_desc("PATH"), cl::cat(toolCategory));
static cl::opt<std::string>
    docToken("doc-token",
             cl::desc("--tokenizer: the token each document starts with "
                      "(default: the tokenizer's BOS, else its end-of-text)"),
             cl::value_desc("TOKEN"), cl::cat(toolCategory));
static cl::opt<std::string>
    python("python", cl::desc("--tokenizer: the Python to run (default python3)"),
           cl::init("python3"), cl::cat(toolCategory));
static cl::opt<int64_t> shardTokens("shard-tokens",
                                    cl::desc("Tokens per shard (default 100M)"),
                                    cl::init(100000000), cl::cat(toolCategory));

/// Prints `otc-data: error: <message>` and returns exit status 1.
static int fail(const Twine &message) {
  errs() << "otc-data: error: " << message << "\n";
  return 1;
}

/// Writes \p tokens as shards PREFIX_<split>_NNNNNN.bin, uint32 ones when
/// \p wide, each recording \p docToken (-1: none) as the token that starts
/// every document; returns the count.
static int writeSplit(const std::vector<uint32_t> &tokens, const char *split,
                      bool wide, int64_t docToken, int &shards) {
  shards = 0;
  for (size_t begin = 0; begin < tokens.size() || shards == 0;
       begin += static_cast<size_t>(shardTokens)) {
    size_t end = std::min(tokens.size(), begin + static_cast<size_t>(shardTokens));
    char name[32];
    std::snprintf(name, sizeof(name), "_%s_%06d.bin", split, shards);
    otcrt::Status s =
        wide ? otcrt::writeShard32(prefix + name,
                                   std::vector<uint32_t>(tokens.begin() + begin,
                                                         tokens.begin() + end),
                                   docToken)
             : otcrt::writeShard(prefix + name,
                                 std::vector<uint16_t>(tokens.begin() + begin,
                                                       tokens.begin() + end),
                                 docToken);
    if (!s)
      return fail(s.message());
    ++shards;
    if (end >= tokens.size())
      break;
  }
  return 0;
}

/// Splits \p tokens into train and val (about --val-fraction of them: whole
/// documents, \p starts their first tokens in order, else the tail) and
/// writes both, recording \p docToken (-1: none) in every shard; sets the
/// counts the summary line reports and \p how, the line that says how
/// validation was taken.
static int writeTrainVal(std::vector<uint32_t> &tokens, bool wide,
                         int64_t docToken,
                         std::vector<size_t> starts, size_t &valTokens,
                         int &trainShards, int &valShards, std::string &how) {
  std::vector<uint32_t> train, val;
  size_t valDocs = 0;
  starts.push_back(tokens.size());
  size_t docs = starts.size() - 1;
  if (valFraction > 0 && docs >= 2) {
    size_t seen = 0;
    for (size_t d = 0; d < docs; ++d) {
      size_t len = starts[d + 1] - starts[d];
      seen += len;
      double target = valFraction * double(seen);
      bool take = std::fabs(double(val.size() + len) - target) <
                  std::fabs(double(val.size()) - target);
      std::vector<uint32_t> &to = take ? val : train;
      to.insert(to.end(), tokens.begin() + starts[d],
                tokens.begin() + starts[d + 1]);
      valDocs += take;
    }
  }
  if (valDocs > 0) {
    how = "validation: " + std::to_string(valDocs) + " of " +
          std::to_string(docs) + " documents, whole, spread over the corpus";
    tokens = std::move(train);
  } else {
    valTokens = static_cast<size_t>(valFraction * tokens.size());
    val.assign(tokens.end() - valTokens, tokens.end());
    tokens.resize(tokens.size() - valTokens);
    if (valTokens)
      how = "validation: the last " + std::to_string(valTokens) +
            " tokens (" +
            (docs < 2 ? std::string("one document")
                      : "no whole document of " + std::to_string(docs) +
                            " fits the fraction") +
            ")";
  }
  valTokens = val.size();
  trainShards = valShards = 0;
  if (int rc = writeSplit(tokens, "train", wide, docToken, trainShards))
    return rc;
  if (valTokens)
    if (int rc = writeSplit(val, "val", wide, docToken, valShards))
      return rc;
  return 0;
}

/// Quotes \p s for the shell.
static std::string quoted(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The ids of the input files under --tokenizer (otc-tokenize.py), with
/// the vocabulary's size and the documents' separator (-1: none); a
/// non-zero exit status after the helper's one-line error.
static int tokenize(const char *argv0, std::vector<uint32_t> &ids,
                    uint32_t &vocab, int32_t &separator) {
  std::string self = sys::fs::getMainExecutable(argv0, (void *)&tokenize);
  SmallString<256> helper(sys::path::parent_path(self));
  sys::path::append(helper, "otc-tokenize.py");
  if (!sys::fs::exists(helper))
    return fail("--tokenizer needs " + helper.str() + ", which is missing");
  std::string cmd = quoted(python) + " " + quoted(helper.str().str()) +
                    " --tokenizer " + quoted(tokenizer);
  if (!docToken.empty())
    cmd += " --doc-token " + quoted(docToken);
  for (const std::string &path : inputFiles)
    cmd += " " + quoted(path);
  std::FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe)
    return fail("cannot run " + python + ": " + std::strerror(errno));
  char header[16];
  uint64_t count = 0;
  bool ok = std::fread(header, 1, sizeof header, pipe) == sizeof header;
  if (ok) {
    std::memcpy(&vocab, header, 4);
    std::memcpy(&separator, header + 4, 4);
    std::memcpy(&count, header + 8, 8);
    ids.resize(static_cast<size_t>(count));
    ok = std::fread(ids.data(), 4, ids.size(), pipe) == ids.size();
  }
  int status = pclose(pipe);
  if (status != 0) {
    // The helper printed its one-line error (exit status 2); anything else
    // is the Python itself failing.
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
      return 1;
    return fail("running " + helper.str() + " with " + python +
                " failed (exit status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                ")");
  }
  if (!ok)
    return fail(helper.str() + " ended before its ids");
  return 0;
}

/// The options' checks: 0, or 1 after a one-line error.
static int checkOptions() {
  if (vocabMode != "bytes" && vocabMode != "chars")
    return fail("--vocab must be bytes or chars, got '" + vocabMode + "'");
  if (valFraction < 0 || valFraction >= 1)
    return fail("--val-fraction must be in [0, 1)");
  if (shardTokens < 1)
    return fail("--shard-tokens must be positive");
  if (maxVocab < 2 || maxVocab > 256)
    return fail("--max-vocab must be in [2, 256]");
  if (!tokenizer.empty() &&
      (vocabMode.getNumOccurrences() || maxVocab.getNumOccurrences() || lower))
    return fail("--tokenizer gives the ids itself: leave out --vocab, "
                "--max-vocab and --lower");
  if (tokenizer.empty() && docToken.getNumOccurrences())
    return fail("--doc-token needs --tokenizer");
  // The folder of -o's prefix (shards/ of shards/c) is made when missing.
  if (StringRef folder = sys::path::parent_path(prefix); !folder.empty())
    if (std::error_code ec = sys::fs::create_directories(folder))
      return fail("cannot make the folder '" + folder.str() +
                  "' of -o: " + ec.message());
  return 0;
}

/// Prints what was written: `vocab` describes the vocabulary, `how` the
/// validation split ("": none).
static void summary(size_t trainTokens, int trainShards, size_t valTokens,
                    int valShards, const std::string &vocab,
                    const std::string &how) {
  outs() << "otc-data: " << trainTokens << " train tokens in " << trainShards
         << " shard(s), " << valTokens << " val tokens in " << valShards
         << " shard(s), vocab " << vocab << "\n";
  if (!how.empty())
    outs() << "otc-data: " << how << "\n";
}

/// Under --tokenizer: the ids of the model's tokenizer, sharded.
static int shardTokenizerIds(const char *argv0) {
  std::vector<uint32_t> ids;
  uint32_t vocab = 0;
  int32_t separator = -1;
  if (int rc = tokenize(argv0, ids, vocab, separator))
    return rc;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab)
      return fail("the tokenizer gave id " + std::to_string(ids[i]) +
                  " at token " + std::to_string(i) +
                  ", outside its vocabulary of " + std::to_string(vocab));
  // uint16 where every id fits (llm.c's format), else uint32.
  bool wide = vocab > 65536;
  size_t valTokens = 0;
  int trainShards = 0, valShards = 0;
  std::vector<size_t> starts{0};
  for (size_t i = 1; separator >= 0 && i < ids.size(); ++i)
    if (ids[i] == static_cast<uint32_t>(separator))
      starts.push_back(i);
  std::string how;
  if (int rc = writeTrainVal(ids, wide, separator, starts, valTokens,
                             trainShards, valShards, how))
    return rc;
  summary(ids.size(), trainShards, valTokens, valShards,
          std::to_string(vocab) + " (" + tokenizer + "; " +
              (wide ? "uint32" : "uint16") + " tokens" +
              (separator >= 0
                   ? ", documents start with token " + std::to_string(separator)
                   : std::string(", no document separator")) +
              ")",
          how);
  return 0;
}

/// The text of the input files (lowered under --lower), and where each
/// file, a document, starts in it.
static int readText(std::string &text, std::vector<size_t> &starts) {
  for (const std::string &path : inputFiles) {
    starts.push_back(text.size());
    auto buffer = MemoryBuffer::getFile(path);
    if (!buffer)
      return fail("cannot read " + path + ": " + buffer.getError().message());
    text += (*buffer)->getBuffer().str();
  }
  if (lower)
    for (char &c : text)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return 0;
}

/// --vocab=chars: the distinct bytes of `text` numbered in byte order (the
/// --max-vocab - 1 most frequent when there are more, the rest one last
/// "unknown" token '?'), as `id` of each byte; `vocab` holds the character
/// of each token, written as PREFIX_vocab.bin.
static int charVocabulary(const std::string &text,
                          std::array<uint16_t, 256> &id, std::string &vocab) {
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
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv, "otc-data: token shards from text\n");
  if (int rc = checkOptions())
    return rc;
  if (!tokenizer.empty())
    return shardTokenizerIds(argv[0]);

  std::string text;
  std::vector<size_t> starts; // each file is a document
  if (int rc = readText(text, starts))
    return rc;
  std::array<uint16_t, 256> id;
  for (int b = 0; b < 256; ++b)
    id[b] = static_cast<uint16_t>(b);
  std::string vocab;
  if (vocabMode == "chars")
    if (int rc = charVocabulary(text, id, vocab))
      return rc;

  std::vector<uint32_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text)
    tokens.push_back(id[c]);
  size_t valTokens = 0;
  int trainShards = 0, valShards = 0;
  // An empty file starts where the next one does: one document less.
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  if (!starts.empty() && starts.back() == tokens.size())
    starts.pop_back();
  if (starts.empty())
    starts.push_back(0);
  std::string how;
  if (int rc = writeTrainVal(tokens, false, -1, starts, valTokens, trainShards,
                             valShards, how))
    return rc;
  summary(tokens.size(), trainShards, valTokens, valShards,
          vocabMode == "chars" ? std::to_string(vocab.size()) : "256 (bytes)",
          how);
  return 0;
}
