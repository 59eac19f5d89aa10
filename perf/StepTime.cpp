//===- StepTime.cpp - predicted time of a planned training step ----------===//
//
// Walks @zero_grads, @micro_step and @optimizer_step of a planned module in
// the order the emitter does (EmitProgram.cpp) and prices each launch it
// would emit: see StepTime.h for the model. Per launch on a GPU:
//   GEMM             the device's GEMM curve for its operand type, divided
//                    by its wave efficiency (LaunchModel.h), or its bytes
//                    at the bandwidth if longer
//   attention        the device's attention rate (forward, backward, or the
//                    fallback kernels' where the library path does not run:
//                    FP32, dropout, a head size not a multiple of 8)
//   other library    each kernel it launches by its grid, the call's FLOPs
//                    shared among them by bytes
//   generated kernel its launch by its grid
//   memset, copy     bandwidth (a copy reads and writes its bytes)
// each with its launch overhead (a graph replay's on targets whose runtime
// replays graphs). What is launched, and which attention runs on the
// library, is the target's machine model (GridLaunchOpInterface,
// perf/GridLaunch.h, which targets/cuda/ attaches to the ops). On the cpu every
// launch but a GEMM and attention takes max(FLOPs / vectorRate, bytes /
// bandwidth). Adjacent zero fills are one memset, as in the program.
//
//===----------------------------------------------------------------------===//

#include "perf/StepTime.h"
#include "codegen/KernelBodies.h"
#include "codegen/Launches.h"
#include "ir/Config.h"
#include "ir/Fp8.h"
#include "ir/Functions.h"
#include "ir/GradientBuckets.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/ShapeUtils.h"
#include "ir/TypeBytes.h"
#include "passes/Passes.h"
#include "perf/Fp8Cost.h"
#include "perf/LaunchModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace otc;

