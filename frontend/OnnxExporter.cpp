//===- OnnxExporter.cpp - ONNX model with trained weights -----------------===//
//
// Implementation of exportOnnxWithWeights: parse the ModelProto, check every
// trained weight against the initializer of the same name (float32, same
// dims), store it as raw little-endian data (dropping typed or external data),
// optionally expose the loss's scores as "logits", and serialize. A model
// whose weights were external data (the dynamo exporter's default, and any
// model over protobuf's 2 GB) is written the same way: the graph in OUT, every
// initializer of 1 KiB or more in OUT.data beside it.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxExporter.h"
#include "frontend/Importer.h"

#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include "llvm/ADT/ArrayRef.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

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

/// The float32 values an initializer is written with instead of its own (a
/// trained weight; a tied copy made from one), made when it is written.
using Replacements = std::map<std::string, std::function<std::vector<float>()>>;

/// Sets `init`'s data to `values`, raw and in the model.
void setRawData(onnx::TensorProto &init, llvm::ArrayRef<float> values) {
  init.clear_float_data();
  init.clear_external_data();
  init.clear_data_location();
  init.set_raw_data(std::string(reinterpret_cast<const char *>(values.data()),
                                values.size() * sizeof(float)));
}

/// Moves every initializer of 1 KiB or more (and every one the source kept
/// as external data) into OUT.data beside OUT, one after another at 64-byte
/// aligned offsets, the way onnx.save_model(..., save_as_external_data=True)
/// lays them out; the graph keeps each one's location, offset and length.
/// A replaced initializer is written from its new values, the others from
/// the source's bytes, one at a time.
bool writeExternalData(onnx::ModelProto &model, const ExportOptions &options,
                       const Replacements &replacements, std::string &error) {
  std::string dataPath = options.outputPath + ".data";
  std::string location = dataPath.substr(dataPath.find_last_of('/') + 1);
  std::ofstream data(dataPath, std::ios::binary | std::ios::trunc);
  if (!data) {
    error = "cannot write " + dataPath + ": " + std::strerror(errno);
    return false;
  }
  uint64_t offset = 0;
  for (onnx::TensorProto &init : *model.mutable_graph()->mutable_initializer()) {
    std::string bytes;
    std::vector<float> values;
    llvm::StringRef written;
    auto r = replacements.find(init.name());
    if (r != replacements.end())
      values = r->second();
    if (r != replacements.end() &&
        init.data_location() != onnx::TensorProto::EXTERNAL &&
        values.size() * sizeof(float) < 1024) {
      setRawData(init, values);
      continue;
    }
    if (r != replacements.end()) {
      written = llvm::StringRef(reinterpret_cast<const char *>(values.data()),
                                values.size() * sizeof(float));
      init.clear_float_data();
    } else if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      bytes = detail::externalBytes(init, "initializer '" + init.name() + "'",
                                    options.modelPath);
      written = bytes;
    } else if (init.has_raw_data() && init.raw_data().size() >= 1024) {
      bytes = std::move(*init.mutable_raw_data());
      written = bytes;
    } else {
      continue;
    }
    uint64_t padded = (offset + 63) / 64 * 64;
    if (padded > offset)
      data << std::string(padded - offset, '\0');
    offset = padded;
    data.write(written.data(), static_cast<std::streamsize>(written.size()));
    init.clear_raw_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] :
         {std::pair<std::string, std::string>{"location", location},
          {"offset", std::to_string(offset)},
          {"length", std::to_string(written.size())}}) {
      onnx::StringStringEntryProto *e = init.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    offset += written.size();
  }
  if (!data.flush()) {
    error = "cannot write " + dataPath + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool exportImpl(const ExportOptions &options,
                const std::vector<ExportWeight> &weights, int64_t &replaced,
                std::string &error) {
  onnx::ModelProto model;
  // Mapped, not copied: an inline model of a few hundred megabytes is
  // held once, as parsed.
  try {
    detail::loadModel(options.modelPath, model);
  } catch (const detail::ImportError &e) {
    error = e.what();
    return false;
  }
  // The program trained the model as the importer read it: parameters the
  // exporter had merged are apart, and the copies of a split tie (a folded
  // W^T) follow their source. Do the same here, on the values as written.
  detail::splitMergedParams(model, options.modelPath);
  // A large tensor of external data is read for its tie key and let go
  // (read again to compare it with another of the same key, and to write
  // it): one at a time in memory.
  std::vector<std::vector<float>> original;
  original.reserve(model.graph().initializer_size());
  std::vector<NamedTensor> named;
  bool external = false;
  for (const onnx::TensorProto &init : model.graph().initializer()) {
    external |= init.data_location() == onnx::TensorProto::EXTERNAL;
    if (init.data_type() != onnx::TensorProto::FLOAT)
      continue;
    const std::string what = "initializer '" + init.name() + "'";
    NamedTensor n{init.name(),
                  std::vector<int64_t>(init.dims().begin(), init.dims().end())};
    if (std::optional<detail::StreamedKey> key =
            detail::keyWithoutValues(init, what, options.modelPath)) {
      n.key = key->key;
      n.load = [&init, &options, what] {
        return detail::decodeTensor(init, what, options.modelPath).floats;
      };
    } else {
      original.push_back(
          detail::decodeTensor(init, what, options.modelPath).floats);
      n.values = &original.back();
    }
    named.push_back(std::move(n));
  }
  std::vector<InitializerTie> ties = findTies(named);
  std::vector<std::vector<float>>().swap(original);

  std::map<std::string, const ExportWeight *> trained;
  for (const ExportWeight &w : weights)
    trained[w.name] = &w;
  // The weights not yet written, by name.
  std::map<std::string, const ExportWeight *> byName = trained;
  onnx::GraphProto &graph = *model.mutable_graph();
  Replacements replacements;
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
    replacements[init.name()] = [&w] { return w.values(); };
    byName.erase(it);
    ++replaced;
  }
  // Each tied copy from its trained source.
  for (const InitializerTie &t : ties) {
    auto it = trained.find(t.source);
    if (it == trained.end() || byName.count(t.source) || trained.count(t.copy))
      continue;
    const ExportWeight *src = it->second;
    replacements[t.copy] = [src, transposed = t.transposed] {
      std::vector<float> v = src->values();
      return transposed ? transposed2d(v.data(), src->shape[0], src->shape[1])
                        : v;
    };
    ++replaced;
  }
  if (!byName.empty()) {
    error = "weight '" + byName.begin()->first + "' is not an initializer of " +
            options.modelPath + " (weights of another model?)";
    return false;
  }
  if (options.exposeLogits && !exposeLogits(model, error))
    return false;
  if (external) {
    if (!writeExternalData(model, options, replacements, error))
      return false;
  } else {
    for (onnx::TensorProto &init : *graph.mutable_initializer())
      if (auto r = replacements.find(init.name()); r != replacements.end())
        setRawData(init, r->second());
  }
  detail::forgetCanonicalScopes(*model.mutable_graph());
  std::ofstream out(options.outputPath, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out)) {
    error = "cannot write " + options.outputPath + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace

std::vector<float> ExportWeight::values() const {
  if (data) {
    size_t n = 1;
    for (int64_t d : shape)
      n *= static_cast<size_t>(d);
    return std::vector<float>(data, data + n);
  }
  std::vector<float> out;
  std::string error;
  if (load && !load(out, error))
    throw WeightReadError(error);
  return out;
}

bool exportOnnxWithWeights(const ExportOptions &options,
                           const std::vector<ExportWeight> &weights,
                           int64_t &replaced, std::string &error) {
  try {
    return exportImpl(options, weights, replaced, error);
  } catch (const WeightReadError &e) {
    error = e.what();
    return false;
  } catch (const std::exception &e) {
    error = options.modelPath + ": " + e.what();
    return false;
  }
}

} // namespace otc
