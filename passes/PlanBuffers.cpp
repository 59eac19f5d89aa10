//===- PlanBuffers.cpp - arena offsets from liveness -----------------------===//
//
// Places every otck.buffer in one arena. Persistent slots get one place each
// for the whole program; temporaries live from their first to their last use
// in op order and share a region that every function reuses, since the
// runtime calls one function at a time. An elementwise kernel whose input
// dies where its output is born writes the output over the input (in place).
// The rest is packed largest first, each at the lowest offset free for its
// whole live range.
//
//===----------------------------------------------------------------------===//

#include "passes/Liveness.h"
#include "passes/Passes.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <queue>

namespace otc {
#define GEN_PASS_DEF_PLANBUFFERS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

static int64_t bufferBytes(otck::BufferOp buf) {
  return byteSize(buf.getType());
}

static int64_t alignTo(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

using Interval = BufferInterval;

/// Marks a buffer that a kernel writes over one of its dying inputs.
constexpr const char kInPlaceAttr[] = "otck.in_place";

/// Whether `op`'s every output element depends only on the same element of
/// its same-shaped operands, read before the element is written (the
/// Otc_Elementwise trait).
static bool isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::OtcElementwise>();
}

/// Whether kernel `k` (whose single op is `body`) may write its output
/// `out` over its input `in`: an elementwise op over an input of the same
/// type; a library call over the operand it names
/// (LibraryCallOpInterface::getInPlaceOperand), for its first result.
static bool canWriteOver(otck::KernelOp k, Operation *body, otck::BufferOp in,
                         otck::BufferOp out) {
  if (in.getType() != out.getType())
    return false;
  if (auto lib = dyn_cast<LibraryCallOpInterface>(body)) {
    std::optional<unsigned> n = lib.getInPlaceOperand();
    auto arg = n ? dyn_cast<BlockArgument>(body->getOperand(*n)) : nullptr;
    return arg && k.getInputs()[arg.getArgNumber()] == in.getResult() &&
           k.getOutputs()[0] == out.getResult();
  }
  return isElementwise(body);
}

/// The single op of a kernel body, or null.
static Operation *kernelBody(otck::KernelOp k) {
  Block &b = k.getBody().front();
  if (!llvm::hasSingleElement(b.without_terminator()))
    return nullptr;
  return &b.front();
}

/// Whether kernel `k` may write its output `out` over its input `in`.
/// A merged elementwise chain reads every input's element before it
/// stores any output's, so it may, for an input of the output's type.
static bool canWriteOver(otck::KernelOp k, otck::BufferOp in,
                         otck::BufferOp out) {
  if (Operation *body = kernelBody(k))
    return canWriteOver(k, body, in, out);
  return in.getType() == out.getType() && isElementwiseKernel(k);
}

} // namespace

/// Live ranges of the temporaries of `f`, in order of first use.
SmallVector<BufferInterval> otc::temporaryLiveRanges(func::FuncOp f) {
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
    otck::forEachByteUser(buf, [&](Operation *user) {
      unsigned p = pos.lookup(user);
      iv.first = std::min(iv.first, p);
      iv.last = std::max(iv.last, p);
    });
    if (iv.first == ~0u) // never used: lives at its own position only
      iv.first = iv.last = pos.lookup(buf);
    // Written over a dying input: its bytes are that input's at the kernel.
    if (buf->hasAttr(kInPlaceAttr)) {
      ++iv.first;
      iv.last = std::max(iv.last, iv.first);
    }
    out.push_back(iv);
  }
  llvm::stable_sort(out, [](const Interval &a, const Interval &b) {
    return a.first < b.first;
  });
  return out;
}

namespace {

static SmallVector<Interval> liveRanges(func::FuncOp f) {
  return temporaryLiveRanges(f);
}

/// The bytes taken in the arena over time, for placing live ranges at the
/// lowest offset free over their whole range: the lowest multiple of the
/// alignment where no placed range that shares a moment with it overlaps it
/// in bytes (for two ranges of bytes, one ending where the next begins
/// does not count).
///
/// A segment tree over op positions keeps, at each node, the union of the
/// bytes of the placed ranges that cover the node's span (`whole`) and of
/// those that cover part of it (`part`), each as disjoint [lo, hi) runs. The
/// ranges that share a moment with [first, last] are exactly those in
/// `whole` or `part` of the nodes tiling [first, last], or in `whole` of
/// their ancestors, so a query looks at a few dozen maps, and a stack of
/// ranges placed one on another is one run to step over, not one each.
/// Empty ranges keep the exact rule of a scan over every placed range.
class ArenaOccupancy {
public:
  ArenaOccupancy(ArrayRef<Interval> ranges, int64_t alignment)
      : ranges(ranges), alignment(alignment) {
    unsigned span = 1;
    for (const Interval &iv : ranges)
      span = std::max(span, iv.last + 1);
    leaves = llvm::PowerOf2Ceil(span);
    whole.resize(2 * leaves);
    part.resize(2 * leaves);
    seen.assign(2 * leaves, 0);
  }

