//===- Remat.cpp - which forward values to keep, which to recompute --------===//
//
// Decides, in @train_step, which forward values the backward reads from
// memory and which it recomputes from kept ones, and rewrites the backward
// accordingly: a recomputed value is rebuilt by clones of its forward ops
// placed just before its first backward use. Clones compute exactly what the
// originals did (dropout included: its mask is a function of key, stream and
// index), so gradients do not change.
//
// Blocks are found from the graph, not from names: the cut values of the
// forward (values that every path from the data to the loss goes through:
// the residual stream between sublayers) split it into segments, and the
// repeating pattern of segment op sequences groups them into blocks.
//
//===----------------------------------------------------------------------===//

#include "passes/Cost.h"
#include "passes/Passes.h"
#include "passes/Remat.h"
#include "ir/Config.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace otc;

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

/// Position of every op of `body`.
static DenseMap<Operation *, unsigned> positions(Block &body) {
  DenseMap<Operation *, unsigned> pos;
  unsigned i = 0;
  for (Operation &op : body)
    pos[&op] = i++;
  return pos;
}

static bool isFloatValue(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

/// The ops of `body` the loss depends on, in order.
static SmallVector<Operation *> forwardOf(Block &body, Value loss) {
  llvm::SetVector<Operation *> fwd;
  SmallVector<Value> work{loss};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !fwd.insert(def))
      continue;
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : body.without_terminator())
    if (fwd.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// The arguments of `step` marked `argAttr` (otc.input: the data;
/// otc.param: the parameters) and the values of `forward` computed from
/// them.
static llvm::DenseSet<Value> computedFrom(func::FuncOp step,
                                          ArrayRef<Operation *> forward,
                                          StringRef argAttr) {
  Block &body = step.getBody().front();
  llvm::DenseSet<Value> from;
  for (BlockArgument arg : body.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), argAttr))
      from.insert(arg);
  for (Operation *op : forward)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return from.contains(v); }))
      for (Value r : op->getResults())
        from.insert(r);
  return from;
}

/// The cut values: float data-dependent results computed from a parameter
/// (the model's activations) that no forward edge between other such values
/// jumps over. A value of the data alone (a padding mask from
/// `attention_mask`, read by every layer) is no edge: it is kept or
/// recomputed from the inputs, which live through the step, and counting it
/// would leave the whole model one block (full recomputation of every layer
/// before the first layer's backward).
static SmallVector<Value> cutValues(Block &body,
                                    DenseMap<Operation *, unsigned> &pos,
                                    ArrayRef<Operation *> forward,
                                    const llvm::DenseSet<Operation *> &fwdSet,
                                    const llvm::DenseSet<Value> &data,
                                    const llvm::DenseSet<Value> &fromParams) {
  SmallVector<Value> chain;
  for (Operation *op : forward)
    for (Value r : op->getResults())
      if (data.contains(r) && fromParams.contains(r) && isFloatValue(r) &&
          !isa<ConstantOp>(op))
        chain.push_back(r);
  unsigned n = body.getOperations().size();
  std::vector<int> cover(n + 2, 0);
  // Float inputs feed the chain from before the first op.
  SmallVector<Value> edges(chain);
  for (BlockArgument arg : body.getArguments())
    if (data.contains(arg) && isFloatValue(arg))
      edges.push_back(arg);
  for (Value v : edges) {
    Operation *def = v.getDefiningOp();
    unsigned p = def ? pos[def] : 0, last = p;
    for (Operation *u : v.getUsers())
      if (fwdSet.contains(u))
        last = std::max(last, pos[u]);
    // Strictly inside (p, last); an argument covers from the first op on.
    unsigned from = def ? p + 1 : 0;
    if (last > from) {
      cover[from] += 1;
      cover[last] -= 1;
    }
  }
  std::vector<int> covered(n + 1, 0);
  int c = 0;
  for (unsigned i = 0; i < n; ++i) {
    c += cover[i];
    covered[i] = c;
  }
  // One cut per op: its first result (a layer norm's output, not its mean
  // and rstd). Segments end at a cut's op, so a second cut of the same op
  // would end none, and every op after it would fall in one segment (a
  // post-norm model, BERT, was one block from its first norm on).
  SmallVector<Value> cuts;
  for (Value v : chain)
    if (covered[pos[v.getDefiningOp()]] == 0 &&
        (cuts.empty() || cuts.back().getDefiningOp() != v.getDefiningOp()))
      cuts.push_back(v);

  return cuts;
}

