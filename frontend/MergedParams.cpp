//===- MergedParams.cpp - parameters an exporter merged by value ----------===//
//
// torch.onnx's exporters keep one initializer for parameters of equal values
// (the dynamo exporter's optimizer, the TorchScript exporter's
// deduplication). In a freshly initialized model every norm's weight is all
// ones, so `model.layers.0.input_layernorm.weight` ends up read
// by the post-attention norm and the final norm too: trained as one tensor,
// three parameters that PyTorch trains apart would move together after the
// first step.
//
// The exporter records on every node the module it came from (node metadata
// "namespace": `.../m.model.norm: ...LlamaRMSNorm/mul_14: aten.mul.Tensor`;
// the TorchScript exporter, which merges too, names nodes by scope:
// `/model/norm/Mul_1`, or reads the merged tensor through an Identity whose
// output carries the parameter's own name).
// An initializer read by nodes of several modules is split: the nodes of
// each module other than the one its name belongs to read a copy named
// after their module (`m.model.norm.weight`), which is the state-dict name
// PyTorch has for it, when they were merged: when the dynamo exporter's
// record of those nodes' traced calls names the module's own parameter
// (`mul(%p_model_norm_weight, ...)`; a tied weight's reader names the one
// tensor it shares: `embedding(%p_lm_head_weight, ...)`), or, without that
// record, when its values are not mostly distinct (ones, zeros: what a
// merge of independent parameters looks like; a tied embedding is random).
// With the record no value is read, so a file of zeros sized for a plan
// ties what PyTorch ties.
//
// libonnx 1.12 predates NodeProto.metadata_props (field 9), so it is read
// from the unknown fields that protobuf keeps.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "google/protobuf/unknown_field_set.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace otc {
namespace detail {

namespace {

/// metadata_props of NodeProto and ValueInfoProto in the onnx.proto of IR
/// version 10 and later.
constexpr int kNodeMetadataField = 9;
constexpr int kValueInfoMetadataField = 4;
constexpr int kGraphMetadataField = 16;

/// The value of metadata entry `key` kept among `message`'s unknown fields
/// as field `number`, or "".
std::string unknownMetadata(const google::protobuf::Message &message,
                            int number, const std::string &key) {
  const google::protobuf::UnknownFieldSet &fields =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField &f = fields.field(i);
    if (f.number() != number ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()) && entry.key() == key)
      return entry.value();
  }
  return "";
}

} // namespace

std::string nodeMetadata(const onnx::NodeProto &node, const std::string &key) {
  return unknownMetadata(node, kNodeMetadataField, key);
}

void eraseNodeMetadata(onnx::NodeProto &node, const std::string &key) {
  google::protobuf::UnknownFieldSet *fields =
      node.GetReflection()->MutableUnknownFields(&node);
  for (int i = fields->field_count() - 1; i >= 0; --i) {
    const google::protobuf::UnknownField &f = fields->field(i);
    onnx::StringStringEntryProto entry;
    if (f.number() == kNodeMetadataField &&
        f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
        entry.ParseFromString(f.length_delimited()) && entry.key() == key)
      fields->DeleteSubrange(i, 1);
  }
}

void setNodeMetadata(onnx::NodeProto &node, const std::string &key,
                     const std::string &value) {
  eraseNodeMetadata(node, key);
  onnx::StringStringEntryProto entry;
  entry.set_key(key);
  entry.set_value(value);
  node.GetReflection()->MutableUnknownFields(&node)->AddLengthDelimited(
      kNodeMetadataField, entry.SerializeAsString());
}

std::string valueMetadata(const onnx::ValueInfoProto &info,
                          const std::string &key) {
  return unknownMetadata(info, kValueInfoMetadataField, key);
}

std::optional<std::set<std::string>>
exportedParameters(const onnx::GraphProto &graph) {
  // torch 2.6 and later write a line per input, `p_model_norm_weight:
  // PARAMETER target='model.norm.weight'`; earlier ones the repr,
  // `InputSpec(kind=<InputKind.PARAMETER: 2>, arg=..., target='lm_head.weight',
  // ...)`. Either way: the target of each entry whose kind is PARAMETER.
  std::string signature = unknownMetadata(
      graph, kGraphMetadataField, "pkg.torch.export.ExportedProgram.graph_signature");
  std::set<std::string> params;
  size_t begin = 0;
  while (begin < signature.size()) {
    size_t line = signature.find('\n', begin);
    size_t spec = signature.find("InputSpec(", begin + 1);
    size_t end = std::min(line == std::string::npos ? signature.size() : line,
                          spec == std::string::npos ? signature.size() : spec);
    std::string entry = signature.substr(begin, end - begin);
    begin = end + 1;
    size_t kind = entry.find("PARAMETER"), target = entry.find("target='");
    if (kind == std::string::npos || target == std::string::npos ||
        entry.find("OutputSpec") != std::string::npos)
      continue;
    size_t start = target + 8, close = entry.find('\'', start);
    if (close != std::string::npos)
      params.insert(entry.substr(start, close - start));
  }
  // No entry read: an export without the record (or one this cannot read).
  if (params.empty())
    return std::nullopt;
  return params;
}

