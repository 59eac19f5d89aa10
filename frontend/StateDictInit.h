//===- StateDictInit.h - what the state-dict export knows of a weight -----===//
//
// Shared by StateDictExport.cpp (names from the graph, the output) and
// StateDictReference.cpp (names checked and found by value in the model's
// original state dict): an initializer considered for the state dict, and
// how a state-dict tensor relates to its values.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FRONTEND_STATEDICTINIT_H
#define OTC_FRONTEND_STATEDICTINIT_H

#include "frontend/Importer.h"
#include "frontend/OnnxExporter.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace otc {
namespace statedict {

/// How a state-dict tensor relates to an initializer's values.
struct Relation {
  enum Kind { Identical, Transposed, Reshaped, Offset } kind = Identical;
  float offset = 0;           ///< Offset: initializer = state dict + offset
  std::vector<int64_t> shape; ///< the state-dict tensor's shape
};

/// A float initializer considered for the state dict.
struct Init {
  std::string name;
  std::vector<int64_t> shape;
  size_t count = 0; ///< its number of elements
  /// Its values as exported, or empty where they are not kept (a large
  /// tensor of external data, when no reference compares values): then
  /// `key` says what findTies needs and `proto` where to read them again.
  std::vector<float> original;
  std::optional<TieKey> key;
  /// Where the values are not kept: what a match by value checks first.
  std::optional<ValuePrint> print;
  const onnx::TensorProto *proto = nullptr;
  /// The trained weight (the caller's, which outlives the export), or null.
  const ExportWeight *trainedWeight = nullptr;
  /// The trained initializer whose values this one, a tie's copy, follows
  /// (transposed when `followsTransposed`), or -1.
  int follows = -1;
  bool followsTransposed = false;
  bool trained = false;
  /// Not read at all (no key): none of its names may be kept (load,
  /// readKept).
  bool unread = false;

  /// Whether its exported values were read and let go.
  bool deferred() const { return original.empty() && proto; }
  /// State-dict names found for it, each with its relation and how.
  struct Named {
    std::string name;
    Relation relation;
    std::string how;
  };
  std::vector<Named> names;
  /// A name the metadata suggests but cannot confirm (a fold otc cannot
  /// undo alone), for the reference to check and for errors.
  std::string hint;
  std::string hintWhy;
};

inline int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Whether every name of `names` starts with `prefix` (false when empty).
template <typename Range, typename Name>
bool allStartWith(const Range &names, Name name, const std::string &prefix) {
  bool any = false;
  for (const auto &x : names) {
    if (name(x).rfind(prefix, 0) != 0)
      return false;
    any = true;
  }
  return any;
}

/// How far a match by value may go: every relation where the graph's own
/// names or metadata say which tensor it is (a check), the exact ones alone
/// where the value is the only evidence (a search).
enum class Rules { All, Exact };

/// The relation under which values `v` of shape `shape` (an initializer's
/// as exported) equal `r`, `ref`'s values (within its relTol relative),
/// trying `preferred` first. Under Rules::Exact no folded-in offset is
/// taken (the trained `ln_1.weight` minus 1 is not the zero-initialized
/// `c_proj.bias`, though both were so at export).
std::optional<Relation> relate(const std::vector<int64_t> &shape,
                               const float *v, const ExportWeight &ref,
                               const float *r,
                               const Relation *preferred = nullptr,
                               Rules rules = Rules::All);
/// Whether values of prints `a` and `b` (of equal counts) may relate under
/// `rules`: false only where relate would find no relation (their first
/// and last values are neither equal within `relTol` nor one offset
/// apart).
bool mayRelate(const ValuePrint &a, const ValuePrint &b, float relTol,
               Rules rules);
/// How a name's relation reads after how it was found (", transposed").
std::string relationText(const Relation &rel);
/// The state-dict tensor of `v`, the current values of `init`, under `rel`.
std::vector<float> invert(std::vector<float> v, const Init &init,
                          const Relation &rel);

/// Names the initializers from a reference, the model's original state
/// dict: each name the graph gave checked by value (an error when it does
/// not hold); the metadata's hints tried; the initializers still unnamed
/// named by value; the reference's names no initializer took, a tie's other
/// name or copied through.
class ReferenceResolver {
public:
  /// `readInit` reads an initializer's exported values again where
  /// they are not kept (Init::deferred).
  ReferenceResolver(std::vector<Init> &inits,
                    const std::vector<ExportWeight> &reference,
                    const std::string &stripPrefix,
                    std::function<std::vector<float>(const Init &)> readInit);
  bool run(std::string &error);
  /// The reference under the graph's names (the wrapper's prefix put back
  /// where the graph's names have it and the reference's do not).
  const std::vector<ExportWeight> &reference() const { return ref; }
  /// Reference tensors copied through (not in the graph).
  const std::vector<const ExportWeight *> &copied() const {
    return copiedThrough;
  }

private:
  bool checkGraphNames(std::string &error);
  void matchHints();
  void nameByValue();
  void claimUnnamedReference();
  /// The relation of `init` to `w` (relate), their prints checked first
  /// and their values read only then, each kept until another is asked
  /// for (a search reads one side once for all candidates of the other).
  std::optional<Relation> match(const Init &init, const ExportWeight &w,
                                const Relation *preferred = nullptr,
                                Rules rules = Rules::All);
  ValuePrint printOf(const Init &init) const;
  ValuePrint printOf(const ExportWeight &w) const;

  std::vector<Init> &inits;
  std::function<std::vector<float>(const Init &)> readInit;
  const Init *initRead = nullptr;
  std::vector<float> initValues;
  const ExportWeight *refRead = nullptr;
  std::vector<float> refValues;
  std::vector<ExportWeight> ref;
  std::map<std::string, const ExportWeight *> refByName;
  /// The reference's names taken so far.
  std::set<std::string> claimed;
  std::vector<const ExportWeight *> copiedThrough;
};

/// The module of a state-dict name ("a.b" of "a.b.weight"; "" without a
/// dot) and its last part ("weight").
inline std::string ownerOf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}
inline std::string leafOf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

} // namespace statedict
} // namespace otc

#endif // OTC_FRONTEND_STATEDICTINIT_H
