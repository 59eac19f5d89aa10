//===- GraphWalk.cpp - graph structure, arguments and values --------------===//
//
// The graph side of the importer: the pre-scan (node names, unsupported ops
// listed all at once, values used before they are defined or never defined,
// initializers read only at import time), the graph inputs as arguments
// (symbolic dimensions bound and checked against the export's ranges), the
// results, the name -> value table with import-time constants, and the
// current-node helpers (errors, attributes, shapes). The float initializers
// as parameters are Params.cpp's.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

using namespace mlir;

namespace otc {
namespace detail {

//===----------------------------------------------------------------------===//
// Pre-scan
//===----------------------------------------------------------------------===//

void Importer::prescan() {
  const onnx::GraphProto &graph = model.graph();
  if (graph.sparse_initializer_size() > 0)
    fail("'" + path + "': sparse initializers are not supported (first: '" +
         graph.sparse_initializer(0).values().name() + "')");
  nameNodesAndCheckOps();
  checkNames();
  checkOrderAndUses();
}

void Importer::nameNodesAndCheckOps() {
  const onnx::GraphProto &graph = model.graph();
  std::string unsupported;
  // NonZero nodes: of a mixture of experts' loop, and of anything else.
  bool expertNonZero = false, otherNonZero = false;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &n = graph.node(i);
    std::string name =
        n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    nodes.push_back({&n, name});
    bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
    if (defaultDomain) {
      const OpInfo *info = lookupOp(n.op_type());
      if (info && opset >= info->minOpset)
        continue;
    }
    int64_t version = defaultDomain ? opset : 0;
    for (const auto &imp : model.opset_import())
      if (!defaultDomain && imp.domain() == n.domain())
        version = imp.version();
    if (defaultDomain && n.op_type() == "NonZero") {
      std::string where = name + " " + nodeMetadata(n, "namespace");
      std::transform(where.begin(), where.end(), where.begin(), ::tolower);
      (where.find("expert") != std::string::npos ? expertNonZero
                                                 : otherNonZero) = true;
    }
    if (!unsupported.empty())
      unsupported += ", ";
    unsupported += (defaultDomain ? "" : n.domain() + ".") + n.op_type() +
                   " (node '" + name + "', opset " + std::to_string(version) +
                   ")";
  }
  // NonZero's size depends on the data: a Hugging Face mixture-of-experts
  // model's loop over its experts writes it (the batched experts do not),
  // and so do boolean indexing and masked_scatter (a vision-language
  // model's merge of its image features into the text embeddings).
  if (expertNonZero)
    unsupported += "; NonZero's output size depends on the values (a "
                   "mixture-of-experts model's loop over its experts): export "
                   "with experts_implementation=\"batched_mm\" (an argument "
                   "of the model's config or from_pretrained)";
  if (otherNonZero)
    unsupported += "; NonZero's output size depends on the values (boolean "
                   "indexing, or a masked_scatter in another form than "
                   "ScatterND at the NonZero of its mask, the dynamo "
                   "exporter's, which otc rewrites): otc compiles static "
                   "shapes; write the indexing as a multiply by the mask, a "
                   "merge as a gather (positions from the mask's cumulative "
                   "sum, then where)";
  if (!unsupported.empty())
    fail("unsupported ops: " + unsupported);
}

void Importer::checkOrderAndUses() {
  const onnx::GraphProto &graph = model.graph();
  // Definitions in order, and which node defines what.
  llvm::StringMap<size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const std::string &out : nodes[i].proto->output())
      if (!out.empty())
        producer.try_emplace(out, i);
  llvm::StringSet<> defined;
  for (const auto &in : graph.input())
    defined.insert(in.name());
  for (const auto &init : graph.initializer())
    defined.insert(init.name());

