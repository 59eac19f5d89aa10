//===- VersionConvert.cpp - upgrading old opsets --------------------------===//
//
// Models at default-domain opsets older than the importer's kMinOpset (7 to
// 12) are upgraded to kMinOpset by the version converter that libonnx ships
// (onnx::version_conversion::ConvertVersion), which rewrites the nodes whose
// signature changed (axes attributes that became inputs, Dropout's is_test,
// broadcast flags...), after ONNX shape inference (some adapters need the
// rank of their input). The importer then reads the converted model as any
// other opset-13 model; initializers stored as external data keep their
// location.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"

#include <exception>
#include <map>
#include <string>

namespace otc {
namespace detail {

int64_t upgradeOpset(const std::string &path, onnx::ModelProto &model,
                     int64_t opset) {
  if (opset >= kMinOpset)
    return opset;
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
    onnx::shape_inference::InferShapes(model);
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
