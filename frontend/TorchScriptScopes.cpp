//===- TorchScriptScopes.cpp - module paths from TorchScript scopes -------===//
//
// The TorchScript exporter names each node by the scope of the modules whose
// calls made it (`/model/layers.0/mlp/down_proj/MatMul`), and otc names a
// folded weight by that scope (`model.layers.0.mlp.down_proj.weight`). Two
// kinds of module are missing from the scopes of a peft model:
//  - a wrapper whose forward calls an inner module's `forward` directly
//    (peft's LoraModel): the scopes of
//    `model.base_model.model.model.layers.0...` read `model.model.model.
//    layers.0...`;
//  - a ModuleDict (peft's lora_A and lora_B, keyed by adapter): the two
//    Linears of adapter `default` are the scopes `q_proj.default` and
//    `q_proj.default_1`, the second deduplicated by the exporter.
// canonicalizeScopes reads the state-dict path of each scope from the graph
// itself and notes it on the node (metadata "otc.module"), where moduleOf
// finds it:
//  - the dropped levels from the parameters the graph keeps under their own
//    names (a norm's weight `model.base_model.model.model.norm.weight`, read
//    in scope `model.model.model.norm`): the scope's prefix before the part
//    both share becomes the name's (`model` -> `model.base_model`) in every
//    scope, when every such parameter agrees and none is read in its own
//    module's scope under that prefix already;
//  - a LoRA pair where a module holds a `base_layer`: the product of scope
//    `M.X` read by the product of `M.Y` (B(A(x))) is `M.lora_A.<adapter>`
//    and that one `M.lora_B.<adapter>`, the adapter being X (Y is X's
//    deduplicated name, `X_1`) or their common stem (`default_1`,
//    `default_2` when a dropout module took `default` first).
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include <algorithm>
#include <map>
#include <set>

namespace otc {
namespace detail {

namespace {

constexpr const char *kModuleKey = "otc.module";

std::vector<std::string> tokens(const std::string &path) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t dot = path.find('.', begin);
    if (dot == std::string::npos)
      dot = path.size();
    out.push_back(path.substr(begin, dot - begin));
    begin = dot + 1;
  }
  return out;
}

std::string join(const std::vector<std::string> &t, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i)
    s += (i > from ? "." : "") + t[i];
  return s;
}

/// Whether `a` is `b` with some tokens left out (in order), and shorter.
bool dropsLevels(const std::vector<std::string> &a,
                 const std::vector<std::string> &b) {
  if (a.size() >= b.size())
    return false;
  size_t j = 0;
  for (const std::string &t : a) {
    while (j < b.size() && b[j] != t)
      ++j;
    if (j == b.size())
      return false;
    ++j;
  }
  return true;
}

bool under(const std::string &path, const std::string &prefix) {
  return prefix.empty() || path == prefix ||
         (path.size() > prefix.size() &&
          path.compare(0, prefix.size(), prefix) == 0 &&
          path[prefix.size()] == '.');
}

std::string rebase(const std::string &path, const std::string &from,
                   const std::string &to) {
  if (from.empty())
    return path.empty() ? to : to + "." + path;
  return to + path.substr(from.size());
}

/// The levels the scopes drop: scope prefix -> state-dict prefix, from the
/// initializers named as parameters and each reader's scope.
std::map<std::string, std::string>
droppedLevels(const onnx::GraphProto &graph,
              const std::vector<std::string> &scope) {
  std::map<std::string, std::vector<int>> readers;
  for (int n = 0; n < graph.node_size(); ++n)
    if (!scope[n].empty())
      for (const std::string &in : graph.node(n).input())
        readers[in].push_back(n);
  std::map<std::string, std::set<std::string>> targets;
  std::set<std::string> exact;
  for (const onnx::TensorProto &init : graph.initializer()) {
    const std::string &name = init.name();
    size_t dot = name.rfind('.');
    if (name.find("::") != std::string::npos || dot == std::string::npos)
      continue;
    std::string owner = name.substr(0, dot);
    std::vector<std::string> o = tokens(owner);
    for (int n : readers[name]) {
      if (scope[n] == owner) {
        exact.insert(owner);
        continue;
      }
      std::vector<std::string> s = tokens(scope[n]);
      size_t k = 0;
      while (k < s.size() && k < o.size() &&
             s[s.size() - 1 - k] == o[o.size() - 1 - k])
        ++k;
      if (k == 0)
        continue;
      std::vector<std::string> sp(s.begin(), s.end() - k),
          op(o.begin(), o.end() - k);
      if (dropsLevels(sp, op))
        targets[join(sp, 0, sp.size())].insert(join(op, 0, op.size()));
    }
  }
  std::map<std::string, std::string> rules;
  for (auto &[from, to] : targets) {
    bool contradicted = to.size() != 1;
    for (const std::string &e : exact)
      contradicted |= under(e, from);
    if (!contradicted)
      rules[from] = *to.begin();
  }
  return rules;
}

