// Token shards for the train driver: mapping, windowing, choosing the token
// and target slots, and the seeded loader (see data.h).
#include "data.h"

#include "otcrt/safetensors.h"
#include "otcrt/shards.h"
#include "program.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace otcrt {

TokenDataset::~TokenDataset() {
  for (Shard &s : shards_)
    if (s.map)
      munmap(s.map, s.mapBytes);
}

Status expandGlobs(const std::vector<std::string> &globs,
                   const std::string &what, std::vector<std::string> &paths) {
  for (const std::string &pattern : globs) {
    glob_t g;
    int rc = glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
      globfree(&g);
      return Status::error(what + " '" + pattern + "' matches no file");
    }
    if (rc != 0) {
      globfree(&g);
      return Status::error(what + " '" + pattern + "': glob failed");
    }
    std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matched.begin(), matched.end());
    paths.insert(paths.end(), matched.begin(), matched.end());
  }
  return Status::ok();
}

Status TokenDataset::open(const std::vector<std::string> &globs, int64_t window,
                          int64_t stride, const std::string &what) {
  window_ = window;
  stride_ = stride;
  std::vector<std::string> paths;
  if (Status s = expandGlobs(globs, what, paths); !s)
    return s;
  for (const std::string &path : paths) {
    Shard shard;
    shard.path = path;
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return Status::error("cannot open " + path + ": " + std::strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
      ::close(fd);
      return Status::error("cannot stat " + path);
    }
    shard.mapBytes = static_cast<size_t>(st.st_size);
    if (shard.mapBytes > 0) {
      shard.map = mmap(nullptr, shard.mapBytes, PROT_READ, MAP_PRIVATE, fd, 0);
      if (shard.map == MAP_FAILED) {
        ::close(fd);
        return Status::error("cannot map " + path + ": " + std::strerror(errno));
      }
    }
    ::close(fd);
    const uint8_t *bytes = static_cast<const uint8_t *>(shard.map);
    uint8_t empty[kShardHeaderBytes] = {};
    int64_t docToken = -1;
    Status s = parseShardHeader(bytes ? bytes : empty,
                                static_cast<int64_t>(shard.mapBytes), path,
                                shard.count, shard.tokenBytes, &docToken);
    if (!s) {
      if (shard.map)
        munmap(shard.map, shard.mapBytes);
      return s;
    }
    shard.tokens = bytes + kShardHeaderBytes;
    if (shards_.empty())
      docToken_ = docToken;
    else if (docToken_ != docToken)
      docToken_ = -2;
    shard.firstWindow = numWindows_;
    int64_t windows =
        shard.count >= window ? (shard.count - window) / stride + 1 : 0;
    numWindows_ += windows;
    numTokens_ += shard.count;
    shards_.push_back(shard);
  }
  if (numWindows_ == 0)
    return Status::error(what + ": the shards hold " + std::to_string(numTokens_) +
                         " tokens, not one window of " + std::to_string(window));
  return Status::ok();
}

TokenDataset::Window TokenDataset::window(int64_t w) const {
  // The last shard whose first window is <= w.
  auto it = std::upper_bound(
      shards_.begin(), shards_.end(), w,
      [](int64_t v, const Shard &s) { return v < s.firstWindow; });
  const Shard &s = *(it - 1);
  Window out;
  out.tokenBytes = s.tokenBytes;
  out.bytes = s.tokens + (w - s.firstWindow) * stride_ * s.tokenBytes;
  return out;
}

uint64_t TokenDataset::fingerprint() const {
  uint64_t h = splitMix64(static_cast<uint64_t>(window_));
  for (const Shard &s : shards_)
    h = splitMix64(h ^ static_cast<uint64_t>(s.count));
  return h >> 11; // exact as a double in JSON-ish metadata
}

std::string TokenDataset::locate(int64_t w, int64_t t) const {
  auto it = std::upper_bound(
      shards_.begin(), shards_.end(), w,
      [](int64_t v, const Shard &s) { return v < s.firstWindow; });
  const Shard &s = *(it - 1);
  return s.path + " token " + std::to_string((w - s.firstWindow) * stride_ + t);
}

Status checkDataCovers(const TokenDataset &data, const std::string &what,
                       const std::string &reader, int64_t windows,
                       int64_t seqLen, const std::string &batch) {
  if (data.numWindows() >= windows)
    return Status::ok();
  return Status::error(
      what + ": " + reader + " reads " + std::to_string(windows) +
      " windows of " + std::to_string(seqLen) + " tokens (" + batch + "), " +
      std::to_string(windows * seqLen) + " tokens, but the shards hold " +
      std::to_string(data.numTokens()) + " tokens, " +
      std::to_string(data.numWindows()) +
      (data.numWindows() == 1 ? " window" : " windows") +
      ": give more data or build a smaller batch");
}

