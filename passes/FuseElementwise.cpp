//===- FuseElementwise.cpp - chains of elementwise kernels as one ---------===//
//
// Buffer-level fusion: a kernel made only of ops with a scalar expression,
// all of one result shape (its domain), takes in the kernels of the same kind
// and domain that write its inputs. The merged body computes element i of
// every op in turn, so an intermediate that nothing else reads never reaches
// memory. The producer's work moves down to the consumer's position, which is
// legal when nothing in between writes what the producer reads or uses what
// it writes. Buffers reached through views are not touched (their bytes have
// other names). Then a slice whose only readers are such kernels is copied
// into each of them (they read its input at its offsets) and its buffer
// goes, where that keeps no more bytes alive. See Passes.td for the
// contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace otc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

bool otc::isElementwiseKernel(otck::KernelOp k) {
  Block &body = k.getBody().front();
  if (body.without_terminator().empty() || k.getOutputs().empty())
    return false;
  ArrayRef<int64_t> domain =
      cast<MemRefType>(k.getOutputs()[0].getType()).getShape();
  // Slices alone are a copy (emitted as one, 16-byte packets on cuda).
  if (llvm::all_of(body.without_terminator(),
                   [](Operation &op) { return isa<SliceOp>(op); }))
    return false;
  for (Operation &op : body.without_terminator()) {
    // A slice of an input (folded in by this pass) reads its element i
    // from that input at the slice's offset.
    if (auto slice = dyn_cast<SliceOp>(op)) {
      auto arg = dyn_cast<BlockArgument>(slice.getInput());
      if (!arg || arg.getOwner() != &body ||
          cast<RankedTensorType>(slice.getType()).getShape() != domain)
        return false;
      continue;
    }
    if (!isa<ScalarExpressionOpInterface>(op) || op.getNumResults() != 1)
      return false;
    auto t = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    if (!t || !t.hasStaticShape() || t.getShape() != domain)
      return false;
    for (Type ot : op.getOperandTypes()) {
      auto tt = dyn_cast<RankedTensorType>(ot);
      if (!tt || !tt.hasStaticShape())
        return false;
    }
  }
  for (Value out : k.getOutputs())
    if (cast<MemRefType>(out.getType()).getShape() != domain)
      return false;
  return true;
}

namespace {

/// Whether `op` (an op of the function's block) reads or writes `buffer`'s
/// bytes, and whether it writes them.
struct Access {
  bool reads = false, writes = false;
};

static Access accessOf(Operation *op, Value buffer) {
  Access a;
  if (auto k = dyn_cast<otck::KernelOp>(op)) {
    for (Value v : k.getInputs())
      a.reads |= otck::storageOf(v) == buffer;
    for (Value v : k.getOutputs())
      a.writes |= otck::storageOf(v) == buffer;
    return a;
  }
  if (auto g = dyn_cast<otck::GemmOp>(op)) {
    for (Value v : g.getReadBuffers())
      a.reads |= otck::storageOf(v) == buffer;
    for (Value v : g.getWrittenBuffers())
      a.writes |= otck::storageOf(v) == buffer;
    return a;
  }
  if (auto c = dyn_cast<otck::CopyOp>(op)) {
    a.reads = otck::storageOf(c.getSource()) == buffer;
    a.writes = otck::storageOf(c.getTarget()) == buffer;
    return a;
  }
  if (isa<otck::ViewOp, otck::BufferOp, func::ReturnOp>(op))
    return a;
  // Anything else: assume the worst for the buffers it names.
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()) && otck::storageOf(v) == buffer)
      a.reads = a.writes = true;
  return a;
}

/// Whether no op strictly between `from` and `to` writes a buffer of
/// `reads`, or reads or writes one of `writes`.
static bool untouchedBetween(Operation *from, Operation *to,
                             ArrayRef<Value> reads, ArrayRef<Value> writes) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    for (Value r : reads)
      if (accessOf(op, r).writes)
        return false;
    for (Value w : writes) {
      Access a = accessOf(op, w);
      if (a.reads || a.writes)
        return false;
    }
  }
  return true;
}

