//===- GroupParams.cpp - one flat range per kind of parameter state
//--------===//
//
// The optimizer step updates every trained parameter with the same AdamW
// hyperparameters, and `@zero_grads` clears every gradient and rounds every
// BF16 working copy from its master: per parameter, each of them is one
// kernel (148 AdamW kernels and 148 casts for GPT-2). This pass lays every
// kind of a trained parameter's state ("param", "grad", "adam_m", "adam_v",
// "param_bf16") out as one flat group slot, "group:<kind>", in which the
// parameter's slot starts at the same element offset in every kind, and
// replaces the per-parameter kernels by one kernel over the groups: a single
// AdamW pass over all parameters that also writes the BF16 working copies,
// and one fill of all gradients. The casts of the masters into the copies
// leave `@zero_grads` for a new function, `@refresh_params`, one cast over
// the groups that the runtime calls once the masters are loaded (every
// update writes the copies afterwards). Element i of a group belongs to the
// same parameter in every kind, so the merged kernels compute exactly what
// the per-parameter ones did; the padding between members (to keep each
// member aligned) is zero in every kind and stays zero under AdamW, a fill
// and a cast.
//
// Buffer planning places each group and its members (otc-plan-buffers); the
// per-parameter slots stay in every function that names them, so the
// runtime's slot table and checkpoints see the same slots as before.
//
//===----------------------------------------------------------------------===//

#include "ir/Config.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

namespace otc {
#define GEN_PASS_DEF_GROUPPARAMS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The slot of `v`'s buffer ("" when `v` is not a slot buffer).
static StringRef slotOf(Value v) {
  auto b = v.getDefiningOp<otck::BufferOp>();
  return b && b.getSlot() ? *b.getSlot() : StringRef();
}

/// The single op of a kernel body, or null.
static Operation *soleOp(otck::KernelOp k) {
  Block &b = k.getBody().front();
  if (!llvm::hasSingleElement(b.without_terminator()))
    return nullptr;
  return &b.front();
}

/// The parameters of one group and where each starts, in elements.
struct Layout {
  SmallVector<std::string> names;
  SmallVector<int64_t> elements, offsets;
  int64_t total = 0;
};

struct GroupParamsPass : public otc::impl::GroupParamsBase<GroupParamsPass> {
  using GroupParamsBase::GroupParamsBase;