/// The data-dependent forward ops in segments, each up to and including a
/// cut (the last one to the end).
static SmallVector<SmallVector<Operation *>>
segmentsAt(ArrayRef<Operation *> forward, const llvm::DenseSet<Value> &data,
           ArrayRef<Value> cuts) {
  SmallVector<SmallVector<Operation *>> segments(cuts.size() + 1);
  unsigned s = 0;
  for (Operation *op : forward) {
    if (!llvm::any_of(op->getResults(),
                      [&](Value r) { return data.contains(r); }))
      continue;
    segments[s].push_back(op);
    if (s < cuts.size() && op == cuts[s].getDefiningOp())
      ++s;
  }
  if (segments.back().empty())
    segments.pop_back();

  return segments;
}

/// The blocks (see below) of `segments` into a.blocks.
static void addBlocks(RematAnalysis &a,
                      ArrayRef<SmallVector<Operation *>> segments,
                      ArrayRef<Value> cuts) {
  // Blocks: the longest run of segments whose op sequences repeat with a
  // period p; outside the run every segment is a block of its own. Among
  // runs of equal length the smallest period, then the earliest start, wins.
  SmallVector<unsigned> sig;
  {
    llvm::StringMap<unsigned> ids;
    for (auto &seg : segments) {
      std::string str;
      for (Operation *op : seg)
        str += op->getName().getStringRef().str() + ";";
      sig.push_back(ids.try_emplace(str, ids.size()).first->second);
    }
  }
  // For period p, match[i] counts the segments from i on that equal the one
  // p later, so a run from `start` repeats 1 + match[start] / p times: one
  // backward scan per period, and periods that cannot cover more than the
  // best run so far are skipped.
  unsigned bestP = 0, bestStart = 0, bestReps = 0;
  unsigned nSig = sig.size();
  std::vector<unsigned> match(nSig + 1, 0);
  for (unsigned p = 1; 2 * p <= nSig; ++p) {
    if ((nSig / p) * p <= bestReps * bestP)
      continue;
    match[nSig - p] = 0;
    for (unsigned i = nSig - p; i-- > 0;)
      match[i] = sig[i] == sig[i + p] ? match[i + 1] + 1 : 0;
    for (unsigned start = 0; start + 2 * p <= nSig; ++start) {
      unsigned reps = 1 + match[start] / p;
      if (reps >= 2 && reps * p > bestReps * bestP) {
        bestP = p;
        bestStart = start;
        bestReps = reps;
      }
    }
  }
  auto addBlock = [&](unsigned from, unsigned to) {
    RematBlock b;
    for (unsigned i = from; i < to; ++i)
      llvm::append_range(b.ops, segments[i]);
    if (from > 0)
      b.input = cuts[from - 1];
    a.blocks.push_back(std::move(b));
  };
  if (bestReps >= 2) {
    for (unsigned i = 0; i < bestStart; ++i)
      addBlock(i, i + 1);
    for (unsigned r = 0; r < bestReps; ++r)
      addBlock(bestStart + r * bestP, bestStart + (r + 1) * bestP);
    for (unsigned i = bestStart + bestReps * bestP; i < segments.size(); ++i)
      addBlock(i, i + 1);
  } else {
    for (unsigned i = 0; i < segments.size(); ++i)
      addBlock(i, i + 1);
  }
}

/// Each block's selective-recompute ops (below).
static void markSelective(RematAnalysis &a, const llvm::DenseSet<Value> &data) {
  // Selective: the fused activations, and for each unfused softmax the ops
  // from the scores matmul through the mask and scale to the softmax and its
  // dropout.
  for (RematBlock &b : a.blocks) {
    llvm::DenseSet<Operation *> inBlock(b.ops.begin(), b.ops.end());
    llvm::SetVector<Operation *> core;
    for (Operation *op : b.ops) {
      if (isa<GeluOp, SiluOp>(op))
        core.insert(op);
      if (!isa<SoftmaxOp>(op))
        continue;
      SmallVector<Operation *> up{op};
      while (!up.empty()) {
        Operation *o = up.pop_back_val();
        if (!inBlock.contains(o) || !core.insert(o) || isa<MatMulOp>(o))
          continue;
        for (Value v : o->getOperands())
          if (Operation *d = v.getDefiningOp(); d && data.contains(v))
            up.push_back(d);
      }
      // Downstream only dropout belongs to the core: the next op is the
      // product with the values.
      for (Operation *u : op->getResult(0).getUsers())
        if (inBlock.contains(u) && isa<DropoutOp>(u))
          core.insert(u);
    }
    b.selectiveOps.assign(core.begin(), core.end());
  }
}