  // Uses as a loss's class weights: an initializer read only there (or at
  // import time) is a constant, not a trained parameter.
  llvm::StringSet<> dynamicUse, staticUse, classWeightUse;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo &node = nodes[i];
    for (int j = 0; j < node.proto->input_size(); ++j) {
      const std::string &in = node.proto->input(j);
      if (in.empty())
        continue;
      used.insert(in);
      const OpInfo *info = lookupOp(node.proto->op_type());
      bool isStatic = info && j < 32 && (info->staticInputs >> j & 1);
      bool isClassWeight =
          j == 2 && (node.proto->op_type() == "SoftmaxCrossEntropyLoss" ||
                     node.proto->op_type() == "NegativeLogLikelihoodLoss");
      (isStatic        ? staticUse
       : isClassWeight ? classWeightUse
                       : dynamicUse)
          .insert(in);
      if (defined.contains(in))
        continue;
      std::string where = "node '" + node.name + "' (" + node.proto->op_type() +
                          "): input '" + in + "'";
      auto it = producer.find(in);
      if (it == producer.end())
        fail(where + " is never defined");
      const NodeInfo &later = nodes[it->second];
      fail(where + " is produced by node '" + later.name + "' (" +
           later.proto->op_type() +
           ") which comes later: nodes must be in topological order");
    }
    for (const std::string &out : node.proto->output())
      if (!out.empty())
        defined.insert(out);
  }
  for (const auto &out : graph.output()) {
    used.insert(out.name());
    dynamicUse.insert(out.name());
    if (!defined.contains(out.name()))
      fail("graph output '" + out.name() + "' is never defined");
  }
  for (const auto &init : graph.initializer())
    if ((staticUse.contains(init.name()) ||
         classWeightUse.contains(init.name())) &&
        !dynamicUse.contains(init.name()))
      staticOnly.insert(init.name());
  for (const auto &in : graph.input())
    if (staticUse.contains(in.name()))
      staticGraphInputs.insert(in.name());
}

//===----------------------------------------------------------------------===//
// Function arguments and results
//===----------------------------------------------------------------------===//

void Importer::addInputs() {
  const onnx::GraphProto &graph = model.graph();
  llvm::StringSet<> inits;
  for (const auto &init : graph.initializer())
    inits.insert(init.name());

  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (inits.contains(in.name()))
      continue;
    std::string what = "input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      fail(what + " is not a tensor");
    const auto &tt = in.type().tensor_type();
    std::optional<Kind> kind = kindOf(tt.elem_type());
    if (!kind)
      fail(what + " has element type " + dataTypeName(tt.elem_type()) +
           ", which is not supported");
    BoundInput bound;
    if (staticGraphInputs.contains(in.name()) && options.inputValue &&
        options.inputValue(in.name(), bound)) {
      SmallVector<int64_t> declared;
      if (tt.has_shape())
        for (const auto &dim : tt.shape().dim())
          declared.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      bindInput(in, *kind,
                tt.has_shape() ? ArrayRef<int64_t>(declared)
                               : ArrayRef<int64_t>(bound.shape),
                bound);
      continue;
    }
    if (!tt.has_shape())
      fail(what + " has no shape (rank unknown)");
    SmallVector<int64_t> shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &dim = tt.shape().dim(i);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0)
          fail(what + " dimension " + Twine(i) + " is negative");
        shape.push_back(options.fixedDim(i, dim.dim_value()));
        continue;
      }
      const std::string &param = dim.dim_param();
      if (std::optional<int64_t> bound = options.boundDim(i, param)) {
        shape.push_back(*bound);
        checkDimRange(what, i, param, *bound);
      } else if (param.empty()) {
        fail(what + " dimension " + Twine(i) +
             " is unknown: bind it with --micro-batch N (leading dimension "
             "only) or give it a dim_param");
      } else {
        fail(what + " dimension " + Twine(i) + " ('" + param +
             "') is symbolic: bind it with --dim " + param + "=N" +
             (i == 0 ? " or --micro-batch N" : ""));
      }
      if (shape.back() <= 0)
        fail(what + " dimension " + Twine(i) + " is bound to " +
             Twine(shape.back()) + ", not a positive size");
    }
    auto type = RankedTensorType::get(shape, elementType(&ctx, *kind));
    checkSize(in.name(), type, "input");
    Location loc = NameLoc::get(builder.getStringAttr(in.name()));
    Value arg = entry->addArgument(type, loc);
    argAttrs.push_back({cast<BlockArgument>(arg).getArgNumber(),
                        builder.getNamedAttr(
                            attrs::kInput, builder.getStringAttr(in.name()))});
    values[in.name()] = arg;
  }
}

