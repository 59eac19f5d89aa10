//===- LowerToBuffers.cpp - otc functions to otck buffers and kernels ------===//
//
// Lowers each training-loop function (arguments and results named by
// `otc.slot`) to a function without arguments over arena buffers. Each otc op
// becomes one kernel (or a GEMM for otc.matmul) writing a fresh temporary;
// results land in their slots, in place where no later op reads the slot's
// previous value. A matmul of BF16 operands (mixed precision) becomes kernels
// that widen each operand into an FP32 temporary and an FP32 GEMM: exactly
// "BF16 inputs, FP32 accumulation" on every target's FP32 GEMM.
//
// Constants never change, so each distinct one (by value and type) of at
// most kMaxPersistentConstantBytes lives in a persistent slot private to the
// generated code ("const:<n>") that a new function, `@init_constants`, fills
// once; the runtime calls it after allocating the arena and the steps only
// read it; so do the values otc-training-loop computes from constants and
// buffers (`@constant_values`, lowered like the steps and run at the end of
// `@init_constants`, which the runtime calls once the buffers are loaded). A constant that a function returns into a slot (the zeros
// `@zero_grads` writes into the gradient accumulators every step) and a
// larger one stay per-call fills.
//
//===----------------------------------------------------------------------===//

#include "ir/Fp8.h"
#include "ir/OtcDialect.h"
#include "ir/OtckDialect.h"
#include "ir/TypeBytes.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace otc {
#define GEN_PASS_DEF_LOWERTOBUFFERS
#include "passes/Passes.h.inc"
} // namespace otc

using namespace mlir;
using namespace otc;

namespace {

/// The largest constant that gets a persistent slot; larger ones are filled
/// into a temporary where they are read, on every call: persistent bytes
/// are taken for the whole run, a temporary's only while it lives.
constexpr int64_t kMaxPersistentConstantBytes = 64ll << 20;

static MemRefType memrefFor(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

/// Ops whose every output element depends only on the same element of each
/// same-shaped operand (the Otc_Elementwise trait), so an output may share a
/// buffer with such an operand.
static bool isElementwise(Operation *op) {
  return op->hasTrait<OpTrait::OtcElementwise>();
}

/// Emits a kernel converting `source` (a buffer of `from`) into a new FP32
/// temporary, and returns that temporary.
static Value widenToF32(OpBuilder &b, Location loc, Value source,
                        RankedTensorType from) {
  auto to = from.clone(b.getF32Type());
  Value buf = b.create<otck::BufferOp>(loc, memrefFor(to), StringAttr(),
                                       IntegerAttr());
  auto kernel =
      b.create<otck::KernelOp>(loc, ValueRange{source}, ValueRange{buf});
  Block *body = new Block();
  kernel.getBody().push_back(body);
  OpBuilder kb = OpBuilder::atBlockEnd(body);
  Value cast = kb.create<CastOp>(loc, to, body->addArgument(from, loc));
  kb.create<otck::YieldOp>(loc, ValueRange{cast});
  return buf;
}

struct LowerToBuffersPass
    : public otc::impl::LowerToBuffersBase<LowerToBuffersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // One pass instance may run on several modules (split input files).
    constants.clear();
    constantIndex.clear();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs)
      if (failed(lower(f)))
        return signalPassFailure();
    buildInitConstants(module);
  }

  LogicalResult lower(func::FuncOp f);

  /// The persistent slot of constant `c`, shared by every constant of the
  /// same value and type.
  StringRef constantSlot(ConstantOp c);

  /// Appends `@init_constants`, which fills every constant slot, when there
  /// is one.
  void buildInitConstants(ModuleOp module);

  /// Constant slots in order of first use: name, value, where first seen.
  struct ConstantSlot {
    std::string slot;
    ElementsAttr value;
    Location loc;
  };
  SmallVector<ConstantSlot> constants;
  llvm::DenseMap<Attribute, unsigned> constantIndex;
};

StringRef LowerToBuffersPass::constantSlot(ConstantOp c) {
  ElementsAttr value = c.getValue();
  auto [it, inserted] = constantIndex.try_emplace(value, constants.size());
  if (inserted)
    constants.push_back(
        {"const:" + std::to_string(constants.size()), value, c.getLoc()});
  return constants[it->second].slot;
}