/// The adapter name of a LoRA pair whose Linears have the scopes' last
/// levels `a` and `b`: `a` when `b` is `a_N`, their stem when both are
/// `stem_N`, else "".
std::string adapterOf(const std::string &a, const std::string &b) {
  auto numbered = [](const std::string &s, const std::string &stem) {
    return s.size() > stem.size() + 1 && s.compare(0, stem.size(), stem) == 0 &&
           s[stem.size()] == '_' &&
           s.find_first_not_of("0123456789", stem.size() + 1) ==
               std::string::npos;
  };
  if (numbered(b, a))
    return a;
  size_t us = a.rfind('_');
  if (us != std::string::npos && us > 0) {
    std::string stem = a.substr(0, us);
    if (numbered(a, stem) && numbered(b, stem))
      return stem;
  }
  return "";
}

/// Renames the scopes of peft's LoRA Linears (see the file comment).
void loraLevels(const onnx::GraphProto &graph,
                std::vector<std::string> &scope) {
  std::set<std::string> wrapped; // modules with a base_layer
  for (const std::string &s : scope) {
    size_t at = s.find(".base_layer");
    while (at != std::string::npos) {
      size_t end = at + 11;
      if (end == s.size() || s[end] == '.')
        wrapped.insert(s.substr(0, at));
      at = s.find(".base_layer", at + 1);
    }
  }
  if (wrapped.empty())
    return;
  std::map<std::string, int> producer;
  for (int n = 0; n < graph.node_size(); ++n)
    if (graph.node(n).op_type() == "MatMul" && graph.node(n).output_size() == 1)
      producer[graph.node(n).output(0)] = n;
  std::map<std::string, std::string> renames;
  for (int n = 0; n < graph.node_size(); ++n) {
    const onnx::NodeProto &b = graph.node(n);
    if (b.op_type() != "MatMul" || b.input_size() != 2)
      continue;
    auto p = producer.find(b.input(0));
    if (p == producer.end())
      continue;
    const std::string &sa = scope[p->second], &sb = scope[n];
    size_t da = sa.rfind('.'), db = sb.rfind('.');
    if (da == std::string::npos || db == std::string::npos ||
        sa.compare(0, da, sb, 0, db) != 0 || !wrapped.count(sa.substr(0, da)))
      continue;
    std::string module = sa.substr(0, da);
    std::string adapter = adapterOf(sa.substr(da + 1), sb.substr(db + 1));
    if (adapter.empty())
      continue;
    renames[sa] = module + ".lora_A." + adapter;
    renames[sb] = module + ".lora_B." + adapter;
  }
  for (std::string &s : scope)
    for (const auto &[from, to] : renames)
      if (under(s, from)) {
        s = rebase(s, from, to);
        break;
      }
}

} // namespace

std::string scopePath(const onnx::NodeProto &node) {
  const std::string &name = node.name();
  size_t last = name.rfind('/');
  if (name.empty() || name[0] != '/' || last == 0 || last == std::string::npos)
    return "";
  std::string path = name.substr(1, last - 1);
  std::replace(path.begin(), path.end(), '/', '.');
  return path;
}

std::string canonicalScope(const onnx::NodeProto &node) {
  return nodeMetadata(node, kModuleKey);
}

void canonicalizeScopes(onnx::GraphProto &graph) {
  std::vector<std::string> scope(graph.node_size());
  bool any = false;
  for (int n = 0; n < graph.node_size(); ++n)
    if (nodeMetadata(graph.node(n), "namespace").empty()) {
      scope[n] = scopePath(graph.node(n));
      any |= !scope[n].empty();
    }
  if (!any)
    return;
  std::vector<std::string> canonical = scope;
  std::map<std::string, std::string> rules = droppedLevels(graph, scope);
  for (std::string &s : canonical) {
    if (s.empty())
      continue;
    const std::string *best = nullptr;
    for (const auto &[from, to] : rules)
      if (under(s, from) && (!best || from.size() > best->size()))
        best = &from;
    if (best)
      s = rebase(s, *best, rules.at(*best));
  }
  loraLevels(graph, canonical);
  for (int n = 0; n < graph.node_size(); ++n)
    if (canonical[n] != scope[n])
      setNodeMetadata(*graph.mutable_node(n), kModuleKey, canonical[n]);
}

void forgetCanonicalScopes(onnx::GraphProto &graph) {
  for (onnx::NodeProto &node : *graph.mutable_node())
    eraseNodeMetadata(node, kModuleKey);
}

} // namespace detail
} // namespace otc