  /// Records range i at `offset`.
  void place(unsigned i, int64_t offset) {
    const Interval &iv = ranges[i];
    if (!iv.size) {
      empty.push_back({i, offset});
      return;
    }
    // Offsets are aligned, so bytes up to the next aligned one are as good
    // as taken: runs of ranges stacked one on another then meet.
    int64_t end = alignTo(offset + iv.size, alignment);
    ++stamp;
    forEachTile(iv.first, iv.last, [&](unsigned n) {
      add(whole[n], offset, end);
      for (unsigned a = n / 2; a >= 1 && seen[a] != stamp; a /= 2) {
        seen[a] = stamp;
        add(part[a], offset, end);
      }
    });
    placed.push_back({i, offset});
  }

  /// The lowest aligned offset free for `iv` over its live range.
  int64_t lowestFree(const Interval &iv) {
    auto shares = [&](const Interval &o) {
      return o.last >= iv.first && o.first <= iv.last;
    };
    if (!iv.size) {
      // An empty range is in the way of nothing but what strictly contains
      // its offset: the scan, over every placed range.
      SmallVector<std::pair<int64_t, int64_t>> busy;
      for (auto [j, off] : placed)
        if (shares(ranges[j]))
          busy.push_back({off, off + ranges[j].size});
      for (auto [j, off] : empty)
        if (shares(ranges[j]))
          busy.push_back({off, off});
      llvm::sort(busy);
      int64_t x = 0;
      for (auto [lo, hi] : busy) {
        if (x + iv.size <= lo)
          break;
        x = std::max(x, alignTo(hi, alignment));
      }
      return x;
    }
    // The maps that hold every range sharing a moment with iv.
    SmallVector<const Runs *> maps;
    ++stamp;
    forEachTile(iv.first, iv.last, [&](unsigned n) {
      maps.push_back(&whole[n]);
      maps.push_back(&part[n]);
      for (unsigned a = n / 2; a >= 1 && seen[a] != stamp; a /= 2) {
        seen[a] = stamp;
        maps.push_back(&whole[a]);
      }
    });
    // Step over whatever is in the way until nothing is.
    int64_t x = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const Runs *m : maps) {
        auto it = m->upper_bound(x);
        if (it != m->begin() && std::prev(it)->second > x) {
          x = alignTo(std::prev(it)->second, alignment);
          moved = true;
        } else if (it != m->end() && it->first < x + iv.size) {
          x = alignTo(it->second, alignment);
          moved = true;
        }
      }
      // An empty range strictly inside [x, x + size) is in the way too.
      for (auto [j, off] : empty)
        if (shares(ranges[j]) && x < off && off < x + iv.size) {
          x = alignTo(off, alignment);
          moved = true;
        }
    }
    return x;
  }

private:
  /// Disjoint runs of bytes, lo -> hi.
  using Runs = std::map<int64_t, int64_t>;

  /// Adds [lo, hi) to `runs`, merging it with the runs it overlaps or meets.
  static void add(Runs &runs, int64_t lo, int64_t hi) {
    auto it = runs.upper_bound(lo);
    if (it != runs.begin() && std::prev(it)->second >= lo) {
      --it;
      lo = it->first;
      hi = std::max(hi, it->second);
      it = runs.erase(it);
    }
    while (it != runs.end() && it->first <= hi) {
      hi = std::max(hi, it->second);
      it = runs.erase(it);
    }
    runs.emplace(lo, hi);
  }

  /// Calls fn on the nodes that tile [first, last].
  template <typename Fn>
  void forEachTile(unsigned first, unsigned last, Fn fn) {
    for (unsigned l = first + leaves, h = last + leaves + 1; l < h;
         l /= 2, h /= 2) {
      if (l & 1)
        fn(l++);
      if (h & 1)
        fn(--h);
    }
  }

  ArrayRef<Interval> ranges;
  int64_t alignment;
  unsigned leaves;
  std::vector<Runs> whole, part;
  std::vector<unsigned> seen;
  unsigned stamp = 0;
  SmallVector<std::pair<unsigned, int64_t>> placed, empty;
};