namespace {

/// The op's name without the dialect prefix and a `_grad` or `_with_grad`
/// suffix.
std::string baseName(Operation &op) {
  StringRef name = op.getName().stripDialect();
  if (name.consume_back("_grad"))
    name.consume_back("_with");
  return name.str();
}

/// The machine model of a GPU target for `op` (GridLaunchOpInterface),
/// which the target attaches when the dialects load (targets/<t>/): a
/// library call or a generated kernel without one on a GPU is a target
/// that does not describe what it launches, a fault of the build.
GridLaunchOpInterface gridModel(Operation *op) {
  auto model = dyn_cast<GridLaunchOpInterface>(op);
  if (!model)
    llvm::report_fatal_error(
        llvm::Twine("no launch model of ") + op->getName().getStringRef() +
        " on a GPU target: registerAllTargets() must run before the "
        "dialects load");
  return model;
}

/// What a generated kernel computes, for the shares.
std::string generatedKind(otck::KernelOp k, Operation &op, bool single) {
  if (isa<AdamWOp>(op))
    return "optimizer";
  if (!single || op.hasTrait<OpTrait::OtcElementwise>())
    return "elementwise";
  if (isa<ReduceSumOp, ReduceMaxOp, SoftmaxOp, SoftmaxGradOp, LogSoftmaxOp,
          LogSoftmaxGradOp>(op))
    return "reduction";
  if (isa<SoftmaxCrossEntropyOp, SoftmaxCrossEntropyGradOp, NllLossOp,
          NllLossGradOp>(op))
    return "loss";
  if (isa<SliceGradOp>(op))
    return "data_movement";
  if (auto cost = dyn_cast<CostOpInterface>(op); cost && !cost.getFlops())
    return "data_movement";
  return baseName(op);
}

int64_t costFlops(Operation &op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

/// Bytes an op reads and writes: its cost interface's count, else those of
/// its operands and results.
int64_t costBytes(Operation &op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getBytesRead() + cost.getBytesWritten();
  int64_t n = 0;
  for (Value v : op.getOperands())
    n += byteSize(v);
  for (Value v : op.getResults())
    n += byteSize(v);
  return n;
}

/// Kernels `launches` of one call computing `flops` in all, shared among
/// them by bytes, priced by their grids.
LaunchTime priceKernels(const DeviceModel &d, std::string kind, double flops,
                        ArrayRef<KernelLaunch> launches) {
  LaunchTime t;
  t.kind = std::move(kind);
  t.flops = flops;
  for (const KernelLaunch &l : launches)
    t.bytes += l.bytes;
  for (const KernelLaunch &l : launches) {
    double share = t.bytes > 0 ? l.bytes / t.bytes : 1.0 / launches.size();
    LaunchCost c = priceKernel(d, l, flops * share);
    t.cost += c;
    t.kernels.push_back({l, c});
  }
  t.seconds = t.cost.total();
  t.launches = static_cast<int64_t>(launches.size());
  return t;
}

class Predictor {
public:
  Predictor(const DeviceModel &device, int64_t alignment)
      : d(device), zeroFills(alignment) {}

  /// Appends the launches of `f` to `out`; fails at an op it cannot cost.
  LogicalResult function(func::FuncOp f, std::vector<LaunchTime> &out);
  /// Seconds from the start of its function to the end of each op priced
  /// (the launches appended up to it).
  llvm::DenseMap<Operation *, double> finished;
  /// Appends, to the optimizer step, the runtime's gradient factor before
  /// it (otcrt_grad_factor, runtime/cuda/sum_squares.cu): a sum of squares
  /// over every "grad:" slot of `module`, one range per element type (the
  /// slots lie together), then one block that adds the partials.
  void gradientFactor(ModuleOp module, std::vector<LaunchTime> &out);

private:
  LaunchTime &add(std::string name, std::string kind, double flops,
                  double bytes, const LaunchCost &cost, bool traced = true) {
    LaunchTime t;
    t.function = fn;
    t.name = std::move(name);
    t.kind = std::move(kind);
    t.flops = flops;
    t.bytes = bytes;
    t.cost = cost;
    t.seconds = cost.total();
    t.traced = traced;
    out->push_back(std::move(t));
    return out->back();
  }
  /// Prices kernels `launches` of one call computing `flops` in all, shared
  /// among them by bytes, and adds the call.
  void addKernels(std::string name, std::string kind, double flops,
                  ArrayRef<KernelLaunch> launches) {
    LaunchTime t = priceKernels(d, std::move(kind), flops, launches);
    t.function = fn;
    t.name = std::move(name);
    out->push_back(std::move(t));
  }
  /// A memset of `bytes`, as the program makes one of adjacent zero fills.
  void addMemset(double bytes);
  void flushZero() {
    zeroFills.flush([&](int64_t, int64_t n) { addMemset(n); });
  }
  void kernel(otck::KernelOp k);
  void library(otck::KernelOp k, Operation &op);
  LogicalResult gemm(otck::GemmOp g);
  void gemmSums(otck::GemmOp g);

  const DeviceModel &d;
  ZeroFills zeroFills;
  std::string fn;
  std::vector<LaunchTime> *out = nullptr;
};

LogicalResult Predictor::function(func::FuncOp f,
                                  std::vector<LaunchTime> &launches) {
  fn = f.getSymName().str();
  out = &launches;
  size_t priced = launches.size();
  double elapsed = 0;
  for (Operation &op : f.getBody().front()) {
    if (isa<otck::BufferOp>(op))
      continue;
    if (zeroFills.take(op, [&](int64_t, int64_t n) { addMemset(n); }))
      continue;
    flushZero();
    LogicalResult r =
        TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](otck::KernelOp k) {
              kernel(k);
              return success();
            })
            .Case([&](otck::GemmOp g) { return gemm(g); })
            .Case([&](otck::Fp8QuantizeOp q) {
              // One copy, shared by its GEMMs (ir/Fp8.h).
              int64_t elements = q.getSource().getType().getNumElements();
              int layouts = (q.getLayouts() & 1) + ((q.getLayouts() >> 1) & 1);
              add(fp8QuantizeTraceName(q), "fp8_quantize", 0,
                  (2.0 + layouts) * double(elements),
                  fp8QuantizeCost(d, elements, layouts));
              return success();
            })
            .Case([&](otck::CopyOp c) {
              double bytes = 2.0 * byteSize(c.getSource().getType());
              add("copy", "copy", 0, bytes, priceRoofline(d, 0, bytes),
                  /*traced=*/false);
              return success();
            })
            .Case<otck::ViewOp, func::ReturnOp>(
                [](Operation *) { return success(); })
            .Default([](Operation *op) {
              return op->emitOpError("has no predicted time");
            });
    if (failed(r))
      return failure();
    for (; priced < launches.size(); ++priced)
      elapsed += launches[priced].seconds;
    finished[&op] = elapsed;
  }
  flushZero();
  return success();
}

