//===- Params.cpp - float initializers as parameters ----------------------===//
//
// Which float initializers of a graph train, and as what: the import rules'
// constants (one element, non-finite values, a folded additive mask, a
// value the dynamo exporter folded through a many-to-one lookup), --train's
// and the exporter's record of the module's parameters (its graph signature
// and folded_from metadata), ties of one tensor written twice, the
// state-dict name each trained tensor is (what --freeze matches), and the
// parameters the exporter removed. An import that keeps no values (a plan)
// reads only what these rules need.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

using namespace mlir;

namespace otc {
namespace detail {
size_t valuelessElements() {
  static const size_t n = [] {
    const char *v = std::getenv("OTC_TEST_VALUELESS_ELEMENTS");
    long long parsed = v ? std::atoll(v) : 0;
    return parsed > 0 ? static_cast<size_t>(parsed) : size_t(1) << 22;
  }();
  return n;
}

/// Why the import rules make a float initializer a constant ("": they
/// do not): what PyTorch could not have trained.
static std::string untrainedReason(const std::vector<float> &v) {
  if (v.size() <= 1)
    return "a single element";
  if (!llvm::all_of(v, [](float x) { return std::isfinite(x); }))
    return "values that are not finite (a mask)";
  if (llvm::all_of(v, [](float x) { return x == 0.0f || x <= -1e4f; }) &&
      llvm::any_of(v, [](float x) { return x != 0.0f; }))
    return "values 0 and at most -1e4 (an additive mask)";
  return "";
}

/// The first values of a large matrix that an import keeping no values
/// reads to apply the rules above (untrainedReason, fewDistinct): a trained
/// or random weight shows hundreds of distinct finite values there, which no
/// mask or constant fill has.
constexpr int64_t kProbeElements = 4096;

/// The elements of `init`'s shape.
static int64_t elementsOf(const onnx::TensorProto &init) {
  int64_t elements = 1;
  for (int64_t d : init.dims())
    elements *= d;
  return elements;
}

/// "" when the rules, applied to all of a sampled matrix's `values`, agree
/// with what its first values decided (trained), else the error line: a
/// value past them that is not finite, which the full import would have
/// kept constant, and a trained weight cannot hold.
static std::string sampledValuesError(const std::string &name,
                                      const std::vector<float> &values) {
  if (untrainedReason(values).empty())
    return "";
  size_t at = 0;
  while (at < values.size() && std::isfinite(values[at]))
    ++at;
  std::string value =
      at < values.size() ? std::to_string(values[at]) : std::string("?");
  return "initializer '" + name + "': value " + std::to_string(at) + " of " +
         std::to_string(values.size()) + " is " + value +
         "; a large matrix of a graph without the exporter's signature is "
         "judged by its first " +
         std::to_string(kProbeElements) +
         " values, and these, finite and varied, made it a trained weight, "
         "which must be finite: the model's weights are damaged (re-export "
         "them)";
}

/// Elements (i, i), i < kTieKeyDiagonal, of a matrix of `cols` columns held
/// in `v`, or read from `init`'s data.
static std::vector<float> diagonalOf(const std::vector<float> &v, int64_t rows,
                                     int64_t cols) {
  std::vector<float> d;
  for (int64_t i = 0; i < std::min({kTieKeyDiagonal, rows, cols}); ++i)
    d.push_back(v[static_cast<size_t>(i * cols + i)]);
  return d;
}
static std::vector<float> readDiagonal(const onnx::TensorProto &init,
                                       const std::string &what,
                                       const std::string &path) {
  const int64_t rows = init.dims(0), cols = init.dims(1);
  return readFloatRange(init, what, path, 0,
                        std::min({kTieKeyDiagonal, rows, cols}), cols + 1);
}

std::optional<std::string> ParamOrigins::parameterOf(const std::string &name) {
  std::optional<std::string> root;
  if (exported->count(name))
    root = name;
  reached.insert(name);
  if (auto it = folded.find(name); it != folded.end())
    for (const std::string &f : it->second) {
      reached.insert(f);
      if (!root && exported->count(f))
        root = f;
    }
  for (auto &[copy, original] : *splits)
    if (copy == name && exported->count(original)) {
      reached.insert(original);
      if (!root)
        root = original;
    }
  return root;
}

std::string Importer::stateDictNameOf(const std::string &name,
                                      ParamOrigins &origins, bool *guessed) {
  if (guessed)
    *guessed = false;
  if (origins.exported) {
    std::optional<std::string> of = origins.parameterOf(name);
    return of && *of != name ? *of : "";
  }
  // The TorchScript exporter names what it folded `onnx::<Op>_N`: a
  // Linear's Wᵀ is its module's weight, and a value read in one module's
  // scope alone (Gemma's folded 1 + weight, read by its norm's Mul) is
  // taken for that module's weight too, as otc-export's hint names it.
  if (name.rfind("onnx::", 0) != 0)
    return "";
  if (!initializerReaders) {
    initializerReaders.emplace();
    const onnx::GraphProto &graph = model.graph();
    for (int n = 0; n < graph.node_size(); ++n)
      for (int j = 0; j < graph.node(n).input_size(); ++j)
        if (graph.node(n).input(j).rfind("onnx::", 0) == 0)
          (*initializerReaders)[graph.node(n).input(j)].push_back({n, j});
  }
  auto readers = initializerReaders->find(name);
  if (readers == initializerReaders->end())
    return "";
  std::string weight =
      detail::foldedProjectionName(model.graph(), name, readers->second);
  if (!weight.empty())
    return weight;
  weight = detail::scopeWeightName(model.graph(), readers->second);
  if (guessed)
    *guessed = !weight.empty();
  return weight;
}

std::string Importer::additiveFoldWarning(const std::string &name,
                                          const std::string &guess) {
  auto readers = initializerReaders->find(name);
  const onnx::GraphProto &graph = model.graph();
  for (auto [n, j] : readers->second)
    if (graph.node(n).op_type() != "Add" && graph.node(n).op_type() != "Sub")
      return "";
  return "is a value the TorchScript exporter folded, added by " +
         graph.node(readers->second.front().first).name() +
         ": trained as a parameter (named '" + guess +
         "' after that node's scope), though it may be a buffer (BART's "
         "final_logits_bias); if it is, freeze it: --freeze='^" +
         name + "$' (a dynamo export records which it is)";
}

std::string Importer::mergedFoldWarning(const ParamCandidate &c) {
  const std::string &name = c.init->name();
  if (!initializerReaders)
    return "";
  auto readers = initializerReaders->find(name);
  if (readers == initializerReaders->end())
    return "";
  std::set<std::string> modules =
      detail::readerModules(model.graph(), readers->second);
  // The values last: a kept tensor is scanned for them.
  if (modules.size() < 2 || modules.count("") ||
      !(c.key ? c.key->fewDistinct : fewDistinct(c.data.floats)))
    return "";
  const int64_t elements = elementsOf(*c.init);
  std::string list;
  size_t shown = 0;
  for (const std::string &m : modules)
    if (shown++ < 3)
      list += (list.empty() ? "" : ", ") + m;
  if (modules.size() > 3)
    list += ", ...";
  return "is a value the TorchScript exporter folded, of few distinct values "
         "(a fresh norm's 1 + weight), read by " +
         std::to_string(modules.size()) + " modules (" + list +
         "): the exporter merges equal tensors, so it may be a parameter of "
         "each, which PyTorch trains apart (" +
         std::to_string(int64_t(modules.size()) * elements) +
         " values) and this program trains as one (" +
         std::to_string(elements) +
         "); export from trained weights, or with the dynamo exporter, "
         "which records merges";
}

/// Why a value the dynamo exporter folded from a parameter and indices is
/// not trained ("" if it is): a lookup that reads one entry of the
/// parameter in many places (T5's relative position bias folded at a fixed
/// sequence length: a [1, H, T, T] tensor of the table's few values). As
/// free values it would no longer be the model; PyTorch trains the table,
/// which the graph no longer holds. A lookup of distinct entries (a
/// position table's first T rows) is trained: each value is one entry.
std::string Importer::foldedLookupReason(const std::string &name,
                                         ParamOrigins &origins,
                                         const std::vector<float> &values) {
  auto from = origins.folded.find(name);
  if (from == origins.folded.end() || from->second.size() < 2 ||
      values.size() < 16)
    return "";
  std::optional<std::string> param = origins.parameterOf(name);
  if (!param || *param == name)
    return "";
  std::vector<float> sorted(values);
  std::sort(sorted.begin(), sorted.end());
  size_t distinct = static_cast<size_t>(
      std::unique(sorted.begin(), sorted.end()) - sorted.begin());
  if (distinct * 4 > values.size())
    return "";
  return kFoldedLookupReason + *param +
         " the exporter folded at the export's "
         "fixed shape (" +
         std::to_string(values.size()) + " values, " +
         std::to_string(distinct) +
         " distinct): kept constant, not trained; "
         "export with a dynamic sequence dimension to train " +
         *param;
}

void Importer::addParams() {
  std::unique_ptr<NameRegex> train;
  if (!options.train.empty()) {
    std::string regexError;
    train = NameRegex::compile(options.train, regexError);
    if (!train)
      fail("invalid --train regular expression '" + options.train +
           "': " + regexError);
  }
  // The dynamo exporter's record of the module's parameters: an initializer
  // that is none of them and was folded from none of them (a rotary table's
  // angles, folded from the inv_freq buffer and positions) is a constant,
  // whatever its values; a parameter neither kept nor folded into anything
  // was removed by the exporter (a zero bias whose addition it dropped).
  ParamOrigins origins;
  origins.exported = exportedParameters(model.graph());
  origins.splits = &splitParams;
  if (origins.exported)
    origins.folded = foldedFromAll(model.graph());
  std::vector<ParamCandidate> floats =
      readParamCandidates(origins, train.get());
  addParamArguments(floats, origins);
  recordRemovedParams(origins);
}

std::vector<ParamCandidate>
Importer::readParamCandidates(ParamOrigins &origins, const NameRegex *train) {
  // Reserved: a growing vector would copy every decoded tensor so far
  // (TensorData moves only by copy here), gigabytes for a large model.
  std::vector<ParamCandidate> floats;
  floats.reserve(static_cast<size_t>(model.graph().initializer_size()));
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    // --train matches the initializer's name or the state-dict name it is.
    bool forced =
        train && (train->matches(init.name()) ||
                  train->matches(stateDictNameOf(init.name(), origins)));
    if (!addCachedCandidate(init, origins, forced, floats) &&
        !addSignatureCandidate(init, origins, forced, floats) &&
        !addSampledCandidate(init, origins, forced, floats))
      addDecodedCandidate(init, origins, forced, floats);
  }
  return floats;
}

/// `init`'s shape, without values.
static TensorData shapeOnly(const onnx::TensorProto &init) {
  TensorData data;
  data.shape.assign(init.dims().begin(), init.dims().end());
  return data;
}

bool Importer::addCachedCandidate(const onnx::TensorProto &init,
                                  ParamOrigins &origins, bool forced,
                                  std::vector<ParamCandidate> &floats) {
  // Learned by an earlier import of the same loaded model: nothing read.
  if (initializersOut || !cache || staticOnly.contains(init.name()))
    return false;
  auto known = cache->find(init.name());
  if (known == cache->end())
    return false;
  if (!origins.fromParameter(init.name()) && known->second.reason.empty() &&
      !forced)
    notParameters.insert(init.name());
  floats.push_back({&init, shapeOnly(init), forced, known->second.reason,
                    known->second.key});
  return true;
}

bool Importer::addSignatureCandidate(const onnx::TensorProto &init,
                                     ParamOrigins &origins, bool forced,
                                     std::vector<ParamCandidate> &floats) {
  // A large parameter by the exporter's graph signature (or folded from
  // one: a Linear's Wᵀ), in an import that keeps no values (plan-only,
  // --fit): trainable as PyTorch trained it, so its values are not read
  // at all (an 8B model's 32 GB), unless another tensor shares its tie
  // key (addParamArguments): then both are read and compared.
  // So is one stored as external data in a build's import that defers
  // values (read when the initial values are written).
  const int64_t elements = elementsOf(init);
  const bool deferredBuild =
      options.deferValues &&
      init.data_location() == onnx::TensorProto::EXTERNAL;
  if ((initializersOut && !deferredBuild) || !origins.exported ||
      init.data_type() != onnx::TensorProto::FLOAT ||
      staticOnly.contains(init.name()) ||
      elements < static_cast<int64_t>(valuelessElements()))
    return false;
  // A value folded from several (a lookup of a table at the export's
  // fixed shape) is read: foldedLookupReason decides by its values.
  if (auto f = origins.folded.find(init.name());
      f != origins.folded.end() && f->second.size() > 1)
    return false;
  std::optional<std::string> root = origins.parameterOf(init.name());
  if (!root)
    return false;
  // Keyed by the parameter it is: a Wᵀ folded from a parameter that is an
  // initializer too (a tied LM head) shares that one's key, and findTies
  // reads both and compares them.
  TieKey key;
  key.count = static_cast<size_t>(elements);
  key.sum = llvm::hash_value(*root);
  key.mixed = ~key.sum;
  if (cache)
    (*cache)[init.name()] = {"", key};
  floats.push_back({&init, shapeOnly(init), forced, "", key});
  return true;
}

bool Importer::addSampledCandidate(const onnx::TensorProto &init,
                                   ParamOrigins &origins, bool forced,
                                   std::vector<ParamCandidate> &floats) {
  // A large matrix of a graph without the exporter's signature
  // (TorchScript's, one written by hand), in an import that keeps no
  // values or defers external data: its first values and its diagonal
  // decide, its other bytes are not read (Llama 1B's TorchScript export:
  // 13 s of a plan spent reading 5 GB). A weight whose first values pass
  // the rules is trained: a non-finite value past them, which the full
  // import would keep constant, a plan does not see, and a build stops on
  // when it reads the rest (sampledValuesError). It is keyed by its
  // diagonal (diagonalTieKey); any other is read whole by
  // addDecodedCandidate, and keyed the same way. A hole of a sparse file
  // is not read at all (an 8B model sized from one: 32 GB of zeros).
  if (!isSampled(init, origins))
    return false;
  const int64_t elements = elementsOf(init);
  const std::string what = "initializer '" + init.name() + "'";
  // A hole of a sparse file (a file made to size the model) is zeros, as
  // reading it would find: trained, few distinct values, never a tie;
  // nothing read.
  const bool hole = elements > 1 && externalHole(init, what, path);
  std::vector<float> head;
  if (!hole)
    head = readFloatRange(init, what, path, 0,
                          std::min<int64_t>(elements, kProbeElements));
  if (!hole && (!untrainedReason(head).empty() || fewDistinct(head)))
    return false;
  const int64_t diagonal =
      std::min({kTieKeyDiagonal, init.dims(0), init.dims(1)});
  TieKey key = diagonalTieKey(
      static_cast<size_t>(elements),
      hole ? std::vector<float>(static_cast<size_t>(diagonal), 0.0f)
           : readDiagonal(init, what, path),
      hole);
  if (!origins.fromParameter(init.name()) && !forced)
    notParameters.insert(init.name());
  if (cache)
    (*cache)[init.name()] = {"", key};
  floats.push_back({&init, shapeOnly(init), forced, "", key, true});
  return true;
}

bool Importer::isSampled(const onnx::TensorProto &init,
                         const ParamOrigins &origins) const {
  // A build that defers external data reads such a matrix whole once, when
  // it writes the initial values, and checks there what the sample could
  // not see (sampledValuesError): its import reads 64 KiB of it, not all of
  // it twice (a Llama-3-8B-shaped TorchScript export: 32 GB).
  const bool deferred = options.deferValues &&
                        init.data_location() == onnx::TensorProto::EXTERNAL;
  return (!initializersOut || deferred) && !origins.exported &&
         init.data_type() == onnx::TensorProto::FLOAT &&
         init.dims_size() == 2 && !staticOnly.contains(init.name()) &&
         elementsOf(init) >= static_cast<int64_t>(valuelessElements());
}

void Importer::addDecodedCandidate(const onnx::TensorProto &init,
                                   ParamOrigins &origins, bool forced,
                                   std::vector<ParamCandidate> &floats) {
  const std::optional<std::set<std::string>> &exported = origins.exported;
  TensorData data =
      decodeTensor(init, "initializer '" + init.name() + "'", path);
  if (data.kind != Kind::F32 || staticOnly.contains(init.name())) {
    // Integer and bool initializers (and floats read only at import time)
    // are constants.
    Location loc = NameLoc::get(builder.getStringAttr(init.name()));
    statics[init.name()] = std::make_unique<StaticValue>(
        StaticValue{toAttr(&ctx, data), loc, Value()});
    return;
  }
  ParamCandidate c{&init, std::move(data), forced, "", std::nullopt};
  c.reason = untrainedReason(c.data.floats);
  // A single element the exporter's graph signature names as a parameter
  // under its own name is one PyTorch trains (CLIP's logit_scale): not a
  // scalar of the forward stored as an initializer.
  if (c.data.floats.size() == 1 && exported && exported->count(init.name()) &&
      std::isfinite(c.data.floats[0]))
    c.reason.clear();
  if (c.reason.empty() && exported)
    c.reason = foldedLookupReason(init.name(), origins, c.data.floats);
  if (!origins.fromParameter(init.name()) && c.reason.empty() && !forced)
    notParameters.insert(init.name());
  // An import that keeps no values (plan-only, --fit) drops those of a
  // large trained tensor once the rules have read them: it keeps its tie
  // key, and reads it again only to compare it with a tensor of the same
  // key. Llama 3 8B: 32 GB of weights never held at once. So does a
  // build's import with deferValues for a weight stored as external data
  // (a parameter by the exporter's graph signature, or any trained one of
  // a graph without it: TorchScript's, one written by hand): its values
  // are read again when the initial values are written.
  const bool deferred = initializersOut && options.deferValues &&
                        init.data_location() == onnx::TensorProto::EXTERNAL &&
                        (!exported || origins.parameterOf(init.name()));
  if ((!initializersOut || deferred) && (c.reason.empty() || c.forced) &&
      c.data.floats.size() >= valuelessElements()) {
    c.key = isSampled(init, origins)
                ? diagonalTieKey(
                      c.data.floats.size(),
                      diagonalOf(c.data.floats, init.dims(0), init.dims(1)),
                      fewDistinct(c.data.floats))
                : tieKey(c.data.floats);
    c.data.floats = std::vector<float>();
    if (cache)
      (*cache)[init.name()] = {c.reason, *c.key};
  }
  floats.push_back(std::move(c));
}

void Importer::recordUndecidedTies(
    const std::vector<NamedTensor> &tieable,
    const llvm::StringMap<InitializerTie> &copies) {
  // Embedding tables (a Gather's data) and projection weights (a MatMul's
  // or Gemm's second input) of the graph.
  std::set<std::string> tables, projections;
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (node.op_type() == "Gather" && node.input_size() > 0)
      tables.insert(node.input(0));
    if ((node.op_type() == "MatMul" || node.op_type() == "Gemm") &&
        node.input_size() > 1)
      projections.insert(node.input(1));
  }
  auto fewValues = [](const NamedTensor &t) {
    return t.key ? t.key->fewDistinct : t.values && fewDistinct(*t.values);
  };
  SmallVector<NamedAttribute> undecided;
  for (const NamedTensor &table : tieable) {
    if (table.shape.size() != 2 || !tables.count(table.name) ||
        !fewValues(table) || copies.count(table.name))
      continue;
    for (const NamedTensor &w : tieable) {
      bool transposed =
          w.shape == std::vector<int64_t>{table.shape[1], table.shape[0]};
      // A copy the exporter made has a name of its own making
      // (`onnx::MatMul_N`), not a parameter's.
      if (&w == &table || (!transposed && w.shape != table.shape) ||
          w.name.find("::") == std::string::npos ||
          !projections.count(w.name) || tables.count(w.name) || !fewValues(w) ||
          copies.count(w.name))
        continue;
      // The count as otc-compile's summary line writes counts (3,072).
      std::string n = std::to_string(table.shape[0] * table.shape[1]);
      for (int at = int(n.size()) - 3; at > 0; at -= 3)
        n.insert(size_t(at), ",");
      undecided.push_back(builder.getNamedAttr(
          w.name,
          builder.getStringAttr(
              "may be the tied " +
              std::string(transposed ? "transpose" : "copy") + " of '" +
              table.name +
              "' (an exporter's folded projection of an "
              "embedding table), but their values, few distinct (as a "
              "sparse file made to size a model holds), cannot say: "
              "planned as two parameters, " +
              n +
              " values more than if tied; plan from the real weights, or "
              "from a dynamo export, which records ties")));
    }
  }
  if (!undecided.empty())
    func->setAttr(attrs::kUndecidedTies, builder.getDictionaryAttr(undecided));
}