FailureOr<RematAnalysis> otc::analyzeTrainStep(func::FuncOp step) {
  RematAnalysis a;
  a.step = step;
  Block &body = step.getBody().front();
  auto pos = positions(body);
  Value loss = body.getTerminator()->getOperand(0);

  // Forward: the ops the loss depends on.
  a.forward = forwardOf(body, loss);
  llvm::DenseSet<Operation *> fwdSet(a.forward.begin(), a.forward.end());
  llvm::DenseSet<Value> data = computedFrom(step, a.forward, attrs::kInput);

  // Saved: forward results read by the backward.
  for (Operation &op : body.without_terminator()) {
    if (fwdSet.contains(&op))
      continue;
    for (Value v : op.getOperands())
      if (Operation *d = v.getDefiningOp(); d && fwdSet.contains(d))
        a.saved.insert(v);
  }

  SmallVector<Value> cuts =
      cutValues(body, pos, a.forward, fwdSet, data,
                computedFrom(step, a.forward, attrs::kParam));
  addBlocks(a, segmentsAt(a.forward, data, cuts), cuts);
  markSelective(a, data);
  return a;
}

//===----------------------------------------------------------------------===//
// Rewriting
//===----------------------------------------------------------------------===//

/// applyRecompute with the forward ops of `step` given; `rewired`, when
/// given, gets each use it redirects with the value it read before.
static int64_t recomputeInBackward(
    func::FuncOp step, const llvm::DenseSet<Value> &recompute,
    const llvm::DenseSet<Operation *> &forward,
    SmallVectorImpl<Operation *> *clonedOps,
    SmallVectorImpl<std::pair<OpOperand *, Value>> *rewired = nullptr) {
  Block &body = step.getBody().front();
  // Ops to rewire: every op outside the recomputed set that reads one of
  // its values after the forward is done, i.e. the backward ops.
  SmallVector<Operation *> backward;
  for (Operation &op : body.without_terminator())
    if (!forward.contains(&op))
      backward.push_back(&op);

  DenseMap<Value, Value> clones;
  int64_t flops = 0;
  std::function<Value(Value, Operation *)> materialize =
      [&](Value v, Operation *before) -> Value {
    if (Value c = clones.lookup(v))
      return c;
    Operation *def = v.getDefiningOp();
    IRMapping map;
    for (Value o : def->getOperands())
      if (recompute.contains(o))
        map.map(o, materialize(o, before));
    OpBuilder b(before);
    Operation *copy = b.clone(*def, map);
    flops += opFlops(copy);
    if (clonedOps)
      clonedOps->push_back(copy);
    for (auto [orig, cl] : llvm::zip(def->getResults(), copy->getResults()))
      clones[orig] = cl;
    return clones.lookup(v);
  };
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (recompute.contains(use.get())) {
        if (rewired)
          rewired->push_back({&use, use.get()});
        use.set(materialize(use.get(), op));
      }
  return flops;
}

int64_t otc::applyRecompute(func::FuncOp step,
                            const llvm::DenseSet<Value> &recompute,
                            SmallVectorImpl<Operation *> *clonedOps) {
  FailureOr<RematAnalysis> an = analyzeTrainStep(step);
  llvm::DenseSet<Operation *> forward(an->forward.begin(), an->forward.end());
  return recomputeInBackward(step, recompute, forward, clonedOps);
}

//===----------------------------------------------------------------------===//
// Policies
//===----------------------------------------------------------------------===//