void Predictor::gradientFactor(ModuleOp module,
                               std::vector<LaunchTime> &launches) {
  fn = "optimizer_step";
  out = &launches;
  // Elements of the gradient slots by element width (bf16 or f32).
  std::map<std::string, MemRefType> slots;
  module.walk([&](otck::BufferOp b) {
    auto slot = b->getAttrOfType<StringAttr>("slot");
    if (slot && slot.getValue().starts_with("grad:"))
      slots.emplace(slot.getValue().str(), b.getType());
  });
  std::map<int64_t, int64_t> elements;
  for (auto &[name, type] : slots)
    elements[storageBytes(type.getElementType())] += type.getNumElements();
  if (elements.empty())
    return;
  double bytes = 0;
  for (auto [width, n] : elements)
    bytes += double(width) * double(n);
  if (!d.pricesGrids()) {
    add("gradient norm", "optimizer", 2.0 * bytes / 4, bytes,
        priceRoofline(d, 0, bytes));
    return;
  }
  SmallVector<std::pair<int64_t, int64_t>> byWidth(elements.begin(),
                                                   elements.end());
  SmallVector<KernelLaunch> grid;
  d.gradientNormLaunches(d, byWidth, grid);
  double flops = 0;
  for (auto [width, n] : elements)
    flops += 2.0 * double(n);
  addKernels("gradient norm", "optimizer", flops, grid);
}

void Predictor::addMemset(double bytes) {
  add("memset", "memset", 0, bytes, priceRoofline(d, 0, bytes),
      /*traced=*/false);
}

void Predictor::kernel(otck::KernelOp k) {
  Block &body = k.getBody().front();
  bool single = llvm::hasSingleElement(body.without_terminator());
  Operation &first = body.front();
  if (single && isa<LibraryCallOpInterface>(first))
    return library(k, first);
  double flops = 0, bytes = 0;
  if (single) {
    flops = costFlops(first);
    bytes = costBytes(first);
  } else {
    // A chain: its intermediates never reach memory.
    for (Operation &op : body.without_terminator())
      flops += costFlops(op);
    for (Value v : k.getInputs())
      bytes += byteSize(cast<MemRefType>(v.getType()));
    for (Value v : k.getOutputs())
      bytes += byteSize(cast<MemRefType>(v.getType()));
  }
  std::string name = kernelTraceName(k), kind = generatedKind(k, first, single);
  if (!d.pricesGrids()) {
    add(name, kind, flops, bytes,
        priceRoofline(d, flops / d.vectorRate, bytes));
    return;
  }
  // One launch, its grid the target's; its bytes are the kernel's.
  SmallVector<KernelLaunch, 1> launches;
  gridModel(k).getGridLaunches(d, launches);
  assert(launches.size() == 1 && "a generated kernel is one launch");
  launches.front().bytes = bytes;
  addKernels(name, kind, flops, launches);
}

