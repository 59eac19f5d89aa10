//===- StateDictExport.cpp - trained weights under PyTorch's names --------===//
//
// Implementation of exportStateDict. An exported graph names its weights in
// three ways, and the state dict of the module it came from is recovered
// from each:
//
//  - the initializer name itself (`model.layers.0.self_attn.q_proj.bias`):
//    both exporters keep the state-dict name of a parameter they read as is;
//  - exporter metadata: the dynamo exporter's optimizer records on each
//    folded value `pkg.onnxscript.optimizer.folded_from` (`val_134` came
//    from `['model.layers.0.self_attn.q_proj.weight']`, transposed for the
//    MatMul of an `aten.linear`); the TorchScript exporter names a folded
//    Wᵀ `onnx::MatMul_N` and the MatMul that reads it by module scope
//    (`/model/layers.0/self_attn/q_proj/MatMul`);
//  - a reference: the model's original state dict. Each initializer is then
//    matched by value (the same values, transposed, reshaped, or shifted by
//    a constant the exporter folded in: Gemma's `1 + weight`), every name
//    the metadata gave is checked against it, tied names are found (the
//    reference holds both), and reference entries the graph lacks are
//    copied through, so the output loads with `strict=True`.
//
// A weight tied by the model (read by an embedding lookup of one module and
// the projection of another) gets both names.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"
#include "frontend/OnnxExporter.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

namespace otc {
namespace {

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
  const onnx::TensorProto *proto = nullptr;
  /// The trained values (the caller's, which outlive the export), or null.
  const float *trainedValues = nullptr;
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

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Whether every value is finite (a mask's -inf is not).
bool allFinite(const std::vector<float> &v) {
  return std::all_of(v.begin(), v.end(),
                     [](float x) { return std::isfinite(x); });
}

/// A state-dict-like name: dotted module path, no exporter prefix.
bool paramLike(const std::string &name) {
  return name.find('.') != std::string::npos &&
         name.find("::") == std::string::npos && !name.empty() &&
         name[0] != '/' && name.find(' ') == std::string::npos;
}

/// "['a', 'b']" -> {a, b}.
std::vector<std::string> parseList(const std::string &text) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = text.find('\'', i)) != std::string::npos) {
    size_t j = text.find('\'', i + 1);
    if (j == std::string::npos)
      break;
    out.push_back(text.substr(i + 1, j - i - 1));
    i = j + 1;
  }
  return out;
}

