// Token data for `train --data`: shards matched by globs are memory-mapped
// and cut into windows of T+1 tokens (T with no target input or masked-LM
// targets) starting at
// multiples of T within each shard; a loader walks the windows in a seeded
// per-epoch permutation (or in order) and fills micro-batches of the token
// and target inputs. The loader's position is two integers, saved in
// checkpoints so a resumed run reads exactly the windows the straight run
// would have read.
#ifndef OTCRT_DATA_H
#define OTCRT_DATA_H

#include "otcrt/abi.h"
#include "otcrt/status.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace otcrt {

/// The files each glob of \p globs matches, each glob's sorted, appended
/// to \p paths; an error naming \p what (the flag) for a glob that matches
/// none.
Status expandGlobs(const std::vector<std::string> &globs,
                   const std::string &what, std::vector<std::string> &paths);

/// Memory-mapped shards cut into fixed-length windows.
class TokenDataset {
public:
  TokenDataset() = default;
  ~TokenDataset();
  TokenDataset(const TokenDataset &) = delete;
  TokenDataset &operator=(const TokenDataset &) = delete;

  /// Maps every file matched by \p globs (each sorted, matches in order) and
  /// cuts windows of \p window tokens every \p stride tokens. \p what names
  /// the flag in messages ("--data").
  Status open(const std::vector<std::string> &globs, int64_t window,
              int64_t stride, const std::string &what);

  int64_t numWindows() const { return numWindows_; }
  /// The token that starts every document, as the shards' headers record
  /// it: -1 when none does, -2 when they record different ones.
  int64_t docToken() const { return docToken_; }
  int64_t numTokens() const { return numTokens_; }
  size_t numShards() const { return shards_.size(); }
  /// The tokens of one window, in its shard's width (uint16 or uint32).
  struct Window {
    const uint8_t *bytes = nullptr;
    int tokenBytes = 2;
    uint32_t operator[](int64_t t) const {
      if (tokenBytes == 2) {
        uint16_t v;
        std::memcpy(&v, bytes + 2 * t, 2);
        return v;
      }
      uint32_t v;
      std::memcpy(&v, bytes + 4 * t, 4);
      return v;
    }
  };
  /// The \p window tokens of window \p w.
  Window window(int64_t w) const;
  /// A fingerprint of the shard list and sizes (checked on resume).
  uint64_t fingerprint() const;
  /// "SHARD token N": where token \p t of window \p w lies.
  std::string locate(int64_t w, int64_t t) const;

private:
  struct Shard {
    std::string path;
    void *map = nullptr;
    size_t mapBytes = 0;
    const uint8_t *tokens = nullptr;
    int tokenBytes = 2;
    int64_t count = 0;
    int64_t firstWindow = 0;
  };
  std::vector<Shard> shards_;
  int64_t window_ = 0, stride_ = 0, numWindows_ = 0, numTokens_ = 0;
  int64_t docToken_ = -1;
};

/// An error naming the sizes when \p data (opened for \p what, "--data")
/// holds fewer than the \p windows windows that \p reader ("one step")
/// reads at once, \p batch saying of what they are ("micro-batch 4 x
/// grad-accum 8"): fewer would feed it the same windows twice.
Status checkDataCovers(const TokenDataset &data, const std::string &what,
                       const std::string &reader, int64_t windows,
                       int64_t seqLen, const std::string &batch);

/// Masked-LM targets (`train --data --mlm`): instead of the next tokens,
/// each position of a window is chosen with probability \p prob (never one
/// holding \p keepToken, the shards' document token, as Hugging Face's
/// collator never chooses a special token); a chosen position's input
/// becomes \p maskToken (80%), a token drawn uniformly from [0, vocab)
/// (10%) or stays (10%), and its target is the original token; every other
/// target is \p ignoreIndex. A window where no position is chosen gets one,
/// drawn uniformly (a step of such windows alone would have no loss; at
/// T = 512 and 0.15 no window ever needs it). The draws are a SplitMix64
/// stream seeded by
/// (seed, epoch, window): the same on every platform and after a resume,
/// different in each epoch.
struct MaskedLM {
  int64_t maskToken = -1; ///< negative: next-token targets
  double prob = 0.15;
  int64_t vocab = 0;
  int64_t keepToken = -1; ///< never chosen; negative: none
  int64_t ignoreIndex = -100;
  /// The most positions of a window chosen (a program whose loss is at K
  /// positions per sequence: otc-compile --sparse-prediction); a window
  /// with more chosen keeps this many of them, drawn uniformly, the others
  /// left as they are. 0: no limit.
  int64_t maxChosen = 0;
  bool on() const { return maskToken >= 0; }
};

