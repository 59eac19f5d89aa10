//===- PlanJson.cpp - plan.json from a planned module
//----------------------===//
//
// Reports what the planned buffer-level module implies before anything runs:
// parameter count, the bytes of every class of state, the activation peak and
// arena size of the chosen schedule with its lower bound (the most bytes live
// at once), and the FLOPs of one optimizer step. Every FLOP count comes from
// the cost interface (passes/Cost.h) on the tensor-level functions, handed
// over in PlanInfo. Under mixed precision the BF16 working copies
// ("param_bf16:" slots) are `params` and the FP32 "param:" slots
// `master_params`; `state_bytes_per_param` is the model of
// perf/MemoryAccounting.h for the precision recipe (and, under ZeRO-1,
// `state_bytes_per_param_per_rank` what each rank keeps of it). The constants filled
// once at load ("const:" slots) are `constants`, persistent bytes like the
// rest. The memory outside the arena (`libraries`, `context`,
// passes/DeviceMemory.h) adds to `total_peak`. `time` is the prediction of
// perf/StepTime.h on the chosen device, with the step's throughput and
// MFU derived here, and what binds each kernel.
//
//===----------------------------------------------------------------------===//

#include "codegen/Launches.h"
#include "ir/Config.h"
#include "ir/Fp8.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"
#include "perf/MemoryAccounting.h"
#include "perf/Plan.h"
#include "perf/StepTime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace otc;

/// The attention calls that take a key padding; the GEMMs of `module`'s
/// functions, those that sum an operand, and those that run FP8: the one
/// fact of their `fp8` attribute (ir/Fp8.h), by trace name and shape (a
/// projection's rows stacked, as the emitter calls it).
static void collectCalls(ModuleOp module, PlanSummary &s) {
  if (auto p = module->getAttrOfType<DictionaryAttr>(attrs::kPredictionRows))
    s.prediction = {p.getAs<IntegerAttr>("positions").getInt(),
                    p.getAs<IntegerAttr>("of").getInt(),
                    p.getAs<IntegerAttr>("ops").getInt()};
  if (auto micro = module.lookupSymbol<func::FuncOp>("micro_step"))
    micro.walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp>(op) && op->hasAttr("key_padding"))
        ++s.keyPaddingAttentions;
    });
  module.walk([&](otck::GemmOp g) {
    ++s.gemms;
    if (g.getSums())
      ++s.gemmSums;
    std::optional<Fp8Operands> fp8 = gemmFp8(g);
    if (!fp8)
      return;
    ArrayRef<int64_t> a = g.getLhs().getType().getShape(),
                      c = g.getOut().getType().getShape();
    PlanSummary::Fp8Gemm e;
    e.name = gemmTraceName(g);
    e.formats = fp8AttrText(*fp8);
    e.m = numElements(c.drop_back(1));
    e.n = c.back();
    e.k = g.getTransposeLhs() ? a[a.size() - 2] : a.back();
    s.fp8Gemms.push_back(std::move(e));
  });
}

FailureOr<PlanSummary> otc::summarizePlan(ModuleOp module,
                                          const PlanInfo &info) {
  auto arena = module->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("buffers are not planned");
  FailureOr<ConfigAttr> config = requireConfig(module, "plan.json");
  if (failed(config))
    return failure();
  PlanSummary s;
  s.target = config->getTarget().str();
  s.precision = config->getPrecision().str();
  s.fp32GradAccum = config->getFp32GradAccum();
  s.microBatch = config->getMicroBatch();
  s.gradAccum = config->getGradAccum();
  s.shardRanks = config->getShardOptimizer() ? config->getWorldSize() : 1;
  int64_t other = 0, paramsF32 = 0, paramsBf16 = 0;
  // A group's bytes are its members' (otc-group-params).
  otck::forEachSlot(module, [&](StringRef kind, otck::BufferOp b) {
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
    else if (kind == "buffer") {
      s.buffers += bytes;
      s.bufferValues += b.getType().getNumElements();
    } else if (kind == "kv_cache")
      s.kvCache += bytes;
    else if (kind == "fp8_copy")
      s.fp8WeightCopies += bytes;
    else
      other += bytes;
  });
  s.params = paramsBf16 ? paramsBf16 : paramsF32;
  collectCalls(module, s);
  s.masterParams = paramsBf16 ? paramsF32 : 0;
  int64_t persistent = s.params + s.masterParams + s.grads + s.optimizer +
                       s.inputs + s.constants + s.buffers + s.kvCache +
                       s.fp8WeightCopies + other;

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
  s.outside = memoryOutsideArena(module);
  s.workspace = s.outside.gemmWorkspace;
  s.libraries = s.outside.libraries();
  s.context = s.outside.context;
  s.arena = arena.getInt();
  s.lowerBound = persistent + liveMax;
  s.totalPeak = s.arena + s.outside.total();
  s.modelFlops = info.microStepFlops * s.gradAccum;
  s.recomputeFlops = info.recomputeFlops * s.gradAccum;
  s.optimizerFlops = info.optimizerFlops;
  return s;
}