void Predictor::library(otck::KernelOp k, Operation &op) {
  LaunchTime t = priceLibraryCall(d, op);
  t.function = fn;
  t.name = kernelTraceName(k);
  out->push_back(std::move(t));
}

LogicalResult Predictor::gemm(otck::GemmOp g) {
  ArrayRef<int64_t> a = g.getLhs().getType().getShape(),
                    c = g.getOut().getType().getShape();
  int64_t m = c[c.size() - 2], n = c[c.size() - 1];
  int64_t k = g.getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
  int64_t batch = numElements(c.drop_back(2));
  // The emitter launches nothing for an empty batch.
  if (!batch)
    return success();
  Type in = g.getLhs().getType().getElementType();
  if (!in.isBF16() && !in.isF32())
    return g.emitOpError("has no predicted time for operands of type ") << in;
  // An FP8 GEMM (ir/Fp8.h) reads FP8 copies of its operands on the FP8
  // curve (a device without one, the cpu's emulation: BF16's), and pays
  // for their quantization (perf/Fp8Cost.h).
  bool fp8 = gemmFp8(g).has_value();
  const GemmRate &curve = fp8 && d.fp8Gemm.rate > 0 ? d.fp8Gemm
                          : in.isBF16()             ? d.bf16Gemm
                                                    : d.fp32Gemm;
  double flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  int64_t lhsElements = g.getLhs().getType().getNumElements(),
          rhsElements = g.getRhs().getType().getNumElements();
  double bytes =
      (fp8 ? double(lhsElements + rhsElements)
           : byteSize(g.getLhs().getType()) + byteSize(g.getRhs().getType())) +
      byteSize(g.getOut().getType());
  // What the epilogue moves per element of the result: the result, read
  // too when it accumulates; a GELU epilogue writes (gelu) or reads (dgelu)
  // the aux matrix, and an addend is read.
  double epilogueBytes = storageBytes(g.getOut().getType().getElementType());
  if (g.getAccumulate()) {
    bytes += byteSize(g.getOut().getType());
    epilogueBytes *= 2;
  }
  if (g.getAux()) {
    bytes += byteSize(g.getAux().getType());
    epilogueBytes += storageBytes(g.getAux().getType().getElementType());
  }
  if (g.getAddend()) {
    bytes += byteSize(g.getAddend().getType());
    epilogueBytes += storageBytes(g.getAddend().getType().getElementType());
  }
  double seconds =
      gemmSeconds(curve, flops, k, gemmWaveEfficiency(d, m, n, k, batch),
                  gemmEpilogueScale(in.isBF16(), epilogueBytes));
  add(gemmTraceName(g), "gemm", flops, bytes, priceRoofline(d, seconds, bytes));
  if (g.getSums())
    gemmSums(g);
  // An operand without a copy (otc-fp8-copies) is quantized by the call.
  if (fp8) {
    if (!g.getLhsFp8())
      add(gemmTraceName(g) + ".fp8_quantize", "fp8_quantize", 0,
          3.0 * double(lhsElements), fp8QuantizeCost(d, lhsElements),
          /*traced=*/false);
    if (!g.getRhsFp8())
      add(gemmTraceName(g) + ".fp8_quantize", "fp8_quantize", 0,
          3.0 * double(rhsElements), fp8QuantizeCost(d, rhsElements),
          /*traced=*/false);
  }
  return success();
}