std::string ownerOf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}
std::string leafOf(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

using detail::projectionWeight;

/// How far a match by value may go: every relation where the graph's own
/// names or metadata say which tensor it is (a check), the exact ones alone
/// where the value is the only evidence (a search).
enum class Rules { All, Exact };

/// The relation under which `init` (its original values) equals `ref`
/// (within `tol` relative), trying `preferred` first. Under Rules::Exact no
/// folded-in offset is taken (the trained `ln_1.weight` minus 1 is not the
/// zero-initialized `c_proj.bias`, though both were so at export).
std::optional<Relation> relate(const Init &init, const ExportWeight &ref,
                               const Relation *preferred = nullptr,
                               Rules rules = Rules::All) {
  int64_t n = numel(init.shape);
  if (n != numel(ref.shape))
    return std::nullopt;
  const float *r = ref.data;
  // Values are kept whenever a reference is given (StateDictBuilder::load).
  assert(!init.deferred() && "values compared with a reference are kept");
  const std::vector<float> &v = init.original;
  auto near = [&](float a, float b) {
    return a == b || std::fabs(a - b) <= ref.relTol * std::fabs(b);
  };
  auto same = [&]() {
    for (int64_t i = 0; i < n; ++i)
      if (!near(v[i], r[i]))
        return false;
    return true;
  };
  auto transposed = [&]() {
    if (init.shape.size() != 2 || ref.shape.size() != 2 ||
        init.shape[0] != ref.shape[1] || init.shape[1] != ref.shape[0])
      return false;
    int64_t rows = ref.shape[0], cols = ref.shape[1];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!near(v[j * rows + i], r[i * cols + j]))
          return false;
    return true;
  };
  auto offset = [&]() -> std::optional<float> {
    if (n == 0)
      return std::nullopt;
    double c = double(v[0]) - r[0];
    if (c == 0)
      return std::nullopt;
    for (int64_t i = 0; i < n; ++i) {
      double d = double(v[i]) - r[i];
      // The fold rounded v = r + c once in float32.
      if (std::fabs(d - c) > 4 * std::ldexp(1.0, -23) * (std::fabs(v[i]) + 1) +
                                 ref.relTol * (std::fabs(r[i]) + 1))
        return std::nullopt;
    }
    return float(std::nearbyint(c * 1e6) / 1e6);
  };
  std::vector<Relation::Kind> order = {Relation::Identical, Relation::Transposed,
                                       Relation::Reshaped, Relation::Offset};
  if (preferred)
    order.insert(order.begin(), preferred->kind);
  for (Relation::Kind k : order) {
    if (k == Relation::Offset && rules == Rules::Exact)
      continue;
    Relation rel;
    rel.kind = k;
    rel.shape = ref.shape;
    switch (k) {
    case Relation::Identical:
      if (init.shape == ref.shape && same())
        return rel;
      break;
    case Relation::Transposed:
      if (transposed())
        return rel;
      break;
    case Relation::Reshaped:
      if (init.shape != ref.shape && same())
        return rel;
      break;
    case Relation::Offset:
      if (init.shape == ref.shape)
        if (auto c = offset()) {
          rel.offset = *c;
          return rel;
        }
      break;
    }
  }
  return std::nullopt;
}

std::string relationText(const Relation &rel) {
  switch (rel.kind) {
  case Relation::Identical:
    return "";
  case Relation::Transposed:
    return ", transposed";
  case Relation::Reshaped:
    return ", reshaped to " + detail::shapeStr(rel.shape);
  case Relation::Offset: {
    std::ostringstream s;
    s << ", minus the " << rel.offset << " the exporter folded in";
    return s.str();
  }
  }
  return "";
}

/// The state-dict tensor of `v`, the current values of `init`, under `rel`.
std::vector<float> invert(std::vector<float> v, const Init &init,
                          const Relation &rel) {
  switch (rel.kind) {
  case Relation::Identical:
  case Relation::Reshaped:
    return v;
  case Relation::Transposed:
    return transposed2d(v.data(), init.shape[0], init.shape[1]);
  case Relation::Offset:
    for (float &x : v)
      x -= rel.offset;
    return v;
  }
  return v;
}

class StateDictBuilder : public std::enable_shared_from_this<StateDictBuilder> {
public:
  StateDictBuilder(const StateDictOptions &options) : options(options) {}

  bool run(const std::vector<ExportWeight> &trained,
           std::vector<StateDictTensor> &out,
           std::vector<std::string> &unresolved, std::string &error);

private:
  bool load(std::string &error);
  /// Marks the trained initializers (a trained scalar becomes one).
  bool markTrained(const std::vector<ExportWeight> &trained,
                   std::string &error);
  /// Makes each untrained copy of a tie follow its trained source.
  void followTies();
  /// Reads the initializers left unread whose names are kept (for their
  /// tie keys, and to drop a mask).
  void readKept();
  /// The state-dict names the graph gives `init`: its own name (1.), the
  /// dynamo exporter's record of what it was folded from (2.), or the
  /// TorchScript scope of its readers (3.), the first that applies.
  void nameFromGraph(Init &init);
  void nameFromOwnName(Init &init, const onnx::ValueInfoProto *vi);
  /// Whether the record named it (or hinted a name).
  bool nameFromFoldedFrom(Init &init, const onnx::ValueInfoProto *vi);
  void nameFromScope(Init &init);
  /// The (node, input) pairs that read `name`.
  std::vector<std::pair<int, int>> readsOf(const std::string &name) const;
  void aliasesFromReaders();
  bool resolveWithReference(std::string &error);
  /// resolveWithReference's steps: each name the graph gave checked by
  /// value (an error when it does not hold); the metadata's hints tried;
  /// the initializers still unnamed named by value; the reference's names
  /// no initializer took, a tie's other name or copied through.
  bool checkGraphNames(std::string &error);
  void matchHints();
  void nameByValue();
  void claimUnnamedReference();
  /// The values `init` holds now: its trained ones, its tie source's, or
  /// as exported (read again when not kept).
  std::vector<float> currentValues(const Init &init) const;
  /// The exported values of `init`, read from the model's external data
  /// (one that load did not keep).
  std::vector<float> readExported(const Init &init) const;
  /// Whether currentValues(init) reads the model's external data again.
  bool readsExternalData(const Init &init) const;

