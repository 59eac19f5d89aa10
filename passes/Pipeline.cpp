//===- Pipeline.cpp - the otc pass pipeline, assembled once ----------------===//
//
// One table of the phases after import (name, pass, what failing means) and
// the functions that add them to a pass manager. Nothing else in otc
// assembles passes into a pipeline.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline.h"
#include "passes/Passes.h"

using namespace mlir;
using namespace otc;

namespace {
/// One phase: its --compile-to name and what the driver says on failure.
struct PhaseInfo {
  Phase phase;
  const char *name;
  const char *failure;
};
} // namespace

static const PhaseInfo kPhases[] = {
    {Phase::FoldShapes, "fold-shapes", "folding shape computations failed"},
    {Phase::Fuse, "fuse", "recognizing fused ops failed"},
    {Phase::Differentiate, "differentiate", "differentiation failed"},
    {Phase::Remat, "remat", "choosing recomputation failed"},
    {Phase::MixedPrecision, "mixed-precision", "setting the precision failed"},
    {Phase::FuseReductions, "fuse-reductions",
     "packing attention or turning sums and the loss into library calls "
     "failed"},
    {Phase::Schedule, "schedule", "scheduling failed"},
    {Phase::TrainingLoop, "training-loop", "building the training loop failed"},
    {Phase::Buffers, "buffers", "lowering to buffers failed"},
    {Phase::FuseEpilogues, "fuse-epilogues", "merging GEMM epilogues failed"},
    {Phase::FuseElementwise, "fuse-elementwise",
     "merging elementwise kernels failed"},
    {Phase::Plan, "plan", "buffer planning failed"},
};

static const PhaseInfo &infoOf(Phase phase) {
  const PhaseInfo &info = kPhases[static_cast<unsigned>(phase)];
  assert(info.phase == phase && "kPhases is in Phase order");
  return info;
}

StringRef otc::phaseName(Phase phase) { return infoOf(phase).name; }

StringRef otc::phaseFailure(Phase phase) { return infoOf(phase).failure; }

std::optional<Phase> otc::parsePhase(StringRef name) {
  for (const PhaseInfo &p : kPhases)
    if (name == p.name)
      return p.phase;
  return std::nullopt;
}

/// Adds the pass of one phase (none for a phase that is off).
static void addPhase(OpPassManager &pm, Phase phase,
                     const PipelineOptions &o) {
  const BackEndOptions &be = o.backEnd;
  switch (phase) {
  case Phase::FoldShapes:
    pm.addPass(createFoldShapes());
    return;
  case Phase::Fuse:
    if (o.fuse) {
      FusePatternsOptions f;
      f.remarks = o.fusionRemarks;
      pm.addPass(createFusePatterns(f));
    }
    if (o.sparsePrediction) {
      SparsePredictionOptions s;
      s.positions = o.sparsePrediction;
      pm.addPass(createSparsePrediction(s));
    }
    return;
  case Phase::Differentiate: {
    DifferentiateOptions d;
    d.lossName = o.lossName;
    d.freeze = o.freeze;
    pm.addPass(createDifferentiate(d));
    return;
  }
  case Phase::Remat: {
    RematOptions r;
    r.policy = o.rematPolicy;
    r.blocks = o.rematBlocks;
    pm.addPass(createRemat(r));
    return;
  }
  case Phase::MixedPrecision:
    pm.addPass(createMixedPrecision());
    return;
  case Phase::FuseReductions:
    if (be.packAttention)
      pm.addPass(createPackAttention());
    pm.addPass(createFuseReductions());
    if (be.fuseLossGrad)
      pm.addPass(createFuseLossGrad());
    if (be.fuseLossGrad && be.chunkedLoss) {
      ChunkLossOptions c;
      c.chunkRows = be.lossChunkRows;
      pm.addPass(be.priceLossChunk ? createChunkLoss(c, be.priceLossChunk)
                                   : createChunkLoss(c));
    }
    pm.addPass(createFp8Gemms(be.fp8Pays));
    return;
  case Phase::Schedule:
    pm.addPass(createSchedule());
    return;
  case Phase::TrainingLoop: {
    TrainingLoopOptions t;
    t.decode = be.generate;
    pm.addPass(createTrainingLoop(t));
    return;
  }
  case Phase::Buffers:
    pm.addPass(createLowerToBuffers());
    return;
  case Phase::FuseEpilogues:
    pm.addPass(createFuseEpilogues());
    if (be.fuseGemmSums)
      pm.addPass(createFuseGemmSums());
    return;
  case Phase::FuseElementwise:
    if (be.fuseElementwise)
      pm.addPass(createFuseElementwise());
    return;
  case Phase::Plan: {
    Fp8CopiesOptions c;
    c.stepWeights = be.fp8StepWeights;
    pm.addPass(createFp8Copies(c));
    if (be.groupParams)
      pm.addPass(createGroupParams());
    pm.addPass(createPlanBuffers());
    return;
  }
  }
}

void otc::addPhases(OpPassManager &pm, Phase first, Phase last,
                    const PipelineOptions &options) {
  for (unsigned p = static_cast<unsigned>(first);
       p <= static_cast<unsigned>(last); ++p)
    addPhase(pm, static_cast<Phase>(p), options);
}

void otc::addBackEnd(OpPassManager &pm, const BackEndOptions &options) {
  PipelineOptions o;
  o.backEnd = options;
  addPhases(pm, Phase::MixedPrecision, kLastPhase, o);
}
