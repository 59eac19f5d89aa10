//===- otc-export.cpp - ONNX model with trained weights -------------------===//
//
//   otc-export MODEL.onnx --weights DIR/model.safetensors -o OUT.onnx
//              [--expose-logits]
//
// Writes a copy of MODEL (the model a train program was compiled from) whose
// initializers hold the trained weights of a checkpoint (float32 tensors by
// initializer name; a checkpoint directory may be given instead of the file).
// Initializers without a trained weight (frozen ones, buffers) keep their
// data. The result runs in otc-run or onnxruntime. --expose-logits also
// outputs the scores that the SoftmaxCrossEntropyLoss reads, as "logits".
// Errors are one line `otc-export: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxExporter.h"
#include "otcrt/safetensors.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory toolCategory("otc-export options");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::opt<std::string>
    weightsPath("weights",
                cl::desc("Trained weights (model.safetensors or its directory)"),
                cl::value_desc("PATH"), cl::Required, cl::cat(toolCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Output ONNX file"),
                                       cl::value_desc("OUT.onnx"), cl::Required, cl::cat(toolCategory));
static cl::opt<bool> exposeLogits(
    "expose-logits",
    cl::desc("Also output the loss's scores as a graph output 'logits'"), cl::cat(toolCategory));

/// Prints `otc-export: error: <message>` and returns exit status 1.
static int fail(const Twine &message) {
  errs() << "otc-export: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "otc-export: ONNX model with trained weights\n");
  std::string weights = weightsPath;
  if (sys::fs::is_directory(weights))
    weights += "/model.safetensors";
  otcrt::TensorFile file;
  otcrt::Status s = otcrt::readSafetensors(weights, file);
  if (!s)
    return fail(s.message());
  bool checked = false;
  if (s = otcrt::verifyChecksums(file, weights, checked); !s)
    return fail(s.message());
  auto format = file.metadata.find("format");
  if (!checked && format != file.metadata.end() &&
      format->second == "otc-weights")
    errs() << "otc-export: warning: " << weights
           << " has no checksums (saved before they were stored); exporting "
              "it unverified\n";
  std::vector<otc::ExportWeight> list;
  for (const otcrt::Tensor &t : file.tensors) {
    if (t.dtype != otcrt::StDType::F32)
      return fail(weights + ": tensor '" + t.name + "' is " +
                  otcrt::dtypeName(t.dtype) + ", expected F32");
    list.push_back({t.name, t.shape, reinterpret_cast<const float *>(t.data.data())});
  }
  otc::ExportOptions options;
  options.modelPath = modelPath;
  options.outputPath = outputPath;
  options.exposeLogits = exposeLogits;
  int64_t replaced = 0;
  std::string error;
  if (!otc::exportOnnxWithWeights(options, list, replaced, error))
    return fail(error);
  outs() << "otc-export: wrote " << outputPath << " (" << replaced
         << " initializers from " << weights << ")\n";
  return 0;
}
