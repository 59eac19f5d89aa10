//===- otc-translate.cpp - planned IR to a training program ---------------===//
//
// The MLIR translate driver with otc's emitter registered:
//   otc-translate --emit-program planned.mlir
// prints the training program (C++ for the cpu target, CUDA C++ for cuda,
// as the module's #otc.config says) of a module after otc-plan-buffers,
// exactly as otc-compile writes model.cpp / model.cu. Emitter tests start
// from a small .mlir file with it; `--model=PATH` sets the model file the
// program records (default: the input's name).
//
//===----------------------------------------------------------------------===//

#include "codegen/Codegen.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "targets/Targets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

static llvm::cl::opt<std::string>
    modelPath("model",
              llvm::cl::desc("The model file the program records (default: "
                             "the input file)"),
              llvm::cl::init(""));

int main(int argc, char **argv) {
  otc::registerAllTargets();
  mlir::TranslateFromMLIRRegistration emit(
      "emit-program",
      "the training program of a planned module (its #otc.config target)",
      [](mlir::ModuleOp module, llvm::raw_ostream &os) {
        otc::EmitOptions options;
        options.modelPath = modelPath;
        if (options.modelPath.empty())
          if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(module.getLoc()))
            options.modelPath = file.getFilename().str();
        return otc::emitProgram(module, options, os);
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<otc::OtcDialect, otc::otck::OtckDialect,
                        mlir::func::FuncDialect, mlir::memref::MemRefDialect>();
      });
  return mlir::failed(
             mlir::mlirTranslateMain(argc, argv, "otc translation driver\n"))
             ? 1
             : 0;
}
