//===- otc-plan.cpp - --remat=auto's search on a module --------------------===//
//
//   otc-plan [IN.mlir] --memory-budget=SIZE
// reads a differentiated module that carries the compile's configuration
// (#otc.config: otc-compile --compile-to=differentiate writes one, otc-opt
// --otc-configure sets one), chooses the recomputation of every block as
// otc-compile --remat=auto does without a device to cost it (the least
// recompute FLOPs whose planned total peak fits: planner/RematSearch.h),
// applies it with otc-remat and prints the module. The search runs the rest
// of the pipeline per candidate, which no pass does; tests of the choice
// start here.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "passes/Passes.h"
#include "passes/Remat.h"
#include "planner/RematSearch.h"
#include "targets/Targets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static llvm::cl::opt<std::string> input(llvm::cl::Positional,
                                        llvm::cl::desc("<input .mlir>"),
                                        llvm::cl::init("-"));
static llvm::cl::opt<std::string>
    memoryBudget("memory-budget",
                 llvm::cl::desc("The most bytes the planned total peak may "
                                "take (e.g. 12GiB, 500MB, 1048576)"));

/// The module with `budget`'s choice applied; failure after an error.
static LogicalResult plan(ModuleOp module) {
  if (!otc::requireTrainStep(module))
    return failure();
  if (memoryBudget.empty())
    return module.emitError("--remat=auto needs a memory budget");
  std::optional<int64_t> budget = otc::parseByteSize(memoryBudget);
  if (!budget)
    return module.emitError("cannot read memory budget '")
           << memoryBudget << "' (e.g. 12GiB, 500MB, 1048576)";
  // The candidates are planned through the back end, which reads the
  // compile's configuration (precision, grad-accum, target...).
  if (failed(otc::requireConfig(module, "otc-plan")))
    return failure();
  FailureOr<std::vector<otc::RematCandidate>> frontier =
      otc::rematFrontier(module);
  if (failed(frontier))
    return failure();
  FailureOr<otc::AutoRematResult> r =
      otc::solveAutoRemat(module, *budget, otc::BackEndOptions(), *frontier);
  if (failed(r))
    return failure();
  if (!r->choice)
    return module.emitError("no recomputation plan fits the memory budget of ")
           << *budget << " bytes; the smallest that fits is "
           << r->smallestPeak << " bytes";
  otc::RematOptions options;
  options.policy = "auto";
  options.blocks = otc::rematBlockString(*r->choice);
  PassManager pm(module.getContext());
  pm.addPass(otc::createRemat(options));
  return pm.run(module);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  otc::registerAllTargets();
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "otc-plan: --remat=auto's choice for a memory budget\n");
  MLIRContext context;
  context.loadDialect<otc::OtcDialect, otc::otck::OtckDialect,
                      func::FuncDialect, memref::MemRefDialect>();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "otc-plan: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module || failed(plan(*module)))
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n";
  return 0;
}
