//===- MaskedScatter.cpp - masked_scatter without data-dependent shapes ---===//
//
// Every Hugging Face vision-language model merges its image features into
// the text embeddings with `inputs_embeds.masked_scatter(mask, features)`,
// which the dynamo exporter writes as
//
//   ScatterND(self, Transpose(NonZero(mask), [1, 0]),
//             Slice(Reshape(features, [-1]), [0], [K]))
//
// with K the count of the mask's true elements: shapes that depend on the
// values, which a compiler of static shapes cannot take. The same function
// has static shapes: the i-th true element of the mask (row-major) takes
// features[i], so
//
//   pos = CumSum(Cast(mask, int64) flattened) - 1
//   out = Where(mask flattened, Gather(features flattened, Max(pos, 0)),
//               self flattened), reshaped to self's shape,
//
// whose gradient reaches the features through the gather and self where the
// mask is false, as masked_scatter's does. rewriteMaskedScatter replaces the
// ScatterND with those nodes and removes the NonZero chain it no longer
// needs, before the import checks the ops.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include <algorithm>
#include <map>
#include <set>

namespace otc {
namespace detail {

namespace {

/// The int64 values of a Constant node (value, value_ints or value_int),
/// or none.
std::optional<std::vector<int64_t>> constantInts(const onnx::NodeProto *node) {
  if (!node || node->op_type() != "Constant")
    return std::nullopt;
  for (const onnx::AttributeProto &a : node->attribute()) {
    if (a.name() == "value_ints")
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    if (a.name() == "value_int")
      return std::vector<int64_t>{a.i()};
    if (a.name() == "value" && a.t().data_type() == onnx::TensorProto::INT64)
      return decodeTensor(a.t(), "Constant '" + node->name() + "'", "").ints;
  }
  return std::nullopt;
}

onnx::NodeProto makeNode(const std::string &op, std::vector<std::string> inputs,
                         const std::string &output, const std::string &name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string &i : inputs)
    n.add_input(i);
  n.add_output(output);
  return n;
}

onnx::NodeProto intConstant(const std::string &output,
                            std::vector<int64_t> values, bool scalar,
                            const std::string &name) {
  onnx::NodeProto n = makeNode("Constant", {}, output, name);
  onnx::AttributeProto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto *t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar)
    t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values)
    t->add_int64_data(v);
  return n;
}

} // namespace