/// The column sums a GEMM forms of an operand (otc-fuse-gemm-sums). On a
/// GPU cuBLASLt forms them in its bias-gradient epilogue from the tiles it
/// streams for the product (no time of their own here but the write of W
/// floats), and the runtime adds them into an accumulated or BF16 output
/// with one small kernel; the cpu reads the operand once more, as the
/// column sum kernel it replaces did.
void Predictor::gemmSums(otck::GemmOp g) {
  auto type = cast<MemRefType>(g.getSums().getType());
  double w = double(type.getNumElements());
  double sumsBytes =
      w * storageBytes(type.getElementType()) * (g.getAccumulateSums() ? 2 : 1);
  auto operand =
      cast<MemRefType>((g.getSumsOfRhs() ? g.getRhs() : g.getLhs()).getType());
  std::string name = gemmTraceName(g) + ".sums";
  if (!d.pricesGrids()) {
    double bytes = byteSize(operand) + sumsBytes;
    add(name, "column_sum", double(operand.getNumElements()), bytes,
        priceRoofline(d, 0, bytes), /*traced=*/false);
    return;
  }
  if (!g.getAccumulateSums() && type.getElementType().isF32())
    return;
  double bytes = 4.0 * w + sumsBytes;
  add(name, "column_sum", w, bytes, priceRoofline(d, 0, bytes),
      /*traced=*/false);
}

} // namespace

/// The time of an attention call relative to a causal one of its shape, on
/// which the rates are measured (with the FLOPs counted in full): the
/// (query, key) pairs it computes over the causal T (T + 1) / 2. A causal
/// sliding window of W keys sees T W - W (W - 1) / 2 of them (cuDNN's band,
/// the library's and the cpu's kernels skip the rest), its FLOPs counted
/// over T W pairs (the op's getFlops), hence the factor T / W; a
/// bidirectional one (not causal) sees T (2 W - 1) - W (W - 1), counted
/// over T min(2 W - 1, T) pairs; an attention that is not causal and has no
/// window computes every pair, T S (a mask tensor hides keys by value,
/// which no kernel skips): twice a causal one's work.
static double causalShare(Operation &op) {
  auto [causal, window] =
      isa<AttentionOp>(op)
          ? std::pair(cast<AttentionOp>(op).getCausal(),
                      static_cast<int64_t>(cast<AttentionOp>(op).getWindow()))
          : std::pair(
                cast<AttentionGradOp>(op).getCausal(),
                static_cast<int64_t>(cast<AttentionGradOp>(op).getWindow()));
  AttentionSizes a = attentionSizes(&op);
  if (a.t != a.s)
    return causal ? 1.0 : 2.0;
  const double t = double(a.t), w = double(window);
  const bool band = window > 0 && window < a.t;
  // The pairs the kernels compute: a causal band's T W - W (W - 1) / 2, a
  // bidirectional one's T (2 W - 1) - W (W - 1), else the triangle or all.
  const double pairs = causal
                           ? (band ? t * w - w * (w - 1) / 2 : t * (t + 1) / 2)
                           : (band ? t * (2 * w - 1) - w * (w - 1) : t * t);
  // The FLOPs count T K pairs, K the counted keys.
  return pairs / (t * (t + 1) / 2) * (t / double(attentionCountedKeys(&op)));
}