void LowerToBuffersPass::buildInitConstants(ModuleOp module) {
  auto values = module.lookupSymbol<func::FuncOp>("constant_values");
  if (constants.empty() && !values)
    return;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto f = b.create<func::FuncOp>(module.getLoc(), "init_constants",
                                  b.getFunctionType({}, {}));
  b.setInsertionPointToEnd(f.addEntryBlock());
  for (const ConstantSlot &c : constants) {
    ShapedType type = c.value.getShapedType();
    Value buf = b.create<otck::BufferOp>(c.loc, memrefFor(type),
                                         b.getStringAttr(c.slot),
                                         IntegerAttr());
    auto kernel =
        b.create<otck::KernelOp>(c.loc, ValueRange{}, ValueRange{buf});
    Block *body = new Block();
    kernel.getBody().push_back(body);
    OpBuilder kb = OpBuilder::atBlockEnd(body);
    auto value = kb.create<ConstantOp>(c.loc, c.value);
    kb.create<otck::YieldOp>(c.loc, value->getResults());
  }
  // Then the values computed from constants (otc-training-loop's
  // @constant_values, lowered like the steps), which read those slots.
  if (values) {
    Block &from = values.getBody().front();
    Block *to = b.getInsertionBlock();
    to->getOperations().splice(to->end(), from.getOperations(), from.begin(),
                               std::prev(from.end()));
    values.erase();
  }
  b.create<func::ReturnOp>(module.getLoc());
}

/// The lowering of one tensor-level step function to buffers: slot
/// buffers for its arguments and results, a temporary for every other
/// value (a view for a reshape), a GEMM for a product and a kernel of one
/// op for the rest, and copies into the slots not written in place.
class FunctionLowering {
public:
  FunctionLowering(LowerToBuffersPass &pass, func::FuncOp f)
      : pass(pass), f(f), src(f.getBody().front()), b(f) {}

  LogicalResult run();

private:
  LowerToBuffersPass &pass;
  func::FuncOp f;
  Block &src;
  OpBuilder b;
  /// Buffers of values; slot buffers by slot name; the argument each slot
  /// buffer holds (the last, where several share it).
  llvm::DenseMap<Value, Value> bufferOf, argOfBuffer;
  llvm::StringMap<Value> slotBuffer;
  /// Results that go to a slot: value -> slot name (first one wins).
  llvm::DenseMap<Value, StringRef> resultSlot;
  /// The value whose bytes a reshape reads, and the position of the last
  /// op reading each value's bytes.
  llvm::DenseMap<Value, Value> storage;
  llvm::DenseMap<Value, unsigned> lastUse;
  /// Casts a BF16 GEMM's rounding replaced.
  llvm::DenseSet<Operation *> roundedByGemm;

  Value slotBuf(StringRef slot, Type tensorType, Location loc) {
    Value &buf = slotBuffer[slot];
    if (!buf)
      buf = b.create<otck::BufferOp>(loc, memrefFor(tensorType),
                                     b.getStringAttr(slot), IntegerAttr());
    return buf;
  }
  Value storageOf(Value v) const {
    Value s = storage.lookup(v);
    return s ? s : v;
  }
  Value temporary(Type tensorType, Location loc) {
    return b.create<otck::BufferOp>(loc, memrefFor(tensorType), StringAttr(),
                                    IntegerAttr());
  }

  LogicalResult bindArguments();
  LogicalResult findResultSlots();
  void keepPartialSumsInSlots(func::ReturnOp ret);
  void findLastUses();
  CastOp roundingCast(Operation &op) const;
  /// The buffers `op`'s results are written to (see outputFor).
  SmallVector<Value> outputsOf(Operation &op, unsigned index);
  void lowerOp(Operation &op, unsigned index);
  void copyResults(func::ReturnOp ret);
};

LogicalResult FunctionLowering::bindArguments() {
  for (BlockArgument arg : src.getArguments()) {
    auto slot = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attrs::kSlot);
    if (!slot)
      return f.emitError("argument ")
             << arg.getArgNumber() << " has no otc.slot: run "
             << "--otc-training-loop first";
    bufferOf[arg] = slotBuf(slot.getValue(), arg.getType(), f.getLoc());
  }
  for (BlockArgument arg : src.getArguments())
    argOfBuffer[bufferOf.lookup(arg)] = arg;
  return success();
}