  const StateDictOptions options;
  onnx::ModelProto model;
  std::vector<Init> inits;
  std::map<std::string, size_t> byName;
  /// One-element float initializers: parameters only when the checkpoint
  /// trained them (CLIP's logit_scale under --train=logit_scale).
  std::map<std::string, Init> scalars;
  std::map<std::string, const onnx::ValueInfoProto *> infos;
  std::map<std::string, std::vector<std::pair<int, int>>> readers;
  /// Reference tensors copied through (not in the graph).
  std::vector<const ExportWeight *> copied;
  /// The reference under the graph's names (options.stripPrefix put back
  /// where the graph's names have it and the reference's do not), by
  /// name, and the names of it taken so far.
  std::vector<ExportWeight> reference;
  std::map<std::string, const ExportWeight *> refByName;
  std::set<std::string> claimed;
};

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

bool StateDictBuilder::load(std::string &error) {
  std::ifstream in(options.modelPath, std::ios::binary);
  if (!in) {
    error = "cannot open " + options.modelPath;
    return false;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!model.ParseFromString(bytes.str())) {
    error = options.modelPath + ": not a valid ONNX model (protobuf parse failed)";
    return false;
  }
  // As the importer read it: parameters the exporter merged are apart.
  detail::splitMergedParams(model, options.modelPath);
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::ValueInfoProto &info : graph.value_info())
    infos[info.name()] = &info;
  for (const onnx::ValueInfoProto &info : graph.input())
    infos[info.name()] = &info;
  for (int n = 0; n < graph.node_size(); ++n)
    for (int j = 0; j < graph.node(n).input_size(); ++j)
      readers[graph.node(n).input(j)].push_back({n, j});
  for (const onnx::TensorProto &t : graph.initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT &&
        t.data_type() != onnx::TensorProto::FLOAT16 &&
        t.data_type() != onnx::TensorProto::BFLOAT16 &&
        t.data_type() != onnx::TensorProto::DOUBLE)
      continue;
    // Only some names kept (a peft adapter out of a model of gigabytes): a
    // large tensor of external data is not read until its names say it is
    // kept (readKept).
    if (options.keep && !options.reference &&
        t.data_location() == onnx::TensorProto::EXTERNAL) {
      Init init;
      init.name = t.name();
      init.shape.assign(t.dims().begin(), t.dims().end());
      init.count = size_t(numel(init.shape));
      if (init.count >= 2 && init.count >= detail::valuelessElements()) {
        init.proto = &t;
        init.unread = true;
        byName[init.name] = inits.size();
        inits.push_back(std::move(init));
        continue;
      }
    }
    Init init;
    init.name = t.name();
    const std::string what = "initializer '" + t.name() + "'";
    // A large tensor of external data (detail::valuelessElements) is read
    // again when it is written: without a reference to compare it with,
    // only ties need its values, and its key is read without keeping them.
    std::optional<detail::StreamedKey> key =
        options.reference
            ? std::nullopt
            : detail::keyWithoutValues(t, what, options.modelPath);
    if (key) {
      init.shape.assign(t.dims().begin(), t.dims().end());
      init.count = size_t(numel(init.shape));
      init.key = key->key;
      init.proto = &t;
    } else {
      detail::TensorData d = detail::decodeTensor(t, what, options.modelPath);
      init.shape.assign(d.shape.begin(), d.shape.end());
      init.count = d.floats.size();
      init.original = std::move(d.floats);
    }
    // Scalars, one-element constants and masks are never parameters,
    // unless a scalar was trained (markTrained).
    if (key ? !key->finite : !allFinite(init.original))
      continue;
    if (init.count < 2) {
      scalars[init.name] = std::move(init);
      continue;
    }
    byName[init.name] = inits.size();
    inits.push_back(std::move(init));
  }
  return true;
}

