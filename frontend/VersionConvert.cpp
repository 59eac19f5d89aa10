//===- VersionConvert.cpp - upgrading old opsets --------------------------===//
//
// Models at default-domain opsets older than the importer's kMinOpset (7 to
// 12) are upgraded to kMinOpset by the version converter that libonnx ships
// (onnx::version_conversion::ConvertVersion), which rewrites the nodes whose
// signature changed (axes attributes that became inputs, Dropout's is_test,
// broadcast flags...). Some adapters need the rank or the dimensions of
// their input, so the dimensions that --dim / --micro-batch bind are first
// written into the graph inputs and ONNX shape inference runs, told the rank
// of computed Reshapes. The importer then reads the converted model as any
// other opset-13 model; initializers stored as external data keep their
// location.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

#include <exception>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace otc {
namespace detail {

/// Runs ONNX shape inference on `model` (adding value_info), helped where
/// it stops: the output of a Reshape whose shape input is computed (an
/// exporter's Shape/Gather/Concat chain) gets the rank that the shape input's
/// length gives, with unknown dimensions, and inference runs again from there.
static void inferShapes(onnx::ModelProto &model) {
  const onnx::ShapeInferenceOptions options(/*check_type_val=*/false,
                                            /*strict_mode_val=*/0,
                                            /*data_prop_val=*/true);
  for (int round = 0; round < 8; ++round) {
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), options);
    onnx::GraphProto &graph = *model.mutable_graph();
    std::map<std::string, const onnx::TypeProto *> types;
    for (const auto *list :
         {&graph.input(), &graph.value_info(), &graph.output()})
      for (const onnx::ValueInfoProto &v : *list)
        types.emplace(v.name(), &v.type());
    std::map<std::string, std::vector<int64_t>> initDims;
    for (const onnx::TensorProto &t : graph.initializer())
      initDims[t.name()] =
          std::vector<int64_t>(t.dims().begin(), t.dims().end());
    auto hasShape = [&](const std::string &name) {
      auto it = types.find(name);
      return it != types.end() && it->second->has_tensor_type() &&
             it->second->tensor_type().has_shape();
    };
    std::vector<onnx::ValueInfoProto> added;
    for (const onnx::NodeProto &node : graph.node()) {
      if (node.op_type() != "Reshape" || node.input_size() < 2 ||
          node.output_size() < 1 || hasShape(node.output(0)))
        continue;
      auto data = types.find(node.input(0));
      if (data == types.end() || !data->second->has_tensor_type())
        continue;
      // The length of the shape input: from its inferred shape, or its dims
      // when it is an initializer (which inference reads itself).
      int64_t rank = -1;
      auto shape = types.find(node.input(1));
      if (shape != types.end() && hasShape(node.input(1))) {
        const auto &dims = shape->second->tensor_type().shape().dim();
        if (dims.size() == 1 && dims[0].has_dim_value())
          rank = dims[0].dim_value();
      } else if (auto it = initDims.find(node.input(1));
                 it != initDims.end() && it->second.size() == 1) {
        rank = it->second[0];
      }
      if (rank < 0)
        continue;
      onnx::ValueInfoProto v;
      v.set_name(node.output(0));
      auto *tt = v.mutable_type()->mutable_tensor_type();
      tt->set_elem_type(data->second->tensor_type().elem_type());
      for (int64_t d = 0; d < rank; ++d)
        tt->mutable_shape()->add_dim();
      added.push_back(std::move(v));
    }
    if (added.empty())
      return;
    for (onnx::ValueInfoProto &v : added)
      *graph.add_value_info() = std::move(v);
  }
}

/// Writes the dimensions that --dim and --micro-batch bind (to a positive
/// size) into the graph inputs, as addInputs would read them, so that shape
/// inference and the adapters see them: the Softmax-12 to 13 adapter writes
/// the input's dimensions into a Reshape.
static void bindDims(onnx::ModelProto &model, const ImportOptions &options) {
  for (onnx::ValueInfoProto &in : *model.mutable_graph()->mutable_input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape())
      continue;
    auto *dims = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < dims->dim_size(); ++i) {
      onnx::TensorShapeProto_Dimension &dim = *dims->mutable_dim(i);
      if (dim.has_dim_value()) {
        dim.set_dim_value(options.fixedDim(i, dim.dim_value()));
        continue;
      }
      std::optional<int64_t> value = options.boundDim(i, dim.dim_param());
      if (value && *value > 0)
        dim.set_dim_value(*value);
    }
  }
}

/// Fails naming the value when a node reads, or the graph outputs, a value
/// that nothing before it defines: the converter's graph form dereferences
/// such a value (and crashes) instead of reporting it.
static void checkDefined(const std::string &path,
                         const onnx::GraphProto &graph) {
  std::set<std::string> defined;
  for (const onnx::ValueInfoProto &in : graph.input())
    defined.insert(in.name());
  for (const onnx::TensorProto &t : graph.initializer())
    defined.insert(t.name());
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &in : node.input())
      if (!in.empty() && !defined.count(in))
        fail("'" + path + "': node '" + node.name() + "' (" + node.op_type() +
             ") reads '" + in + "', which no graph input, initializer or "
             "earlier node defines");
    for (const std::string &out : node.output())
      defined.insert(out);
  }
  for (const onnx::ValueInfoProto &out : graph.output())
    if (!defined.count(out.name()))
      fail("'" + path + "': graph output '" + out.name() +
           "' is not written by any node, graph input or initializer");
}

int64_t upgradeOpset(const std::string &path, onnx::ModelProto &model,
                     int64_t opset, const ImportOptions &options) {
  if (opset >= kMinOpset)
    return opset;
  checkDefined(path, model.graph());
  bindDims(model, options);
  // The converter's graph form keeps an initializer's dims but not its
  // external data: those initializers are put back as they were (adapters
  // add initializers, they never change one).
  std::map<std::string, onnx::TensorProto> external;
  for (const onnx::TensorProto &t : model.graph().initializer())
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
      external.emplace(t.name(), t);
  try {
    // Adapters such as Softmax-12 to 13 need the rank of their input: infer
    // the shapes first (without failing on what inference cannot do).
    inferShapes(model);
    onnx::ModelProto converted = onnx::version_conversion::ConvertVersion(
        model, static_cast<int>(kMinOpset));
    for (onnx::TensorProto &t :
         *converted.mutable_graph()->mutable_initializer()) {
      auto it = external.find(t.name());
      if (it != external.end())
        t = it->second;
    }
    model = std::move(converted);
  } catch (const std::exception &e) {
    fail("'" + path + "': the ONNX version converter cannot upgrade opset " +
         llvm::Twine(opset) + " to " + llvm::Twine(kMinOpset) + ": " +
         oneLine(e.what()));
  }
  return kMinOpset;
}

} // namespace detail
} // namespace otc
