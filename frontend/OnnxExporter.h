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
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace otc {

/// A trained weight that could not be read (ExportWeight::load's line,
/// which names the weights' file, not the model).
struct WeightReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a match by value reads of a tensor before its values
/// (statedict::mayRelate): its first and last values, which a transpose or
/// a reshape keeps in place, and whether few of its values are distinct
/// (zeros, ones).
struct ValuePrint {
  float first = 0, last = 0;
  bool few = false;
};

/// The print of `n` values (StateDictReference.cpp).
ValuePrint valuePrint(const float *v, size_t n);

/// One trained weight: a float32 tensor named after an ONNX initializer.
struct ExportWeight {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr; ///< numel(shape) values, or null: `load`
  /// Reads the values where `data` is null (a trained weight of a large
  /// checkpoint, read when it is written); false with one line in its
  /// second argument when it cannot.
  std::function<bool(std::vector<float> &, std::string &)> load;
  /// Relative tolerance when compared by value (a reference saved in
  /// bfloat16 or float16 matches the float32 export only to its precision).
  float relTol = 0;
  /// Its print, where `data` is null (a reference read one tensor at a
  /// time); computed from `data` otherwise.
  std::optional<ValuePrint> print;

  /// Its values: a copy of `data`, or read by `load` (OnnxExporter.cpp;
  /// throws WeightReadError with load's line when that fails).
  std::vector<float> values() const;
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

/// What exportStateDict reads.
struct StateDictOptions {
  std::string modelPath; ///< the ONNX model the program was compiled from
  /// The model's original state dict (optional): names are checked against
  /// it and recovered by value where the graph has none, tied names and
  /// tensors the graph lacks come from it.
  const std::vector<ExportWeight> *reference = nullptr;
  /// A wrapper module's prefix (`model.` of README's `Logits` wrapper, whose
  /// `self.model` holds the Hugging Face model): taken off every name when
  /// every name has it, so that the state dict loads into the wrapped model;
  /// a reference saved from the wrapped model (names without it) is then
  /// matched with it put back. Empty: names as the graph gives them.
  std::string stripPrefix;
  /// When set, only the state-dict names it accepts (as the graph gives
  /// them, before stripPrefix) are written out: the others are never
  /// materialized (a peft adapter's few megabytes of a model of gigabytes).
  std::function<bool(const std::string &)> keep;
};

/// One tensor of the state dict.
struct StateDictTensor {
  std::string name;
  std::vector<int64_t> shape;
  /// Makes its values when asked (the trained ones, or the exported ones
  /// read again from the model's external data; transposed or shifted as
  /// the name needs), one tensor at a time as the file is written. Valid
  /// while the trained weights and the reference given to exportStateDict
  /// live; false with a one-line \p error when the model's data cannot be
  /// read again.
  std::function<bool(std::vector<float> &out, std::string &error)> values;
  std::string initializer; ///< where it came from ("" if from the reference)
  std::string how;         ///< how the name was recovered, one line
  /// Whether `values` reads the model's external data again (an untrained
  /// tensor whose exported values were not kept).
  bool readAgain = false;
};

/// The trained weights (by initializer name; untrained initializers keep
/// their exported values) under the state-dict names of the PyTorch module
/// the model was exported from (StateDictExport.cpp). `unresolved` gets one
/// line per trained initializer, or folded parameter, whose name or value
/// could not be recovered. Returns false with a one-line \p error on bad
/// input.
bool exportStateDict(const StateDictOptions &options,
                     const std::vector<ExportWeight> &trained,
                     std::vector<StateDictTensor> &out,
                     std::vector<std::string> &unresolved, std::string &error);

} // namespace otc

#endif // OTC_FRONTEND_ONNXEXPORTER_H
