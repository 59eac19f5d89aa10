//===- PlanJson.cpp - plan.json from a planned module ----------------------===//
//
// Reports what the planned buffer-level module implies before anything runs:
// parameter count, the bytes of every class of state, the activation peak and
// arena size of the chosen schedule with its lower bound (the most bytes live
// at once), and the FLOPs of one optimizer step. Every FLOP count comes from
// the cost interface (passes/Cost.h) on the tensor-level functions, handed
// over in PlanInfo. Under mixed precision the BF16 working copies
// ("param_bf16:" slots) are `params` and the FP32 "param:" slots
// `master_params`; `state_bytes_per_param` is the model of
// codegen/MemoryAccounting.h for the precision recipe. The constants filled
// once at load ("const:" slots) are `constants`, persistent bytes like the
// rest.
//
//===----------------------------------------------------------------------===//

#include "codegen/Codegen.h"
#include "codegen/MemoryAccounting.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace otc;

FailureOr<PlanSummary> otc::summarizePlan(ModuleOp module,
                                          const PlanInfo &info) {
  auto arena = module->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("buffers are not planned");
  PlanSummary s;
  int64_t other = 0, paramsF32 = 0, paramsBf16 = 0;
  llvm::StringSet<> seen;
  module.walk([&](otck::BufferOp b) {
    if (!b.getSlot() || !seen.insert(*b.getSlot()).second)
      return;
    StringRef kind = b.getSlot()->split(':').first;
    int64_t bytes = byteSize(b.getType());
    if (kind == "param")
      paramsF32 += bytes;
    else if (kind == "param_bf16")
      paramsBf16 += bytes;
    else if (kind == "grad") {
      s.grads += bytes;
      s.paramsCount += b.getType().getNumElements();
    } else if (kind == "adam_m" || kind == "adam_v")
      s.optimizer += bytes;
    else if (kind == "input")
      s.inputs += bytes;
    else if (kind == "const")
      s.constants += bytes;
    else
      other += bytes;
  });
  s.params = paramsBf16 ? paramsBf16 : paramsF32;
  s.masterParams = paramsBf16 ? paramsF32 : 0;
  int64_t persistent = s.params + s.masterParams + s.grads + s.optimizer +
                       s.inputs + s.constants + other;

  // Activation peak: the temporaries' extent; lower bound: the most bytes
  // live at one op (persistent state included).
  int64_t extent = 0, liveMax = 0;
  for (auto f : module.getOps<func::FuncOp>()) {
    llvm::DenseMap<Operation *, unsigned> pos;
    unsigned n = 0;
    for (Operation &op : f.getBody().front())
      pos[&op] = n++;
    std::vector<int64_t> delta(n + 1, 0);
    for (BufferInterval iv : temporaryLiveRanges(f)) {
      delta[iv.first] += iv.size;
      delta[iv.last + 1] -= iv.size;
      otck::BufferOp buffer = iv.buffer;
      extent = std::max<int64_t>(extent, *buffer.getOffset() + iv.size);
    }
    int64_t live = 0;
    for (unsigned i = 0; i < n; ++i) {
      live += delta[i];
      liveMax = std::max(liveMax, live);
    }
  }
  // Temporaries start after the persistent slots (aligned), so the extent
  // past that start is the activation peak.
  int64_t scratchStart = arena.getInt();
  module.walk([&](otck::BufferOp b) {
    if (!b.getSlot())
      scratchStart = std::min<int64_t>(scratchStart, *b.getOffset());
  });
  s.activationsPeak = std::max<int64_t>(0, extent - scratchStart);
  s.workspace = info.workspaceBytes;
  s.arena = arena.getInt();
  s.lowerBound = persistent + liveMax;
  s.totalPeak = s.arena + s.workspace;
  s.modelFlops = info.microStepFlops * info.gradAccum;
  s.recomputeFlops = info.recomputeFlops * info.gradAccum;
  s.optimizerFlops = info.optimizerFlops;
  return s;
}