void Importer::checkDimRange(const std::string &what, int index,
                             const std::string &param, int64_t value) {
  if (!dimRanges)
    dimRanges = detail::exportedDimRanges(model.graph());
  auto range = dimRanges->find(param);
  if (range == dimRanges->end())
    return;
  const DimRange &r = range->second;
  if ((r.low && value < *r.low) || (r.high && value > *r.high)) {
    bool byDim = options.dims.count(param) > 0;
    fail(what + " dimension " + Twine(index) + " ('" + param +
         "') is bound to " + Twine(value) +
         (byDim ? " by --dim" : " by --micro-batch") +
         ", outside the range the export allows it: [" +
         (r.low ? std::to_string(*r.low) : std::string("-inf")) + ", " +
         (r.high ? std::to_string(*r.high) : std::string("inf")) +
         "] (torch.export's range_constraints: export with a Dim whose "
         "range holds it)");
  }
}

void Importer::bindInput(const onnx::ValueInfoProto &in, Kind kind,
                         ArrayRef<int64_t> declared, const BoundInput &value) {
  std::string what = "input '" + in.name() + "'";
  if (value.isFloat != (kind == Kind::F32))
    fail(what + " is given as " + (value.isFloat ? "floats" : "integers") +
         " but the model declares " +
         dataTypeName(in.type().tensor_type().elem_type()));
  // A one-element [1] value binds a declared scalar, as numpy would take it.
  bool scalarFromOne =
      declared.empty() && value.shape.size() == 1 && value.shape[0] == 1;
  bool ok = scalarFromOne || declared.size() == value.shape.size();
  for (size_t d = 0; ok && !scalarFromOne && d < declared.size(); ++d)
    ok = declared[d] < 0 || declared[d] == value.shape[d];
  if (!ok) {
    std::string want = "[";
    for (size_t d = 0; d < declared.size(); ++d)
      want += (d ? ", " : "") +
              (declared[d] < 0 ? "?" : std::to_string(declared[d]));
    fail(what + " is given with shape " + shapeStr(value.shape) +
         ", the model declares " + want + "]");
  }
  TensorData data;
  data.kind = kind;
  if (!scalarFromOne)
    data.shape.assign(value.shape.begin(), value.shape.end());
  for (double v : value.values) {
    if (kind == Kind::F32)
      data.floats.push_back(static_cast<float>(v));
    else
      data.ints.push_back(kind == Kind::I1 ? v != 0.0
                                           : static_cast<int64_t>(v));
  }
  Location loc = NameLoc::get(builder.getStringAttr(in.name()));
  statics[in.name()] = std::make_unique<StaticValue>(
      StaticValue{toAttr(&ctx, data), loc, Value()});
}