void otc::readPassRecords(ModuleOp module, llvm::StringRef remat,
                          PlanInfo &info) {
  if (auto fused = module->getAttrOfType<DictionaryAttr>(attrs::kFused)) {
    info.fusedOps.emplace();
    for (NamedAttribute a : fused)
      info.fusedOps->push_back(
          {a.getName().str(), cast<IntegerAttr>(a.getValue()).getInt()});
  }
  if (auto r = module->getAttrOfType<DictionaryAttr>(attrs::kRemat)) {
    info.rematPolicy = remat.str();
    if (auto b = r.getAs<StringAttr>("blocks"))
      info.rematBlocks = b.str();
    if (auto f = r.getAs<IntegerAttr>("recompute_flops"))
      info.recomputeFlops = f.getInt();
    for (auto [key, list] : {std::pair{"saved", &info.saved},
                             std::pair{"recomputed", &info.recomputed}})
      if (auto a = r.getAs<ArrayAttr>(key))
        for (Attribute e : a)
          list->push_back(cast<StringAttr>(e).str());
  }
}

namespace {

/// What a predicted step means for its user.
struct Throughput {
  double stepSeconds = 0, tokensPerSecond = 0, samplesPerSecond = 0;
  /// Model FLOPs per second over the device's peak for the precision.
  double mfu = 0, peak = 0;
  std::string peakName;
};

Throughput throughput(const StepTime &t, const PlanSummary &s,
                      const PlanInfo &info) {
  Throughput r;
  r.stepSeconds = t.step;
  bool bf16 = s.precision != "fp32";
  r.peak = t.device->peakFor(s.precision);
  r.peakName = (bf16 ? "BF16, " : "FP32, ") + t.device->peakSource.str();
  if (t.step <= 0)
    return r;
  // Every rank's tokens (info's are one rank's).
  r.tokensPerSecond = double(info.tokensPerStep) * t.worldSize / t.step;
  r.samplesPerSecond = double(info.samplesPerStep) * t.worldSize / t.step;
  r.mfu = s.modelFlops / t.step / r.peak;
  return r;
}

/// Writes `key`: `v` with `digits` decimals (llvm::json would print 17
/// significant digits), so plan.json stays readable.
void attributeFixed(llvm::json::OStream &j, llvm::StringRef key, double v,
                    int digits) {
  j.attributeBegin(key);
  j.rawValue(llvm::formatv("{0}", llvm::format("%.*f", digits, v)).str());
  j.attributeEnd();
}

void writeTimeJson(llvm::json::OStream &j, const StepTime &t,
                   const PlanSummary &s, const PlanInfo &info) {
  Throughput r = throughput(t, s, info);
  auto ms = [&](llvm::StringRef key, double seconds) {
    attributeFixed(j, key, seconds * 1e3, 4);
  };
  j.attributeObject("time", [&] {
    j.attribute("device", t.device->name);
    j.attribute("device_description", t.device->description);
    j.attribute("cuda_graphs", t.device->cudaGraphs);
    attributeFixed(j, "launch_us", t.launchSeconds * 1e6, 2);
    ms("zero_grads_ms", t.zeroGrads);
    ms("micro_step_ms", t.microStep);
    ms("optimizer_step_ms", t.optimizerStep);
    ms("step_ms", t.step);
    if (t.worldSize > 1)
      j.attributeObject("data_parallel", [&] {
        j.attribute("world_size", t.worldSize);
        j.attribute("link", t.device->link);
        attributeFixed(j, "bus_bandwidth_gb_s",
                       t.device->allReduceBusBandwidth / 1e9, 1);
        attributeFixed(j, "gradient_bytes", t.gradientBytes, 0);
        if (t.shardOptimizer) {
          j.attribute("shard_optimizer", true);
          attributeFixed(j, "gather_bytes", t.gatherBytes, 0);
          ms("reduce_scatter_ms", t.reduceScatter);
          ms("all_gather_ms", t.allGather);
        } else {
          ms("all_reduce_ms", t.allReduce);
        }
        if (!t.bucketBytes.empty()) {
          j.attribute("overlapped", true);
          j.attributeArray("bucket_bytes", [&] {
            for (double b : t.bucketBytes)
              j.value(static_cast<int64_t>(b));
          });
        }
        ms("exposed_ms", t.exposed);
        if (info.tokensPerStep > 0)
          attributeFixed(j, "tokens_per_s_per_rank",
                         r.tokensPerSecond / t.worldSize, 0);
      });
    if (info.tokensPerStep > 0)
      attributeFixed(j, "tokens_per_s", r.tokensPerSecond, 0);
    attributeFixed(j, "samples_per_s", r.samplesPerSecond, 1);
    attributeFixed(j, "mfu", r.mfu, 6);
    attributeFixed(j, "mfu_peak_tflops", r.peak / 1e12, 3);
    j.attribute("mfu_peak", r.peakName);
    j.attribute("launches_per_step", t.launchesPerStep);
    j.attributeObject("share", [&] {
      for (const auto &[kind, seconds] : t.byKind)
        attributeFixed(j, kind, t.step > 0 ? seconds / t.step : 0, 4);
    });
    // The step's time by the limit that set it.
    j.attributeObject("limit_share", [&] {
      for (unsigned i = 0; i < kNumLimits; ++i)
        attributeFixed(j, limitName(static_cast<Limit>(i)),
                       t.step > 0 ? t.byLimit.seconds[i] / t.step : 0, 4);
    });
    j.attributeArray("kernels", [&] {
      for (const LaunchTotal &k : t.byName)
        j.object([&] {
          j.attribute("function", k.function);
          j.attribute("name", k.name);
          j.attribute("kind", k.kind);
          j.attribute("traced", k.traced);
          j.attribute("calls", k.calls);
          ms("ms", k.seconds);
          attributeFixed(j, "flops", k.flops, 0);
          attributeFixed(j, "bytes", k.bytes, 0);
          j.attribute("limit", limitName(k.cost.binding()));
          if (!k.kernels.empty())
            j.attributeArray("launches", [&] {
              for (const auto &[l, c] : k.kernels)
                j.object([&] {
                  j.attribute("what", l.what);
                  j.attribute("blocks", l.blocks);
                  j.attribute("threads", l.threads);
                  j.attribute("waves", c.waves);
                  j.attribute("steps", l.steps);
                  j.attribute("cached_steps", l.cachedSteps);
                  if (l.sharedBytes)
                    j.attribute("shared_bytes", l.sharedBytes);
                  j.attribute("limit", limitName(c.binding()));
                });
            });
        });
    });
  });
}

} // namespace