void StateDictBuilder::readKept() {
  for (Init &init : inits) {
    if (!init.unread || std::none_of(init.names.begin(), init.names.end(),
                                     [&](const Init::Named &n) {
                                       return options.keep(n.name);
                                     }))
      continue;
    std::optional<detail::StreamedKey> key = detail::keyWithoutValues(
        *init.proto, "initializer '" + init.name + "'", options.modelPath);
    assert(key && "load leaves unread only what keyWithoutValues reads");
    init.unread = false;
    // As load: a tensor that is not all finite is no parameter (a mask).
    if (!key->finite) {
      init.names.clear();
      continue;
    }
    init.key = key->key;
  }
}

bool StateDictBuilder::markTrained(const std::vector<ExportWeight> &trained,
                                   std::string &error) {
  for (const ExportWeight &w : trained) {
    auto it = byName.find(w.name);
    if (auto s = scalars.find(w.name);
        it == byName.end() && s != scalars.end()) {
      // A one-element initializer that was trained is a parameter.
      byName[w.name] = inits.size();
      inits.push_back(std::move(s->second));
      scalars.erase(s);
      it = byName.find(w.name);
    }
    if (it == byName.end()) {
      error = "weight '" + w.name + "' is not a float initializer of " +
              options.modelPath + " (weights of another model?)";
      return false;
    }
    Init &init = inits[it->second];
    if (init.shape != w.shape) {
      error = "weight '" + w.name + "' has shape " + detail::shapeStr(w.shape) +
              " but the model's initializer has " + detail::shapeStr(init.shape);
      return false;
    }
    init.trainedValues = w.data;
    init.trained = true;
  }
  return true;
}

void StateDictBuilder::followTies() {
  // The copy of a tied weight follows its trained source.
  std::vector<NamedTensor> named;
  for (const Init &init : inits) {
    NamedTensor n{init.name, init.shape};
    if (init.deferred()) {
      n.key = init.key;
      n.load = [this, &init] { return readExported(init); };
    } else {
      n.values = &init.original;
    }
    named.push_back(std::move(n));
  }
  for (const InitializerTie &t : findTies(named)) {
    Init &copy = inits[byName.at(t.copy)];
    const Init &src = inits[byName.at(t.source)];
    if (copy.trained || !src.trained)
      continue;
    copy.follows = int(byName.at(t.source));
    copy.followsTransposed = t.transposed;
  }
}

bool StateDictBuilder::readsExternalData(const Init &init) const {
  if (init.follows >= 0)
    return readsExternalData(inits[init.follows]);
  return !init.trainedValues && init.deferred();
}

std::vector<float> StateDictBuilder::currentValues(const Init &init) const {
  if (init.follows >= 0) {
    const Init &src = inits[init.follows];
    std::vector<float> v = currentValues(src);
    return init.followsTransposed
               ? transposed2d(v.data(), src.shape[0], src.shape[1])
               : v;
  }
  if (init.trainedValues)
    return std::vector<float>(init.trainedValues,
                              init.trainedValues + init.count);
  if (init.deferred())
    return readExported(init);
  return init.original;
}

