//===- OnnxExporter.h - ONNX model with trained weights ---------*- C++ -*-===//
//
// The writer behind otc-export: copies an ONNX model and replaces the data
// of its float initializers with trained weights (float32 tensors by
// initializer name, as in a train program's model.safetensors). Nothing
// ONNX-typed crosses this header; the implementation is compiled with
// exceptions and catches protobuf/ONNX errors at its boundary.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_FRONTEND_ONNXEXPORTER_H
#define OTC_FRONTEND_ONNXEXPORTER_H

#include <cstdint>
#include <string>
#include <vector>

namespace otc {

/// One trained weight: a float32 tensor named after an ONNX initializer.
struct ExportWeight {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr; ///< numel(shape) values
};

/// What to write.
struct ExportOptions {
  std::string modelPath;  ///< the ONNX model the program was compiled from
  std::string outputPath; ///< the model to write
  /// Also output the scores input of the (single) SoftmaxCrossEntropyLoss
  /// node, through an Identity, as a graph output named "logits" (for
  /// sampling from a model exported with its loss).
  bool exposeLogits = false;
};

/// Writes options.outputPath. On failure returns false and sets \p error to
/// one line naming the file or initializer. \p replaced gets the number of
/// initializers whose data was replaced.
bool exportOnnxWithWeights(const ExportOptions &options,
                           const std::vector<ExportWeight> &weights,
                           int64_t &replaced, std::string &error);

} // namespace otc

#endif // OTC_FRONTEND_ONNXEXPORTER_H