void Importer::finish() {
  current = nullptr;
  SmallVector<Value> results;
  for (const auto &out : model.graph().output())
    results.push_back(get(out.name()));
  builder.setInsertionPointToEnd(entry);
  builder.create<func::ReturnOp>(
      NameLoc::get(builder.getStringAttr(model.graph().name())), results);

  // A re-bound batch must reach every output declared with the fixed one.
  if (options.fixedBatch && options.microBatch)
    for (auto [out, value] : llvm::zip(model.graph().output(), results)) {
      if (!out.type().has_tensor_type() ||
          !out.type().tensor_type().has_shape() ||
          out.type().tensor_type().shape().dim_size() == 0)
        continue;
      const auto &d0 = out.type().tensor_type().shape().dim(0);
      auto shape = shapeOf(value);
      if (d0.has_dim_value() && d0.dim_value() == *options.fixedBatch &&
          (shape.empty() || shape[0] != *options.microBatch))
        fail("graph output '" + out.name() + "' is declared with the " +
             "exported batch " + Twine(*options.fixedBatch) +
             " but comes out as " + typeStr(value.getType()));
    }
  // A declared output element type must be the one computed.
  for (auto [out, value] : llvm::zip(model.graph().output(), results)) {
    if (!out.type().has_tensor_type() ||
        out.type().tensor_type().elem_type() == onnx::TensorProto::UNDEFINED)
      continue;
    int32_t declared = out.type().tensor_type().elem_type();
    std::optional<Kind> kind = kindOf(declared);
    if (!kind || elementType(&ctx, *kind) != elemOf(value))
      fail("graph output '" + out.name() + "' is declared " +
           dataTypeName(declared) + " but is computed as " +
           typeStr(value.getType()));
  }
  func.setType(FunctionType::get(&ctx, entry->getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  // Every argument's and result's attributes set at once (one at a time
  // rebuilds the whole list each time).
  SmallVector<NamedAttrList> args(func.getNumArguments());
  for (auto [i, list] : llvm::enumerate(args))
    if (DictionaryAttr d = func.getArgAttrDict(i))
      list.append(d.getValue());
  for (auto &[idx, attr] : argAttrs)
    args[idx].set(attr.getName(), attr.getValue());
  if (rngKeyArg)
    args[*rngKeyArg].set(attrs::kRngKey, builder.getUnitAttr());
  SmallVector<DictionaryAttr> argDicts;
  for (NamedAttrList &list : args)
    argDicts.push_back(list.getDictionary(&ctx));
  func.setAllArgAttrs(argDicts);
  SmallVector<Attribute> resultDicts;
  for (const auto &out : model.graph().output())
    resultDicts.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        attrs::kOutput, builder.getStringAttr(out.name()))));
  func.setAllResultAttrs(resultDicts);
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

Value Importer::materialize(StaticValue &s) {
  if (s.materialized)
    return s.materialized;
  // Constants go to the top of the function so that every later use sees them.
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  s.materialized = builder.create<ConstantOp>(s.loc, s.attr).getResult();
  return s.materialized;
}

Value Importer::get(StringRef name) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto st = statics.find(name);
  if (st != statics.end())
    return materialize(*st->second);
  if (current)
    nodeFail("value '" + name + "' is never defined");
  fail("value '" + name + "' is never defined");
}

bool Importer::hasInput(int idx) const {
  return idx < current->proto->input_size() &&
         !current->proto->input(idx).empty();
}

Value Importer::input(int idx) {
  if (!hasInput(idx))
    nodeFail("missing input " + Twine(idx));
  return get(current->proto->input(idx));
}

Value Importer::getOptional(int idx) {
  if (!hasInput(idx))
    return Value();
  return get(current->proto->input(idx));
}

std::optional<DenseElementsAttr> Importer::constantInput(int idx) {
  if (!hasInput(idx))
    return std::nullopt;
  const std::string &name = current->proto->input(idx);
  auto st = statics.find(name);
  if (st != statics.end())
    return st->second->attr;
  auto it = values.find(name);
  if (it != values.end()) {
    DenseElementsAttr attr;
    if (matchPattern(it->second, m_Constant(&attr)))
      return attr;
  }
  // A float initializer used both statically and as a tensor is a parameter
  // argument; its values are still known.
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    if (init.name() != name)
      continue;
    TensorData data = decodeTensor(init, "initializer '" + name + "'", path);
    return toAttr(&ctx, data);
  }
  return std::nullopt;
}