std::vector<float> StateDictBuilder::readExported(const Init &init) const {
  return detail::decodeTensor(*init.proto, "initializer '" + init.name + "'",
                              options.modelPath)
      .floats;
}

std::vector<std::pair<int, int>>
StateDictBuilder::readsOf(const std::string &name) const {
  auto r = readers.find(name);
  return r == readers.end() ? std::vector<std::pair<int, int>>() : r->second;
}

void StateDictBuilder::nameFromGraph(Init &init) {
  auto info = infos.find(init.name);
  const onnx::ValueInfoProto *vi = info == infos.end() ? nullptr : info->second;
  if (paramLike(init.name))
    nameFromOwnName(init, vi);
  else if (!nameFromFoldedFrom(init, vi))
    nameFromScope(init);
}

void StateDictBuilder::nameFromOwnName(Init &init,
                                       const onnx::ValueInfoProto *vi) {
  std::string kind =
      vi ? detail::valueMetadata(
               *vi, "pkg.torch.export.graph_signature.InputSpec.kind")
         : "";
  std::string persistent =
      vi ? detail::valueMetadata(
               *vi, "pkg.torch.export.graph_signature.InputSpec.persistent")
         : "";
  // A non-persistent buffer (rotary inv_freq, embed_scale) is no
  // state-dict entry.
  if (kind == "BUFFER" && persistent != "True")
    return;
  Relation rel;
  rel.shape = init.shape;
  init.names.push_back({init.name, rel, "initializer name"});
}

bool StateDictBuilder::nameFromFoldedFrom(Init &init,
                                          const onnx::ValueInfoProto *vi) {
  const onnx::GraphProto &graph = model.graph();
  std::string folded =
      vi ? detail::valueMetadata(*vi, "pkg.onnxscript.optimizer.folded_from") : "";
  if (!folded.empty()) {
    std::vector<std::string> from = parseList(folded);
    std::vector<std::string> params;
    for (const std::string &f : from)
      if (paramLike(f))
        params.push_back(f);
    // An embedding lookup reads its table (a `.weight`) with indices (an
    // index buffer like `position_ids`).
    if (init.name.rfind("embedding", 0) == 0 && params.size() > 1) {
      std::vector<std::string> tables;
      for (const std::string &p : params)
        if (leafOf(p) == "weight")
          tables.push_back(p);
      if (tables.size() == 1)
        params = tables;
    }
    if (from.size() == 1 && params.size() == 1 && init.shape.size() == 2) {
      // A Wᵀ folded for the MatMul of a Linear: every reader is a projection
      // from an aten.linear.
      bool linear = true;
      auto reads = readsOf(init.name);
      for (auto [n, j] : reads)
        linear &= projectionWeight(graph.node(n), j) &&
                  detail::nodeMetadata(graph.node(n), "pkg.torch.onnx.fx_node")
                          .find("aten.linear") != std::string::npos;
      if (linear && !reads.empty()) {
        Relation rel;
        rel.kind = Relation::Transposed;
        rel.shape = {init.shape[1], init.shape[0]};
        init.names.push_back(
            {params[0], rel,
             "exporter metadata (folded_from " + params[0] + ", the Wᵀ of an aten.linear)"});
        return true;
      }
    }
    // A lookup of the table's rows (`embedding_3`), or the parameter and
    // constants only (`add_4` from ['...norm.weight', 'val_5']: Gemma's
    // 1 + weight): the reference can tell how. A table computed from a
    // buffer (rotary cos/sin) is neither.
    bool constantsOnly = true;
    for (const std::string &f : from)
      constantsOnly &= f == params.front() ||
                       (f.rfind("val_", 0) == 0 &&
                        f.find_first_not_of("0123456789", 4) == std::string::npos);
    if (params.size() == 1 &&
        (constantsOnly || init.name.rfind("embedding", 0) == 0)) {
      init.hint = params[0];
      init.hintWhy = "folded by the exporter from " + params[0] +
                     " (folded_from " + folded + ")";
      return true;
    }
  }
  return false;
}