void Importer::addParamArguments(std::vector<ParamCandidate> &floats,
                                 ParamOrigins &origins) {
  // What PyTorch could not have trained: a single element (an epsilon, a
  // scale, -FLT_MAX: exporters store the scalars of the forward as
  // initializers), values that are not all finite (an additive -inf mask),
  // or zeros and fills of at most -1e4 (an additive mask the exporter
  // folded, as torch.onnx's dynamo exporter does with -FLT_MAX).
  SmallVector<NamedAttribute> untrained;
  std::vector<NamedTensor> tieable;
  for (ParamCandidate &c : floats) {
    const std::string &name = c.init->name();
    const std::string &reason = c.reason;
    if (!reason.empty() && !c.forced) {
      untrained.push_back(
          builder.getNamedAttr(name, builder.getStringAttr(reason)));
      Location loc = NameLoc::get(builder.getStringAttr(name));
      statics[name] = std::make_unique<StaticValue>(
          StaticValue{toAttr(&ctx, c.data), loc, Value()});
      c.init = nullptr;
      continue;
    }
    if (!c.forced) {
      NamedTensor t{
          name, std::vector<int64_t>(c.data.shape.begin(), c.data.shape.end()),
          &c.data.floats, std::nullopt, nullptr};
      if (c.key) {
        const onnx::TensorProto *init = c.init;
        t.values = nullptr;
        t.key = c.key;
        t.load = [this, init] {
          return decodeTensor(*init, "initializer '" + init->name() + "'", path)
              .floats;
        };
      }
      tieable.push_back(std::move(t));
    }
  }

  // Ties the exporter split: the copy reads the one trained tensor.
  llvm::StringMap<InitializerTie> copies;
  SmallVector<NamedAttribute> tied;
  for (InitializerTie &t : findTies(tieable)) {
    tied.push_back(builder.getNamedAttr(
        t.copy, builder.getStringAttr(
                    (t.transposed ? "transpose of " : "copy of ") + t.source)));
    copies[t.copy] = t;
  }

  if (!origins.exported)
    recordUndecidedTies(tieable, copies);

  // One argument per trained initializer, however many nodes read it.
  SmallVector<NamedAttribute> undecidedParams;
  for (ParamCandidate &c : floats) {
    if (!c.init || copies.count(c.init->name()))
      continue;
    const std::string &name = c.init->name();
    Location loc = NameLoc::get(builder.getStringAttr(name));
    Value arg = entry->addArgument(
        RankedTensorType::get(c.data.shape, builder.getF32Type()), loc);
    argAttrs.push_back(
        {cast<BlockArgument>(arg).getArgNumber(),
         builder.getNamedAttr(attrs::kParam, builder.getStringAttr(name))});
    // A copy the exporter folded from a module parameter is that
    // parameter for --freeze.
    bool guessed = false;
    if (std::string of = stateDictNameOf(name, origins, &guessed);
        !of.empty()) {
      unsigned n = cast<BlockArgument>(arg).getArgNumber();
      argAttrs.push_back({n, builder.getNamedAttr(attrs::kParamOf,
                                                  builder.getStringAttr(of))});
      // A value only additions read, named `<module>.weight` after their
      // scope, may be a buffer: --freeze matches its own name too.
      if (std::string why = guessed ? additiveFoldWarning(name, of) : "";
          !why.empty()) {
        argAttrs.push_back({n, builder.getNamedAttr(attrs::kParamOfGuessed,
                                                    builder.getUnitAttr())});
        undecidedParams.push_back(
            builder.getNamedAttr(name, builder.getStringAttr(why)));
      }
    }
    if (!origins.exported && name.rfind("onnx::", 0) == 0)
      if (std::string why = mergedFoldWarning(c); !why.empty())
        undecidedParams.push_back(
            builder.getNamedAttr(name, builder.getStringAttr(why)));
    values[name] = arg;
    if (c.key)
      valuelessInits[name] = c.init;
    InitializerData data{
        name, std::vector<int64_t>(c.data.shape.begin(), c.data.shape.end()),
        std::move(c.data.floats), nullptr};
    // Values not kept (deferValues): read again from the external data,
    // through a copy of the initializer's record (its location, no data).
    if (c.key && initializersOut)
      data.load = [init = *c.init, file = path,
                   sampled = c.sampled && !c.forced](std::vector<float> &out,
                                                     std::string &error) {
        try {
          out = decodeTensor(init, "initializer '" + init.name() + "'", file)
                    .floats;
          if (sampled)
            error = sampledValuesError(init.name(), out);
          return error.empty();
        } catch (const std::exception &e) {
          error = oneLine(e.what());
        } catch (...) {
          error = "initializer '" + init.name() + "': unknown exception";
        }
        return false;
      };
    paramData.push_back(std::move(data));
  }
  if (!undecidedParams.empty())
    func->setAttr(attrs::kUndecidedParams,
                  builder.getDictionaryAttr(undecidedParams));
  builder.setInsertionPointToEnd(entry);
  for (ParamCandidate &c : floats) {
    auto it = c.init ? copies.find(c.init->name()) : copies.end();
    if (it == copies.end())
      continue;
    const InitializerTie &t = it->second;
    Value source = values.lookup(t.source);
    assert(source && "a tie's source is a parameter");
    Location loc = NameLoc::get(builder.getStringAttr(t.copy));
    if (!t.transposed) {
      values[t.copy] = source;
      continue;
    }
    ArrayRef<int64_t> s = shapeOf(source);
    values[t.copy] = builder.create<TransposeOp>(
        loc, RankedTensorType::get({s[1], s[0]}, builder.getF32Type()), source,
        SmallVector<int64_t>{1, 0});
  }
  if (!untrained.empty())
    func->setAttr(attrs::kUntrained, builder.getDictionaryAttr(untrained));
  if (!tied.empty())
    func->setAttr(attrs::kTied, builder.getDictionaryAttr(tied));
  SmallVector<NamedAttribute> split;
  for (auto &[copy, original] : splitParams)
    if (values.count(copy) && isa<BlockArgument>(values.lookup(copy)))
      split.push_back(builder.getNamedAttr(
          copy, builder.getStringAttr("own copy of " + original +
                                      " (the exporter merged equal values)")));
  if (!split.empty())
    func->setAttr(attrs::kSplit, builder.getDictionaryAttr(split));
}

