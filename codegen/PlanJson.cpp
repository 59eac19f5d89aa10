//===- PlanJson.cpp - plan.json from a planned module ----------------------===//
//
// Reports what the planned buffer-level module implies before anything runs:
// parameter count, the bytes of every class of state, the activation peak and
// arena size of the chosen schedule with its lower bound (the most bytes live
// at once), and the FLOPs of one optimizer step.
//
//===----------------------------------------------------------------------===//

#include "codegen/Codegen.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace otc;

static int64_t bytesOf(MemRefType t) {
  return t.getNumElements() * storageBytes(t.getElementType());
}

/// FLOPs of one buffer-level op: 2·M·N·K per GEMM, one per output element
/// for every other kernel, none for copies.
static int64_t flopsOf(Operation *op) {
  if (auto g = dyn_cast<otck::GemmOp>(op)) {
    ArrayRef<int64_t> a = g.getLhs().getType().getShape();
    int64_t k = g.getTransposeLhs() ? a[a.size() - 2] : a.back();
    return 2 * g.getOut().getType().getNumElements() * k;
  }
  if (auto k = dyn_cast<otck::KernelOp>(op)) {
    int64_t n = 0;
    for (Value v : k.getOutputs())
      n += cast<MemRefType>(v.getType()).getNumElements();
    return n;
  }
  return 0;
}

LogicalResult otc::writePlanJson(ModuleOp module, const PlanInfo &info,
                                 raw_ostream &os) {
  auto arena = module->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("buffers are not planned");

  int64_t params = 0, paramsCount = 0, grads = 0, optimizer = 0, inputs = 0,
          other = 0;
  llvm::StringSet<> seen;
  module.walk([&](otck::BufferOp b) {
    if (!b.getSlot() || !seen.insert(*b.getSlot()).second)
      return;
    StringRef kind = b.getSlot()->split(':').first;
    int64_t bytes = bytesOf(b.getType());
    if (kind == "param")
      params += bytes;
    else if (kind == "grad") {
      grads += bytes;
      paramsCount += b.getType().getNumElements();
    } else if (kind == "adam_m" || kind == "adam_v")
      optimizer += bytes;
    else if (kind == "input")
      inputs += bytes;
    else
      other += bytes;
  });
  int64_t persistent = params + grads + optimizer + inputs + other;

  // Activation peak: the temporaries' extent; lower bound: the most bytes
  // live at one op (persistent state included).
  int64_t activationsPeak = 0, liveMax = 0, stepFlops = 0, optFlops = 0;
  for (auto f : module.getOps<func::FuncOp>()) {
    SmallVector<Operation *> ops;
    for (Operation &op : f.getBody().front())
      ops.push_back(&op);
    llvm::DenseMap<Operation *, unsigned> pos;
    for (auto [i, op] : llvm::enumerate(ops))
      pos[op] = i;
    std::vector<int64_t> live(ops.size() + 1, 0);
    for (auto b : f.getBody().getOps<otck::BufferOp>())
      if (b.getSlot())
        continue;
      else {
        unsigned first = ~0u, last = 0;
        for (Operation *u : b->getUsers()) {
          first = std::min(first, pos[u]);
          last = std::max(last, pos[u]);
        }
        if (first == ~0u)
          continue;
        for (unsigned p = first; p <= last; ++p)
          live[p] += bytesOf(b.getType());
        activationsPeak = std::max<int64_t>(
            activationsPeak, *b.getOffset() + bytesOf(b.getType()));
      }
    for (int64_t l : live)
      liveMax = std::max(liveMax, l);
    int64_t flops = 0;
    for (Operation *op : ops)
      flops += flopsOf(op);
    if (f.getSymName() == "micro_step")
      stepFlops = flops * info.gradAccum;
    else if (f.getSymName() == "optimizer_step")
      optFlops = flops;
  }
  // Temporaries start after the persistent slots (aligned), so the extent
  // past that start is the activation peak.
  int64_t scratchStart = arena.getInt();
  module.walk([&](otck::BufferOp b) {
    if (!b.getSlot())
      scratchStart = std::min<int64_t>(scratchStart, *b.getOffset());
  });
  activationsPeak = std::max<int64_t>(0, activationsPeak - scratchStart);

  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("target", info.target);
    j.attribute("precision", info.precision);
    j.attribute("micro_batch", info.microBatch);
    j.attribute("grad_accum", info.gradAccum);
    j.attribute("params_count", paramsCount);
    j.attributeObject("memory_bytes", [&] {
      j.attribute("params", params);
      j.attribute("master_params", 0);
      j.attribute("grads", grads);
      j.attribute("optimizer", optimizer);
      j.attribute("inputs", inputs);
      j.attribute("activations_peak", activationsPeak);
      j.attribute("workspace", info.workspaceBytes);
      j.attribute("arena", arena.getInt());
      j.attribute("lower_bound", persistent + liveMax);
      j.attribute("total_peak", arena.getInt() + info.workspaceBytes);
    });
    j.attributeObject("flops", [&] {
      j.attribute("model", stepFlops);
      j.attribute("recompute", 0);
      j.attribute("optimizer", optFlops);
      if (info.samplesPerStep > 0)
        j.attribute("per_sample", stepFlops / info.samplesPerStep);
    });
    j.attributeObject("remat", [&] {
      j.attribute("policy", "none");
      j.attributeArray("saved", [&] {
        for (const std::string &s : info.saved)
          j.value(s);
      });
      j.attributeArray("recomputed", [] {});
    });
  });
  os << "\n";
  return success();
}