std::map<std::string, DimRange>
exportedDimRanges(const onnx::GraphProto &graph) {
  // `{s72: VR[0, 4], s70: VR[2, 32]}`: torch.export's symbols, listed in the
  // order of the inputs' dynamic dimensions (not numbered so: s72 is the
  // batch above), which the exporter names by their Dim (`batch`, `seq`) in
  // the graph inputs.
  std::string text =
      unknownMetadata(graph, kGraphMetadataField,
                      "pkg.torch.export.ExportedProgram.range_constraints");
  std::vector<DimRange> inOrder;
  std::map<std::string, DimRange> byName;
  for (size_t at = text.find('s'); at != std::string::npos;
       at = text.find('s', at + 1)) {
    size_t digits = at + 1, colon = text.find(':', digits);
    if (colon == std::string::npos || colon == digits ||
        text.find_first_not_of("0123456789", digits) != colon ||
        (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))))
      continue;
    size_t open = text.find("VR[", colon), comma = text.find(',', open),
           close = text.find(']', comma);
    if (open == std::string::npos || comma == std::string::npos ||
        close == std::string::npos)
      break;
    auto number = [](std::string s) -> std::optional<int64_t> {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      if (s.empty() || s.find_first_not_of("-0123456789") != std::string::npos)
        return std::nullopt; // int_oo, -int_oo
      return std::stoll(s);
    };
    DimRange r;
    r.low = number(text.substr(open + 3, comma - open - 3));
    r.high = number(text.substr(comma + 1, close - comma - 1));
    std::string symbol = text.substr(at, colon - at);
    byName[symbol] = r;
    inOrder.push_back(r);
    at = close;
  }
  if (inOrder.empty())
    return {};
  // The inputs' dim_params in the order they first appear.
  std::vector<std::string> params;
  std::set<std::string> seen;
  for (const onnx::ValueInfoProto &in : graph.input())
    for (const auto &dim : in.type().tensor_type().shape().dim())
      if (dim.has_dim_param() && seen.insert(dim.dim_param()).second)
        params.push_back(dim.dim_param());
  std::map<std::string, DimRange> out;
  bool named = true;
  for (const std::string &p : params)
    named &= byName.count(p) > 0;
  if (named) { // the symbols themselves (Dim.AUTO)
    for (const std::string &p : params)
      out[p] = byName[p];
    return out;
  }
  // Mapped by order only where every symbol is one of the inputs'.
  if (params.size() != inOrder.size())
    return {};
  for (size_t i = 0; i < params.size(); ++i)
    out[params[i]] = inOrder[i];
  return out;
}

std::map<std::string, std::vector<std::string>>
foldedFromAll(const onnx::GraphProto &graph) {
  std::map<std::string, std::vector<std::string>> out;
  for (const onnx::ValueInfoProto &vi : graph.value_info()) {
    std::string text = valueMetadata(vi, "pkg.onnxscript.optimizer.folded_from");
    if (text.empty())
      continue;
    std::vector<std::string> &from = out[vi.name()];
    for (size_t i = text.find('\''); i != std::string::npos;) {
      size_t j = text.find('\'', i + 1);
      if (j == std::string::npos)
        break;
      from.push_back(text.substr(i + 1, j - i - 1));
      i = text.find('\'', j + 1);
    }
  }
  return out;
}

std::string moduleOf(const onnx::NodeProto &node) {
  std::string ns = nodeMetadata(node, "namespace");
  size_t opSeg = ns.rfind('/');
  if (opSeg == std::string::npos) {
    // The TorchScript exporter names nodes by scope instead:
    // `/model/layers.0/post_attention_layernorm/Mul_1`, with the levels
    // its scopes lack put back (canonicalizeScopes).
    std::string canonical = canonicalScope(node);
    return canonical.empty() ? scopePath(node) : canonical;
  }
  size_t modSeg = ns.rfind('/', opSeg - 1);
  std::string seg = ns.substr(modSeg == std::string::npos ? 0 : modSeg + 1,
                              opSeg - (modSeg == std::string::npos ? 0 : modSeg + 1));
  size_t colon = seg.find(':');
  if (colon == std::string::npos)
    return "";
  return seg.substr(0, colon);
}

