//===- GraphChecks.cpp - what the ONNX checker checks, at every opset -----===//
//
// libonnx's checker knows opsets up to kMaxCheckerOpset only, so the importer
// checks the graph itself, at every opset, before building anything: every
// value assigned once (node outputs, initializers and graph inputs have
// distinct names), graph outputs listed once, each node's input and output
// counts and attributes against its op schema (unknown, duplicated, missing
// or wrongly typed attributes are errors), and, as nodes are imported, the
// element types of their inputs against the schema's type constraints and
// the size of every tensor against kMaxTensorBytes. Schemas come from
// libonnx at min(opset, kMaxCheckerOpset), corrected for the signature
// changes of the supported ops in the opsets libonnx does not know.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include "onnx/defs/schema.h"

#include <map>

using namespace mlir;

namespace otc {
namespace detail {

//===----------------------------------------------------------------------===//
// Names: single assignment
//===----------------------------------------------------------------------===//

void Importer::checkNames() {
  const onnx::GraphProto &graph = model.graph();
  // What defines each name, for the message.
  llvm::StringMap<std::string> definer;
  auto define = [&](const std::string &name, const std::string &what) {
    auto [it, inserted] = definer.try_emplace(name, what);
    if (!inserted)
      fail("value '" + name + "' is defined twice, by " + it->second +
           " and by " + what + ": ONNX values are assigned once");
  };
  llvm::StringSet<> inputs;
  for (int i = 0; i < graph.input_size(); ++i) {
    const std::string &name = graph.input(i).name();
    if (name.empty())
      fail("graph input " + Twine(i) + " has no name");
    if (!inputs.insert(name).second)
      fail("graph input '" + name + "' is listed twice");
  }
  llvm::StringSet<> inits;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const std::string &name = graph.initializer(i).name();
    if (name.empty())
      fail("initializer " + Twine(i) + " has no name");
    if (!inits.insert(name).second)
      fail("initializer '" + name + "' is listed twice");
    // A graph input of the same name is the initializer's declared input
    // (an input with a default value): one value.
    define(name, "initializer '" + name + "'");
  }
  for (const auto &in : graph.input())
    if (!inits.contains(in.name()))
      define(in.name(), "graph input '" + in.name() + "'");
  for (const NodeInfo &node : nodes)
    for (const std::string &out : node.proto->output())
      if (!out.empty())
        define(out, "node '" + node.name + "' (" + node.proto->op_type() + ")");
  llvm::StringSet<> outputs;
  for (int i = 0; i < graph.output_size(); ++i) {
    const std::string &name = graph.output(i).name();
    if (name.empty())
      fail("graph output " + Twine(i) + " has no name");
    if (!outputs.insert(name).second)
      fail("graph output '" + name + "' is listed twice");
  }
}

//===----------------------------------------------------------------------===//
// Op schemas
//===----------------------------------------------------------------------===//

namespace {
/// What the checks read from an op's schema at the model's opset.
struct SchemaFacts {
  int minInputs = 0, maxInputs = 0, minOutputs = 0, maxOutputs = 0;
  /// Attribute name -> (type, required).
  std::map<std::string, std::pair<onnx::AttributeProto::AttributeType, bool>>
      attrs;
  /// libonnx's schema (for type constraints), when it describes this opset.
  const onnx::OpSchema *schema = nullptr;
};
} // namespace

/// The schema facts of default-domain op `op` at `opset`: libonnx's schema
/// at min(opset, kMaxCheckerOpset), with the changes of later opsets applied
/// for the ops the importer supports.
static std::optional<SchemaFacts> schemaFacts(const std::string &op,
                                              int64_t opset) {
  using AP = onnx::AttributeProto;
  SchemaFacts f;
  if (op == "Gelu") {
    // Opset 20, newer than libonnx.
    f.minInputs = f.maxInputs = f.minOutputs = f.maxOutputs = 1;
    f.attrs["approximate"] = {AP::STRING, false};
    return f;
  }
  // Opset 23, newer than libonnx.
  if (op == "RMSNormalization") {
    f.minInputs = f.maxInputs = 2;
    f.minOutputs = f.maxOutputs = 1;
    f.attrs["axis"] = {AP::INT, false};
    f.attrs["epsilon"] = {AP::FLOAT, false};
    f.attrs["stash_type"] = {AP::INT, false};
    return f;
  }
  if (op == "Attention") {
    f.minInputs = 3;
    f.maxInputs = 6;
    f.minOutputs = 1;
    f.maxOutputs = 4;
    for (const char *a : {"is_causal", "kv_num_heads", "q_num_heads",
                          "qk_matmul_output_mode", "softmax_precision"})
      f.attrs[a] = {AP::INT, false};
    f.attrs["scale"] = {AP::FLOAT, false};
    f.attrs["softcap"] = {AP::FLOAT, false};
    return f;
  }
  if (op == "RotaryEmbedding") {
    f.minInputs = 3;
    f.maxInputs = 4;
    f.minOutputs = f.maxOutputs = 1;
    for (const char *a : {"interleaved", "num_heads", "rotary_embedding_dim"})
      f.attrs[a] = {AP::INT, false};
    return f;
  }
  const onnx::OpSchema *s = onnx::OpSchemaRegistry::Schema(
      op, static_cast<int>(std::min(opset, kMaxCheckerOpset)), "");
  if (!s)
    return std::nullopt;
  f.minInputs = s->min_input();
  f.maxInputs = s->max_input();
  f.minOutputs = s->min_output();
  f.maxOutputs = s->max_output();
  for (const auto &[name, a] : s->attributes())
    f.attrs[name] = {a.type, a.required};
  if (opset <= kMaxCheckerOpset) {
    f.schema = s;
    return f;
  }
  // Opset 18: the remaining reductions take `axes` as an input.
  if (op == "ReduceMax" || op == "ReduceMean") {
    f.attrs.erase("axes");
    f.attrs["noop_with_empty_axes"] = {AP::INT, false};
    f.maxInputs = 2;
  }
  // Opset 18: Split's `num_outputs`.
  if (op == "Split")
    f.attrs["num_outputs"] = {AP::INT, false};
  // Opset 19: Cast and CastLike's `saturate` (float8 targets).
  if ((op == "Cast" || op == "CastLike") && opset >= 19)
    f.attrs["saturate"] = {AP::INT, false};
  // The type constraints of the supported ops only grew after opset 17
  // (float8, int4, bool for ReduceMax...), which the importer rejects
  // anyway; the constraints of opset 17 hold for what it accepts.
  f.schema = s;
  return f;
}

/// Name of an attribute type, e.g. "INT".
static std::string attrTypeName(onnx::AttributeProto::AttributeType t) {
  if (onnx::AttributeProto_AttributeType_IsValid(t))
    return onnx::AttributeProto_AttributeType_Name(t);
  return "type " + std::to_string(static_cast<int>(t));
}

void Importer::checkNodeSchema(const NodeInfo &node) {
  const onnx::NodeProto &n = *node.proto;
  std::string where = "node '" + node.name + "' (" + n.op_type() + ")";
  std::optional<SchemaFacts> f = schemaFacts(n.op_type(), opset);
  if (!f)
    fail(where + ": no schema for opset " + Twine(opset));
  if (n.input_size() < f->minInputs || n.input_size() > f->maxInputs)
    fail(where + " has " + Twine(n.input_size()) + " inputs; opset " +
         Twine(opset) + " takes " + Twine(f->minInputs) +
         (f->maxInputs == f->minInputs ? std::string()
          : f->maxInputs == std::numeric_limits<int>::max()
              ? " or more"
              : " to " + std::to_string(f->maxInputs)));
  if (n.output_size() < f->minOutputs || n.output_size() > f->maxOutputs)
    fail(where + " has " + Twine(n.output_size()) + " outputs; opset " +
         Twine(opset) + " gives " + Twine(f->minOutputs) +
         (f->maxOutputs == f->minOutputs ? std::string()
          : f->maxOutputs == std::numeric_limits<int>::max()
              ? " or more"
              : " to " + std::to_string(f->maxOutputs)));
  for (int i = 0; i < n.input_size() && i < f->minInputs; ++i)
    if (n.input(i).empty() &&
        (!f->schema || i >= static_cast<int>(f->schema->inputs().size()) ||
         f->schema->inputs()[i].GetOption() != onnx::OpSchema::Optional))
      fail(where + ": required input " + Twine(i) + " has an empty name");
  llvm::StringSet<> seen;
  for (const onnx::AttributeProto &a : n.attribute()) {
    if (!seen.insert(a.name()).second)
      fail(where + ": attribute '" + oneLine(a.name()) + "' is given twice");
    auto it = f->attrs.find(a.name());
    if (it == f->attrs.end())
      fail(where + ": unknown attribute '" + oneLine(a.name()) + "' for " +
           n.op_type() + " at opset " + Twine(opset));
    if (a.type() != onnx::AttributeProto::UNDEFINED &&
        a.type() != it->second.first)
      fail(where + ": attribute '" + a.name() + "' has type " +
           attrTypeName(a.type()) + ", expected " +
           attrTypeName(it->second.first));
  }
  for (const auto &[name, info] : f->attrs)
    if (info.second && !seen.contains(name))
      fail(where + ": missing the required attribute '" + name + "'");
}

//===----------------------------------------------------------------------===//
// Types and sizes, as nodes are imported
//===----------------------------------------------------------------------===//

/// The ONNX tensor types an imported element type may have come from (every
/// float type is imported as f32).
static llvm::SmallVector<const char *> onnxTypesOf(Type t) {
  if (t.isF32())
    return {"tensor(float)", "tensor(double)", "tensor(float16)",
            "tensor(bfloat16)"};
  if (t.isInteger(64))
    return {"tensor(int64)"};
  if (t.isInteger(32))
    return {"tensor(int32)"};
  if (t.isInteger(1))
    return {"tensor(bool)"};
  return {};
}

void Importer::checkInputTypes() {
  const onnx::NodeProto &n = *current->proto;
  std::optional<SchemaFacts> f = schemaFacts(n.op_type(), opset);
  if (!f || !f->schema)
    return;
  const auto &formals = f->schema->inputs();
  if (formals.empty())
    return;
  // The element type bound to each type variable, and by which input.
  llvm::StringMap<std::pair<Type, int>> bound;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty())
      continue;
    Type et;
    if (auto st = statics.find(n.input(i)); st != statics.end())
      et = st->second->attr.getElementType();
    else if (auto v = values.find(n.input(i)); v != values.end())
      et = elemOf(v->second);
    else
      continue; // A sequence: SequenceAt checks it.
    // Inputs past the formal parameters belong to a trailing variadic one,
    // or to a signature newer than libonnx's (the axes of a reduction at
    // opset 18): those are left to the op's builder.
    if (static_cast<size_t>(i) >= formals.size() &&
        formals.back().GetOption() != onnx::OpSchema::Variadic)
      continue;
    const auto &formal = formals[std::min<size_t>(i, formals.size() - 1)];
    const auto &allowed = formal.GetTypes();
    if (!allowed.empty()) {
      bool ok = false;
      for (const char *t : onnxTypesOf(et))
        for (const std::string *a : allowed)
          ok |= *a == t;
      if (!ok)
        nodeFail("input " + Twine(i) + " '" + n.input(i) +
                 "' has element type " + typeStr(et) + ", which " +
                 n.op_type() + " does not take for " + formal.GetTypeStr());
    }
    auto [it, inserted] = bound.try_emplace(formal.GetTypeStr(), et, i);
    if (!inserted && it->second.first != et &&
        (formal.GetOption() != onnx::OpSchema::Variadic ||
         formal.GetIsHomogeneous()))
      nodeFail("inputs " + Twine(it->second.second) + " '" +
               n.input(it->second.second) + "' (" + typeStr(it->second.first) +
               ") and " + Twine(i) + " '" + n.input(i) + "' (" + typeStr(et) +
               ") must have the same element type " + formal.GetTypeStr());
  }
}

void Importer::checkSize(const std::string &name, Type type,
                         const Twine &what, uint64_t limit) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return;
  Type et = t.getElementType();
  uint64_t bytes = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
  checkedElements(t.getShape(), bytes, what + " '" + name + "'", limit);
}

void Importer::checkOutputs() {
  const onnx::NodeProto &n = *current->proto;
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty())
      continue;
    std::string what =
        "node '" + current->name + "' (" + n.op_type() + "): output";
    // A run-time value holds no memory here (kMaxComputedTensorBytes); a
    // value computed at import does.
    if (auto it = values.find(n.output(i)); it != values.end())
      checkSize(n.output(i), it->second.getType(), what,
                kMaxComputedTensorBytes);
    else if (auto st = statics.find(n.output(i)); st != statics.end())
      checkSize(n.output(i), st->second->attr.getType(), what);
  }
}

} // namespace detail
} // namespace otc
