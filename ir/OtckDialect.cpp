//===- OtckDialect.cpp - the otck buffer-level dialect ---------------------===//
//
// Registration and verifiers of the buffer-level ops.
//
//===----------------------------------------------------------------------===//

#include "ir/OtckDialect.h"
#include "ir/Fp8.h"
#include "ir/TargetRegistry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace otc::otck;

#include "ir/OtckDialect.cpp.inc"

void OtckDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/OtckOps.cpp.inc"
      >();
  // The targets' models of these ops (how a GPU target launches a kernel).
  otc::attachTargetInterfaces(*this);
}

/// The tensor type a kernel body sees for a buffer.
static RankedTensorType tensorFor(Type memref) {
  auto m = cast<MemRefType>(memref);
  return RankedTensorType::get(m.getShape(), m.getElementType());
}

void otc::otck::forEachSlot(ModuleOp module,
                            function_ref<void(StringRef, BufferOp)> fn) {
  llvm::StringSet<> seen;
  module.walk([&](BufferOp b) {
    if (!b.getSlot() || b->hasAttr(kImageMemberAttr) ||
        !seen.insert(*b.getSlot()).second)
      return;
    // A group with members is their bytes; one without (a rank's shard of
    // the AdamW moments, otc-group-params) stands for its kind.
    if (!isGroupSlot(*b.getSlot()))
      fn(b.getSlot()->split(':').first, b);
    else if (!b->hasAttr(kMembersAttr))
      fn(b.getSlot()->split(':').second, b);
  });
}

bool otc::otck::stepsReadParams(ModuleOp module) {
  bool reads = false;
  for (const char *name : {"zero_grads", "micro_step"}) {
    auto f = module.lookupSymbol<func::FuncOp>(name);
    if (!f)
      continue;
    f.walk([&](BufferOp b) {
      if (!b.getSlot())
        return;
      StringRef slot = *b.getSlot();
      if (slot.starts_with("param:") ||
          slot == (std::string(kGroupSlotPrefix) + "param"))
        forEachByteUser(b, [&](Operation *) { reads = true; });
    });
  }
  return reads;
}

Value otc::otck::storageOf(Value v) {
  while (auto view = v.getDefiningOp<ViewOp>())
    v = view.getSource();
  return v;
}

void otc::otck::forEachByteUser(Value buffer,
                           llvm::function_ref<void(Operation *)> fn) {
  for (Operation *user : buffer.getUsers()) {
    if (auto view = dyn_cast<ViewOp>(user))
      forEachByteUser(view.getResult(), fn);
    else
      fn(user);
  }
}

LogicalResult GemmOp::verify() {
  if (failed(verifyGemmFp8(*this, getLhs().getType().getElementType(),
                           getRhs().getType().getElementType())))
    return failure();
  if (!getLhsFp8() != !getRhsFp8())
    return emitOpError("reads FP8 copies of both operands or of neither");
  for (Value copy : {getLhsFp8(), getRhsFp8()}) {
    if (!copy)
      continue;
    if (!getOperation()->hasAttr(kFp8Attr))
      return emitOpError("reads an FP8 copy but is no FP8 GEMM");
    if (!cast<MemRefType>(copy.getType()).getElementType().isInteger(8))
      return emitOpError("FP8 copies are i8 buffers");
  }
  if (failed(verifySums()))
    return failure();
  bool gelu = getGelu(), dgelu = getDgelu();
  if (Value addend = getAddend()) {
    if (addend.getType() != getOut().getType())
      return emitOpError("addend type ")
             << addend.getType() << " must be the result type "
             << getOut().getType();
    if (getAccumulate() || gelu || dgelu)
      return emitOpError("cannot take an addend with accumulate or a GELU "
                         "epilogue");
  }
  if (!gelu && !dgelu) {
    if (getAux())
      return emitOpError("has an aux operand but no gelu or dgelu epilogue");
    return success();
  }
  if (gelu && dgelu)
    return emitOpError("cannot have both the gelu and dgelu epilogues");
  if (!getAux())
    return emitOpError("needs an aux operand for its ")
           << (gelu ? "gelu" : "dgelu") << " epilogue";
  if (getAux().getType() != getOut().getType())
    return emitOpError("aux type ")
           << getAux().getType() << " must be the result type "
           << getOut().getType();
  if (getAccumulate())
    return emitOpError("cannot accumulate with a GELU epilogue");
  if (dgelu && getBias())
    return emitOpError("cannot add a bias with the dgelu epilogue");
  MemRefType out = getOut().getType();
  if (out.getRank() < 2 || out.getShape().back() % 8 != 0)
    return emitOpError("GELU epilogues need a last dimension that is a "
                       "multiple of 8, got ")
           << out;
  return success();
}

SmallVector<Value, 3> GemmOp::getWrittenBuffers() {
  SmallVector<Value, 3> w{getOut()};
  if (getGelu() && getAux())
    w.push_back(getAux());
  if (getSums())
    w.push_back(getSums());
  return w;
}

SmallVector<Value, 8> GemmOp::getReadBuffers() {
  SmallVector<Value, 8> r{getLhs(), getRhs()};
  for (Value v : {getBias(), getAddend(), getLhsFp8(), getRhsFp8()})
    if (v)
      r.push_back(v);
  if (getAccumulate())
    r.push_back(getOut());
  if (getDgelu() && getAux())
    r.push_back(getAux());
  if (getAccumulateSums() && getSums())
    r.push_back(getSums());
  return r;
}