/// Whether `call` (a traced call, `linear(%x, %p_lm_head_weight)`) names
/// `placeholder` as a whole argument.
bool callNames(const std::string &call, const std::string &placeholder) {
  for (size_t i = call.find(placeholder); i != std::string::npos;
       i = call.find(placeholder, i + 1)) {
    size_t end = i + placeholder.size();
    char next = end < call.size() ? call[end] : ' ';
    if (!std::isalnum(static_cast<unsigned char>(next)) && next != '_')
      return true;
  }
  return false;
}

/// torch.export's placeholder of parameter `name` (`%p_model_norm_weight`).
std::string placeholderOf(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return "%p_" + name;
}

/// From the dynamo exporter's record of each node's traced call: whether
/// the nodes `uses` of a module read that module's own parameter `copy`
/// (a parameter of its own that the exporter merged with `name` by value),
/// or `name`'s placeholder (a tied weight: GPT-2's and Llama 3.2's
/// embedding reads the head's); none without the record.
std::optional<bool>
readsOwnParameter(const onnx::GraphProto &graph,
                  const std::vector<std::pair<int, int>> &uses,
                  const std::string &copy, const std::string &name) {
  std::optional<bool> own;
  for (auto [n, j] : uses) {
    std::string call = nodeMetadata(graph.node(n), "pkg.torch.onnx.fx_node");
    if (callNames(call, placeholderOf(copy)))
      return true;
    if (callNames(call, placeholderOf(name)))
      own = false;
  }
  return own;
}

bool projectionWeight(const onnx::NodeProto &node, int j) {
  if (node.op_type() == "MatMul")
    return j == 1;
  if (node.op_type() != "Gemm" || j != 1)
    return false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "transB" && a.i() != 0)
      return false;
  return true;
}

std::set<std::string>
readerModules(const onnx::GraphProto &graph,
              const std::vector<std::pair<int, int>> &readers) {
  std::set<std::string> modules;
  for (auto [n, j] : readers)
    modules.insert(moduleOf(graph.node(n)));
  return modules;
}

std::string scopeWeightName(const onnx::GraphProto &graph,
                            const std::vector<std::pair<int, int>> &readers) {
  std::set<std::string> modules = readerModules(graph, readers);
  return modules.size() == 1 && !modules.begin()->empty()
             ? *modules.begin() + ".weight"
             : "";
}

std::string
foldedProjectionName(const onnx::GraphProto &graph, const std::string &name,
                     const std::vector<std::pair<int, int>> &readers) {
  if (name.rfind("onnx::MatMul_", 0) != 0 || readers.empty())
    return "";
  for (auto [n, j] : readers)
    if (!projectionWeight(graph.node(n), j))
      return "";
  return scopeWeightName(graph, readers);
}

/// Whether `out`, an Identity's output that reads initializer `src`, names
/// a copy the TorchScript exporter made of a merged value: a parameter's
/// own name (`model.norm.weight`), or, for a value it folded
/// (`onnx::Mul_N`: a fresh Gemma norm's 1 + weight, ones), another folded
/// name read in one module's scope (`readers`: each value's reading nodes).
static bool mergedCopyName(
    const onnx::GraphProto &graph, const std::string &src,
    const std::string &out,
    const std::map<std::string, std::vector<std::pair<int, int>>> &readers) {
  if (out.find("::") == std::string::npos)
    return out.find('.') != std::string::npos;
  if (src.rfind("onnx::", 0) != 0 || out.rfind("onnx::", 0) != 0)
    return false;
  auto r = readers.find(out);
  if (r == readers.end())
    return false;
  // An Identity that reads the copy (a chain: the TorchScript exporter's
  // copy for a second call of the same module, Gemma 3n's AltUp router
  // norm read in scopes router_norm and router_norm_1) reads the copy
  // made here: the module's readers are the others.
  std::vector<std::pair<int, int>> direct;
  for (auto [n, j] : r->second)
    if (graph.node(n).op_type() != "Identity")
      direct.push_back({n, j});
  if (direct.empty())
    return false;
  std::set<std::string> modules = readerModules(graph, direct);
  return modules.size() == 1 && !modules.begin()->empty();
}