std::optional<int64_t> otc::parseByteSize(StringRef text) {
  StringRef s = text.trim();
  size_t i = 0;
  while (i < s.size() && (isdigit(s[i]) || s[i] == '.'))
    ++i;
  double v;
  if (i == 0 || s.take_front(i).getAsDouble(v))
    return std::nullopt;
  StringRef unit = s.drop_front(i).trim();
  double scale = llvm::StringSwitch<double>(unit.lower())
                     .Cases("", "b", 1)
                     .Cases("k", "kb", 1e3)
                     .Case("kib", 1024.0)
                     .Cases("m", "mb", 1e6)
                     .Case("mib", 1048576.0)
                     .Cases("g", "gb", 1e9)
                     .Case("gib", 1073741824.0)
                     .Cases("t", "tb", 1e12)
                     .Case("tib", 1099511627776.0)
                     .Default(-1);
  if (scale < 0)
    return std::nullopt;
  return static_cast<int64_t>(v * scale);
}

int64_t otc::persistentBytes(func::FuncOp step) {
  int64_t bytes = 0;
  for (BlockArgument arg : step.getBody().front().getArguments())
    bytes += byteSize(arg); // parameters, inputs, key
  for (unsigned i = 1, e = step.getNumResults(); i < e; ++i)
    bytes += 3 * byteSize(step.getBody().front().getTerminator()->getOperand(
                     i)); // gradient + two Adam moments
  return bytes;
}

/// The values a block recomputes under each per-block choice.
static llvm::DenseSet<Value> valuesFor(const RematAnalysis &a,
                                       ArrayRef<RematChoice> choice) {
  // Block inputs are what `full` keeps, whichever block computes them.
  llvm::DenseSet<Value> inputs;
  for (const RematBlock &b : a.blocks)
    if (b.input)
      inputs.insert(b.input);
  llvm::DenseSet<Value> r;
  for (auto [b, c] : llvm::zip(a.blocks, choice)) {
    ArrayRef<Operation *> ops = c == RematChoice::Full        ? b.ops
                                : c == RematChoice::Selective ? b.selectiveOps
                                                              : ArrayRef<Operation *>();
    for (Operation *op : ops) {
      if (isa<ConstantOp>(op))
        continue;
      for (Value v : op->getResults())
        if (!inputs.contains(v))
          r.insert(v);
    }
  }
  return r;
}

/// Applies `choice` to the step `a` analyzes (whose forward ops are
/// `forward`), measures it, and undoes the rewrite: the same figures as on
/// a copy of the step, without copying it.
static RematOutcome measureChoice(const RematAnalysis &a,
                                  const llvm::DenseSet<Operation *> &forward,
                                  ArrayRef<RematChoice> choice) {
  SmallVector<Operation *> clones;
  SmallVector<std::pair<OpOperand *, Value>> rewired;
  RematOutcome out;
  out.recomputeFlops = recomputeInBackward(a.step, valuesFor(a, choice),
                                           forward, &clones, &rewired);
  out.peakBytes = persistentBytes(a.step) + activationPeak(a.step);
  for (auto [use, old] : rewired)
    use->set(old);
  // A clone's operands are cloned before it: erase users first.
  for (Operation *c : llvm::reverse(clones))
    c->erase();
  return out;
}

FailureOr<RematOutcome> otc::evaluateRemat(ModuleOp module,
                                           ArrayRef<RematChoice> choice) {
  auto step = requireTrainStep(module);
  if (!step)
    return failure();
  FailureOr<RematAnalysis> a = analyzeTrainStep(step);
  if (failed(a))
    return failure();
  llvm::DenseSet<Operation *> forward(a->forward.begin(), a->forward.end());
  return measureChoice(*a, forward, choice);
}

/// A Pareto dynamic program over the blocks on (bytes kept, FLOPs
/// recomputed), with per-block choices none / selective / full, proposes the
/// candidates; each is then measured exactly on a copy of the step. A front
/// of more than maxFrontier points keeps that many, evenly spaced from least
/// to most bytes, so that measuring them stays linear in the model.
size_t otc::maxFrontier(size_t stepOps) {
  return std::max(kMinFrontier, kFrontierWork / std::max<size_t>(stepOps, 1));
}

std::string otc::rematBlockString(ArrayRef<RematChoice> choice) {
  std::string s;
  for (RematChoice c : choice)
    s += c == RematChoice::Full        ? 'f'
         : c == RematChoice::Selective ? 's'
                                       : 'n';
  return s;
}