/// plan.json's memory_bytes: the arena's parts, what lies outside it and
/// the total peak.
static void writeMemoryJson(llvm::json::OStream &j, const PlanSummary &s) {
  j.attributeObject("memory_bytes", [&] {
    j.attribute("params", s.params);
    j.attribute("master_params", s.masterParams);
    j.attribute("grads", s.grads);
    j.attribute("optimizer", s.optimizer);
    j.attribute("inputs", s.inputs);
    j.attribute("constants", s.constants);
    j.attribute("buffers", s.buffers);
    if (s.kvCache)
      j.attribute("kv_cache", s.kvCache);
    if (s.fp8WeightCopies)
      j.attribute("fp8_weight_copies", s.fp8WeightCopies);
    j.attribute("activations_peak", s.activationsPeak);
    j.attribute("workspace", s.workspace);
    j.attribute("arena", s.arena);
    j.attribute("lower_bound", s.lowerBound);
    j.attribute("libraries", s.libraries);
    j.attribute("context", s.context);
    j.attribute("total_peak", s.totalPeak);
    j.attributeArray("outside_arena", [&] {
      for (const OutsideBuffer &b : s.outside.buffers)
        j.object([&] {
          j.attribute("name", b.name);
          j.attribute("bytes", b.bytes);
          j.attribute("basis", b.basis);
        });
      if (s.context)
        j.object([&] {
          j.attribute("name", "context");
          j.attribute("bytes", s.context);
          j.attribute("basis", s.outside.contextBasis);
        });
    });
  });
}