Status chooseTokenFeed(const std::vector<const OtcSlot *> &inputs,
                       const std::string &tokensName,
                       const std::string &targetsName, TokenFeed &out) {
  auto byName = [&](const std::string &name, const char *flag,
                    const OtcSlot *&slot) -> Status {
    for (const OtcSlot *s : inputs)
      if (name == s->name)
        slot = s;
    if (!slot)
      return Status::error(std::string(flag) + " '" + name +
                           "' is not an input of the model");
    return Status::ok();
  };
  if (!tokensName.empty()) {
    Status s = byName(tokensName, "--tokens-input", out.tokens);
    if (!s)
      return s;
  }
  if (!targetsName.empty()) {
    Status s = byName(targetsName, "--targets-input", out.targets);
    if (!s)
      return s;
  }
  // An attention mask: named so, [B, T], [B, T, T] or [B, 1, T, T]
  // integers, booleans or floats.
  auto isMask = [](const OtcSlot &s) {
    std::string name = s.name;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return name.find("mask") != std::string::npos && s.rank >= 2 &&
           s.rank <= 4 &&
           (isIntegerSlot(s) || s.dtype == OTC_BOOL || s.dtype == OTC_F32);
  };
  for (const OtcSlot *s : inputs)
    if (s != out.tokens && s != out.targets && !out.mask && isMask(*s))
      out.mask = s;
  // The targets otc-compile --loss appends (`targets`), or `labels`, by
  // name before the order of the inputs decides.
  for (const char *name : {"targets", "labels"})
    for (const OtcSlot *s : inputs)
      if (!out.targets && targetsName.empty() && s != out.tokens &&
          s != out.mask && isIntegerSlot(*s) && name == std::string(s->name))
        out.targets = s;
  for (const OtcSlot *s : inputs) {
    if (!isIntegerSlot(*s) || s == out.tokens || s == out.targets ||
        s == out.mask)
      continue;
    if (!out.tokens)
      out.tokens = s;
    else if (!out.targets && targetsName.empty())
      out.targets = s;
  }
  if (!out.tokens)
    return Status::error("--data needs an integer token input; the model has none");
  for (const OtcSlot *s : inputs)
    if (s != out.tokens && s != out.targets && s != out.mask)
      return Status::error(
          std::string("--data feeds only the token and target inputs (and an "
                      "attention mask), but the model also has input '") +
          s->name + "'" +
          (isIntegerSlot(*s)
               ? std::string(": a second token input (an encoder-decoder "
                             "model's decoder ids) has no stream of its own "
                             "in the shards; train such a model with --batch "
                             "files (each of one or more global batches of "
                             "every input)")
               : std::string(": train such a model with --batch files (each "
                             "of one or more global batches of every "
                             "input)")));
  for (const OtcSlot *s : {out.tokens, out.targets}) {
    if (!s)
      continue;
    if (!isIntegerSlot(*s) || s->rank != 2)
      return Status::error(std::string("--data: input '") + s->name +
                           "' must be an integer [batch, T] tensor");
  }
  out.seqLen = out.tokens->shape[1];
  if (out.targets && out.targets->shape[1] != out.seqLen)
    return Status::error(std::string("--data: inputs '") + out.tokens->name +
                         "' and '" + out.targets->name +
                         "' have different sequence lengths");
  if (out.mask) {
    const OtcSlot &m = *out.mask;
    int64_t B = out.tokens->shape[0], T = out.seqLen;
    bool fits = m.shape[0] == B &&
                (m.rank == 2   ? m.shape[1] == T
                 : m.rank == 3 ? m.shape[1] == T && m.shape[2] == T
                               : m.shape[1] == 1 && m.shape[2] == T &&
                                     m.shape[3] == T);
    if (!fits)
      return Status::error(
          std::string("--data: the attention mask '") + m.name + "' is " +
          formatShape(slotShape(m)) + ", not [" + std::to_string(B) + ", " +
          std::to_string(T) + "] (the tokens'), [" + std::to_string(B) + ", " +
          std::to_string(T) + ", " + std::to_string(T) + "] or [" +
          std::to_string(B) + ", 1, " + std::to_string(T) + ", " +
          std::to_string(T) + "]");
  }
  return Status::ok();
}

TokenLoader::TokenLoader(const TokenDataset &data, const TokenFeed &feed,
                         uint64_t seed, bool shuffle)
    : data_(data), feed_(feed), seed_(seed), shuffle_(shuffle) {
  buildOrder();
}

