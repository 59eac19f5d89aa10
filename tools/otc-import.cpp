//===- otc-import.cpp - print an ONNX model as otc IR ---------------------===//
//
// `otc-import MODEL.onnx [--dim NAME=V]... [--micro-batch N] [-o out.mlir]`
// imports an ONNX model with the frontend and prints the resulting module
// (`func.func @forward` in the otc dialect). The MLIR printing flags, e.g.
// `--mlir-print-debuginfo` to show the ONNX node names as locations, are
// accepted. Errors are one line on stderr, `otc-import: error: ...`, and
// exit status 1.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxImporter.h"
#include "ir/OtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace cl = llvm::cl;

static cl::OptionCategory toolCategory("otc-import options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("filename"),
                                       cl::init("-"), cl::cat(toolCategory));
static cl::list<std::string>
    dimBindings("dim", cl::desc("Bind a symbolic ONNX dimension (repeatable)"),
                cl::value_desc("NAME=VALUE"), cl::cat(toolCategory));
static cl::opt<int64_t> microBatch(
    "micro-batch",
    cl::desc("Bind the leading symbolic dimension of every graph input"),
    cl::value_desc("N"), cl::init(0), cl::cat(toolCategory));

/// Prints `otc-import: error: msg` and returns the failing exit status.
static int reportError(const llvm::Twine &msg) {
  llvm::errs() << "otc-import: error: " << msg << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv, "otc ONNX importer\n");

  otc::ImportOptions options;
  for (const std::string &binding : dimBindings)
    if (!options.bindDim(binding))
      return reportError("bad --dim '" + binding +
                         "': expected NAME=VALUE with VALUE > 0");
  if (microBatch.getNumOccurrences()) {
    if (microBatch <= 0)
      return reportError("--micro-batch must be positive");
    options.microBatch = microBatch;
  }

  mlir::MLIRContext context;
  context.loadDialect<otc::OtcDialect, mlir::func::FuncDialect>();
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      otc::importOnnxModel(context, inputFile, options, error);
  if (!module)
    return reportError(error);

  std::string ioError;
  auto output = mlir::openOutputFile(outputFile, &ioError);
  if (!output)
    return reportError(ioError);
  module->print(output->os(), mlir::OpPrintingFlags());
  output->os() << "\n";
  output->keep();
  return 0;
}
