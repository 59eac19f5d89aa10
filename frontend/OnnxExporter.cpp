//===- OnnxExporter.cpp - ONNX model with trained weights -----------------===//
//
// Implementation of exportOnnxWithWeights: parse the ModelProto, check every
// trained weight against the initializer of the same name (float32, same
// dims), store it as raw little-endian data (dropping typed or external data),
// optionally expose the loss's scores as "logits", and serialize.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxExporter.h"
#include "frontend/Importer.h"

#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"

#include <fstream>
#include <map>
#include <sstream>

namespace otc {
namespace {

/// Adds an Identity from the scores of the SoftmaxCrossEntropyLoss node to a
/// new graph output "logits", typed by ONNX shape inference (the checker
/// requires a shape; unknown dimensions stay symbolic).
bool exposeLogits(onnx::ModelProto &model, std::string &error) {
  onnx::GraphProto &graph = *model.mutable_graph();
  const onnx::NodeProto *loss = nullptr;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "SoftmaxCrossEntropyLoss") {
      if (loss) {
        error = "--expose-logits: the model has more than one SoftmaxCrossEntropyLoss";
        return false;
      }
      loss = &node;
    }
  if (!loss || loss->input_size() < 1) {
    error = "--expose-logits: the model has no SoftmaxCrossEntropyLoss node";
    return false;
  }
  for (const onnx::ValueInfoProto &out : graph.output())
    if (out.name() == "logits") {
      error = "--expose-logits: the model already has an output named 'logits'";
      return false;
    }
  std::string scores = loss->input(0);
  onnx::NodeProto *identity = graph.add_node();
  identity->set_op_type("Identity");
  identity->set_name("otc_export_logits");
  identity->add_input(scores);
  identity->add_output("logits");
  onnx::ModelProto inferred = model;
  try {
    onnx::shape_inference::InferShapes(inferred);
  } catch (const std::exception &) {
    // Fall back to a rank-2 [N, C] type below.
  }
  onnx::TypeProto type;
  bool found = false;
  for (const onnx::ValueInfoProto &info : inferred.graph().value_info())
    if (info.name() == scores && info.type().tensor_type().has_shape()) {
      type = info.type();
      found = true;
    }
  if (!found) {
    type.mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("logits_rows");
    type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("logits_classes");
  }
  onnx::ValueInfoProto *out = graph.add_output();
  out->set_name("logits");
  *out->mutable_type() = type;
  return true;
}

bool exportImpl(const ExportOptions &options,
                const std::vector<ExportWeight> &weights, int64_t &replaced,
                std::string &error) {
  std::ifstream in(options.modelPath, std::ios::binary);
  if (!in) {
    error = "cannot open " + options.modelPath;
    return false;
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) {
    error = options.modelPath + ": not a valid ONNX model (protobuf parse failed)";
    return false;
  }
  // The program trained the model as the importer read it: parameters the
  // exporter had merged are apart, and the copies of a split tie (a folded
  // W^T) follow their source. Do the same here, on the values as written.
  detail::splitMergedParams(model, options.modelPath);
  std::vector<std::vector<float>> original;
  original.reserve(model.graph().initializer_size());
  std::vector<NamedTensor> named;
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT ||
        init.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    detail::TensorData t = detail::decodeTensor(
        init, "initializer '" + init.name() + "'", options.modelPath);
    original.push_back(std::move(t.floats));
    named.push_back({init.name(),
                     std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                     &original.back()});
  }
  std::vector<InitializerTie> ties = findTies(named);

  std::map<std::string, const ExportWeight *> trained;
  for (const ExportWeight &w : weights)
    trained[w.name] = &w;
  // The weights not yet written, by name.
  std::map<std::string, const ExportWeight *> byName = trained;
  onnx::GraphProto &graph = *model.mutable_graph();
  replaced = 0;
  for (onnx::TensorProto &init : *graph.mutable_initializer()) {
    auto it = byName.find(init.name());
    if (it == byName.end())
      continue;
    const ExportWeight &w = *it->second;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (init.data_type() != onnx::TensorProto::FLOAT) {
      error = options.modelPath + ": initializer '" + init.name() +
              "' is not float32; otc-export writes float32 weights only";
      return false;
    }
    if (dims != w.shape) {
      error = "weight '" + w.name + "' has shape " + detail::shapeStr(w.shape) +
              " but the model's initializer has " + detail::shapeStr(dims);
      return false;
    }
    int64_t numel = 1;
    for (int64_t d : dims)
      numel *= d;
    init.clear_float_data();
    init.clear_external_data();
    init.clear_data_location();
    init.set_raw_data(std::string(reinterpret_cast<const char *>(w.data),
                                  static_cast<size_t>(numel) * sizeof(float)));
    byName.erase(it);
    ++replaced;
  }
  // Each tied copy from its trained source.
  std::map<std::string, onnx::TensorProto *> inits;
  for (onnx::TensorProto &init : *graph.mutable_initializer())
    inits[init.name()] = &init;
  for (const InitializerTie &t : ties) {
    auto it = trained.find(t.source);
    if (it == trained.end() || byName.count(t.source) || trained.count(t.copy))
      continue;
    const ExportWeight *src = it->second;
    size_t n = 1;
    for (int64_t d : src->shape)
      n *= static_cast<size_t>(d);
    std::vector<float> v =
        t.transposed ? transposed2d(src->data, src->shape[0], src->shape[1])
                     : std::vector<float>(src->data, src->data + n);
    onnx::TensorProto &copy = *inits.at(t.copy);
    copy.clear_float_data();
    copy.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()),
                                  v.size() * sizeof(float)));
    ++replaced;
  }
  if (!byName.empty()) {
    error = "weight '" + byName.begin()->first + "' is not an initializer of " +
            options.modelPath + " (weights of another model?)";
    return false;
  }
  for (const onnx::TensorProto &init : graph.initializer())
    if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      error = options.modelPath + ": initializer '" + init.name() +
              "' keeps external data, which otc-export does not copy";
      return false;
    }
  if (options.exposeLogits && !exposeLogits(model, error))
    return false;
  std::ofstream out(options.outputPath, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) {
    error = "cannot write " + options.outputPath;
    return false;
  }
  return true;
}

} // namespace

bool exportOnnxWithWeights(const ExportOptions &options,
                           const std::vector<ExportWeight> &weights,
                           int64_t &replaced, std::string &error) {
  try {
    return exportImpl(options, weights, replaced, error);
  } catch (const std::exception &e) {
    error = options.modelPath + ": " + e.what();
    return false;
  }
}

} // namespace otc
