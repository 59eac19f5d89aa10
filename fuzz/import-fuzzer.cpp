//===- import-fuzzer.cpp - libFuzzer target for the ONNX importer ---------===//
//
// Feeds each input, as a model file, to importOnnxModel (reading, the ONNX
// checker, the graph checks, building and verifying @forward). Built with
// -fsanitize=fuzzer,address by the OTC_FUZZ configuration
// (fuzz/CMakeLists.txt). A crash, a sanitizer report, a leak or a timeout is a
// bug; so is a failed import whose error is empty, spans several lines or
// reports an internal error (IR that does not verify): those abort.
//
// The model is written to a private directory that also holds a copy of the
// external-data file of the seed corpus (external.weights), so that mutated
// external-data locations, offsets and lengths reach the reader.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>

namespace {
/// The directory the model is written to, and the model's path there.
std::string workDir, modelPath;

/// Writes `size` bytes at `data` to `path`; aborts on failure.
void writeFile(const std::string &path, const void *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/otc-import-fuzzer.XXXXXX";
  if (!mkdtemp(templ.data())) {
    std::perror("mkdtemp");
    std::abort();
  }
  workDir = templ;
  modelPath = workDir + "/model.onnx";
  // 4x3 + 4 floats, the layout of the seed test/frontend/Inputs/external.onnx.
  std::string weights(64, '\0');
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] = static_cast<char>(i * 37);
  writeFile(workDir + "/external.weights", weights.data(), weights.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  writeFile(modelPath, data, size);
  // One context for many inputs (creating one per input would dominate the
  // run); renewed now and then so that uniqued attributes do not pile up.
  static std::unique_ptr<mlir::MLIRContext> context;
  static unsigned uses = 0;
  if (!context || ++uses % 512 == 0) {
    context = std::make_unique<mlir::MLIRContext>(
        mlir::MLIRContext::Threading::DISABLED);
    context->loadDialect<otc::OtcDialect, mlir::func::FuncDialect>();
  }
  otc::ImportOptions options;
  options.microBatch = 2;
  options.dims = {{"batch", 2}, {"seq", 4}, {"s0", 2}};
  std::string error;
  std::vector<otc::InitializerData> initializers;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      otc::importOnnxModel(*context, modelPath, options, error, &initializers);
  if (!module) {
    // The importer's own verifier failure starts so; a model name holding
    // those words elsewhere in a message is not one.
    bool bad = error.empty() || error.find('\n') != std::string::npos ||
               llvm::StringRef(error).starts_with("internal error:");
    if (bad) {
      std::fprintf(stderr, "import-fuzzer: bad error message: '%s'\n",
                   error.c_str());
      std::abort();
    }
  }
  return 0;
}