struct PlanBuffersPass : public otc::impl::PlanBuffersBase<PlanBuffersPass> {
  using PlanBuffersBase::PlanBuffersBase;

  /// Places the temporaries of `f` from `base` on; returns the bytes used.
  int64_t placeTemporaries(func::FuncOp f, int64_t base, Builder &b) {
    // In place: a kernel's output takes over an input that no later op reads
    // where canWriteOver allows it. Members of a chain share one place.
    SmallVector<Interval> first = liveRanges(f);
    DenseMap<Operation *, Interval *> ivOf;
    for (Interval &iv : first)
      ivOf[iv.buffer] = &iv;
    DenseMap<Operation *, Operation *> host; // buffer -> buffer it reuses
    llvm::DenseSet<Operation *> hosting;
    DenseMap<Operation *, unsigned> pos;
    unsigned n = 0;
    for (Operation &op : f.getBody().front())
      pos[&op] = n++;
    for (auto k : f.getBody().getOps<otck::KernelOp>()) {
      for (Value out : k.getOutputs()) {
        auto ob = out.getDefiningOp<otck::BufferOp>();
        if (!ob || ob.getSlot() || !ivOf.count(ob) ||
            ivOf[ob]->first != pos[k])
          continue;
        for (Value in : k.getInputs()) {
          auto ib = in.getDefiningOp<otck::BufferOp>();
          if (!ib || ib.getSlot() || !canWriteOver(k, ib, ob) ||
              hosting.contains(ib) || !ivOf.count(ib) ||
              ivOf[ib]->last != pos[k] || ib == ob)
            continue;
          ob->setAttr(kInPlaceAttr, b.getUnitAttr());
          host[ob] = ib;
          hosting.insert(ib);
          break;
        }
      }
    }
    auto root = [&](Operation *buf) {
      while (host.count(buf))
        buf = host[buf];
      return buf;
    };

    // Groups of buffers sharing a place, with their joint live range.
    SmallVector<Interval> ivs = liveRanges(f);
    DenseMap<Operation *, Interval> groups;
    SmallVector<Operation *> order;
    for (Interval &iv : ivs) {
      Operation *r = root(iv.buffer);
      auto [it, inserted] = groups.try_emplace(r, iv);
      if (inserted) {
        it->second.buffer = cast<otck::BufferOp>(r);
        order.push_back(r);
      } else {
        it->second.first = std::min(it->second.first, iv.first);
        it->second.last = std::max(it->second.last, iv.last);
        it->second.size = std::max(it->second.size, iv.size);
      }
    }
    // Largest first, each at the lowest offset free over its live range.
    llvm::stable_sort(order, [&](Operation *x, Operation *y) {
      return groups[x].size > groups[y].size;
    });
    std::vector<Interval> all;
    for (Operation *r : order)
      all.push_back(groups[r]);
    ArenaOccupancy occupied(all, alignment);
    DenseMap<Operation *, int64_t> offsetOf;
    int64_t peak = 0;
    for (unsigned i = 0; i < all.size(); ++i) {
      const Interval &iv = all[i];
      int64_t off = occupied.lowestFree(iv);
      occupied.place(i, off);
      offsetOf[iv.buffer] = off;
      peak = std::max(peak, off + iv.size);
    }
    for (Interval &iv : ivs)
      iv.buffer.setOffsetAttr(
          b.getI64IntegerAttr(base + offsetOf[root(iv.buffer)]));
    return peak;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError("alignment must be a power of two, got ") << alignment.getValue();
      return signalPassFailure();
    }
    Builder b(module.getContext());