LaunchTime otc::priceLibraryCall(const DeviceModel &d, Operation &op) {
  double flops = costFlops(op), bytes = costBytes(op);
  std::string kind = baseName(op);
  auto single = [&](const LaunchCost &cost) {
    LaunchTime t;
    t.kind = kind;
    t.flops = flops;
    t.bytes = bytes;
    t.cost = cost;
    t.seconds = cost.total();
    return t;
  };
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    // On a GPU, the library path (cuDNN's SDPA) or the fallback kernels; the
    // cpu has one kind of kernel, priced by its forward and backward rates.
    bool fast = !d.pricesGrids() || gridModel(&op).runsOnVendorLibrary();
    double rate = !fast                  ? d.attentionFallbackRate
                  : isa<AttentionOp>(op) ? d.attentionFwdRate
                                         : d.attentionBwdRate;
    LaunchCost cost = priceRoofline(d, flops * causalShare(op) / rate, bytes);
    // A key-padding mask written out along the queries for cuDNN: one more
    // launch writing its values (cuDNN's reading them is in its rate).
    if (int64_t staged =
            d.pricesGrids() ? gridModel(&op).getStagedBytes() : 0) {
      bytes += double(staged);
      cost += priceRoofline(d, 0, double(staged));
    }
    return single(cost);
  }
  auto call = cast<LibraryCallOpInterface>(op);
  // The GEMMs the call makes (otc.linear_cross_entropy_with_grad's), priced
  // as the GEMM ops are; its kernels share the rest of its FLOPs.
  SmallVector<LibraryGemm> gemms;
  call.getLibraryGemms(gemms);
  double gemmFlops = 0, gemmBytes = 0;
  LaunchCost gemmCost;
  for (const LibraryGemm &g : gemms) {
    double f = 2.0 * double(g.m) * double(g.n) * double(g.k);
    double efficiency =
        (d.pricesGrids() ? gemmWaveEfficiency(d, g.m, g.n, g.k, 1) : 1.0) *
        (g.ownKernel && g.bf16 ? d.ownGemmShare : 1.0);
    double seconds =
        gemmSeconds(g.bf16 ? d.bf16Gemm : d.fp32Gemm, f, g.k, efficiency,
                    gemmEpilogueScale(g.bf16, g.epilogueBytes));
    gemmCost += priceRoofline(d, seconds, g.bytes);
    gemmFlops += f;
    gemmBytes += g.bytes;
  }
  double kernelFlops = std::max(0.0, flops - gemmFlops);
  SmallVector<KernelLaunch> launches;
  if (d.pricesGrids())
    gridModel(&op).getGridLaunches(d, launches);
  LaunchTime t;
  if (launches.empty()) {
    flops = kernelFlops;
    t = single(priceRoofline(d, kernelFlops / d.vectorRate, bytes));
  } else {
    t = priceKernels(d, kind, kernelFlops, launches);
  }
  if (gemms.empty())
    return t;
  t.flops += gemmFlops;
  t.bytes += gemmBytes;
  t.cost += gemmCost;
  t.seconds = t.cost.total();
  t.launches += static_cast<int64_t>(gemms.size());
  return t;
}

/// The launches' totals per function call, per step, per kind (largest
/// first) and per (function, trace name) (largest first, equal times in
/// that order).
static void addTotals(StepTime &t) {
  std::map<std::string, double> byKind;
  std::map<std::pair<std::string, std::string>, LaunchTotal> byName;
  for (const LaunchTime &l : t.launches) {
    int64_t calls = l.function == "micro_step" ? t.gradAccum : 1;
    double &fnTotal = l.function == "zero_grads"   ? t.zeroGrads
                      : l.function == "micro_step" ? t.microStep
                                                   : t.optimizerStep;
    fnTotal += l.seconds;
    t.launchesPerStep += calls * l.launches;
    byKind[l.kind] += calls * l.seconds;
    LaunchCost perStep;
    for (unsigned i = 0; i < kNumLimits; ++i)
      perStep.seconds[i] = calls * l.cost.seconds[i];
    t.byLimit += perStep;
    LaunchTotal &n = byName[{l.function, l.name}];
    n.function = l.function;
    n.name = l.name;
    n.kind = l.kind;
    n.traced = l.traced;
    if (!n.calls)
      n.kernels = l.kernels;
    n.cost += perStep;
    n.calls += calls;
    n.flops += calls * l.flops;
    n.bytes += calls * l.bytes;
    n.seconds += calls * l.seconds;
  }
  t.byKind.assign(byKind.begin(), byKind.end());
  std::stable_sort(
      t.byKind.begin(), t.byKind.end(),
      [](const auto &a, const auto &b) { return a.second > b.second; });
  for (auto &entry : byName)
    t.byName.push_back(std::move(entry.second));
  std::stable_sort(t.byName.begin(), t.byName.end(),
                   [](const LaunchTotal &a, const LaunchTotal &b) {
                     return a.seconds > b.seconds;
                   });
}