void Importer::recordRemovedParams(ParamOrigins &origins) {
  // Removed by the exporter's optimizer: a parameter that the traced calls
  // of the graph's nodes still name (`addmm(%p_..._c_attn_bias, ...)`) but
  // that no initializer holds. One that no call names was not used by the
  // trace itself (the other name of a tied weight: GPT-2's wte, whose
  // lookup reads lm_head's placeholder).
  auto placeholder = [](std::string name) {
    std::replace(name.begin(), name.end(), '.', '_');
    return "%p_" + name;
  };
  auto names = [](const std::string &call, const std::string &ph) {
    for (size_t i = call.find(ph); i != std::string::npos;
         i = call.find(ph, i + 1)) {
      char next = i + ph.size() < call.size() ? call[i + ph.size()] : ' ';
      if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_')
        return true;
    }
    return false;
  };
  if (const std::optional<std::set<std::string>> &exported = origins.exported) {
    std::vector<std::string> calls;
    for (const onnx::NodeProto &node : model.graph().node())
      calls.push_back(nodeMetadata(node, "pkg.torch.onnx.fx_node"));
    for (const std::string &p : *exported)
      if (!origins.reached.count(p) &&
          llvm::none_of(calls, [&](const std::string &call) {
            return names(call, placeholder(p));
          }))
        origins.reached.insert(p);
  }
  SmallVector<NamedAttribute> removed;
  if (origins.exported)
    for (const std::string &p : *origins.exported)
      if (!origins.reached.count(p))
        removed.push_back(builder.getNamedAttr(
            p, builder.getStringAttr("removed by the exporter (no initializer "
                                     "holds it or was folded from it)")));
  if (!removed.empty())
    func->setAttr(attrs::kRemoved, builder.getDictionaryAttr(removed));
}

} // namespace detail
} // namespace otc