void StateDictBuilder::nameFromScope(Init &init) {
  const onnx::GraphProto &graph = model.graph();
  if (init.name.rfind("onnx::", 0) == 0) {
    auto reads = readsOf(init.name);
    std::string weight =
        init.shape.size() == 2
            ? detail::foldedProjectionName(graph, init.name, reads)
            : "";
    if (!weight.empty()) {
      Relation rel;
      rel.kind = Relation::Transposed;
      rel.shape = {init.shape[1], init.shape[0]};
      init.names.push_back({weight, rel,
                            "TorchScript node scope of " +
                                graph.node(reads[0].first).name() +
                                " (the exporter folded the Linear's Wᵀ)"});
      return;
    }
    if (std::string hint = detail::scopeWeightName(graph, reads);
        !hint.empty()) {
      init.hint = hint;
      init.hintWhy = "read in the scope of " + graph.node(reads[0].first).name() +
                     " as '" + init.name + "', a value the exporter folded";
    }
  }
}

void StateDictBuilder::aliasesFromReaders() {
  // A weight tied by the model is read as the table of one module's
  // embedding lookup and the projection of another: each of them has it in
  // its state dict.
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> taken;
  for (const Init &init : inits)
    for (const Init::Named &n : init.names)
      taken.insert(n.name);
  // The initializers that hold each state-dict name (a tie's copy too).
  for (Init &init : inits) {
    if (init.names.empty())
      continue;
    const Init::Named primary = init.names.front();
    auto r = readers.find(init.name);
    if (r == readers.end())
      continue;
    for (auto [n, j] : r->second) {
      const onnx::NodeProto &node = graph.node(n);
      bool lookup = node.op_type() == "Gather" && j == 0;
      if (!lookup && !projectionWeight(node, j))
        continue;
      std::string module = detail::moduleOf(node);
      if (module.empty() || node.name().rfind('/', 0) == 0)
        continue; // TorchScript scopes name the copy's reader already
      std::string alias = module + "." + leafOf(primary.name);
      if (module == ownerOf(primary.name) || taken.count(alias))
        continue;
      taken.insert(alias);
      init.names.push_back(
          {alias, primary.relation,
           "tied: " + primary.name + " is read by " + node.name() + " of " + module});
    }
  }
}

bool StateDictBuilder::resolveWithReference(std::string &error) {
  reference = *options.reference;
  const std::string &prefix = options.stripPrefix;
  std::vector<std::string> graphNames;
  for (const Init &init : inits)
    for (const Init::Named &n : init.names)
      graphNames.push_back(n.name);
  auto self = [](const std::string &s) -> const std::string & { return s; };
  auto nameOf = [](const ExportWeight &w) -> const std::string & {
    return w.name;
  };
  if (!prefix.empty() && allStartWith(graphNames, self, prefix) &&
      !allStartWith(reference, nameOf, prefix))
    for (ExportWeight &w : reference)
      w.name = prefix + w.name;
  for (const ExportWeight &w : reference)
    refByName[w.name] = &w;
  claimed.clear();
  if (!checkGraphNames(error))
    return false;
  matchHints();
  nameByValue();
  claimUnnamedReference();
  return true;
}