LogicalResult FunctionLowering::findResultSlots() {
  auto ret = cast<func::ReturnOp>(src.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto slot = f.getResultAttrOfType<StringAttr>(i, attrs::kSlot);
    if (!slot)
      return f.emitError("result ") << i << " has no otc.slot";
    resultSlot.try_emplace(v, slot.getValue());
  }
  keepPartialSumsInSlots(ret);
  return success();
}

// A sum into a slot made in steps, ((acc + a) + b) from the slot's own
// argument acc (a tied weight's contributions, otc-training-loop), keeps
// its partial sums in the slot: each is read once, by the next step.
void FunctionLowering::keepPartialSumsInSlots(func::ReturnOp ret) {
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Value slot = slotBuffer.lookup(
        f.getResultAttrOfType<StringAttr>(i, attrs::kSlot).getValue());
    Value acc = slot ? argOfBuffer.lookup(slot) : Value();
    SmallVector<Value> partial;
    bool fromAcc = false;
    for (Value cur = v; auto add = cur.getDefiningOp<AddOp>();) {
      Value next;
      for (Value x : {add.getLhs(), add.getRhs()}) {
        fromAcc |= x == acc;
        if (x.getType() == v.getType() && x.hasOneUse() &&
            x.getDefiningOp<AddOp>())
          next = x;
      }
      if (fromAcc || !next)
        break;
      partial.push_back(next);
      cur = next;
    }
    if (acc && fromAcc)
      for (Value x : partial)
        resultSlot.try_emplace(x, resultSlot.lookup(v));
  }
}

// Position of the last op reading each value's bytes: a reshape becomes a
// view of its input's buffer, so its reads are its input's.
void FunctionLowering::findLastUses() {
  unsigned index = 0;
  for (Operation &op : src.without_terminator()) {
    for (Value v : op.getOperands())
      lastUse[storageOf(v)] = index;
    if (auto reshape = dyn_cast<ReshapeOp>(op))
      storage[reshape.getResult()] = storageOf(reshape.getInput());
    ++index;
  }
}

// A BF16 x BF16 product read only by its rounding to BF16 writes BF16
// itself (the GEMM rounds its FP32 accumulator once, as the cast would).
CastOp FunctionLowering::roundingCast(Operation &op) const {
  auto mm = dyn_cast<MatMulOp>(op);
  if (!mm || !mm->hasOneUse() ||
      !llvm::all_of(op.getOperandTypes(), [](Type t) {
        return cast<RankedTensorType>(t).getElementType().isBF16();
      }))
    return nullptr;
  auto c = dyn_cast<CastOp>(*mm->getUsers().begin());
  if (!c || !getElementTypeOrSelf(c.getType()).isBF16() ||
      resultSlot.count(c.getResult()))
    return nullptr;
  return c;
}

// Outputs: the result's slot when writing there now is safe (nothing reads
// the slot's old value after this op, or only this elementwise op does),
// else a temporary.
SmallVector<Value> FunctionLowering::outputsOf(Operation &op, unsigned index) {
  SmallVector<Value> outs;
  for (Value r : op.getResults()) {
    Value buf;
    auto it = resultSlot.find(r);
    if (it != resultSlot.end()) {
      Value slot = slotBuffer.lookup(it->second);
      Value oldValue = slot ? argOfBuffer.lookup(slot) : Value();
      if (oldValue)
        oldValue = storageOf(oldValue);
      bool oldDead = !oldValue || !lastUse.count(oldValue) ||
                     lastUse[oldValue] < index ||
                     (lastUse[oldValue] == index && isElementwise(&op));
      if (oldDead) {
        buf = slotBuf(it->second, r.getType(), op.getLoc());
        resultSlot.erase(it);
      }
    }
    if (!buf)
      buf = temporary(r.getType(), op.getLoc());
    bufferOf[r] = buf;
    outs.push_back(buf);
  }
  return outs;
}