    // Persistent slots, in order of first appearance. A group slot
    // (otc-group-params) is placed where it or one of its members first
    // appears, and its members inside it.
    llvm::StringMap<std::pair<int64_t, MemRefType>> slots;
    llvm::StringMap<otck::BufferOp> groupOf;
    llvm::StringMap<int64_t> memberOffset;
    // ZeRO-1's sharded masters: each member's place in the whole group.
    llvm::StringMap<std::pair<otck::BufferOp, int64_t>> imageOf;
    module.walk([&](otck::BufferOp buf) {
      if (buf.getSlot() && otck::isGroupSlot(*buf.getSlot()))
        if (auto members = buf->getAttrOfType<ArrayAttr>(otck::kMembersAttr))
          for (Attribute m : members)
            groupOf.try_emplace(cast<StringAttr>(m).getValue(), buf);
      auto members = buf->getAttrOfType<ArrayAttr>(otck::kImageMembersAttr);
      auto offsets =
          buf->getAttrOfType<DenseI64ArrayAttr>(otck::kImageOffsetsAttr);
      if (members && offsets)
        for (auto [m, e] : llvm::zip(members, offsets.asArrayRef()))
          imageOf.try_emplace(cast<StringAttr>(m).getValue(), buf, e);
    });
    int64_t persistent = 0;
    auto placeGroup = [&](otck::BufferOp g) -> LogicalResult {
      auto members = g->getAttrOfType<ArrayAttr>(otck::kMembersAttr);
      auto offsets =
          g->getAttrOfType<DenseI64ArrayAttr>(otck::kMemberOffsetsAttr);
      if (!members || !offsets || offsets.size() != (int64_t)members.size())
        return g.emitError("group slot without its members and offsets");
      int64_t base = persistent;
      slots.try_emplace(*g.getSlot(), base, g.getType());
      int64_t elemBytes = storageBytes(g.getType().getElementType());
      for (auto [m, e] : llvm::zip(members, offsets.asArrayRef())) {
        int64_t off = base + e * elemBytes;
        if (off % alignment)
          return g.emitError("member '")
                 << cast<StringAttr>(m).getValue() << "' at offset " << off
                 << " is not aligned to " << alignment.getValue();
        memberOffset[cast<StringAttr>(m).getValue()] = off;
      }
      persistent = alignTo(persistent + bufferBytes(g), alignment);
      return success();
    };
    WalkResult r = module.walk([&](otck::BufferOp buf) {
      auto slot = buf.getSlot();
      if (!slot)
        return WalkResult::advance();
      auto grouped = groupOf.find(*slot);
      // A group without members (a rank's shard of the moments under
      // ZeRO-1) is placed like any slot.
      otck::BufferOp g = grouped != groupOf.end() ? grouped->second
                         : otck::isGroupSlot(*slot) &&
                                 buf->hasAttr(otck::kMembersAttr)
                             ? buf
                             : otck::BufferOp();
      if (g && !slots.count(*g.getSlot()) && failed(placeGroup(g)))
        return WalkResult::interrupt();
      int64_t at = persistent;
      if (auto m = memberOffset.find(*slot); m != memberOffset.end())
        at = m->second;
      if (buf->hasAttr(otck::kImageMemberAttr)) {
        // A place in the whole group of sharded masters, past the rank's
        // part (which is placed first): no bytes of its own.
        auto image = imageOf.find(*slot);
        if (image == imageOf.end()) {
          buf.emitError("slot '") << *slot << "' is in no sharded group";
          return WalkResult::interrupt();
        }
        otck::BufferOp shard = image->second.first;
        auto [placed, fresh] =
            slots.try_emplace(*shard.getSlot(), persistent, shard.getType());
        if (fresh)
          persistent = alignTo(persistent + bufferBytes(shard), alignment);
        at = placed->second.first +
             image->second.second *
                 storageBytes(shard.getType().getElementType());
        auto [it, inserted] = slots.try_emplace(*slot, at, buf.getType());
        buf.setOffsetAttr(b.getI64IntegerAttr(it->second.first));
        return WalkResult::advance();
      }
      auto [it, inserted] = slots.try_emplace(*slot, at, buf.getType());
      if (inserted && at == persistent) {
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

    // Temporaries, per function.
    int64_t scratchPeak = 0;
    for (auto f : module.getOps<func::FuncOp>())
      scratchPeak = std::max(scratchPeak, placeTemporaries(f, persistent, b));
    module->setAttr(otck::kArenaSizeAttr,
                    b.getI64IntegerAttr(alignTo(persistent + scratchPeak,
                                                alignment)));
    module->setAttr(otck::kAlignmentAttr, b.getI64IntegerAttr(alignment));
    if (failed(verifyBufferPlan(module)))
      return signalPassFailure();
  }
};

} // namespace

/// Every in-place buffer of `f` is written by a kernel that canWriteOver an
/// input at its offset that the kernel reads last.
static LogicalResult verifyInPlace(func::FuncOp f) {
  for (auto buf : f.getBody().getOps<otck::BufferOp>()) {
    if (!buf->hasAttr(kInPlaceAttr))
      continue;
    Operation *writer = nullptr;
    for (Operation *u : buf->getUsers())
      if (!writer || u->isBeforeInBlock(writer))
        writer = u;
    auto k = dyn_cast_or_null<otck::KernelOp>(writer);
    bool legal = false;
    if (k) {
      for (Value in : k.getInputs()) {
        auto ib = in.getDefiningOp<otck::BufferOp>();
        if (!ib || !canWriteOver(k, ib, buf) ||
            ib.getOffset() != buf.getOffset())
          continue;
        bool readLater = false;
        otck::forEachByteUser(ib, [&](Operation *u) {
          readLater |= k->isBeforeInBlock(u);
        });
        legal |= !readLater;
      }
    }
    if (!legal)
      return buf.emitError("in-place buffer is not written by an elementwise "
                           "kernel over a dying input at its offset");
  }
  return success();
}

/// Every buffer of `ivs` has an offset, and lies in the arena of `arena`
/// bytes (but a place in a sharded group, past this rank's bytes).
static LogicalResult verifyInArena(ArrayRef<Interval> ivs, int64_t arena) {
  for (const Interval &iv : ivs) {
    otck::BufferOp buffer = iv.buffer;
    // The attribute is a signed i64 but its getter reads it unsigned: read
    // the attribute itself so that a negative offset is seen as one.
    IntegerAttr off = buffer.getOffsetAttr();
    if (!off)
      return buffer.emitError("buffer has no offset");
    if (buffer->hasAttr(otck::kImageMemberAttr))
      continue;
    if (off.getInt() < 0 || iv.size > arena ||
        off.getInt() > arena - iv.size)
      return buffer.emitError("buffer lies outside the arena");
  }
  return success();
}

/// No two buffers of `ivs` that are live at once overlap. The intervals are
/// swept by first use: the buffers live at that point sit in a map by
/// offset, which never holds two that overlap, so a new one only needs
/// checking against its neighbours there. A slot appears once (its buffers
/// in every function share its one place).
static LogicalResult verifyNoOverlap(SmallVector<Interval> &ivs) {
  llvm::stable_sort(ivs, [](const Interval &a, const Interval &c) {
    return a.first < c.first;
  });
  llvm::StringSet<> slotsSeen;
  std::map<int64_t, Interval *> live;
  std::priority_queue<std::pair<unsigned, int64_t>,
                      std::vector<std::pair<unsigned, int64_t>>,
                      std::greater<>>
      ends; // (last use, offset) of the entries of `live`
  for (Interval &c : ivs) {
    // A group slot (otc-group-params) overlaps its members by design: its
    // members stand for it.
    if ((c.buffer.getSlot() && otck::isGroupSlot(*c.buffer.getSlot()) &&
         c.buffer->hasAttr(otck::kMembersAttr)) ||
        c.buffer->hasAttr(otck::kImageMemberAttr))
      continue;
    if (c.buffer.getSlot() && !slotsSeen.insert(*c.buffer.getSlot()).second)
      continue;
    while (!ends.empty() && ends.top().first < c.first) {
      live.erase(ends.top().second);
      ends.pop();
    }
    if (!c.size)
      continue;
    int64_t co = static_cast<int64_t>(*c.buffer.getOffset());
    auto next = live.lower_bound(co);
    Interval *other = nullptr;
    if (next != live.end() && next->first < co + c.size)
      other = next->second;
    else if (next != live.begin() &&
             std::prev(next)->first + std::prev(next)->second->size > co)
      other = std::prev(next)->second;
    if (other)
      return c.buffer.emitError("buffer overlaps another live buffer at "
                                "offset ")
             << *other->buffer.getOffset();
    live[co] = &c;
    ends.push({c.last, co});
  }
  return success();
}

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
    if (failed(verifyInPlace(f)) || failed(verifyInArena(ivs, arena.getInt())) ||
        failed(verifyNoOverlap(ivs)))
      return failure();
  }
  return success();
}