  /// Ranks the AdamW moments are sharded over (#otc.config's
  /// shard_optimizer; 1: not sharded).
  int64_t shards = 1;
  /// Set once the optimizer step is grouped.
  bool grouped = false;
  /// Under ZeRO-1, whether the rank keeps its part of the FP32 masters
  /// alone (groupModule).
  bool shardMasters = false;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ConfigAttr config = getConfig(module);
        config && config.getShardOptimizer())
      shards = config.getWorldSize();
    groupModule(module);
    if (shards > 1 && !grouped) {
      module.emitError("cannot shard the optimizer (shard_optimizer): "
                       "@optimizer_step is not one AdamW kernel per trained "
                       "parameter with one set of hyperparameters, which "
                       "ZeRO-1 needs to lay the moments out in one group");
      signalPassFailure();
    }
  }

  /// The per-parameter AdamW kernels of @optimizer_step and what they
  /// share: the hyperparameters (`first`'s attributes), the gradients'
  /// element type, and the lr, step and gradient factor they read.
  struct Updates {
    SmallVector<otck::KernelOp> kernels;
    Operation *first = nullptr;
    Type gradElement;
    Value lr, step, factor;
  };

  /// The updates of `opt` when it is nothing but per-parameter AdamW
  /// kernels with one set of hyperparameters, each reading the parameter's
  /// slots and the shared lr, step and gradient factor and updating the
  /// parameter's slots in place; nullopt otherwise.
  static std::optional<Updates> collectUpdates(func::FuncOp opt) {
    Updates u;
    for (Operation &op : opt.getBody().front().without_terminator()) {
      if (isa<otck::BufferOp>(op))
        continue;
      auto k = dyn_cast<otck::KernelOp>(op);
      Operation *body = k ? soleOp(k) : nullptr;
      if (!body || !isa<AdamWOp>(body) || k.getInputs().size() != 7 ||
          k.getOutputs().size() != 3)
        return std::nullopt;
      ValueRange in = k.getInputs(), out = k.getOutputs();
      StringRef name = slotOf(in[0]).split(':').second;
      if (slotOf(in[0]) != ("param:" + name).str() ||
          slotOf(in[1]) != ("grad:" + name).str() ||
          slotOf(in[2]) != ("adam_m:" + name).str() ||
          slotOf(in[3]) != ("adam_v:" + name).str() || out[0] != in[0] ||
          out[1] != in[2] || out[2] != in[3])
        return std::nullopt;
      // Block arguments follow `ins` in order (the kernel's contract).
      Block &b = k.getBody().front();
      for (unsigned i = 0; i < 7; ++i)
        if (body->getOperand(i) != b.getArgument(i))
          return std::nullopt;
      Type g = cast<MemRefType>(in[1].getType()).getElementType();
      for (unsigned i : {0u, 2u, 3u})
        if (!cast<MemRefType>(in[i].getType()).getElementType().isF32())
          return std::nullopt;
      if (!u.first) {
        u.first = body;
        u.gradElement = g;
        u.lr = in[4];
        u.step = in[5];
        u.factor = in[6];
      } else if (body->getAttrDictionary() != u.first->getAttrDictionary() ||
                 g != u.gradElement || in[4] != u.lr || in[5] != u.step ||
                 in[6] != u.factor) {
        return std::nullopt;
      }
      u.kernels.push_back(k);
    }
    return u;
  }

  /// The members of the updates in order, each starting at a multiple of
  /// `granule` elements; under ZeRO-1 the total splits into `shards` equal
  /// parts of whole granules (so that every rank's part is aligned too),
  /// the padding at the end zero in every kind like the rest.
  Layout layoutOf(ArrayRef<otck::KernelOp> updates, int64_t granule) const {
    Layout layout;
    for (otck::KernelOp k : updates) {
      auto t = cast<MemRefType>(k.getInputs()[0].getType());
      layout.names.push_back(slotOf(k.getInputs()[0]).split(':').second.str());
      layout.offsets.push_back(layout.total);
      layout.elements.push_back(t.getNumElements());
      layout.total += (t.getNumElements() + granule - 1) / granule * granule;
    }
    layout.total = (layout.total + shards * granule - 1) / (shards * granule) *
                   (shards * granule);
    return layout;
  }

  void groupModule(ModuleOp module) {
    auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!opt || opt.getBody().empty())
      return;
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError("alignment must be a power of two, got ")
          << alignment.getValue();
      return signalPassFailure();
    }
    std::optional<Updates> updates = collectUpdates(opt);
    if (!updates || updates->kernels.size() < 2)
      return;

    // Every kind starts each member at the same element; members start at
    // a multiple of the elements that make `alignment` bytes in the
    // narrowest kind, so that each is aligned in every kind.
    auto zeroGrads = module.lookupSymbol<func::FuncOp>("zero_grads");
    llvm::StringMap<otck::KernelOp> fills, casts;
    if (zeroGrads)
      collectZeroGradsKernels(zeroGrads, fills, casts);
    bool groupCopies = !casts.empty();
    int64_t narrowest =
        std::min<int64_t>(4, storageBytes(updates->gradElement));
    if (groupCopies)
      narrowest = std::min<int64_t>(narrowest, 2);
    if (alignment % narrowest)
      return;
    Layout layout = layoutOf(updates->kernels, alignment / narrowest);
    grouped = true;
    for (const std::string &n : layout.names)
      groupCopies &= casts.count(n) > 0;
    bool groupFills = zeroGrads != nullptr;
    for (const std::string &n : layout.names)
      groupFills &= fills.count(n) > 0;

    // ZeRO-1 keeps the rank's part of the FP32 masters alone where the
    // steps read their BF16 copies only: the masters are then read by the
    // update, by @refresh_params and by the runtime (loading, checkpoints).
    shardMasters = shards > 1 && groupCopies && !microStepReadsMasters(module);
    if (failed(groupUpdate(module, opt, *updates, layout, groupCopies)))
      return signalPassFailure();
    if (groupFills)
      groupZeroFills(zeroGrads, fills, updates->gradElement, layout);
    if (groupCopies)
      groupRefresh(module, zeroGrads, casts, layout);
  }

  /// A body for `k`, one argument per input (tensors of the buffers'
  /// types), and a builder at its end.
  static OpBuilder kernelBody(otck::KernelOp k, SmallVectorImpl<Value> &args) {
    Block *body = new Block();
    k.getBody().push_back(body);
    for (Value in : k.getInputs())
      args.push_back(body->addArgument(tensorOf(in.getType()), k.getLoc()));
    return OpBuilder::atBlockEnd(body);
  }

  /// The FP32 masters of the update and of @refresh_params: the rank's part
  /// (a buffer of its own, or a view of the whole group).
  Value masters(OpBuilder &b, Location loc, const Layout &layout) {
    if (shardMasters)
      return masterShard(b, loc, layout);
    Value whole = group(b, loc, "param", b.getF32Type(), layout);
    return shards > 1 ? rankPart(b, loc, whole) : whole;
  }

  /// The optimizer step: one AdamW over the groups, which also writes the
  /// BF16 working copies when `groupCopies`.
  LogicalResult groupUpdate(ModuleOp module, func::FuncOp opt, Updates &updates,
                            const Layout &layout, bool groupCopies) {
    OpBuilder b(module.getContext());
    Type f32 = b.getF32Type();
    b.setInsertionPointToStart(&opt.getBody().front());
    Location loc = updates.kernels.front().getLoc();
    Value p = masters(b, loc, layout);
    Value g = group(b, loc, "grad", updates.gradElement, layout);
    Value m, v;
    if (shards > 1) {
      // ZeRO-1: the moments are this rank's part alone, and the update
      // runs over the rank's part of the parameters and gradients (the
      // runtime reduce-scatters the gradients before and all-gathers the
      // parameters after).
      m = shardBuffer(b, loc, "adam_m", f32, layout.total / shards);
      v = shardBuffer(b, loc, "adam_v", f32, layout.total / shards);
      g = rankPart(b, loc, g);
    } else {
      m = group(b, loc, "adam_m", f32, layout);
      v = group(b, loc, "adam_v", f32, layout);
    }
    SmallVector<Value> outs{p, m, v};
    if (groupCopies) {
      Value copy = group(b, loc, "param_bf16", b.getBF16Type(), layout);
      outs.push_back(shards > 1 ? rankPart(b, loc, copy) : copy);
    }
    b.setInsertionPoint(updates.kernels.front());
    auto k = b.create<otck::KernelOp>(
        fusedLoc(updates.kernels),
        ValueRange{p, g, m, v, updates.lr, updates.step, updates.factor}, outs);
    SmallVector<Value> args;
    OpBuilder kb = kernelBody(k, args);
    Type pt = tensorOf(p.getType());
    OperationState state(k.getLoc(), updates.first->getName());
    state.addOperands(args);
    state.addTypes({pt, pt, pt});
    if (groupCopies)
      state.addTypes(tensorOf(outs.back().getType()));
    state.addAttributes(updates.first->getAttrs());
    Operation *adamw = kb.create(state);
    kb.create<otck::YieldOp>(loc, adamw->getResults());
    for (otck::KernelOp old : updates.kernels)
      old.erase();
    // The per-parameter moments no longer exist: a rank holds its part of
    // the group alone (the runtime's checkpoints name them by parameter).
    if (shards > 1) {
      SmallVector<otck::BufferOp> dead;
      module.walk([&](otck::BufferOp buf) {
        StringRef slot = slotOf(buf);
        if (slot.starts_with("adam_m:") || slot.starts_with("adam_v:"))
          dead.push_back(buf);
      });
      for (otck::BufferOp buf : dead) {
        if (!buf->use_empty())
          return buf.emitError("slot '")
                 << slotOf(buf)
                 << "' is read outside the optimizer step: the moments "
                    "cannot be sharded";
        buf.erase();
      }
    }
    // With the masters sharded, the per-parameter FP32 slots hold no bytes
    // of this rank: they stay in the slot table as places in the whole
    // group (otc-plan-buffers; the runtime's loading and checkpoints go
    // through that image).
    if (shardMasters)
      module.walk([&](otck::BufferOp buf) {
        if (slotOf(buf).starts_with("param:"))
          buf->setAttr(otck::kImageMemberAttr, b.getUnitAttr());
      });
    return success();
  }

  /// @zero_grads: one fill of every gradient.
  static void groupZeroFills(func::FuncOp zeroGrads,
                             llvm::StringMap<otck::KernelOp> &fills,
                             Type gradElement, const Layout &layout) {
    SmallVector<otck::KernelOp> olds;
    for (const std::string &n : layout.names)
      olds.push_back(fills[n]);
    OpBuilder b(zeroGrads.getContext());
    b.setInsertionPointToStart(&zeroGrads.getBody().front());
    Location loc = olds.front().getLoc();
    Value g = group(b, loc, "grad", gradElement, layout);
    b.setInsertionPoint(firstOf(olds));
    auto k =
        b.create<otck::KernelOp>(fusedLoc(olds), ValueRange{}, ValueRange{g});
    SmallVector<Value> args;
    OpBuilder kb = kernelBody(k, args);
    auto t = cast<RankedTensorType>(tensorOf(g.getType()));
    Value zero = kb.create<ConstantOp>(
        k.getLoc(),
        DenseElementsAttr::get(t, FloatAttr::get(gradElement, 0.0)));
    kb.create<otck::YieldOp>(loc, zero);
    for (otck::KernelOp old : olds)
      old.erase();
  }

  /// The masters are rounded into the copies once after loading
  /// (@refresh_params, which the runtime calls then); every update writes
  /// them afterwards, so @zero_grads no longer does.
  void groupRefresh(ModuleOp module, func::FuncOp zeroGrads,
                    llvm::StringMap<otck::KernelOp> &casts,
                    const Layout &layout) {
    SmallVector<otck::KernelOp> olds;
    for (const std::string &n : layout.names)
      olds.push_back(casts[n]);
    OpBuilder b(module.getContext());
    Location loc = olds.front().getLoc();
    b.setInsertionPointToEnd(module.getBody());
    auto refresh = b.create<func::FuncOp>(loc, "refresh_params",
                                          b.getFunctionType({}, {}));
    Block *entry = refresh.addEntryBlock();
    b.setInsertionPointToStart(entry);
    Value master = masters(b, loc, layout);
    Value copy = group(b, loc, "param_bf16", b.getBF16Type(), layout);
    if (shards > 1)
      copy = rankPart(b, loc, copy);
    auto k = b.create<otck::KernelOp>(fusedLoc(olds), ValueRange{master},
                                      ValueRange{copy});
    SmallVector<Value> args;
    OpBuilder kb = kernelBody(k, args);
    Value c = kb.create<CastOp>(k.getLoc(), tensorOf(copy.getType()), args[0]);
    kb.create<otck::YieldOp>(loc, c);
    // Buffers (untrained tables such as rotary cos/sin) never change after
    // loading: their BF16 copies are rounded here once as well, not by
    // every @zero_grads.
    IRMapping map;
    for (otck::KernelOp cast : bufferCasts(zeroGrads)) {
      for (Value v : cast->getOperands())
        if (!map.contains(v))
          map.map(v, b.clone(*v.getDefiningOp())->getResult(0));
      b.clone(*cast, map);
      SmallVector<Value> operands(cast->getOperands());
      cast.erase();
      for (Value v : operands)
        if (v.use_empty())
          v.getDefiningOp()->erase();
    }
    b.create<func::ReturnOp>(loc);
    for (otck::KernelOp old : olds)
      old.erase();
  }

  /// @zero_grads' casts of a "buffer:<name>" slot into its BF16 copy.
  static SmallVector<otck::KernelOp> bufferCasts(func::FuncOp zeroGrads) {
    SmallVector<otck::KernelOp> found;
    if (!zeroGrads)
      return found;
    for (auto k : zeroGrads.getBody().getOps<otck::KernelOp>())
      if (Operation *body = soleOp(k);
          body && isa<CastOp>(body) && k.getInputs().size() == 1 &&
          k.getOutputs().size() == 1 &&
          slotOf(k.getInputs()[0]).starts_with("buffer:") &&
          k.getInputs()[0].getDefiningOp<otck::BufferOp>() &&
          k.getOutputs()[0].getDefiningOp<otck::BufferOp>())
        found.push_back(k);
    return found;
  }

  /// @zero_grads' per-parameter zero fills of "grad:<name>" and casts of
  /// "param:<name>" into "param_bf16:<name>", by name.
  static void collectZeroGradsKernels(func::FuncOp f,
                                      llvm::StringMap<otck::KernelOp> &fills,
                                      llvm::StringMap<otck::KernelOp> &casts) {
    for (auto k : f.getBody().getOps<otck::KernelOp>()) {
      Operation *body = soleOp(k);
      if (!body || k.getOutputs().size() != 1)
        continue;
      StringRef out = slotOf(k.getOutputs()[0]);
      Block &blk = k.getBody().front();
      if (auto c = dyn_cast<ConstantOp>(body)) {
        auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
        if (k.getInputs().empty() && out.starts_with("grad:") && attr &&
            attr.isSplat() && isa<FloatType>(attr.getElementType()) &&
            attr.getSplatValue<APFloat>().isPosZero())
          fills[out.split(':').second] = k;
      } else if (auto c = dyn_cast<CastOp>(body)) {
        StringRef name = out.split(':').second;
        if (k.getInputs().size() == 1 && out.starts_with("param_bf16:") &&
            slotOf(k.getInputs()[0]) == ("param:" + name).str() &&
            c->getOperand(0) == blk.getArgument(0) &&
            cast<MemRefType>(k.getInputs()[0].getType())
                .getElementType()
                .isF32() &&
            cast<MemRefType>(k.getOutputs()[0].getType())
                .getElementType()
                .isBF16())
          casts[name] = k;
      }
    }
  }

  static Type tensorOf(Type memref) {
    auto m = cast<MemRefType>(memref);
    return RankedTensorType::get(m.getShape(), m.getElementType());
  }

  /// "all parameters", over the merged kernels' locations: the name the
  /// merged kernel goes by in traces and reports.
  static Location fusedLoc(ArrayRef<otck::KernelOp> kernels) {
    SmallVector<Location> locs;
    for (otck::KernelOp k : kernels)
      locs.push_back(k.getLoc());
    MLIRContext *ctx = locs.front()->getContext();
    return NameLoc::get(StringAttr::get(ctx, "all parameters"),
                        FusedLoc::get(ctx, locs));
  }

  static Operation *firstOf(ArrayRef<otck::KernelOp> kernels) {
    Operation *first = kernels.front();
    for (otck::KernelOp k : kernels)
      if (k->isBeforeInBlock(first))
        first = k;
    return first;
  }

  /// Whether @micro_step reads an FP32 parameter slot.
  static bool microStepReadsMasters(ModuleOp module) {
    auto f = module.lookupSymbol<func::FuncOp>("micro_step");
    bool reads = false;
    if (f)
      f.walk([&](otck::BufferOp buf) {
        reads |= slotOf(buf).starts_with("param:") && !buf->use_empty();
      });
    return reads;
  }

  /// The rank's part of the FP32 masters, "group:param" of one part, which
  /// names the whole group's members and their element offsets (the image
  /// the runtime gathers).
  Value masterShard(OpBuilder &b, Location loc, const Layout &layout) {
    Value buf =
        shardBuffer(b, loc, "param", b.getF32Type(), layout.total / shards);
    SmallVector<Attribute> members;
    for (const std::string &n : layout.names)
      members.push_back(b.getStringAttr("param:" + n));
    Operation *op = buf.getDefiningOp();
    op->setAttr(otck::kImageMembersAttr, b.getArrayAttr(members));
    op->setAttr(otck::kImageOffsetsAttr,
                b.getDenseI64ArrayAttr(layout.offsets));
    return buf;
  }

  /// A buffer of group slot "group:<kind>" of `elements`, without members:
  /// this rank's part of a sharded group.
  static Value shardBuffer(OpBuilder &b, Location loc, StringRef kind,
                           Type element, int64_t elements) {
    return b.create<otck::BufferOp>(
        loc, MemRefType::get({elements}, element),
        b.getStringAttr(otck::kGroupSlotPrefix + kind.str()), IntegerAttr());
  }

  /// The running rank's part of group buffer `whole` (a view with `shards`).
  Value rankPart(OpBuilder &b, Location loc, Value whole) {
    auto t = cast<MemRefType>(whole.getType());
    return b.create<otck::ViewOp>(
        loc, MemRefType::get({t.getNumElements() / shards}, t.getElementType()),
        whole, b.getI64IntegerAttr(shards));
  }

  /// A buffer of group slot "group:<kind>" listing its members.
  static Value group(OpBuilder &b, Location loc, StringRef kind, Type element,
                     const Layout &layout) {
    SmallVector<Attribute> members;
    for (const std::string &n : layout.names)
      members.push_back(b.getStringAttr(kind + ":" + n));
    auto buf = b.create<otck::BufferOp>(
        loc, MemRefType::get({layout.total}, element),
        b.getStringAttr(otck::kGroupSlotPrefix + kind.str()), IntegerAttr());
    buf->setAttr(otck::kMembersAttr, b.getArrayAttr(members));
    buf->setAttr(otck::kMemberOffsetsAttr,
                 b.getDenseI64ArrayAttr(layout.offsets));
    return buf;
  }
};

} // namespace