bool StateDictBuilder::checkGraphNames(std::string &error) {
  // Names from the graph, checked by value.
  for (Init &init : inits) {
    std::vector<Init::Named> kept;
    for (Init::Named &n : init.names) {
      auto it = refByName.find(n.name);
      if (it == refByName.end()) {
        // An alias the reference lacks (it saved one name of a tie) or a
        // parameter it does not have.
        if (&n != &init.names.front())
          continue;
        error = "initializer '" + init.name + "' is '" + n.name + "' (" + n.how +
                ") but the reference has no tensor of that name (the reference "
                "of another model?)";
        return false;
      }
      std::optional<Relation> rel = relate(init, *it->second, &n.relation);
      if (!rel) {
        error = "initializer '" + init.name + "' is '" + n.name + "' (" + n.how +
                ") but its values are not the reference's " + n.name +
                " (identical, transposed, reshaped or shifted): the model was "
                "exported from other weights than the reference's";
        return false;
      }
      n.relation = *rel;
      n.how += ", checked against the reference";
      claimed.insert(n.name);
      kept.push_back(n);
    }
    init.names = kept;
  }
  return true;
}

void StateDictBuilder::matchHints() {
  for (Init &init : inits) {
    if (!init.names.empty() || init.hint.empty())
      continue;
    auto it = refByName.find(init.hint);
    if (it == refByName.end() || claimed.count(init.hint))
      continue;
    if (std::optional<Relation> rel = relate(init, *it->second)) {
      init.names.push_back({init.hint, *rel,
                            init.hintWhy + ", matched by value with the reference"});
      claimed.insert(init.hint);
    }
  }
}

void StateDictBuilder::nameByValue() {
  // Initializers still unnamed: by value among the unclaimed reference
  // tensors, trained ones first (constants may match nothing); exactly, and
  // a tensor of a few values (zeros, ones) only where one tensor matches.
  std::vector<Init *> unnamed;
  for (bool trainedPass : {true, false})
    for (Init &init : inits)
      if (init.names.empty() && init.trained == trainedPass)
        unnamed.push_back(&init);
  for (Init *ip : unnamed) {
    Init &init = *ip;
    std::vector<std::pair<const ExportWeight *, Relation>> found;
    for (const ExportWeight &w : reference)
      if (!claimed.count(w.name))
        if (std::optional<Relation> rel = relate(init, w, nullptr, Rules::Exact))
          found.push_back({&w, *rel});
    if (found.empty() ||
        (found.size() > 1 && detail::fewDistinct(init.original)))
      continue;
    std::string how = "matched by value with the reference";
    if (found.size() > 1)
      how += " (first of " + std::to_string(found.size()) + " tensors of equal values)";
    init.names.push_back({found[0].first->name, found[0].second, how});
    claimed.insert(found[0].first->name);
  }
}

void StateDictBuilder::claimUnnamedReference() {
  // Reference names no initializer took: the other name of a tie, or a
  // tensor the graph does not read (the exporter may have folded it away:
  // the dynamo exporter drops an addition of a zero bias). A tie is an
  // exact copy of values that say which tensor they are; zeros or ones
  // equal every other such tensor, so those are copied through unchanged.
  for (const ExportWeight &w : reference) {
    if (claimed.count(w.name))
      continue;
    Init *holder = nullptr;
    std::optional<Relation> holderRel;
    bool fewValues =
        detail::fewDistinct(std::vector<float>(w.data, w.data + numel(w.shape)));
    for (Init &init : inits) {
      if (init.names.empty() || fewValues)
        continue;
      if (std::optional<Relation> rel = relate(init, w, nullptr, Rules::Exact)) {
        // Prefer the trained source over an untrained copy.
        if (!holder || (init.trained && !holder->trained)) {
          holder = &init;
          holderRel = rel;
        }
      }
    }
    if (holder) {
      holder->names.push_back({w.name, *holderRel,
                               "tied: the reference's " + w.name + " equals " +
                                   holder->names.front().name});
    } else {
      copied.push_back(&w);
    }
    claimed.insert(w.name);
  }
}