SmallVector<Value> otc::otck::writtenBy(Operation *op) {
  if (auto g = dyn_cast<GemmOp>(op))
    return SmallVector<Value>(g.getWrittenBuffers());
  if (auto k = dyn_cast<KernelOp>(op))
    return SmallVector<Value>(k.getOutputs());
  if (auto c = dyn_cast<CopyOp>(op))
    return {c.getTarget()};
  if (auto q = dyn_cast<Fp8QuantizeOp>(op))
    return {q.getCopy()};
  if (isa<ViewOp, BufferOp, func::ReturnOp>(op))
    return {};
  return SmallVector<Value>(op->getOperands());
}

bool otc::otck::usedBetween(Operation *a, Operation *b, Value storage,
                            bool touch) {
  if (b->isBeforeInBlock(a))
    std::swap(a, b);
  Block *block = a->getBlock();
  bool found = false;
  forEachByteUser(storage, [&](Operation *u) {
    Operation *op = block->findAncestorOpInBlock(*u);
    if (found || !op || !a->isBeforeInBlock(op) || !op->isBeforeInBlock(b) ||
        isa<ViewOp>(op))
      return;
    if (touch) {
      found = true;
      return;
    }
    for (Value o : writtenBy(op))
      found |= storageOf(o) == storage;
  });
  return found;
}

LogicalResult GemmOp::verifySums() {
  Value sums = getSums();
  if (!sums) {
    if (getSumsOfRhs() || getAccumulateSums())
      return emitOpError("has sums_of_rhs or accumulate_sums but no sums");
    return success();
  }
  auto type = cast<MemRefType>(sums.getType());
  if (type.getRank() != 1 ||
      !(type.getElementType().isF32() || type.getElementType().isBF16()))
    return emitOpError("sums must be a rank-1 f32 or bf16 buffer, got ")
           << type;
  if (getBias() || getAux() || getAddend() || getGelu() || getDgelu() ||
      getLhsFp8() || getOperation()->hasAttr(kFp8Attr))
    return emitOpError("sums go with a plain product only (no bias, aux, "
                       "addend, GELU or FP8)");
  MemRefType lhs = getLhs().getType(), rhs = getRhs().getType(),
             out = getOut().getType();
  if (lhs.getRank() != 2 || rhs.getRank() != 2 || out.getRank() != 2)
    return emitOpError("sums need 2-D operands and result");
  bool ofRhs = getSumsOfRhs();
  if (ofRhs ? getTransposeRhs() : !getTransposeLhs())
    return emitOpError("the summed operand must be stored K x W: ")
           << (ofRhs ? "the right one not transposed"
                     : "the left one transposed");
  int64_t width = ofRhs ? out.getDimSize(1) : out.getDimSize(0);
  if (type.getDimSize(0) != width)
    return emitOpError("sums have ")
           << type.getDimSize(0) << " elements, the summed operand " << width
           << " columns";
  return success();
}

LogicalResult Fp8QuantizeOp::verify() {
  MemRefType source = getSource().getType(), copy = getCopy().getType();
  if (!source.getElementType().isBF16() || source.getRank() < 1)
    return emitOpError("quantizes a bf16 buffer, got ") << source;
  if (!parseFp8Format(getFormat()))
    return emitOpError("format must be e4m3 or e5m2, got ") << getFormat();
  int64_t layouts = getLayouts();
  if (layouts < 1 || layouts > 3)
    return emitOpError("layouts must be 1, 2 or 3, got ") << layouts;
  int64_t bytes = fp8CopyBytes(source.getNumElements(), layouts);
  if (!copy.getElementType().isInteger(8) || copy.getRank() != 1 ||
      copy.getNumElements() != bytes)
    return emitOpError("copy must be memref<") << bytes << "xi8>, got " << copy;
  return success();
}

LogicalResult ViewOp::verify() {
  auto from = getSource().getType(), to = getResult().getType();
  if (std::optional<int64_t> n = getShards()) {
    if (*n < 1 || from.getRank() != 1 || to.getRank() != 1 ||
        from.getElementType() != to.getElementType() ||
        from.getNumElements() != *n * to.getNumElements())
      return emitOpError("with shards = ")
             << *n << " must view 1/" << *n << " of a 1-D source, got "
             << from << " to " << to;
    return success();
  }
  if (from.getElementType() != to.getElementType() ||
      from.getNumElements() != to.getNumElements())
    return emitOpError("must keep the element type and count, got ")
           << from << " to " << to;
  return success();
}

LogicalResult KernelOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body must have one argument per input");
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != tensorFor(in.getType()))
      return emitOpError("body argument type ")
             << arg.getType() << " does not match input " << in.getType();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getOutputs().size())
    return emitOpError("must yield one value per output");
  for (auto [v, o] : llvm::zip(yield.getValues(), getOutputs()))
    if (v.getType() != tensorFor(o.getType()))
      return emitOpError("yielded type ")
             << v.getType() << " does not match output " << o.getType();
  return success();
}

#define GET_OP_CLASSES
#include "ir/OtckOps.cpp.inc"