/// plan.json's experts: what expert parallelism would exchange.
static void writeExpertsJson(llvm::json::OStream &j, const ExpertExchange &e) {
  j.attributeObject("experts", [&] {
    j.attribute("experts_per_layer", e.experts);
    j.attribute("layers", e.layers);
    j.attribute("products", e.products);
    j.attribute("rows", e.rows);
    j.attribute("expert_params", e.expertParams);
    j.attribute("placement", "replicated on every rank (no expert "
                             "parallelism yet)");
    j.attributeObject("expert_parallel_all_to_all", [&] {
      j.attribute("calls_per_micro_step", 4 * e.layers);
      j.attribute("dispatch_bytes_per_micro_step", 2 * e.dispatchBytes);
      j.attribute("combine_bytes_per_micro_step", 2 * e.combineBytes);
      j.attribute("what", "each layer's rows to their experts' ranks and "
                          "back, forward and backward; (W - 1) / W of "
                          "the bytes leave a rank of W");
    });
  });
}

LogicalResult otc::writePlanJson(const PlanSummary &s, const PlanInfo &info,
                                 raw_ostream &os, const StepTime *time) {
  llvm::json::OStream j(os, 2);
  j.object([&] {
    j.attribute("target", s.target);
    j.attribute("precision", s.precision);
    // Under fp8: which GEMMs the step-time model ran in FP8.
    if (s.precision == "fp8") {
      j.attribute("gemms", s.gemms);
      j.attributeArray("fp8_gemms", [&] {
        for (const PlanSummary::Fp8Gemm &g : s.fp8Gemms)
          j.object([&] {
            j.attribute("name", g.name);
            j.attribute("m", g.m);
            j.attribute("n", g.n);
            j.attribute("k", g.k);
            j.attribute("formats", g.formats);
          });
      });
    }
    // GEMMs that form a bias's gradient beside their product.
    j.attribute("gemm_sums", s.gemmSums);
    // Attention calls of a micro-step whose mask is a key padding.
    j.attribute("key_padding_attentions", s.keyPaddingAttentions);
    // --sparse-prediction: the loss at K positions of a sequence's T, and
    // how many of the forward's ops before it run there alone.
    if (s.prediction.positions)
      j.attributeObject("sparse_prediction", [&] {
        j.attribute("positions", s.prediction.positions);
        j.attribute("of", s.prediction.of);
        j.attribute("ops_cut", s.prediction.ops);
      });
    j.attribute("micro_batch", s.microBatch);
    j.attribute("grad_accum", s.gradAccum);
    j.attribute("fp32_grad_accum", s.fp32GradAccum);
    j.attribute("params_count", s.paramsCount);
    // What a trained parameter costs (its working copy, master, gradient
    // and moments), and the buffers beside them: frozen parameters cost
    // their values alone.
    j.attributeObject("bytes_per_value", [&] {
      if (s.paramsCount)
        j.attribute("trained", static_cast<double>(s.params + s.masterParams +
                                                   s.grads + s.optimizer) /
                                   static_cast<double>(s.paramsCount));
      if (s.bufferValues)
        j.attribute("not_trained", static_cast<double>(s.buffers) /
                                       static_cast<double>(s.bufferValues));
    });
    j.attribute("buffer_values", s.bufferValues);
    auto nameMap = [&](const char *key, const auto &pairs) {
      j.attributeObject(key, [&] {
        for (const auto &[name, why] : pairs)
          j.attribute(name, why);
      });
    };
    nameMap("untrained_initializers", info.untrained);
    nameMap("tied_initializers", info.tied);
    nameMap("split_initializers", info.split);
    nameMap("removed_parameters", info.removed);
    j.attribute(
        "state_bytes_per_param",
        stateBytesPerParam(s.precision != "fp32", s.fp32GradAccum).total());
    // ZeRO-1: what each rank keeps.
    if (s.shardRanks > 1)
      attributeFixed(j, "state_bytes_per_param_per_rank",
                     stateBytesPerParamPerRank(s.precision != "fp32",
                                               s.fp32GradAccum, s.shardRanks),
                     3);
    writeMemoryJson(j, s);
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
    // Expert parallelism, which otc does not have: what it would exchange.
    if (info.experts)
      writeExpertsJson(j, *info.experts);
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
    if (time)
      writeTimeJson(j, *time, s, info);
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

/// The predicted step, its shares by kind and the ten slowest kernels.
static void printTimeReport(const StepTime &t, const PlanSummary &s,
                            const PlanInfo &info, raw_ostream &os) {
  Throughput r = throughput(t, s, info);
  os << "predicted step on " << t.device->name << " (" << t.device->description
     << "), " << llvm::format("%.2f", t.launchSeconds * 1e6) << " us per launch"
     << (t.device->cudaGraphs ? " (CUDA graphs)" : "") << ":\n"
     << llvm::format("  micro-step %.3f ms x %lld + zero grads %.3f ms + "
                     "optimizer %.3f ms%s = %.3f ms per step\n",
                     t.microStep * 1e3, (long long)t.gradAccum,
                     t.zeroGrads * 1e3, t.optimizerStep * 1e3,
                     t.worldSize > 1 ? (t.shardOptimizer
                                            ? " + reduce-scatter + all-gather"
                                            : " + all-reduce")
                                     : "",
                     t.step * 1e3);
  if (t.worldSize > 1 && t.shardOptimizer)
    os << llvm::format("  %lld ranks, optimizer sharded (ZeRO-1): "
                       "reduce-scatter of %s of gradients %.3f ms and "
                       "all-gather of %s of parameters %.3f ms over %s "
                       "(%.1f GB/s bus bandwidth), in the step above, none "
                       "hidden; tokens/s below are all ranks'\n",
                       (long long)t.worldSize,
                       formatBytes(t.gradientBytes).c_str(),
                       t.reduceScatter * 1e3,
                       formatBytes(t.gatherBytes).c_str(), t.allGather * 1e3,
                       t.device->link.str().c_str(),
                       t.device->allReduceBusBandwidth / 1e9);
  else if (t.worldSize > 1) {
    os << llvm::format("  %lld ranks: all-reduce of %s of gradients over %s "
                       "(%.1f GB/s bus bandwidth)",
                       (long long)t.worldSize,
                       formatBytes(t.gradientBytes).c_str(),
                       t.device->link.str().c_str(),
                       t.device->allReduceBusBandwidth / 1e9);
    if (!t.bucketBytes.empty())
      os << llvm::format(" in %zu buckets as the last micro-step's backward "
                         "finishes them, %.3f ms, of which %.3f ms in the "
                         "step above (the rest hidden)",
                         t.bucketBytes.size(), t.allReduce * 1e3,
                         t.exposed * 1e3);
    else
      os << llvm::format(" %.3f ms, in the step above, none hidden",
                         t.allReduce * 1e3);
    os << "; tokens/s below are all ranks'\n";
  }
  os << "  ";
  if (info.tokensPerStep > 0)
    os << llvm::format("%.0f tokens/s, ", r.tokensPerSecond);
  os << llvm::format("%.1f samples/s, MFU %.1f%% of %.4g TFLOP/s (%s)\n",
                     r.samplesPerSecond, 100 * r.mfu, r.peak / 1e12,
                     r.peakName.c_str());
  os << "  time by kind:";
  for (const auto &[kind, seconds] : t.byKind)
    os << llvm::format(" %s %.1f%%", kind.c_str(),
                       t.step > 0 ? 100 * seconds / t.step : 0.0);
  os << "\n";
  os << "  time by limit:";
  for (unsigned i = 0; i < kNumLimits; ++i)
    os << llvm::format(" %s %.1f%%",
                       limitName(static_cast<Limit>(i)).str().c_str(),
                       t.step > 0 ? 100 * t.byLimit.seconds[i] / t.step : 0.0);
  os << "\n";
  os << "top 10 kernels by predicted time per step (" << t.launchesPerStep
     << " launches):\n"
     << "          ms  share  calls  kind           limit      trace name\n";
  for (const LaunchTotal &k : ArrayRef(t.byName).take_front(10))
    os << llvm::format(
        "  %10.4f %5.1f%% %6lld  %-14s %-10s %s%s\n", k.seconds * 1e3,
        t.step > 0 ? 100 * k.seconds / t.step : 0.0, (long long)k.calls,
        k.kind.c_str(), limitName(k.cost.binding()).str().c_str(),
        k.name.c_str(), k.traced ? "" : " (not traced)");
}

void otc::printPlanReport(const PlanSummary &s, const PlanInfo &info,
                          raw_ostream &os, const StepTime *time) {
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
  row("buffers", s.buffers);
  if (s.kvCache)
    row("key/value cache", s.kvCache);
  if (s.fp8WeightCopies)
    row("fp8 weight copies", s.fp8WeightCopies);
  row("activation peak", s.activationsPeak);
  row("workspace", s.workspace);
  row("arena", s.arena);
  row("lower bound", s.lowerBound);
  row("libraries", s.libraries);
  // What the libraries hold, each (cuDNN's attention workspaces can be
  // gigabytes at long sequences).
  for (const OutsideBuffer &b : s.outside.buffers)
    if (b.bytes)
      row("  " + b.name, b.bytes);
  row("context", s.context);
  row("total peak", s.totalPeak);
  if (s.precision == "fp8")
    os << "fp8 GEMMs: " << s.fp8Gemms.size() << " of " << s.gemms
       << " (the rest BF16)\n";
  if (s.gemmSums)
    os << "bias gradients summed by their weight's gradient GEMM: "
       << s.gemmSums << "\n";
  os << "parameters trained: " << s.paramsCount;
  if (s.paramsCount)
    os << " ("
       << llvm::format("%.4g", static_cast<double>(s.params + s.masterParams +
                                                   s.grads + s.optimizer) /
                                   static_cast<double>(s.paramsCount))
       << " bytes each: working copy, master, gradient, moments)";
  os << "\n";
  if (s.bufferValues)
    os << "not trained (frozen, buffers): " << s.bufferValues << " values ("
       << llvm::format("%.4g", static_cast<double>(s.buffers) /
                                   static_cast<double>(s.bufferValues))
       << " bytes each: no gradient, master or moments)\n";
  auto names = [&](const char *title, const auto &pairs) {
    if (pairs.empty())
      return;
    os << title << ":\n";
    for (const auto &[name, why] : pairs)
      os << "  " << name << ": " << why << "\n";
  };
  names("tied initializers (one trained tensor)", info.tied);
  names("initializers split per module (trained apart)", info.split);
  names("float initializers made constants", info.untrained);
  os << "FLOPs per optimizer step: model " << s.modelFlops << ", recompute "
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
  if (const auto &e = info.experts)
    os << "experts: " << e->experts << " per layer x " << e->layers
       << " layers, " << e->rows << " rows a product, replicated on every "
       << "rank; expert parallelism would exchange "
       << formatBytes(2 * (e->dispatchBytes + e->combineBytes))
       << " a micro-step in " << 4 * e->layers << " all-to-alls\n";
  os << "recomputation: " << info.rematPolicy;
  if (!info.rematBlocks.empty())
    os << " (blocks " << info.rematBlocks << ")";
  os << ", " << info.saved.size() << " values kept, "
     << info.recomputed.size() << " recomputed\n";
  if (time)
    printTimeReport(*time, s, info, os);
}
