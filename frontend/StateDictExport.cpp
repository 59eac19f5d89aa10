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
//  - a reference: the model's original state dict, which every name is
//    checked against and unnamed initializers are found in by value
//    (StateDictReference.cpp).
//
// A weight tied by the model (read by an embedding lookup of one module and
// the projection of another) gets both names.
//
//===----------------------------------------------------------------------===//

#include "frontend/StateDictInit.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

namespace otc {
namespace {

using statedict::Init;
using statedict::leafOf;
using statedict::numel;
using statedict::ownerOf;
using statedict::ReferenceResolver;
using statedict::Relation;

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

/// `text` with `prefix` taken off each name in it that starts a word
/// ("the reference's model.model.shared.weight" -> "... model.shared.weight"),
/// as the names are written.
std::string withoutPrefix(std::string text, const std::string &prefix) {
  for (size_t i = text.find(prefix); i != std::string::npos;
       i = text.find(prefix, i + 1))
    if (i == 0 || std::strchr(" ('[", text[i - 1]))
      text.erase(i, prefix.size());
  return text;
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

using detail::projectionWeight;

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
  /// Names from the reference, when one is given.
  std::optional<ReferenceResolver> resolver;
};

bool StateDictBuilder::load(std::string &error) {
  // Mapped, not copied: an inline model of a few hundred megabytes is
  // held once, as parsed.
  try {
    detail::loadModel(options.modelPath, model);
  } catch (const detail::ImportError &e) {
    error = e.what();
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
      // (A negative dimension is decoded below, which names it.)
      bool dimsValid = std::all_of(init.shape.begin(), init.shape.end(),
                                   [](int64_t d) { return d >= 0; });
      if (dimsValid && init.count >= 2 &&
          init.count >= detail::valuelessElements()) {
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
    // again when it is written, and when a reference compares it: its key
    // and print are read without keeping its values.
    std::optional<detail::StreamedKey> key =
        detail::keyWithoutValues(t, what, options.modelPath);
    if (key) {
      init.shape.assign(t.dims().begin(), t.dims().end());
      init.count = size_t(numel(init.shape));
      init.key = key->key;
      init.print = ValuePrint{key->first, key->last, key->key.fewDistinct};
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
    if (!key)
      continue;
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
    init.trainedWeight = &w;
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
  return !init.trainedWeight && init.deferred();
}

std::vector<float> StateDictBuilder::currentValues(const Init &init) const {
  if (init.follows >= 0) {
    const Init &src = inits[init.follows];
    std::vector<float> v = currentValues(src);
    return init.followsTransposed
               ? transposed2d(v.data(), src.shape[0], src.shape[1])
               : v;
  }
  if (init.trainedWeight)
    return init.trainedWeight->values();
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
  if (options.reference) {
    resolver.emplace(inits, *options.reference, options.stripPrefix,
                     [this](const Init &init) { return readExported(init); });
    if (!resolver->run(error))
      return false;
  }
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
          out = statedict::invert(self->currentValues(*init), *init, rel);
          return true;
        } catch (const WeightReadError &e) {
          error = e.what();
          return false;
        } catch (const std::exception &e) {
          error = self->options.modelPath + ": " + e.what();
          return false;
        }
      };
      t.initializer = init->name;
      t.readAgain = readsExternalData(*init);
      t.how = n.how + statedict::relationText(n.relation);
      out.push_back(std::move(t));
    }
  for (const ExportWeight *w :
       resolver ? resolver->copied() : std::vector<const ExportWeight *>()) {
    if (options.keep && !options.keep(w->name))
      continue;
    StateDictTensor t;
    t.name = w->name;
    t.shape = w->shape;
    t.values = [self = shared_from_this(), w](std::vector<float> &out,
                                              std::string &error) {
      try {
        out = w->values();
        return true;
      } catch (const WeightReadError &e) {
        error = e.what();
        return false;
      }
    };
    t.how = "not in the graph, not trained: the reference's value";
    out.push_back(std::move(t));
  }
  // In the reference's order when there is one, else the graph's.
  if (options.reference) {
    std::map<std::string, size_t> rank;
    for (const ExportWeight &w : resolver->reference())
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
      options.reference &&
      statedict::allStartWith(*options.reference, refName, prefix);
  if (!prefix.empty() && !wrapperReference &&
      statedict::allStartWith(out, nameOf, prefix))
    for (StateDictTensor &t : out) {
      t.name = t.name.substr(prefix.size());
      t.how = withoutPrefix(t.how, prefix);
    }
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
