//===- otc-opt.cpp - run otc passes on textual IR --------------------------===//
//
// The MLIR opt driver with the otc and otck dialects and every otc pass
// registered: `otc-opt --otc-differentiate file.mlir`. Used by the lit tests.
//
//===----------------------------------------------------------------------===//

#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Passes.h"
#include "targets/Targets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  otc::registerAllTargets();
  mlir::DialectRegistry registry;
  registry.insert<otc::OtcDialect, otc::otck::OtckDialect,
                  mlir::func::FuncDialect, mlir::memref::MemRefDialect>();
  otc::registerOtcPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "otc optimizer driver\n", registry));
}