FailureOr<std::vector<RematCandidate>>
otc::rematFrontier(ModuleOp module,
                   llvm::function_ref<void(size_t, size_t)> progress) {
  auto step = requireTrainStep(module);
  if (!step)
    return failure();
  FailureOr<RematAnalysis> a = analyzeTrainStep(step);
  if (failed(a))
    return failure();
  // Choices are shared prefixes: each point names its last choice and the
  // link of the choices before it, so extending a point copies nothing.
  struct Link {
    unsigned parent;
    RematChoice choice;
  };
  std::vector<Link> links{{~0u, RematChoice::None}}; // 0: no block yet
  struct Point {
    int64_t bytes, flops;
    unsigned parent;
    RematChoice choice;
  };
  llvm::DenseSet<Value> inputs;
  for (const RematBlock &b : a->blocks)
    if (b.input)
      inputs.insert(b.input);
  size_t cap = maxFrontier(step.getBody().front().getOperations().size());
  std::vector<Point> front{{0, 0, 0, RematChoice::None}};
  std::vector<unsigned> frontLinks{0};
  for (const RematBlock &b : a->blocks) {
    llvm::DenseSet<Operation *> core(b.selectiveOps.begin(),
                                     b.selectiveOps.end());
    std::vector<Point> next;
    for (RematChoice c :
         {RematChoice::None, RematChoice::Selective, RematChoice::Full}) {
      if (c == RematChoice::Selective && core.empty())
        continue;
      // Kept bytes and recomputed FLOPs of this block under c.
      int64_t kept = 0, flops = 0;
      for (Operation *op : b.ops) {
        bool recomputed = !isa<ConstantOp>(op) &&
                          (c == RematChoice::Full ||
                           (c == RematChoice::Selective && core.contains(op)));
        for (Value v : op->getResults()) {
          if (recomputed && !inputs.contains(v))
            continue;
          if (a->saved.contains(v) || inputs.contains(v))
            kept += byteSize(v);
        }
        if (recomputed)
          flops += opFlops(op);
      }
      for (auto [p, link] : llvm::zip(front, frontLinks))
        next.push_back({p.bytes + kept, p.flops + flops, link, c});
    }
    // Pareto pruning: by bytes, keeping strictly decreasing FLOPs.
    llvm::sort(next, [](const Point &x, const Point &y) {
      return x.bytes != y.bytes ? x.bytes < y.bytes : x.flops < y.flops;
    });
    std::vector<Point> kept;
    for (Point &p : next)
      if (kept.empty() || p.flops < kept.back().flops)
        kept.push_back(p);
    front.clear();
    if (kept.size() <= cap) {
      front = std::move(kept);
    } else {
      for (size_t i = 0; i < cap; ++i)
        front.push_back(kept[i * (kept.size() - 1) / (cap - 1)]);
    }
    frontLinks.clear();
    for (const Point &p : front) {
      frontLinks.push_back(links.size());
      links.push_back({p.parent, p.choice});
    }
  }
  std::vector<SmallVector<RematChoice>> choices;
  for (unsigned link : frontLinks) {
    SmallVector<RematChoice> choice;
    for (unsigned l = link; l != 0; l = links[l].parent)
      choice.push_back(links[l].choice);
    std::reverse(choice.begin(), choice.end());
    choices.push_back(std::move(choice));
  }
  // The two ends are always measured (see below).
  for (RematChoice c : {RematChoice::None, RematChoice::Full}) {
    SmallVector<RematChoice> all(a->blocks.size(), c);
    if (!llvm::is_contained(choices, all))
      choices.push_back(all);
  }
  std::vector<RematCandidate> measured;
  llvm::DenseSet<Operation *> forward(a->forward.begin(), a->forward.end());
  for (SmallVector<RematChoice> &choice : choices) {
    RematOutcome o = measureChoice(*a, forward, choice);
    measured.push_back({std::move(choice), o});
    if (progress)
      progress(measured.size(), choices.size());
  }
  // The estimate ranked them; the measurement may show some dominated. The
  // two ends (nothing and everything recomputed) stay: the measurement is
  // taken before buffer planning, which can still tell them apart.
  std::vector<RematCandidate> out;
  for (const RematCandidate &c : measured) {
    bool end = llvm::all_equal(c.choice) &&
               (c.choice.empty() || c.choice[0] != RematChoice::Selective);
    bool dominated = !end && llvm::any_of(measured, [&](const RematCandidate &d) {
      return d.outcome.peakBytes <= c.outcome.peakBytes &&
             d.outcome.recomputeFlops <= c.outcome.recomputeFlops &&
             (d.outcome.peakBytes < c.outcome.peakBytes ||
              d.outcome.recomputeFlops < c.outcome.recomputeFlops);
    });
    if (!dominated)
      out.push_back(c);
  }
  llvm::stable_sort(out, [](const RematCandidate &x, const RematCandidate &y) {
    return x.outcome.peakBytes < y.outcome.peakBytes;
  });
  return out;
}