LogicalResult otc::writePlanJson(const PlanSummary &s, const PlanInfo &info,
                                 raw_ostream &os) {
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("target", info.target);
    j.attribute("precision", info.precision);
    j.attribute("micro_batch", info.microBatch);
    j.attribute("grad_accum", info.gradAccum);
    j.attribute("fp32_grad_accum", info.fp32GradAccum);
    j.attribute("params_count", s.paramsCount);
    j.attribute("state_bytes_per_param",
                stateBytesPerParam(info.precision == "bf16", info.fp32GradAccum)
                    .total());
    j.attributeObject("memory_bytes", [&] {
      j.attribute("params", s.params);
      j.attribute("master_params", s.masterParams);
      j.attribute("grads", s.grads);
      j.attribute("optimizer", s.optimizer);
      j.attribute("inputs", s.inputs);
      j.attribute("constants", s.constants);
      j.attribute("activations_peak", s.activationsPeak);
      j.attribute("workspace", s.workspace);
      j.attribute("arena", s.arena);
      j.attribute("lower_bound", s.lowerBound);
      j.attribute("total_peak", s.totalPeak);
    });
    j.attributeObject("flops", [&] {
      j.attribute("model", s.modelFlops);
      j.attribute("recompute", s.recomputeFlops);
      j.attribute("optimizer", s.optimizerFlops);
      if (info.samplesPerStep > 0)
        j.attribute("per_sample", s.modelFlops / info.samplesPerStep);
      if (info.tokensPerStep > 0)
        j.attribute("per_token", s.modelFlops / info.tokensPerStep);
    });
    if (info.fusedOps)
      j.attributeObject("fused_ops", [&] {
        for (const auto &[kind, n] : *info.fusedOps)
          j.attribute(kind, n);
      });
    j.attributeObject("remat", [&] {
      j.attribute("policy", info.rematPolicy);
      j.attribute("blocks", info.rematBlocks);
      j.attributeArray("saved", [&] {
        for (const std::string &v : info.saved)
          j.value(v);
      });
      j.attributeArray("recomputed", [&] {
        for (const std::string &v : info.recomputed)
          j.value(v);
      });
    });
  });
  os << "\n";
  return success();
}

std::string otc::formatBytes(double b) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

void otc::printPlanReport(const PlanSummary &s, const PlanInfo &info,
                          raw_ostream &os) {
  auto row = [&](StringRef name, int64_t bytes) {
    os << llvm::format("  %-22s %14lld  %s\n", name.str().c_str(),
                       (long long)bytes, formatBytes(bytes).c_str());
  };
  os << "memory (bytes)\n";
  row("parameters", s.params);
  row("master parameters", s.masterParams);
  row("gradients", s.grads);
  row("optimizer state", s.optimizer);
  row("inputs", s.inputs);
  row("constants", s.constants);
  row("activation peak", s.activationsPeak);
  row("workspace", s.workspace);
  row("arena", s.arena);
  row("lower bound", s.lowerBound);
  row("total peak", s.totalPeak);
  os << "parameters trained: " << s.paramsCount << "\n"
     << "FLOPs per optimizer step: model " << s.modelFlops << ", recompute "
     << s.recomputeFlops << ", optimizer " << s.optimizerFlops << "\n";
  if (info.tokensPerStep > 0)
    os << "FLOPs per token: " << s.modelFlops / info.tokensPerStep << "\n";
  os << "fused ops: ";
  if (!info.fusedOps)
    os << "off (--no-fuse)";
  else if (info.fusedOps->empty())
    os << "none recognized";
  else
    llvm::interleaveComma(*info.fusedOps, os, [&](const auto &kind) {
      os << kind.second << " " << kind.first;
    });
  os << "\n";
  os << "recomputation: " << info.rematPolicy;
  if (!info.rematBlocks.empty())
    os << " (blocks " << info.rematBlocks << ")";
  os << ", " << info.saved.size() << " values kept, "
     << info.recomputed.size() << " recomputed\n";
}