SmallVector<int64_t> Importer::constantInts(int idx, const Twine &what) {
  if (!hasInput(idx))
    nodeFail("missing " + what + " (input " + Twine(idx) + ")");
  std::optional<DenseElementsAttr> attr = constantInput(idx);
  if (!attr)
    foldFail(what + " '" + current->proto->input(idx) +
             "' is not a constant once dimensions are bound");
  if (!attr->getElementType().isSignlessInteger() ||
      attr->getElementType().isInteger(1))
    nodeFail(what + " '" + current->proto->input(idx) +
             "' must be an integer tensor, got " + typeStr(attr->getType()));
  SmallVector<int64_t> out;
  for (APInt v : attr->getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

double Importer::constantScalar(int idx, const Twine &what) {
  std::optional<DenseElementsAttr> attr = constantInput(idx);
  if (!attr)
    foldFail(what + " '" + current->proto->input(idx) +
             "' is not a constant once dimensions are bound");
  if (attr->getNumElements() != 1)
    nodeFail(what + " '" + current->proto->input(idx) + "' must be a scalar");
  Type et = attr->getElementType();
  if (isa<FloatType>(et))
    return widenFloat(static_cast<float>(
        (*attr->getValues<APFloat>().begin()).convertToDouble()));
  APInt v = *attr->getValues<APInt>().begin();
  return et.isInteger(1) ? double(v.getBoolValue()) : double(v.getSExtValue());
}

void Importer::define(int outputIdx, Value v) {
  if (outputIdx < current->proto->output_size() &&
      !current->proto->output(outputIdx).empty())
    values[current->proto->output(outputIdx)] = v;
}

void Importer::defineConstant(int outputIdx, DenseElementsAttr attr) {
  if (outputIdx < current->proto->output_size() &&
      !current->proto->output(outputIdx).empty())
    statics[current->proto->output(outputIdx)] =
        std::make_unique<StaticValue>(StaticValue{attr, currentLoc, Value()});
}

bool Importer::outputUsed(int idx) const {
  return idx < current->proto->output_size() &&
         !current->proto->output(idx).empty() &&
         used.contains(current->proto->output(idx));
}

Value Importer::scalarF32(double v) {
  auto type = RankedTensorType::get({}, builder.getF32Type());
  return builder
      .create<ConstantOp>(currentLoc,
                          DenseElementsAttr::get(type, static_cast<float>(v)))
      .getResult();
}

Value Importer::scalarLike(Value like, double v) {
  Type et = elemOf(like);
  auto type = RankedTensorType::get({}, et);
  DenseElementsAttr attr;
  if (isa<FloatType>(et))
    attr = DenseElementsAttr::get(type, static_cast<float>(v));
  else if (et.isInteger(1))
    attr = DenseElementsAttr::get(type, v != 0.0);
  else
    attr = DenseElementsAttr::get(type, APInt(et.getIntOrFloatBitWidth(),
                                              static_cast<int64_t>(v),
                                              /*isSigned=*/true));
  return builder.create<ConstantOp>(currentLoc, attr).getResult();
}

//===----------------------------------------------------------------------===//
// Current-node helpers
//===----------------------------------------------------------------------===//

void Importer::nodeFail(const Twine &msg) const {
  fail("node '" + current->name + "' (" + current->proto->op_type() +
       "): " + msg);
}

void Importer::foldFail(const Twine &msg) const {
  nodeFail("shape computation did not fold: " + msg);
}

const onnx::AttributeProto *Importer::attr(StringRef name) const {
  for (const auto &a : current->proto->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Importer::attrInt(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float Importer::attrFloat(StringRef name, float dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string Importer::attrString(StringRef name, StringRef dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>> Importer::attrInts(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

int64_t Importer::normAxis(int64_t axis, int64_t rank, StringRef what) const {
  if (axis < -rank || axis >= rank)
    nodeFail(what + " " + Twine(axis) + " is out of range for rank " +
             Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//
// Types and shapes
//===----------------------------------------------------------------------===//

ArrayRef<int64_t> Importer::shapeOf(Value v) const {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type Importer::elemOf(Value v) const {
  return getElementTypeOrSelf(v.getType());
}

Value Importer::requireFloat(Value v, const Twine &what) const {
  if (!elemOf(v).isF32())
    nodeFail(what + " must be a float tensor, got " + typeStr(v.getType()));
  return v;
}

Value Importer::requireInt(Value v, const Twine &what) const {
  Type et = elemOf(v);
  if (!et.isInteger(64) && !et.isInteger(32))
    nodeFail(what + " must be an int64 or int32 tensor, got " +
             typeStr(v.getType()));
  return v;
}

RankedTensorType Importer::tensorType(ArrayRef<int64_t> shape,
                                      Type element) const {
  return RankedTensorType::get(shape, element);
}

SmallVector<int64_t> Importer::broadcastOrFail(ArrayRef<int64_t> a,
                                               ArrayRef<int64_t> b) const {
  auto shape = broadcastShapes(a, b);
  if (!shape)
    nodeFail("operands " + shapeStr(a) + " and " + shapeStr(b) +
             " do not broadcast");
  return *shape;
}

} // namespace detail
} // namespace otc