namespace otc {
#define GEN_PASS_DEF_REMAT
#include "passes/Passes.h.inc"
} // namespace otc

namespace {

struct RematPass : public otc::impl::RematBase<RematPass> {
  using RematBase::RematBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = requireTrainStep(module);
    if (!step)
      return signalPassFailure();
    static const char *policies[] = {"none", "full", "selective", "auto"};
    if (!llvm::is_contained(policies, policy)) {
      module.emitError("unknown recomputation policy '")
          << policy << "' (none, full, selective, auto)";
      return signalPassFailure();
    }
    // auto's choice is searched above the pipeline (planner/RematSearch.h):
    // the pass applies it.
    if (policy == "auto" && blocks.empty()) {
      module.emitError("otc-remat policy=auto applies a searched choice: "
                       "give blocks= (otc-compile --remat=auto and otc-plan "
                       "--memory-budget search for it)");
      return signalPassFailure();
    }
    FailureOr<RematAnalysis> a = analyzeTrainStep(step);
    if (failed(a))
      return signalPassFailure();
    size_t n = a->blocks.size();
    SmallVector<RematChoice> choice(n, RematChoice::None);
    if (!blocks.empty()) {
      if (blocks.size() != n ||
          blocks.find_first_not_of("nsf") != std::string::npos) {
        module.emitError("blocks '")
            << blocks << "' must give n, s or f for each of the " << n
            << " blocks";
        return signalPassFailure();
      }
      for (size_t i = 0; i < n; ++i)
        choice[i] = blocks[i] == 'f'   ? RematChoice::Full
                    : blocks[i] == 's' ? RematChoice::Selective
                                       : RematChoice::None;
    } else if (policy == "full")
      choice.assign(n, RematChoice::Full);
    else if (policy == "selective")
      choice.assign(n, RematChoice::Selective);
    llvm::DenseSet<Value> values = valuesFor(*a, choice);
    SmallVector<std::string> recomputedNames, savedNames;
    for (Value v : a->saved)
      (values.contains(v) ? recomputedNames : savedNames)
          .push_back(describe(v));
    llvm::sort(recomputedNames);
    llvm::sort(savedNames);
    llvm::DenseSet<Operation *> forward(a->forward.begin(), a->forward.end());
    int64_t flops = recomputeInBackward(step, values, forward, nullptr);

    Builder b(module.getContext());
    auto strings = [&](ArrayRef<std::string> v) {
      SmallVector<Attribute> attrs;
      for (const std::string &s : v)
        attrs.push_back(b.getStringAttr(s));
      return b.getArrayAttr(attrs);
    };
    std::string choices = rematBlockString(choice);
    module->setAttr(
        attrs::kRemat,
        b.getDictionaryAttr({
            b.getNamedAttr("policy", b.getStringAttr(policy)),
            b.getNamedAttr("blocks", b.getStringAttr(choices)),
            b.getNamedAttr("recompute_flops", b.getI64IntegerAttr(flops)),
            b.getNamedAttr("saved", strings(savedNames)),
            b.getNamedAttr("recomputed", strings(recomputedNames)),
        }));
  }

  /// A forward value by the ONNX node that computes it.
  static std::string describe(Value v) {
    Operation *def = v.getDefiningOp();
    std::string name;
    if (auto n = dyn_cast<NameLoc>(def->getLoc()))
      name = n.getName().str();
    else
      name = def->getName().getStringRef().str();
    if (def->getNumResults() > 1)
      name += ":" + std::to_string(cast<OpResult>(v).getResultNumber());
    return name;
  }


};

} // namespace