void TokenLoader::buildOrder() {
  int64_t n = data_.numWindows();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    order_[i] = i;
  if (!shuffle_)
    return;
  // Fisher-Yates with a SplitMix64 stream seeded by (seed, epoch): the same
  // order on every platform.
  uint64_t state = splitMix64(seed_ ^ 0x5DA7A5EEDull) ^
                   splitMix64(static_cast<uint64_t>(epoch_) + 1);
  for (int64_t i = n - 1; i > 0; --i) {
    state = splitMix64(state);
    uint64_t j = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(state) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order_[i], order_[j]);
  }
}

void TokenLoader::seek(int64_t epoch, int64_t cursor) {
  bool rebuild = epoch != epoch_;
  epoch_ = epoch;
  cursor_ = cursor;
  if (rebuild)
    buildOrder();
}

/// Stores \p v at element \p i of an I64 or I32 buffer.
static void storeInt(std::vector<uint8_t> &buf, const OtcSlot &slot, int64_t i,
                     int64_t v) {
  if (slot.dtype == OTC_I64) {
    std::memcpy(buf.data() + i * 8, &v, 8);
  } else {
    int32_t w = static_cast<int32_t>(v);
    std::memcpy(buf.data() + i * 4, &w, 4);
  }
}

std::vector<uint8_t> onesFor(const OtcSlot &slot) {
  std::vector<uint8_t> bytes(static_cast<size_t>(slot.nbytes));
  int64_t n = 1;
  for (int d = 0; d < slot.rank; ++d)
    n *= slot.shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (slot.dtype == OTC_BOOL) {
      bytes[i] = 1;
    } else if (slot.dtype == OTC_F32) {
      float one = 1.0f;
      std::memcpy(bytes.data() + i * 4, &one, 4);
    } else {
      storeInt(bytes, slot, i, 1);
    }
  }
  return bytes;
}

bool queryKeyMask(const TokenFeed &feed) {
  return feed.mask && feed.mask->rank > 2;
}

void fillMask(const TokenFeed &feed, const uint8_t *tokens, int64_t docToken,
              std::vector<uint8_t> &out) {
  const OtcSlot &m = *feed.mask;
  const OtcSlot &tok = *feed.tokens;
  const int64_t B = m.shape[0], T = feed.seqLen;
  out.assign(static_cast<size_t>(m.nbytes), 0);
  std::vector<int64_t> doc(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    // doc[t]: how many documents start at or before t in the row.
    int64_t n = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t v = intAt(tok, tokens, b * T + t);
      n += docToken >= 0 && v == docToken;
      doc[t] = n;
    }
    for (int64_t q = 0; q < T; ++q)
      for (int64_t k = 0; k < T; ++k) {
        bool sees = k <= q && doc[k] == doc[q];
        int64_t i = (b * T + q) * T + k;
        if (m.dtype == OTC_BOOL) {
          out[i] = sees;
        } else if (m.dtype == OTC_F32) {
          float v = sees ? 0.0f : std::numeric_limits<float>::lowest();
          std::memcpy(out.data() + i * 4, &v, 4);
        } else {
          storeInt(out, m, i, sees);
        }
      }
  }
}

/// A uniform double in [0, 1) from the next value of \p state.
static double nextUniform(uint64_t &state) {
  state = splitMix64(state);
  return static_cast<double>(state >> 11) * 0x1.0p-53;
}

void TokenLoader::maskWindow(const TokenDataset::Window &w, int64_t window,
                             int64_t row, std::vector<uint8_t> &tokens,
                             std::vector<uint8_t> &targets) const {
  const MaskedLM &m = feed_.mlm;
  const int64_t T = feed_.seqLen;
  uint64_t state = splitMix64(splitMix64(seed_ ^ 0x4D4C4D5EEDull) +
                              static_cast<uint64_t>(epoch_)) ^
                   splitMix64(static_cast<uint64_t>(window) + 0x77ull);
  // A uniform integer in [0, n) from the next value of the stream.
  auto below = [&](int64_t n) {
    state = splitMix64(state);
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>(state) * static_cast<uint64_t>(n)) >>
        64);
  };
  std::vector<char> chosen(static_cast<size_t>(T), 0);
  int64_t eligible = 0, count = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (static_cast<int64_t>(w[t]) == m.keepToken)
      continue;
    ++eligible;
    chosen[t] = nextUniform(state) < m.prob;
    count += chosen[t];
  }
  // A window with none chosen gets one, drawn uniformly among its eligible
  // positions: a step of such windows alone would have no loss to take.
  if (count == 0 && eligible > 0)
    for (int64_t t = 0, k = below(eligible); t < T; ++t)
      if (static_cast<int64_t>(w[t]) != m.keepToken && k-- == 0) {
        chosen[t] = 1;
        break;
      }
  // Over the program's limit: that many kept, drawn uniformly (one at a
  // time among those left, so that a window under it draws nothing more).
  for (; m.maxChosen > 0 && count > m.maxChosen; --count)
    for (int64_t t = 0, k = below(count); t < T; ++t)
      if (chosen[t] && k-- == 0) {
        chosen[t] = 0;
        break;
      }
  for (int64_t t = 0; t < T; ++t) {
    const int64_t original = w[t];
    int64_t input = original, target = m.ignoreIndex;
    if (chosen[t]) {
      target = original;
      double kind = nextUniform(state);
      if (kind < 0.8)
        input = m.maskToken;
      else if (kind < 0.9)
        input = below(m.vocab);
    }
    storeInt(tokens, *feed_.tokens, row * T + t, input);
    storeInt(targets, *feed_.targets, row * T + t, target);
  }
}