int rewriteMaskedScatter(onnx::GraphProto &graph) {
  std::map<std::string, int> producer;
  for (int n = 0; n < graph.node_size(); ++n)
    for (const std::string &o : graph.node(n).output())
      producer[o] = n;
  auto made = [&](const std::string &v,
                  const char *op) -> const onnx::NodeProto * {
    auto it = producer.find(v);
    if (it == producer.end())
      return nullptr;
    const onnx::NodeProto &n = graph.node(it->second);
    return n.op_type() == op && n.domain().empty() ? &n : nullptr;
  };
  std::vector<std::pair<int, std::vector<onnx::NodeProto>>> replace;
  std::vector<std::string> dropped; // the replaced ScatterNDs' old inputs
  for (int s = 0; s < graph.node_size(); ++s) {
    const onnx::NodeProto &scatter = graph.node(s);
    if (scatter.op_type() != "ScatterND" || !scatter.domain().empty() ||
        scatter.input_size() != 3)
      continue;
    bool plain = true;
    for (const onnx::AttributeProto &a : scatter.attribute())
      plain &= a.name() != "reduction" || a.s() == "none";
    const onnx::NodeProto *transpose = made(scatter.input(1), "Transpose");
    const onnx::NodeProto *nonZero =
        transpose ? made(transpose->input(0), "NonZero") : nullptr;
    const onnx::NodeProto *slice = made(scatter.input(2), "Slice");
    const onnx::NodeProto *flat =
        slice ? made(slice->input(0), "Reshape") : nullptr;
    if (!plain || !nonZero || !flat || slice->input_size() < 3)
      continue;
    std::vector<int64_t> perm;
    for (const onnx::AttributeProto &a : transpose->attribute())
      if (a.name() == "perm")
        perm.assign(a.ints().begin(), a.ints().end());
    auto starts = constantInts(made(slice->input(1), "Constant"));
    auto flatShape = constantInts(made(flat->input(1), "Constant"));
    if (perm != std::vector<int64_t>{1, 0} || !starts ||
        *starts != std::vector<int64_t>{0} || !flatShape ||
        *flatShape != std::vector<int64_t>{-1})
      continue;
    const std::string self = scatter.input(0), mask = nonZero->input(0),
                      features = slice->input(0), out = scatter.output(0);
    const std::string p = scatter.name() + "/otc_masked_scatter/";
    std::vector<onnx::NodeProto> nodes;
    nodes.push_back(intConstant(p + "flat", {-1}, false, p + "flat_shape"));
    nodes.push_back(intConstant(p + "axis", {0}, true, p + "axis"));
    nodes.push_back(intConstant(p + "one", {1}, true, p + "one"));
    nodes.push_back(intConstant(p + "zero", {0}, true, p + "zero"));
    nodes.push_back(
        makeNode("Reshape", {mask, p + "flat"}, p + "mask", p + "mask_flat"));
    onnx::NodeProto cast =
        makeNode("Cast", {p + "mask"}, p + "count", p + "cast");
    onnx::AttributeProto *to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::INT64);
    nodes.push_back(cast);
    nodes.push_back(makeNode("CumSum", {p + "count", p + "axis"}, p + "upto",
                             p + "cumsum"));
    nodes.push_back(
        makeNode("Sub", {p + "upto", p + "one"}, p + "pos", p + "pos"));
    nodes.push_back(
        makeNode("Max", {p + "pos", p + "zero"}, p + "index", p + "index"));
    nodes.push_back(
        makeNode("Gather", {features, p + "index"}, p + "taken", p + "gather"));
    nodes.push_back(
        makeNode("Reshape", {self, p + "flat"}, p + "self", p + "self_flat"));
    nodes.push_back(makeNode("Where", {p + "mask", p + "taken", p + "self"},
                             p + "merged", p + "where"));
    nodes.push_back(makeNode("Shape", {self}, p + "shape", p + "shape"));
    nodes.push_back(
        makeNode("Reshape", {p + "merged", p + "shape"}, out, p + "reshape"));
    replace.push_back({s, std::move(nodes)});
    dropped.push_back(scatter.input(1));
    dropped.push_back(scatter.input(2));
  }
  if (replace.empty())
    return 0;
  // Splice the new nodes in at each ScatterND's place.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  size_t next = 0;
  for (int n = 0; n < graph.node_size(); ++n) {
    if (next < replace.size() && replace[next].first == n) {
      for (onnx::NodeProto &x : replace[next].second)
        *nodes.Add() = std::move(x);
      ++next;
      continue;
    }
    *nodes.Add() = graph.node(n);
  }
  graph.mutable_node()->Swap(&nodes);
  // The nodes of the index and slice chains that nothing reads any more
  // (the NonZero, its transpose, the count K): removed, walking up from the
  // ScatterND's old inputs, and only those.
  std::vector<std::string> work = dropped;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    std::set<std::string> read;
    for (const onnx::NodeProto &n : graph.node())
      for (const std::string &i : n.input())
        read.insert(i);
    for (const onnx::ValueInfoProto &o : graph.output())
      read.insert(o.name());
    for (int n = 0; n < graph.node_size(); ++n) {
      const onnx::NodeProto &node = graph.node(n);
      if (std::find(node.output().begin(), node.output().end(), v) ==
          node.output().end())
        continue;
      bool used = false;
      for (const std::string &o : node.output())
        used |= read.count(o) > 0;
      if (used)
        break;
      for (const std::string &i : node.input())
        if (!i.empty())
          work.push_back(i);
      graph.mutable_node()->DeleteSubrange(n, 1);
      break;
    }
  }
  return static_cast<int>(replace.size());
}

} // namespace detail
} // namespace otc
