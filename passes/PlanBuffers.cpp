//===- PlanBuffers.cpp - arena offsets from liveness -----------------------===//
//
// Places every otck.buffer in one arena. Persistent slots get one place each
// for the whole program; temporaries are packed first-fit by their live
// ranges (first to last use in op order) into a region that every function
// reuses, since the runtime calls one function at a time.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "ir/OtckDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace otc {
#define GEN_PASS_DEF_PLANBUFFERS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

int64_t otc::storageBytes(Type elementType) {
  if (elementType.isInteger(1))
    return 1;
  return (elementType.getIntOrFloatBitWidth() + 7) / 8;
}

namespace {

static int64_t bufferBytes(otck::BufferOp buf) {
  MemRefType t = buf.getType();
  return t.getNumElements() * storageBytes(t.getElementType());
}

static int64_t alignTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/// A temporary with its live range [first, last] in op positions.
struct Interval {
  otck::BufferOp buffer;
  unsigned first, last;
  int64_t size;
};

/// Live ranges of the temporaries of `f`, in order of first use.
static SmallVector<Interval> liveRanges(func::FuncOp f) {
  llvm::DenseMap<Operation *, unsigned> pos;
  unsigned i = 0;
  f.walk([&](Operation *op) {
    if (op->getParentOp() == f.getOperation())
      pos[op] = i++;
  });
  SmallVector<Interval> out;
  for (auto buf : f.getBody().getOps<otck::BufferOp>()) {
    if (buf.getSlot())
      continue;
    Interval iv{buf, ~0u, 0, bufferBytes(buf)};
    for (Operation *user : buf->getUsers()) {
      unsigned p = pos.lookup(user);
      iv.first = std::min(iv.first, p);
      iv.last = std::max(iv.last, p);
    }
    if (iv.first == ~0u) // never used: lives at its own position only
      iv.first = iv.last = pos.lookup(buf);
    out.push_back(iv);
  }
  llvm::stable_sort(out, [](const Interval &a, const Interval &b) {
    return a.first < b.first;
  });
  return out;
}

struct PlanBuffersPass : public otc::impl::PlanBuffersBase<PlanBuffersPass> {
  using PlanBuffersBase::PlanBuffersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError("alignment must be a power of two, got ") << alignment.getValue();
      return signalPassFailure();
    }
    Builder b(module.getContext());

    // Persistent slots, in order of first appearance.
    llvm::StringMap<std::pair<int64_t, MemRefType>> slots;
    int64_t persistent = 0;
    WalkResult r = module.walk([&](otck::BufferOp buf) {
      auto slot = buf.getSlot();
      if (!slot)
        return WalkResult::advance();
      auto [it, inserted] = slots.try_emplace(*slot, persistent, buf.getType());
      if (inserted) {
        persistent = alignTo(persistent + bufferBytes(buf), alignment);
      } else if (it->second.second != buf.getType()) {
        buf.emitError("slot '") << *slot << "' has type " << buf.getType()
                                << " here and " << it->second.second
                                << " elsewhere";
        return WalkResult::interrupt();
      }
      buf.setOffsetAttr(b.getI64IntegerAttr(it->second.first));
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return signalPassFailure();

    // Temporaries: first fit over live ranges, per function.
    int64_t scratchPeak = 0;
    for (auto f : module.getOps<func::FuncOp>()) {
      SmallVector<Interval> ivs = liveRanges(f);
      SmallVector<std::pair<Interval *, int64_t>> placed;
      for (Interval &iv : ivs) {
        // Blocks live during iv, by offset.
        SmallVector<std::pair<int64_t, int64_t>> busy;
        for (auto &[other, off] : placed)
          if (other->last >= iv.first && other->first <= iv.last)
            busy.push_back({off, off + other->size});
        llvm::sort(busy);
        int64_t off = 0;
        for (auto [lo, hi] : busy) {
          if (off + iv.size <= lo)
            break;
          off = std::max(off, alignTo(hi, alignment));
        }
        placed.push_back({&iv, off});
        scratchPeak = std::max(scratchPeak, off + iv.size);
        iv.buffer.setOffsetAttr(b.getI64IntegerAttr(persistent + off));
      }
    }
    module->setAttr(otck::kArenaSizeAttr,
                    b.getI64IntegerAttr(alignTo(persistent + scratchPeak,
                                                alignment)));
    if (failed(verifyBufferPlan(module)))
      return signalPassFailure();
  }
};

} // namespace

LogicalResult otc::verifyBufferPlan(ModuleOp module) {
  auto arena = module->getAttrOfType<IntegerAttr>(otck::kArenaSizeAttr);
  if (!arena)
    return module.emitError("no ") << otck::kArenaSizeAttr << ": buffers are not planned";
  for (auto f : module.getOps<func::FuncOp>()) {
    SmallVector<Interval> ivs = liveRanges(f);
    // Persistent slots live throughout: give them the whole range.
    for (auto buf : f.getBody().getOps<otck::BufferOp>())
      if (buf.getSlot())
        ivs.push_back({buf, 0, ~0u, bufferBytes(buf)});
    for (Interval &iv : ivs) {
      auto off = iv.buffer.getOffset();
      if (!off)
        return iv.buffer.emitError("buffer has no offset");
      if (*off < 0 || *off + iv.size > arena.getInt())
        return iv.buffer.emitError("buffer lies outside the arena");
    }
    for (size_t i = 0; i < ivs.size(); ++i)
      for (size_t j = i + 1; j < ivs.size(); ++j) {
        Interval &a = ivs[i], &c = ivs[j];
        if (a.buffer.getSlot() && c.buffer.getSlot() &&
            *a.buffer.getSlot() == *c.buffer.getSlot())
          continue;
        bool liveTogether = a.last >= c.first && a.first <= c.last;
        int64_t ao = *a.buffer.getOffset(), co = *c.buffer.getOffset();
        bool overlap = ao < co + c.size && co < ao + a.size;
        if (liveTogether && overlap && a.size && c.size)
          return a.buffer.emitError("buffer overlaps another live buffer at "
                                    "offset ")
                 << co;
      }
  }
  return success();
}