Status predictionRows(const OtcSlot &slot, const uint8_t *targets,
                      int64_t sequences, int64_t ignore, int64_t K,
                      const std::string &where, std::vector<int64_t> &rows) {
  const int64_t T = slot.nbytes / (slot.dtype == OTC_I64 ? 8 : 4) / sequences;
  rows.assign(static_cast<size_t>(sequences * K), 0);
  for (int64_t b = 0; b < sequences; ++b) {
    int64_t *out = rows.data() + b * K, n = 0;
    for (int pass = 0; pass < 2 && n < K; ++pass)
      for (int64_t t = 0; t < T; ++t) {
        if ((intAt(slot, targets, b * T + t) != ignore) != (pass == 0))
          continue;
        if (n == K) {
          int64_t counted = 0;
          for (int64_t u = 0; u < T; ++u)
            counted += intAt(slot, targets, b * T + u) != ignore;
          return Status::error(
              where + ", sequence " + std::to_string(b) + ": " +
              std::to_string(counted) + " targets of input '" + slot.name +
              "' are counted (not " + std::to_string(ignore) +
              "), more than the " + std::to_string(K) +
              " positions per sequence the program computes the loss at "
              "(otc-compile --sparse-prediction=" +
              std::to_string(K) + ")");
        }
        out[n++] = b * T + t;
        if (pass == 1 && n == K)
          break;
      }
  }
  return Status::ok();
}

Status TokenLoader::next(int64_t rows, std::vector<uint8_t> &tokens,
                         std::vector<uint8_t> &targets) {
  const int64_t T = feed_.seqLen;
  tokens.resize(static_cast<size_t>(feed_.tokens->nbytes));
  if (feed_.targets)
    targets.resize(static_cast<size_t>(feed_.targets->nbytes));
  // Where the first bad value of a window is: slot bytes, range, and the
  // window's first token for the message (targets start one later).
  auto check = [&](const OtcSlot &slot, const OtcIndexRange *range,
                   const std::vector<uint8_t> &buf, int64_t row,
                   int64_t window, int64_t shift) -> Status {
    int64_t index = 0, value = 0;
    size_t elem = slot.dtype == OTC_I64 ? 8 : 4;
    if (!range || !findBadIndex(*range, slot, buf.data() + row * T * elem, T,
                                index, value))
      return Status::ok();
    return Status::error(data_.locate(window, index + shift) + ": token id " +
                         std::to_string(value) + " (for input '" + slot.name +
                         "') is outside " + indexRangeText(*range) + " (" +
                         range->what + ")");
  };
  for (int64_t r = 0; r < rows; ++r) {
    if (cursor_ >= data_.numWindows())
      seek(epoch_ + 1, 0);
    int64_t window = order_[cursor_++];
    TokenDataset::Window w = data_.window(window);
    if (feed_.mlm.on()) {
      maskWindow(w, window, r, tokens, targets);
    } else {
      for (int64_t t = 0; t < T; ++t) {
        storeInt(tokens, *feed_.tokens, r * T + t, w[t]);
        if (feed_.targets)
          storeInt(targets, *feed_.targets, r * T + t, w[t + 1]);
      }
    }
    if (Status s = check(*feed_.tokens, feed_.tokensRange, tokens, r, window, 0); !s)
      return s;
    if (feed_.targets)
      if (Status s = check(*feed_.targets, feed_.targetsRange, targets, r,
                           window, feed_.mlm.on() ? 0 : 1);
          !s)
        return s;
  }
  return Status::ok();
}

} // namespace otcrt