/// The ranks' sum of the gradients (the runtime's
/// GradientCommunicator::sumGradients: every gradient slot, in its storage
/// type, once per step) and, under ZeRO-1, the gather of the parameters:
/// the link's time and what of it the step waits for (`exposed`), given
/// when each micro-step op finished (`finished`).
static LogicalResult predictCommunication(
    ModuleOp module, ConfigAttr config, const DeviceModel &device,
    const llvm::DenseMap<Operation *, double> &finished, StepTime &t) {
  t.worldSize = config.getWorldSize();
  t.shardOptimizer = config.getShardOptimizer();
  // ZeRO-1 gathers the BF16 copies after every update, and the FP32
  // parameters too where the steps read them (or there are no copies).
  bool copies = false;
  otck::forEachSlot(module, [&](StringRef kind, otck::BufferOp) {
    copies |= kind == "param_bf16";
  });
  const bool gatherParams = !copies || otck::stepsReadParams(module);
  otck::forEachSlot(module, [&](StringRef kind, otck::BufferOp b) {
    if (kind == "grad")
      t.gradientBytes += double(byteSize(b.getType()));
    else if (kind == "param_bf16" || (kind == "param" && gatherParams))
      t.gatherBytes += double(byteSize(b.getType()));
  });
  if (t.worldSize > 1 && device.allReduceBusBandwidth <= 0)
    return module.emitError("device model '")
           << device.name << "' has no link figures for world_size "
           << t.worldSize;
  t.exposed = -1;
  if (t.shardOptimizer) {
    t.reduceScatter = ringSeconds(device, t.gradientBytes, t.worldSize, 1);
    t.allGather = ringSeconds(device, t.gatherBytes, t.worldSize, 1);
    t.allReduce = t.reduceScatter + t.allGather;
  } else if (SmallVector<GradientBucket> buckets =
                 programGradientBuckets(module);
             !buckets.empty()) {
    // Overlapped: each bucket's all-reduce starts once the last micro-step
    // has finished it and the link is free; the step waits only for what
    // runs past the end of that micro-step.
    t.gatherBytes = 0;
    double linkFree = 0;
    for (const GradientBucket &b : buckets) {
      double seconds = allReduceSeconds(device, double(b.bytes), t.worldSize);
      double start = std::max(finished.lookup(b.after), linkFree);
      linkFree = start + seconds;
      t.allReduce += seconds;
      t.bucketBytes.push_back(double(b.bytes));
      t.bucketSeconds.push_back(seconds);
    }
    t.exposed = std::max(0.0, linkFree - t.microStep);
  } else {
    t.gatherBytes = 0;
    t.allReduce = allReduceSeconds(device, t.gradientBytes, t.worldSize);
  }
  if (t.exposed < 0)
    t.exposed = t.allReduce;
  return success();
}

FailureOr<StepTime> otc::predictStepTime(ModuleOp module) {
  FailureOr<ConfigAttr> config = requireConfig(module, "the step-time model");
  if (failed(config))
    return failure();
  const DeviceModel *found = lookupDevice(config->getDevice());
  if (!found)
    return module.emitError("unknown device model '")
           << config->getDevice() << "' (known: " << knownDeviceNames() << ")";
  const DeviceModel &device = *found;
  int64_t alignment = 1;
  if (auto a = module->getAttrOfType<IntegerAttr>(otck::kAlignmentAttr))
    alignment = a.getInt();
  StepTime t;
  t.device = &device;
  t.gradAccum = config->getGradAccum();
  Predictor p(device, alignment);
  t.launchSeconds = device.launchSeconds();
  for (StringRef name : {"zero_grads", "micro_step", "optimizer_step"}) {
    func::FuncOp f = requireFunction(module, name, " to predict");
    if (!f)
      return failure();
    if (failed(p.function(f, t.launches)))
      return failure();
  }
  p.gradientFactor(module, t.launches);
  addTotals(t);
  if (failed(predictCommunication(module, *config, device, p.finished, t)))
    return failure();
  t.step =
      t.zeroGrads + t.gradAccum * t.microStep + t.exposed + t.optimizerStep;
  return t;
}