/// Whether `buffer` is seen through a view anywhere.
static bool hasViews(Value buffer) {
  return llvm::any_of(buffer.getUsers(),
                      [](Operation *u) { return isa<otck::ViewOp>(u); });
}

struct FuseElementwisePass
    : public otc::impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      fuseFunction(f);
      fuseSiblings(f);
      // Slices fold into the merged chains (where the readers of both
      // halves are one kernel, folding keeps no more bytes alive), which
      // may then merge further.
      if (foldSliceReads(f)) {
        fuseFunction(f);
        fuseSiblings(f);
      }
    }
  }

  /// Slice folding: a slice kernel whose output only elementwise kernels
  /// of its shape read (the halves of a fused gate/up projection's output,
  /// read by the activation and by its gradient) is copied into each of
  /// them, which then read the slice's input at the slice's offsets, and
  /// the slice and its buffer go: the halves are never written. Each
  /// reader must come after the slice with nothing in between writing the
  /// slice's input, and must not write that input itself.
  bool foldSliceReads(func::FuncOp f) {
    bool folded = false;
    // The slice kernels of each input, decided together: folding them
    // keeps the input alive to the last reader of any of them.
    llvm::MapVector<Value, SmallVector<otck::KernelOp>> groups;
    for (otck::KernelOp k : f.getBody().getOps<otck::KernelOp>())
      if (sliceKernel(k))
        groups[otck::storageOf(k.getInputs()[0])].push_back(k);
    for (auto &[x, group] : groups) {
      SmallVector<otck::KernelOp> folding;
      Operation *last = nullptr; // the latest reader of a folded output
      for (otck::KernelOp s : group)
        if (std::optional<SmallVector<otck::KernelOp>> readers =
                foldableReaders(s)) {
          folding.push_back(s);
          for (otck::KernelOp r : *readers)
            if (!last || last->isBeforeInBlock(r))
              last = r;
        }
      if (folding.empty() || !keepsPeakFolded(x, folding, last))
        continue;
      for (otck::KernelOp s : folding) {
        Value y = s.getOutputs()[0];
        // Asked again: folding a sibling slice rebuilt the readers they
        // share (an activation reading both halves).
        for (otck::KernelOp r : *foldableReaders(s))
          foldSliceInto(s, r);
        s.erase();
        if (y.use_empty())
          y.getDefiningOp()->erase();
      }
      folded = true;
    }
    return folded;
  }

  /// The kernels that read slice kernel `s`'s output, when it may be
  /// folded into them: each an elementwise kernel of its shape after it
  /// that writes neither that output nor the slice's input, with nothing
  /// in between writing the input, and nothing else reading the output.
  static std::optional<SmallVector<otck::KernelOp>>
  foldableReaders(otck::KernelOp s) {
    Value x = otck::storageOf(s.getInputs()[0]), y = s.getOutputs()[0];
    auto buf = y.getDefiningOp<otck::BufferOp>();
    if (!buf || buf.getSlot() || hasViews(y) || hasViews(x))
      return std::nullopt;
    SmallVector<otck::KernelOp> readers;
    for (Operation *user : y.getUsers()) {
      if (user == s.getOperation() || isa<otck::BufferOp>(user))
        continue;
      auto r = dyn_cast<otck::KernelOp>(user);
      if (!r || r->getBlock() != s->getBlock() || !s->isBeforeInBlock(r) ||
          !isElementwiseKernel(r) || llvm::is_contained(r.getOutputs(), y) ||
          cast<MemRefType>(r.getOutputs()[0].getType()).getShape() !=
              cast<MemRefType>(y.getType()).getShape() ||
          llvm::any_of(r.getOutputs(),
                       [&](Value o) { return otck::storageOf(o) == x; }) ||
          !untouchedBetween(s, r, {x}, {}))
        return std::nullopt;
      if (!llvm::is_contained(readers, r))
        readers.push_back(r);
    }
    if (readers.empty())
      return std::nullopt;
    return readers;
  }

  /// Whether folding the slice kernels `folding` of input `x` (read last by
  /// `last`) adds no live bytes: `x` is kept that long anyway (a slot, or
  /// read then), or the outputs that live until `last` are at least its
  /// bytes (the halves that both the activation and its gradient read).
  static bool keepsPeakFolded(Value x, ArrayRef<otck::KernelOp> folding,
                              Operation *last) {
    auto buf = x.getDefiningOp<otck::BufferOp>();
    if (!buf || buf.getSlot())
      return true;
    for (Operation *u : x.getUsers())
      if (!isa<otck::BufferOp>(u) &&
          llvm::none_of(
              folding,
              [&](otck::KernelOp k) { return k.getOperation() == u; }) &&
          u->getBlock() == last->getBlock() && !u->isBeforeInBlock(last))
        return true;
    int64_t freed = 0;
    for (otck::KernelOp s : folding) {
      Value y = s.getOutputs()[0];
      if (llvm::is_contained(y.getUsers(), last))
        freed += byteSize(cast<MemRefType>(y.getType()));
    }
    return freed >= byteSize(cast<MemRefType>(x.getType()));
  }

  /// Whether `k` is a kernel of one otc.slice.
  static bool sliceKernel(otck::KernelOp k) {
    Block &body = k.getBody().front();
    return llvm::hasSingleElement(body.without_terminator()) &&
           isa<SliceOp>(body.front()) && k.getInputs().size() == 1 &&
           k.getOutputs().size() == 1;
  }

  /// A new kernel at `b` reading `ins` and writing `outs`, with an empty
  /// body block whose arguments (the tensors of `ins`) `argOf` maps to.
  static Block *newKernel(OpBuilder &b, Location loc, ArrayRef<Value> ins,
                          ValueRange outs,
                          DenseMap<Value, BlockArgument> &argOf) {
    auto k = b.create<otck::KernelOp>(loc, ins, outs);
    Block *body = new Block();
    k.getBody().push_back(body);
    for (Value v : ins) {
      auto mt = cast<MemRefType>(v.getType());
      argOf[v] = body->addArgument(
          RankedTensorType::get(mt.getShape(), mt.getElementType()),
          v.getLoc());
    }
    return body;
  }

  /// Rebuilds `reader` in place to read slice kernel `s`'s input through a
  /// copy of its slice instead of its output.
  static void foldSliceInto(otck::KernelOp s, otck::KernelOp reader) {
    Value x = s.getInputs()[0], y = s.getOutputs()[0];
    llvm::SetVector<Value> ins;
    for (Value v : reader.getInputs())
      ins.insert(v == y ? x : v);
    OpBuilder b(reader);
    DenseMap<Value, BlockArgument> argOf;
    Block *body = newKernel(b, b.getFusedLoc({s.getLoc(), reader.getLoc()}),
                            ins.getArrayRef(), reader.getOutputs(), argOf);
    OpBuilder kb = OpBuilder::atBlockEnd(body);
    Block &sb = s.getBody().front();
    IRMapping smap;
    smap.map(sb.getArgument(0), argOf[x]);
    Value sliced = kb.clone(sb.front(), smap)->getResult(0);
    Block &rb = reader.getBody().front();
    IRMapping rmap;
    for (auto [arg, v] : llvm::zip(rb.getArguments(), reader.getInputs()))
      rmap.map(arg, v == y ? sliced : Value(argOf[v]));
    for (Operation &op : rb.without_terminator())
      kb.clone(op, rmap);
    SmallVector<Value> yielded;
    for (Value v : cast<otck::YieldOp>(rb.getTerminator()).getValues())
      yielded.push_back(rmap.lookup(v));
    kb.create<otck::YieldOp>(reader.getLoc(), yielded);
    reader.erase();
  }

  void fuseFunction(func::FuncOp f) {
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<otck::KernelOp> kernels(f.getBody().getOps<otck::KernelOp>());
      for (otck::KernelOp consumer : kernels) {
        if (!isElementwiseKernel(consumer))
          continue;
        while (otck::KernelOp producer = findProducer(consumer)) {
          consumer = merge(producer, consumer);
          changed = true;
        }
      }
    }
  }

  /// The body ops of a kernel.
  static unsigned opCount(otck::KernelOp k) {
    return std::distance(k.getBody().front().without_terminator().begin(),
                         k.getBody().front().without_terminator().end());
  }

  /// A kernel that `consumer` can take in, or null.
  otck::KernelOp findProducer(otck::KernelOp consumer) {
    auto domain =
        cast<MemRefType>(consumer.getOutputs()[0].getType()).getShape();
    Block *block = consumer->getBlock();
    for (Value in : consumer.getInputs()) {
      auto buf = in.getDefiningOp<otck::BufferOp>();
      if (!buf || hasViews(buf) ||
          cast<MemRefType>(in.getType()).getShape() != domain)
        continue;
      // The one kernel that writes it, before the consumer.
      otck::KernelOp producer;
      bool otherWriter = false;
      for (Operation *user : buf->getUsers()) {
        if (user == consumer.getOperation())
          continue;
        Access a = accessOf(user, buf);
        if (!a.writes)
          continue;
        auto k = dyn_cast<otck::KernelOp>(user);
        if (producer || !k)
          otherWriter = true;
        producer = k;
      }
      if (otherWriter || !producer || producer->getBlock() != block ||
          !producer->isBeforeInBlock(consumer) ||
          !isElementwiseKernel(producer) ||
          cast<MemRefType>(producer.getOutputs()[0].getType()).getShape() !=
              domain)
        continue;
      if (llvm::is_contained(consumer.getOutputs(), in))
        continue; // the consumer writes it too
      if (opCount(producer) + opCount(consumer) > maxOps)
        continue;
      llvm::SetVector<Value> buffers;
      for (otck::KernelOp k : {producer, consumer}) {
        buffers.insert(k.getInputs().begin(), k.getInputs().end());
        buffers.insert(k.getOutputs().begin(), k.getOutputs().end());
      }
      if (buffers.size() - 1 > maxBuffers)
        continue;
      if (!canMoveDown(producer, consumer) || !keepsPeak(producer, consumer))
        continue;
      return producer;
    }
    return nullptr;
  }

  /// Whether `producer` may run at `consumer`'s position instead of its own:
  /// no op in between writes a buffer it reads, or reads or writes a buffer
  /// it writes; and whatever reads its outputs comes after the consumer.
  bool canMoveDown(otck::KernelOp producer, otck::KernelOp consumer) {
    SmallVector<Value> reads, writes;
    for (Value v : producer.getInputs())
      reads.push_back(otck::storageOf(v));
    for (Value v : producer.getOutputs()) {
      Value s = otck::storageOf(v);
      if (s != v || hasViews(s))
        return false;
      writes.push_back(s);
    }
    return untouchedBetween(producer, consumer, reads, writes);
  }

  /// Whether running `producer` at `consumer`'s position adds no live bytes
  /// between them: the temporaries whose last reader is the producer then
  /// live on to the consumer, while the producer's outputs are born there
  /// instead (or never, when only the consumer read them).
  static bool keepsPeak(otck::KernelOp producer, otck::KernelOp consumer) {
    bool between = false;
    for (Operation *op = producer->getNextNode(); op != consumer;
         op = op->getNextNode())
      between |= !isa<otck::BufferOp>(op);
    if (!between)
      return true;
    int64_t extended = 0, shortened = 0;
    for (Value v : producer.getOutputs())
      shortened += byteSize(cast<MemRefType>(v.getType()));
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value v : producer.getInputs()) {
      auto buf = v.getDefiningOp<otck::BufferOp>();
      if (!buf || buf.getSlot() || !seen.insert(v).second ||
          llvm::is_contained(consumer.getInputs(), v))
        continue;
      bool readLater = llvm::any_of(v.getUsers(), [&](Operation *u) {
        return u != producer.getOperation() &&
               u->getBlock() == producer->getBlock() &&
               producer->isBeforeInBlock(u);
      });
      if (!readLater)
        extended += byteSize(cast<MemRefType>(v.getType()));
    }
    return extended <= shortened;
  }

  /// Sibling fusion: two elementwise kernels of one domain that read a
  /// common buffer, the later not reading what the earlier writes, become
  /// one kernel at the earlier's position, so the common inputs are read
  /// once (SwiGLU's backward: both gradients read dy and the gate's input).
  void fuseSiblings(func::FuncOp f) {
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<otck::KernelOp> kernels(f.getBody().getOps<otck::KernelOp>());
      for (otck::KernelOp first : kernels) {
        if (!isElementwiseKernel(first))
          continue;
        if (otck::KernelOp second = findSibling(first)) {
          for (Value out : second.getOutputs())
            if (Operation *def = out.getDefiningOp();
                def && first->isBeforeInBlock(def))
              def->moveBefore(first);
          merge(first, second, first);
          changed = true;
          break;
        }
      }
    }
  }

  /// The nearest later kernel that `first` can take in as a sibling, or null.
  otck::KernelOp findSibling(otck::KernelOp first) {
    auto domain = cast<MemRefType>(first.getOutputs()[0].getType()).getShape();
    Block *block = first->getBlock();
    otck::KernelOp nearest;
    for (Value in : first.getInputs()) {
      Value buf = otck::storageOf(in);
      for (Operation *user : buf.getUsers()) {
        auto k = dyn_cast<otck::KernelOp>(user);
        if (!k || k == first || k->getBlock() != block ||
            !first->isBeforeInBlock(k) ||
            (nearest && nearest->isBeforeInBlock(k)) ||
            !llvm::any_of(k.getInputs(),
                          [&](Value v) { return otck::storageOf(v) == buf; }))
          continue;
        if (canTakeSibling(first, k, domain))
          nearest = k;
      }
    }
    return nearest;
  }

  /// Whether `second` may run beside `first`, at its position, in one
  /// kernel: same domain, no dependence between them, nothing in between
  /// that writes what `second` reads or touches what it writes, its inputs
  /// defined before `first`, and no more live bytes between the two.
  bool canTakeSibling(otck::KernelOp first, otck::KernelOp second,
                      ArrayRef<int64_t> domain) {
    if (!isElementwiseKernel(second) ||
        cast<MemRefType>(second.getOutputs()[0].getType()).getShape() != domain)
      return false;
    if (opCount(first) + opCount(second) > maxOps)
      return false;
    llvm::SetVector<Value> buffers;
    for (otck::KernelOp k : {first, second}) {
      buffers.insert(k.getInputs().begin(), k.getInputs().end());
      buffers.insert(k.getOutputs().begin(), k.getOutputs().end());
    }
    if (buffers.size() > maxBuffers)
      return false;
    SmallVector<Value> firstTouches;
    for (Value v : first.getInputs())
      firstTouches.push_back(otck::storageOf(v));
    for (Value v : first.getOutputs())
      firstTouches.push_back(otck::storageOf(v));
    SmallVector<Value> reads, writes;
    for (Value v : second.getInputs()) {
      Operation *def = v.getDefiningOp();
      if (def && !def->isBeforeInBlock(first))
        return false;
      reads.push_back(otck::storageOf(v));
    }
    for (Value v : second.getOutputs()) {
      Value s = otck::storageOf(v);
      // Its buffer op moves up with it; views of it read through
      // storageOf below, so they need no exclusion.
      if (s != v || !v.getDefiningOp<otck::BufferOp>() ||
          llvm::is_contained(firstTouches, s))
        return false;
      writes.push_back(s);
    }
    for (Value v : first.getOutputs())
      if (llvm::is_contained(reads, otck::storageOf(v)))
        return false; // a producer and its consumer: fuseFunction's case
    if (!untouchedBetween(first, second, reads, writes))
      return false;
    // Live bytes: the second's outputs are born at the first's position;
    // the inputs it alone read after the first die there.
    int64_t born = 0, freed = 0;
    for (Value v : writes)
      if (!v.getDefiningOp<otck::BufferOp>().getSlot())
        born += byteSize(cast<MemRefType>(v.getType()));
    llvm::SmallPtrSet<Value, 8> seen;
    for (Value v : second.getInputs()) {
      auto buf = v.getDefiningOp<otck::BufferOp>();
      if (!buf || buf.getSlot() || hasViews(v) || !seen.insert(v).second)
        continue;
      bool readLater = llvm::any_of(v.getUsers(), [&](Operation *u) {
        return u != second.getOperation() &&
               u->getBlock() == first->getBlock() && first->isBeforeInBlock(u);
      });
      if (!readLater)
        freed += byteSize(cast<MemRefType>(v.getType()));
    }
    return born <= freed;
  }

  /// Builds the kernel of `producer` then `consumer` at the consumer's
  /// position (or before `at`); a producer output that only the consumer
  /// read is dropped with its buffer.
  otck::KernelOp merge(otck::KernelOp producer, otck::KernelOp consumer,
                       Operation *at = nullptr) {
    // Producer outputs still needed after the merge.
    SmallVector<bool> keep;
    for (Value out : producer.getOutputs()) {
      bool otherUse = llvm::any_of(out.getUsers(), [&](Operation *u) {
        return u != producer.getOperation() && u != consumer.getOperation() &&
               !isa<otck::BufferOp>(u);
      });
      auto buf = out.getDefiningOp<otck::BufferOp>();
      keep.push_back(otherUse || !buf || buf.getSlot());
    }

    llvm::SetVector<Value> ins;
    SmallVector<Value> outs;
    for (Value v : producer.getInputs())
      ins.insert(v);
    for (Value v : consumer.getInputs())
      if (!llvm::is_contained(producer.getOutputs(), v))
        ins.insert(v);
    for (auto [i, v] : llvm::enumerate(producer.getOutputs()))
      if (keep[i])
        outs.push_back(v);
    for (Value v : consumer.getOutputs())
      outs.push_back(v);

    OpBuilder b(at ? at : consumer.getOperation());
    DenseMap<Value, BlockArgument> argOf;
    Block *body =
        newKernel(b, b.getFusedLoc({producer.getLoc(), consumer.getLoc()}),
                  ins.getArrayRef(), outs, argOf);
    auto fused = cast<otck::KernelOp>(body->getParentOp());
    OpBuilder kb = OpBuilder::atBlockEnd(body);
    IRMapping map;
    Block &pb = producer.getBody().front();
    for (auto [arg, v] : llvm::zip(pb.getArguments(), producer.getInputs()))
      map.map(arg, argOf[v]);
    for (Operation &op : pb.without_terminator())
      kb.clone(op, map);
    auto pyield = cast<otck::YieldOp>(pb.getTerminator());
    SmallVector<Value> yielded;
    DenseMap<Value, Value> producedValue; // producer output buffer -> value
    for (auto [i, out] : llvm::enumerate(producer.getOutputs())) {
      Value v = map.lookup(pyield.getValues()[i]);
      producedValue[out] = v;
      if (keep[i])
        yielded.push_back(v);
    }
    Block &cb = consumer.getBody().front();
    IRMapping cmap;
    for (auto [arg, v] : llvm::zip(cb.getArguments(), consumer.getInputs())) {
      auto it = producedValue.find(v);
      cmap.map(arg, it != producedValue.end() ? it->second : Value(argOf[v]));
    }
    for (Operation &op : cb.without_terminator())
      kb.clone(op, cmap);
    for (Value v : cast<otck::YieldOp>(cb.getTerminator()).getValues())
      yielded.push_back(cmap.lookup(v));
    kb.create<otck::YieldOp>(consumer.getLoc(), yielded);

    SmallVector<Value> dropped;
    for (auto [i, out] : llvm::enumerate(producer.getOutputs()))
      if (!keep[i])
        dropped.push_back(out);
    consumer.erase();
    producer.erase();
    for (Value v : dropped)
      if (v.use_empty())
        v.getDefiningOp()->erase();
    return fused;
  }
};

} // namespace