void FunctionLowering::lowerOp(Operation &op, unsigned index) {
  Location loc = op.getLoc();
  // A constant read only by ops: its persistent slot, filled once.
  if (auto c = dyn_cast<ConstantOp>(op)) {
    if (!resultSlot.count(c.getResult()) &&
        byteSize(c.getResult()) <= kMaxPersistentConstantBytes) {
      bufferOf[c.getResult()] =
          slotBuf(pass.constantSlot(c), c.getType(), loc);
      return;
    }
  }
  SmallVector<Value> ins;
  for (Value v : op.getOperands())
    ins.push_back(bufferOf.lookup(v));
  if (roundedByGemm.contains(&op))
    return;
  if (CastOp round = roundingCast(op)) {
    Value buf = temporary(round.getType(), loc);
    bufferOf[op.getResult(0)] = buf;
    bufferOf[round.getResult()] = buf;
    roundedByGemm.insert(round);
    auto mm = cast<MatMulOp>(op);
    auto g = b.create<otck::GemmOp>(loc, ins[0], ins[1], buf);
    g.setTransposeLhs(mm.getTransposeLhs());
    g.setTransposeRhs(mm.getTransposeRhs());
    if (std::optional<Fp8Operands> fp8 = gemmFp8(mm))
      setGemmFp8(g, *fp8);
    return;
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    bufferOf[reshape.getResult()] =
        b.create<otck::ViewOp>(loc, memrefFor(reshape.getType()), ins[0]);
    return;
  }
  SmallVector<Value> outs = outputsOf(op, index);
  if (auto mm = dyn_cast<MatMulOp>(op)) {
    // BF16 x BF16 is a BF16 GEMM (FP32 accumulation); a mixed pair reads
    // its BF16 side widened.
    bool bothBf16 = llvm::all_of(op.getOperandTypes(), [](Type t) {
      return cast<RankedTensorType>(t).getElementType().isBF16();
    });
    for (auto [k, v] : llvm::enumerate(op.getOperands())) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getElementType().isBF16() && !bothBf16)
        ins[k] = widenToF32(b, loc, ins[k], t);
    }
    auto g = b.create<otck::GemmOp>(loc, ins[0], ins[1], outs[0]);
    g.setTransposeLhs(mm.getTransposeLhs());
    g.setTransposeRhs(mm.getTransposeRhs());
    if (std::optional<Fp8Operands> fp8 = gemmFp8(mm); fp8 && bothBf16)
      setGemmFp8(g, *fp8);
    return;
  }
  auto kernel = b.create<otck::KernelOp>(loc, ins, outs);
  Block *body = new Block();
  kernel.getBody().push_back(body);
  IRMapping map;
  for (Value v : op.getOperands())
    map.map(v, body->addArgument(v.getType(), v.getLoc()));
  OpBuilder kb = OpBuilder::atBlockEnd(body);
  Operation *clone = kb.clone(op, map);
  kb.create<otck::YieldOp>(loc, clone->getResults());
}

// Results not written in place: copied into their slots.
void FunctionLowering::copyResults(func::ReturnOp ret) {
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    StringRef slot = f.getResultAttrOfType<StringAttr>(i, attrs::kSlot);
    Value target = slotBuf(slot, v.getType(), ret.getLoc());
    Value source = bufferOf.lookup(v);
    if (source != target)
      b.create<otck::CopyOp>(ret.getLoc(), source, target);
  }
  b.create<func::ReturnOp>(ret.getLoc());
}

LogicalResult FunctionLowering::run() {
  auto out = b.create<func::FuncOp>(f.getLoc(), f.getSymName(),
                                    b.getFunctionType({}, {}));
  b.setInsertionPointToEnd(out.addEntryBlock());
  if (failed(bindArguments()) || failed(findResultSlots()))
    return failure();
  findLastUses();
  unsigned index = 0;
  for (Operation &op : src.without_terminator())
    lowerOp(op, index++);
  copyResults(cast<func::ReturnOp>(src.getTerminator()));
  f.erase();
  return success();
}

LogicalResult LowerToBuffersPass::lower(func::FuncOp f) {
  if (f.isExternal())
    return f.emitError("cannot lower a function without a body");
  return FunctionLowering(*this, f).run();
}

} // namespace