bool StateDictBuilder::run(const std::vector<ExportWeight> &trained,
                           std::vector<StateDictTensor> &out,
                           std::vector<std::string> &unresolved,
                           std::string &error) {
  if (!load(error) || !markTrained(trained, error))
    return false;
  for (Init &init : inits)
    nameFromGraph(init);
  aliasesFromReaders();
  readKept();
  followTies();
  if (options.reference && !resolveWithReference(error))
    return false;
  // Trained initializers without a name, and a fold otc cannot undo alone.
  for (const Init &init : inits)
    if (init.names.empty() && (init.trained || !init.hint.empty()))
      unresolved.push_back(
          "'" + init.name + "' " + detail::shapeStr(init.shape) + ": " +
          (init.hint.empty() ? std::string("no name in the graph or its metadata")
                             : init.hintWhy + ", with an operation otc cannot undo "
                                              "without the original weights"));
  // Each name once; a trained initializer wins over the copy of a tie.
  std::map<std::string, size_t> written;
  std::vector<const Init *> order;
  for (const Init &init : inits)
    if (init.trained)
      order.push_back(&init);
  for (const Init &init : inits)
    if (!init.trained)
      order.push_back(&init);
  for (const Init *init : order)
    for (const Init::Named &n : init->names) {
      if (written.count(n.name) || (options.keep && !options.keep(n.name)))
        continue;
      written[n.name] = out.size();
      StateDictTensor t;
      t.name = n.name;
      t.shape = n.relation.shape;
      t.values = [self = shared_from_this(), init, rel = n.relation](
                     std::vector<float> &out, std::string &error) {
        try {
          out = invert(self->currentValues(*init), *init, rel);
          return true;
        } catch (const std::exception &e) {
          error = self->options.modelPath + ": " + e.what();
          return false;
        }
      };
      t.initializer = init->name;
      t.readAgain = readsExternalData(*init);
      t.how = n.how + relationText(n.relation);
      out.push_back(std::move(t));
    }
  for (const ExportWeight *w : copied) {
    if (options.keep && !options.keep(w->name))
      continue;
    StateDictTensor t;
    t.name = w->name;
    t.shape = w->shape;
    t.values = [self = shared_from_this(), w](std::vector<float> &out,
                                              std::string &) {
      out.assign(w->data, w->data + numel(w->shape));
      return true;
    };
    t.how = "not in the graph, not trained: the reference's value";
    out.push_back(std::move(t));
  }
  // In the reference's order when there is one, else the graph's.
  if (options.reference) {
    std::map<std::string, size_t> rank;
    for (const ExportWeight &w : reference)
      rank.emplace(w.name, rank.size());
    std::stable_sort(out.begin(), out.end(),
                     [&](const StateDictTensor &a, const StateDictTensor &b) {
                       auto ra = rank.find(a.name), rb = rank.find(b.name);
                       size_t ka = ra == rank.end() ? rank.size() : ra->second;
                       size_t kb = rb == rank.end() ? rank.size() : rb->second;
                       return ka < kb;
                     });
  }
  // The wrapper's prefix off, where every name has it (and the reference,
  // when given, is not the wrapper's own state dict).
  const std::string &prefix = options.stripPrefix;
  auto nameOf = [](const StateDictTensor &t) -> const std::string & {
    return t.name;
  };
  auto refName = [](const ExportWeight &w) -> const std::string & {
    return w.name;
  };
  bool wrapperReference =
      options.reference && allStartWith(*options.reference, refName, prefix);
  if (!prefix.empty() && !wrapperReference && allStartWith(out, nameOf, prefix))
    for (StateDictTensor &t : out)
      t.name = t.name.substr(prefix.size());
  return true;
}

} // namespace

bool exportStateDict(const StateDictOptions &options,
                     const std::vector<ExportWeight> &trained,
                     std::vector<StateDictTensor> &out,
                     std::vector<std::string> &unresolved, std::string &error) {
  try {
    // Shared with the tensors' `values`, which read its initializers.
    auto builder = std::make_shared<StateDictBuilder>(options);
    return builder->run(trained, out, unresolved, error);
  } catch (const std::exception &e) {
    error = options.modelPath + ": " + e.what();
    return false;
  }
}

} // namespace otc