/// Which slots take tokens and targets, and the window geometry.
struct TokenFeed {
  const OtcSlot *tokens = nullptr;
  const OtcSlot *targets = nullptr; ///< may be null
  /// An attention mask input (named `*mask*`: Hugging Face's
  /// `attention_mask`): [B, T], fed all ones (a --data window is T tokens
  /// with no padding), or [B, T, T] or [B, 1, T, T] (query by key), fed
  /// causal masks, which --doc-mask also stops at document boundaries
  /// (fillMask). May be null.
  const OtcSlot *mask = nullptr;
  int64_t seqLen = 0;               ///< T
  MaskedLM mlm;                     ///< off: next-token targets
  /// The values each may hold (null: not checked).
  const OtcIndexRange *tokensRange = nullptr, *targetsRange = nullptr;
};

/// Picks the token and target slots from \p inputs (by name when given, else
/// the first two integer inputs that are not an attention mask) and the
/// attention mask (an input named like `attention_mask`, [B, T]), and checks
/// they are [B, T] with no other inputs left unfed.
Status chooseTokenFeed(const std::vector<const OtcSlot *> &inputs,
                       const std::string &tokensName,
                       const std::string &targetsName, TokenFeed &out);

/// The rows of a micro-batch whose loss a program with prediction_rows
/// computes (abi.h): for each of the \p sequences of the \p targets (of
/// \p slot, [sequences, T]), the positions whose target is not \p ignore,
/// in order, then those whose target is, up to \p K, as b x T + t into
/// \p rows ([sequences, K]). A sequence with more than K counted targets
/// is an error naming it (\p where: which micro-batch).
Status predictionRows(const OtcSlot &slot, const uint8_t *targets,
                      int64_t sequences, int64_t ignore, int64_t K,
                      const std::string &where, std::vector<int64_t> &rows);

/// The bytes of \p slot holding ones (an attention mask that hides nothing).
std::vector<uint8_t> onesFor(const OtcSlot &slot);

/// Whether the feed's attention mask is query by key ([B, T, T] or
/// [B, 1, T, T]) rather than [B, T].
bool queryKeyMask(const TokenFeed &feed);

/// Fills \p out with the feed's query-by-key attention mask for the
/// micro-batch whose token input bytes are \p tokens: query q of a row sees
/// key k when k <= q and, with \p docToken not negative, no token k' with
/// k < k' <= q is \p docToken (each such token starts a document, so
/// attention stops at document boundaries). Booleans and integers hold 1
/// where a query sees a key, 0 elsewhere; floats are additive: 0 where it
/// sees, the float32 minimum elsewhere (Hugging Face's convention).
void fillMask(const TokenFeed &feed, const uint8_t *tokens, int64_t docToken,
              std::vector<uint8_t> &out);

/// Walks the windows of a dataset: epoch by epoch, each a seeded permutation
/// (or the identity), micro-batch by micro-batch.
class TokenLoader {
public:
  TokenLoader(const TokenDataset &data, const TokenFeed &feed, uint64_t seed,
              bool shuffle);

  /// Fills the token (and target) bytes of one micro-batch of \p rows
  /// windows, in the slots' dtypes, and advances: targets are the next
  /// tokens, or with the feed's MaskedLM on, masked-LM targets. Stops with an
  /// error naming the shard and position of the first token outside the feed's
  /// ranges.
  Status next(int64_t rows, std::vector<uint8_t> &tokens,
              std::vector<uint8_t> &targets);
  /// Rewinds to the first window of epoch 0 (validation).
  void rewind() { seek(0, 0); }
  /// Moves to window \p cursor of epoch \p epoch.
  void seek(int64_t epoch, int64_t cursor);
  int64_t epoch() const { return epoch_; }
  int64_t cursor() const { return cursor_; }

private:
  void buildOrder();
  /// Writes row \p row's masked-LM inputs and targets from window \p w
  /// (number \p window of the dataset).
  void maskWindow(const TokenDataset::Window &w, int64_t window, int64_t row,
                  std::vector<uint8_t> &tokens,
                  std::vector<uint8_t> &targets) const;

  const TokenDataset &data_;
  TokenFeed feed_;
  uint64_t seed_;
  bool shuffle_;
  int64_t epoch_ = 0, cursor_ = 0;
  std::vector<int64_t> order_;
};

} // namespace otcrt

#endif // OTCRT_DATA_H
