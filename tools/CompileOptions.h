//===- CompileOptions.h - otc-compile's command line -----------*- C++ -*-===//
//
// The options of otc-compile: defined in CompileOptions.cpp (with their
// help texts and defaults), read by the driver, otc-compile.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_TOOLS_COMPILEOPTIONS_H
#define OTC_TOOLS_COMPILEOPTIONS_H

#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <string>

namespace otc::compile_options {
namespace cl = llvm::cl;

/// The phases --compile-to names: import, the pipeline's, emit.
const std::string &phaseList();

extern cl::OptionCategory cat;
extern cl::opt<std::string> modelPath;
extern cl::opt<std::string> outDir;
extern cl::opt<std::string> target;
extern cl::list<std::string> dims;
extern cl::opt<int64_t> microBatch;
extern cl::opt<int64_t> gradAccum;
extern cl::opt<int64_t> worldSize;
extern cl::opt<bool> shardOptimizer;
extern cl::opt<std::string> remat;
extern cl::opt<std::string> memoryBudget;
extern cl::alias memoryAlias;
extern cl::opt<std::string> precision;
extern cl::opt<std::string> fp8Gemms;
extern cl::opt<bool> fp32GradAccum;
extern cl::opt<std::string> lossName;
extern cl::opt<std::string> freeze;
extern cl::opt<std::string> trainRegex;
extern cl::opt<double> weightDecay;
extern cl::opt<bool> noFuse;
extern cl::opt<bool> noFuseElementwise;
extern cl::opt<bool> noFuseLossGrad;
extern cl::opt<bool> noGemmSums;
extern cl::opt<bool> noPackAttention;
extern cl::opt<bool> noChunkedLoss;
extern cl::opt<int64_t> lossChunkRows;
extern cl::opt<bool> noGroupParams;
extern cl::opt<bool> generate;
extern cl::opt<std::string> sparsePrediction;
extern cl::opt<bool> fusionRemarks;
extern cl::opt<bool> fit;
extern cl::opt<int64_t> globalBatchTokens;
extern cl::opt<bool> report;
extern cl::opt<std::string> device;
extern cl::opt<bool> planOnly;
extern cl::opt<bool> timing;
extern cl::opt<bool> progress;
extern cl::opt<std::string> compileTo;

} // namespace otc::compile_options

#endif // OTC_TOOLS_COMPILEOPTIONS_H