/// The TorchScript exporter's form: `Identity(W) -> model.norm.weight`, the
/// merged parameter's own name as the output (or, for a value it folded,
/// `Identity(onnx::Mul_7) -> onnx::Mul_9` read by one module:
/// mergedCopyName). Each becomes an initializer of that name holding W's
/// values (the Identity dropped); appends the (copy, original) pairs to
/// `splits`.
static void
splitIdentityCopies(onnx::GraphProto &graph, const std::string &path,
                    std::vector<std::pair<std::string, std::string>> &splits) {
  std::map<std::string, const onnx::TensorProto *> byName;
  for (const auto &init : graph.initializer())
    byName[init.name()] = &init;
  std::map<std::string, std::vector<std::pair<int, int>>> readers;
  for (int n = 0; n < graph.node_size(); ++n)
    for (int j = 0; j < graph.node(n).input_size(); ++j)
      readers[graph.node(n).input(j)].push_back({n, j});
  std::vector<onnx::TensorProto> added;
  std::vector<int> dropped;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &node = graph.node(n);
    if (node.op_type() != "Identity" || node.input_size() != 1 ||
        node.output_size() != 1 || !node.domain().empty())
      continue;
    auto src = byName.find(node.input(0));
    const std::string &out = node.output(0);
    if (src == byName.end() ||
        src->second->data_type() != onnx::TensorProto::FLOAT ||
        src->second->dims_size() == 0 || byName.count(out) ||
        !mergedCopyName(graph, src->first, out, readers))
      continue;
    TensorData data =
        decodeTensor(*src->second, "initializer '" + src->first + "'", path);
    if (!fewDistinct(data.floats))
      continue;
    onnx::TensorProto copy = *src->second;
    copy.set_name(out);
    added.push_back(std::move(copy));
    dropped.push_back(n);
    splits.push_back({out, src->first});
  }
  for (auto it = dropped.rbegin(); it != dropped.rend(); ++it)
    graph.mutable_node()->DeleteSubrange(*it, 1);
  for (onnx::TensorProto &t : added)
    *graph.add_initializer() = std::move(t);
}

/// The other form: one initializer, named after one module's parameter,
/// read by nodes of several modules (parameters of equal values merged). Each other module whose
/// reads are its own parameter (the exporter's record of the traced
/// calls, else values that are not mostly distinct: a fresh norm's ones)
/// gets a copy under its own name (`names`: the graph's names so far);
/// appends the (copy, original) pairs to `splits`.
static void splitSharedInitializers(
    onnx::GraphProto &graph, const std::string &path,
    std::set<std::string> &names,
    std::vector<std::pair<std::string, std::string>> &splits) {
  // Who reads each value (node, input), once for all initializers.
  std::map<std::string, std::vector<std::pair<int, int>>> readers;
  for (int n = 0; n < graph.node_size(); ++n)
    for (int j = 0; j < graph.node(n).input_size(); ++j)
      readers[graph.node(n).input(j)].push_back({n, j});

  int count = graph.initializer_size();
  for (int i = 0; i < count; ++i) {
    // Copy: adding initializers below may move the repeated field's storage.
    const onnx::TensorProto init = graph.initializer(i);
    const std::string &name = init.name();
    if (init.data_type() != onnx::TensorProto::FLOAT || init.dims_size() == 0)
      continue;
    size_t dot = name.rfind('.');
    if (dot == std::string::npos)
      continue;
    std::string owner = name.substr(0, dot), leaf = name.substr(dot + 1);
    // The reading nodes by module.
    std::map<std::string, std::vector<std::pair<int, int>>> byModule;
    auto reads = readers.find(name);
    if (reads == readers.end())
      continue;
    for (auto [n, j] : reads->second)
      byModule[moduleOf(graph.node(n))].push_back({n, j});
    if (byModule.size() < 2 || byModule.count("") || !byModule.count(owner))
      continue;
    // Without the exporter's record of the traced calls: a tensor that is
    // not mostly distinct was merged (read once, for all modules).
    std::optional<bool> merged;
    auto mergedByValue = [&] {
      if (!merged) {
        TensorData data =
            decodeTensor(init, "initializer '" + name + "'", path);
        merged = fewDistinct(data.floats);
      }
      return *merged;
    };
    for (auto &[module, uses] : byModule) {
      if (module == owner)
        continue;
      std::string copy = module + "." + leaf;
      if (names.count(copy))
        continue;
      std::optional<bool> own = readsOwnParameter(graph, uses, copy, name);
      if (own ? !*own : !mergedByValue())
        continue;
      names.insert(copy);
      onnx::TensorProto *t = graph.add_initializer();
      *t = init;
      t->set_name(copy);
      for (auto [n, j] : uses)
        graph.mutable_node(n)->set_input(j, copy);
      splits.push_back({copy, name});
    }
  }
}

std::vector<std::pair<std::string, std::string>>
splitMergedParams(onnx::ModelProto &model, const std::string &path) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::set<std::string> names;
  for (const auto &init : graph.initializer())
    names.insert(init.name());
  for (const auto &in : graph.input())
    names.insert(in.name());
  for (const auto &node : graph.node())
    for (const std::string &out : node.output())
      names.insert(out);
  canonicalizeScopes(graph);
  std::vector<std::pair<std::string, std::string>> splits;
  splitIdentityCopies(graph, path, splits);
  splitSharedInitializers(graph, path, names, splits);
  return splits;
}

} // namespace detail
} // namespace otc
